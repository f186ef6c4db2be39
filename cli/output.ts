import { safeOutput, safeText } from './safe-text.js'

// Data to stdout, everything else to stderr; tables, colour and human times only on a terminal
// (STYLE, The CLI). `--json` prints the API's JSON and nothing else. What is written for a person
// shows the server's control characters escaped (cli/safe-text.ts, issue 41).

export interface OutputSettings {
  json: boolean
  isTTY: boolean
  /** Whether stderr is a terminal: progress lines (a spinner) go there only then. */
  errorIsTTY: boolean
  color: boolean
  /** The terminal's width: tables on stdout and progress lines on stderr fit it there. */
  columns: number
}

export interface Output extends OutputSettings {
  write(text: string): void
  error(text: string): void
}

/** What the spinner writes to start its line again: carriage return, erase the line. */
export const clearLine = '\r\x1b[K'

/**
 * An Output over two writers (the process's streams, or a test's). Everything but --json's stdout
 * goes through safeOutput: only osctl's own sequences (its colours when it colours, the spinner's
 * clearing when stderr is a terminal) pass as control characters.
 */
export function makeOutput(
  settings: OutputSettings,
  stdout: (text: string) => void,
  stderr: (text: string) => void,
): Output {
  const colours = settings.color
    ? Object.values(styles).flatMap(([on, off]) => [sgr(on), sgr(off)])
    : []
  const spinner = settings.errorIsTTY ? [clearLine] : []
  return {
    ...settings,
    write: (text) => stdout(settings.json ? text : safeOutput(text, colours)),
    error: (text) => stderr(safeOutput(text, [...colours, ...spinner])),
  }
}

export function terminalOutput(json: boolean): Output {
  const isTTY = Boolean(process.stdout.isTTY)
  return makeOutput(
    {
      json,
      isTTY,
      errorIsTTY: Boolean(process.stderr.isTTY),
      color: isTTY && !process.env.NO_COLOR && process.env.TERM !== 'dumb',
      // The terminal's width: stdout's, or stderr's when only stderr is one (`runs start --wait >
      // run.json` fits its event lines to the terminal that shows them).
      columns: process.stdout.columns || process.stderr.columns || 100,
    },
    // Once a reader has gone (EPIPE), the stream is destroyed at once but says so a moment later
    // (shared/pipes.ts ends the process then): what is written meanwhile goes nowhere, quietly.
    (text) => void (process.stdout.destroyed || process.stdout.write(text)),
    (text) => void (process.stderr.destroyed || process.stderr.write(text)),
  )
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
  /** Left out when no row has a value in it (a column that says something only at times). */
  whenAny?: boolean
}

/** Space between two columns. */
const gap = 2
/** A column that gives way is cut no narrower than this (or its own width, if less). */
const narrowest = 10

/**
 * A table, one row a line. On a terminal it is fitted to the width: the widest column that is not an
 * id gives way first, cut with an ellipsis, down to `narrowest`; ids are never cut, since an id is what
 * the next command needs (issue 27), so a terminal too narrow for them wraps the line instead. Off a
 * terminal (a pipe, a file) every column is printed whole. Widths are counted on the cells as shown,
 * the server's control characters escaped (issue 41).
 */
export function printTable<T>(out: Output, rows: T[], columns: Column<T>[]): void {
  if (rows.length === 0) {
    out.error('(none)\n')
    return
  }
  columns = columns.filter(
    (c) => !c.whenAny || rows.some((row) => !['', null, undefined].includes(c.value(row) as never)),
  )
  const cells = rows.map((row) => columns.map((c) => cellOf(out, c.value(row), false)))
  const natural = columns.map((c, i) =>
    Math.max(c.header.length, ...cells.map((r) => r[i]!.text.length)),
  )
  const whole = columns.map((c, i) => c.id === true || cells.every((r) => holdsIds(r[i]!.text)))
  const widths = out.isTTY ? fitted(natural, whole, out.columns) : natural
  const line = (values: Cell[]) =>
    values
      .map((v, i) => fit(v, widths[i]!))
      .join(' '.repeat(gap))
      .trimEnd() + '\n'
  out.write(line(columns.map((c) => ({ text: c.header, style: out.color ? 'bold' : null }))))
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

/**
 * Label and value lines for one record. A value of several lines (a description, a reason) keeps its
 * line breaks, each further line indented under the value, so no line of it reads as a label of its
 * own.
 */
export function printFields(out: Output, fields: [string, unknown][]): void {
  const width = Math.max(...fields.map(([label]) => label.length))
  const indent = '\n' + ' '.repeat(width + 2)
  for (const [label, value] of fields) {
    const cell = cellOf(out, value, true)
    out.write(`${label.padEnd(width)}  ${styled(cell.style, cell.text.replace(/\n/g, indent))}\n`)
  }
}

/** A value as a table or a detail view shows it: its text, escaped, and osctl's style for it. */
interface Cell {
  text: string
  style: StyleName | null
}

function cellOf(out: Output, value: unknown, multiline: boolean): Cell {
  if (value instanceof Styled)
    return { text: multiline ? value.text : oneLine(value.text), style: value.style }
  const text = cellText(out, value)
  return { text: safeText(multiline ? text : oneLine(text), { multiline }), style: null }
}

function cellText(out: Output, value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (typeof value === 'string' && isoTime.test(value)) return formatTime(out, value)
  if (value instanceof Styled) return value.text
  if (Array.isArray(value)) return value.map((v) => cellText(out, v)).join(', ')
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

function fit(cell: Cell, width: number): string {
  const { text } = cell
  if (text.length <= width) return styled(cell.style, text) + ' '.repeat(width - text.length)
  return styled(cell.style, text.slice(0, Math.max(0, width - 1)) + '…')
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

/** osctl's own styles: the SGR codes that turn each on and off. */
const styles = {
  bold: [1, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  dim: [2, 22],
} as const

export type StyleName = keyof typeof styles

function sgr(code: number): string {
  return `\x1b[${code}m`
}

/** `text` in `style` (as it is when there is none). */
function styled(style: StyleName | null, text: string): string {
  if (!style) return text
  const [on, off] = styles[style]
  return `${sgr(on)}${text}${sgr(off)}`
}

/**
 * Words in one of osctl's styles. The words are made safe as it is made (safeText, line breaks kept),
 * so its text holds no control character but its style's own; a table or a detail view measures and
 * cuts the words and puts the style back around them. In a template string it is the styled text.
 */
export class Styled {
  readonly text: string
  constructor(
    text: string,
    readonly style: StyleName | null,
  ) {
    this.text = safeText(text, { multiline: true })
  }
  toString(): string {
    return styled(this.style, this.text)
  }
}

/** Words in bold when the output has colour; the words alone otherwise. */
export function bold(out: Pick<Output, 'color'>, text: string): Styled {
  return new Styled(text, out.color ? 'bold' : null)
}

/** Words in a colour when the output has colour; the words alone otherwise. */
export function colour(
  out: Pick<Output, 'color'>,
  name: Exclude<StyleName, 'bold'>,
  text: string,
): Styled {
  return new Styled(text, out.color ? name : null)
}
