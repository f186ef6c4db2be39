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
  /**
   * What the next command takes to name the row (a slug, say): never cut. Columns whose every value
   * holds a UUID are ids without saying so.
   */
  id?: boolean
}

/** Space between two columns. */
const gap = 2
/** A column that gives way is cut no narrower than this (or its own width, if less). */
const narrowest = 10

/**
 * A table, one row a line. On a terminal it is fitted to the width: the widest column that is not an
 * id gives way first, cut with an ellipsis, down to `narrowest`; ids are never cut, since an id is what
 * the next command needs (issue 27), so a terminal too narrow for them wraps the line instead. Off a
 * terminal (a pipe, a file) every column is printed whole.
 */
export function printTable<T>(out: Output, rows: T[], columns: Column<T>[]): void {
  if (rows.length === 0) {
    out.error('(none)\n')
    return
  }
  const cells = rows.map((row) => columns.map((c) => oneLine(cellText(out, c.value(row)))))
  const natural = columns.map((c, i) =>
    Math.max(c.header.length, ...cells.map((r) => visible(r[i]!).length)),
  )
  const whole = columns.map((c, i) => c.id === true || cells.every((r) => holdsIds(visible(r[i]!))))
  const widths = out.isTTY ? fitted(natural, whole, out.columns) : natural
  const line = (values: string[]) =>
    values
      .map((v, i) => fit(v, widths[i]!))
      .join(' '.repeat(gap))
      .trimEnd() + '\n'
  out.write(line(columns.map((c) => (out.color ? bold(c.header) : c.header))))
  for (const row of cells) out.write(line(row))
}

/** Column widths within `budget`: the widest column that may give way loses a character at a time. */
function fitted(natural: number[], whole: boolean[], budget: number): number[] {
  const widths = [...natural]
  const floor = natural.map((w) => Math.min(w, narrowest))
  let total = widths.reduce((a, b) => a + b, 0) + gap * (widths.length - 1)
  while (total > budget) {
    let widest = -1
    for (let i = 0; i < widths.length; i++) {
      if (whole[i] || widths[i]! <= floor[i]!) continue
      if (widest < 0 || widths[i]! > widths[widest]!) widest = i
    }
    if (widest < 0) break
    widths[widest]!--
    total--
  }
  return widths
}

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i

/** A cell of an id column: it names a record by its UUID (or is empty). */
function holdsIds(text: string): boolean {
  return text === '-' || uuid.test(text)
}

/** A cell is one line, so a row is one line: line breaks and tabs in a value read as spaces. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*|\t/g, ' ')
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
