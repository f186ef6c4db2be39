import {
  getMetricsFromIterator,
  type PromData,
  type PromHistogramData,
  type PromMetrics,
} from 'prom2javascript'

// A scrape read as Prometheus reads it: the text format parsed by a parser of it (prom2javascript),
// never matched with regular expressions, so a malformed line fails the parse rather than a match.

export type Scrape = PromMetrics

/**
 * The scrape's families by name. Samples whose value is NaN are left out first: the text format allows
 * them (prom-client writes `Nan` for the event loop's statistics before their first measurement), the
 * parser does not read them, and no test counts on one. promtool reads the whole text, NaN and all
 * (test/server/prometheus.test.ts).
 */
export async function parseScrape(text: string): Promise<Scrape> {
  const lines = text.split('\n').filter((line) => !/\sNaN$/i.test(line))
  return getMetricsFromIterator(lines[Symbol.iterator]())
}

/** Whether a series carries every one of `labels` (it may carry more: role, say). */
function has(series: { labels: Record<string, string> }, labels: Record<string, string>): boolean {
  return Object.entries(labels).every(([name, value]) => series.labels[name] === value)
}

/** The sum of a counter's or gauge's series that carry `labels`; undefined when none does. */
export function sampleValue(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const series = ((scrape[name]?.data ?? []) as PromData[]).filter((s) => has(s, labels))
  return series.length ? series.reduce((sum, s) => sum + s.value, 0) : undefined
}

/** The observations a histogram's series that carry `labels` counted; 0 when none does. */
export function observations(
  scrape: Scrape,
  name: string,
  labels: Record<string, string> = {},
): number {
  return ((scrape[name]?.data ?? []) as PromHistogramData[])
    .filter((s) => has(s, labels))
    .reduce((sum, s) => sum + s.count, 0)
}

/** Every label value of every series of the osd_* metrics, by label name. */
export function labelValues(scrape: Scrape): Map<string, Set<string>> {
  const values = new Map<string, Set<string>>()
  for (const [name, metric] of Object.entries(scrape)) {
    if (!name.startsWith('osd_')) continue
    for (const series of metric.data as { labels: Record<string, string> }[])
      for (const [label, value] of Object.entries(series.labels)) {
        if (!values.has(label)) values.set(label, new Set())
        values.get(label)!.add(value)
      }
  }
  return values
}
