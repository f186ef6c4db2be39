// Data to stdout, everything else to stderr; tables, colour and human times only on a terminal
// (STYLE, The CLI). `--json` prints the API's JSON and nothing else.

export interface Output {
  json: boolean
  isTTY: boolean
  /** Whether stderr is a terminal: progress lines (a spinner) go there only then. */
  errorIsTTY: boolean
  color: boolean
  columns: number
  write(text: string): void
  error(text: string): void
}

export function terminalOutput(json: boolean): Output {
  const isTTY = Boolean(process.stdout.isTTY)
  return {
    json,
    isTTY,
    errorIsTTY: Boolean(process.stderr.isTTY),
    color: isTTY && !process.env.NO_COLOR && process.env.TERM !== 'dumb',
    columns: process.stdout.columns || 100,
    // Once a reader has gone (EPIPE), the stream is destroyed at once but says so a moment later
    // (shared/pipes.ts ends the process then): what is written meanwhile goes nowhere, quietly.
    write: (text) => void (process.stdout.destroyed || process.stdout.write(text)),
    error: (text) => void (process.stderr.destroyed || process.stderr.write(text)),
  }
}

export function printJson(out: Output, value: unknown): void {
  out.write(JSON.stringify(value, null, 2) + '\n')
}

/** JSON with --json; otherwise what `human` prints. */
export function show(out: Output, value: unknown, human: () => void): void {
  if (out.json) printJson(out, value)
  else human()
}

export interface Column<T> {
  header: string
  value: (row: T) => unknown
}

/** A table sized to the terminal: the widest columns give way first, cut with an ellipsis. */
export function printTable<T>(out: Output, rows: T[], columns: Column<T>[]): void {
  if (rows.length === 0) {
    out.error('(none)\n')
    return
  }
  const cells = rows.map((row) => columns.map((c) => cellText(out, c.value(row))))
  const widths = columns.map((c, i) =>
    Math.max(c.header.length, ...cells.map((r) => visible(r[i]!).length)),
  )
  const gap = 2
  const budget = out.isTTY ? out.columns : Infinity
  while (widths.reduce((a, b) => a + b + gap, -gap) > budget) {
    const widest = widths.indexOf(Math.max(...widths))
    if (widths[widest]! <= 8) break
    widths[widest]!--
  }
  const line = (values: string[]) =>
    values
      .map((v, i) => fit(v, widths[i]!))
      .join(' '.repeat(gap))
      .trimEnd() + '\n'
  out.write(line(columns.map((c) => (out.color ? bold(c.header) : c.header))))
  for (const row of cells) out.write(line(row))
}

/** Label and value lines for one record. */
export function printFields(out: Output, fields: [string, unknown][]): void {
  const width = Math.max(...fields.map(([label]) => label.length))
  for (const [label, value] of fields) {
    out.write(`${label.padEnd(width)}  ${cellText(out, value)}\n`)
  }
}

function cellText(out: Output, value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (typeof value === 'string' && isoTime.test(value)) return formatTime(out, value)
  if (Array.isArray(value)) return value.map((v) => cellText(out, v)).join(', ')
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

/** Text without its colour codes: what takes room on the screen. */
function visible(text: string): string {
  return text.replace(/\x1b\[[0-9;]*m/g, '')
}

function fit(text: string, width: number): string {
  const shown = visible(text)
  if (shown.length <= width) return text + ' '.repeat(width - shown.length)
  return shown.slice(0, Math.max(0, width - 1)) + '…'
}

const isoTime = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

/** On a terminal "3m ago" / "in 2h"; elsewhere the ISO time unchanged. */
export function formatTime(out: Pick<Output, 'isTTY'>, iso: string, now = Date.now()): string {
  if (!out.isTTY) return iso
  const seconds = Math.round((Date.parse(iso) - now) / 1000)
  const abs = Math.abs(seconds)
  const [n, unit] =
    abs < 60
      ? [abs, 's']
      : abs < 3600
        ? [Math.floor(abs / 60), 'm']
        : abs < 86400
          ? [Math.floor(abs / 3600), 'h']
          : [Math.floor(abs / 86400), 'd']
  if (abs < 5) return 'just now'
  return seconds < 0 ? `${n}${unit} ago` : `in ${n}${unit}`
}

export function bold(text: string): string {
  return `\x1b[1m${text}\x1b[22m`
}

export function colour(
  out: Output,
  name: 'red' | 'green' | 'yellow' | 'dim',
  text: string,
): string {
  if (!out.color) return text
  const codes = { red: [31, 39], green: [32, 39], yellow: [33, 39], dim: [2, 22] }[name]
  return `\x1b[${codes[0]}m${text}\x1b[${codes[1]}m`
}
