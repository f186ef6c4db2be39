import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { projectRoot } from '../../shared/paths.js'
import { enableMetrics, metrics, scrape } from '../../server/metrics.js'
import { parseScrape, type Scrape } from '../helpers/metrics.js'

// What docs/ ships for Prometheus and Grafana (issue 33), held to the metrics osd exposes: promtool
// accepts the alert rules and finds nothing to lint in a scrape, and every osd_* metric the rules and
// the dashboard name is one a scrape has. promtool comes with Debian's prometheus package: .ci/run
// installs it and asks for this test; elsewhere it runs where promtool is on the PATH.

const promtool = spawnSync('promtool', ['--version']).status === 0
const required = process.env.OSD_TEST_PROMTOOL === 'required'
const rules = join(projectRoot, 'docs', 'prometheus', 'alerts.yml')
const dashboard = join(projectRoot, 'docs', 'grafana', 'osd.json')

let text: string
let scraped: Scrape

beforeAll(async () => {
  await enableMetrics('all')
  // One of each labelled count, so that every family has a series to lint.
  metrics.httpRequest('GET', '/v1/tasks/{id}', 200, 0.002)
  metrics.runsStarted([{ origin: 'api', kind: 'llm', status: 'queued' }])
  metrics.modelCall({ provider: 'provider_a', tier: 'mid' }, 1.5, {
    usage: { input: 10, cacheRead: 0, cacheWrite: 0, output: 5 },
    costMicros: 120,
  })
  metrics.modelCall({ provider: 'provider_a', tier: 'mid' }, 0.5, {
    kind: 'throttled',
    timedOut: false,
  })
  text = (await scrape()).body
  scraped = await parseScrape(text)
})

/** The osd_* metric families an expression names (a _bucket, _count or _sum is its histogram's). */
function familiesIn(expression: string): string[] {
  return [...expression.matchAll(/\b(osd_[a-z0-9_]+)/g)].map(([, name]) =>
    name!.replace(/_(bucket|count|sum)$/, ''),
  )
}

describe('the dashboard and the alert rules', () => {
  it('name only metrics that a scrape has', () => {
    const board = JSON.parse(readFileSync(dashboard, 'utf8')) as {
      panels: { targets?: { expr: string }[] }[]
    }
    const named = new Set([
      ...board.panels.flatMap((p) => (p.targets ?? []).flatMap((t) => familiesIn(t.expr))),
      ...familiesIn(readFileSync(rules, 'utf8')),
    ])
    expect(named.size).toBeGreaterThan(20)
    expect([...named].filter((name) => !scraped[name])).toEqual([])
  })
})

describe.skipIf(!promtool && !required)('promtool', () => {
  it('accepts the alert rules', () => {
    if (!promtool) throw new Error('no promtool on the PATH (apt-get install prometheus)')
    const out = execFileSync('promtool', ['check', 'rules', rules], { encoding: 'utf8' })
    expect(out).toMatch(/SUCCESS: 5 rules found/)
  })

  it("reads a scrape and finds nothing to lint in osd's own metrics", () => {
    const linted = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    const problems = (linted.stdout + linted.stderr).split('\n').filter(Boolean)
    // prom-client's process metrics name three gauges *_total (nodejs_active_handles_total...):
    // theirs to mend, so promtool's exit code says nothing here; osd's own must be clean.
    expect(problems.filter((line) => !/^(nodejs|process)_/.test(line))).toEqual([])
    expect(linted.error).toBeUndefined()
  })
})
