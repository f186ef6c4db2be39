import type { RunEvent } from '../shared/schemas/runs.js'
import { deciderText } from './decisions.js'
import { usd } from './money.js'
import { safeText } from './safe-text.js'

/**
 * One line for a run event: its time, its type, and a summary of its payload. On a terminal the time
 * is the local clock time and the line fits the terminal's `columns`, cut with an ellipsis; elsewhere
 * (a pipe, a file, a CI log) the ISO time as recorded, so logs can be compared, and the whole line,
 * never cut (issue 51): what a pipeline greps for may be at its end. The server's text in it (a
 * reason, a tool's name, a model's summary) has its control characters escaped, before it is measured.
 */
export function formatEvent(
  event: RunEvent,
  options: { isTTY: boolean; columns?: number },
): string {
  const time = safeText(options.isTTY ? clockTime(event.createdAt) : event.createdAt)
  const summary = summarisePayload(event.payload)
  const line = [time, safeText(event.type).padEnd(22), summary].join('  ').trimEnd()
  return options.isTTY && options.columns ? cut(line, options.columns) : line
}

/** `text` in at most `width` characters: cut with an ellipsis when it is longer. */
function cut(text: string, width: number): string {
  return text.length > width ? text.slice(0, Math.max(0, width - 1)) + '…' : text
}

/**
 * The payload as `key=value` pairs, the run's result first and flattened (outcome, summary, output),
 * strings unquoted unless they hold spaces, money as osctl writes it (cost=$0.0295), who decided a
 * gate by name where the daemon gave one, on one line, cut to `width` when one is given: its control
 * characters escaped before it is measured (JSON leaves C1 and the bidi controls as they are; a bare
 * string all of them).
 */
export function summarisePayload(payload: Record<string, unknown>, width = Infinity): string {
  const { result, ...rest } = payload
  const parts: string[] = []
  if (result && typeof result === 'object' && !Array.isArray(result)) {
    for (const [key, value] of inOrder(result as Record<string, unknown>))
      parts.push(pair(key, value))
  } else if (result !== undefined) {
    parts.push(pair('result', result))
  }
  for (const [key, value] of inOrder(whoInWords(rest))) parts.push(pair(key, value))
  const line = safeText(parts.join(' ').replace(/\s*\n\s*/g, ' '))
  return cut(line, width)
}

/** gate.decided's decidedBy in words where the daemon named who (issue 51): "ci-bot (token)". */
function whoInWords(payload: Record<string, unknown>): Record<string, unknown> {
  const { decidedBy, decidedByName, ...rest } = payload
  if (typeof decidedBy !== 'string' || typeof decidedByName !== 'string') return payload
  return { ...rest, decidedBy: deciderText(decidedBy, decidedByName) }
}

/** What says most about an event comes first (stored JSON keeps no order of its own). */
const first = ['outcome', 'summary', 'reason', 'blockedReason']

function inOrder(record: Record<string, unknown>): [string, unknown][] {
  const rank = (key: string) => (first.includes(key) ? first.indexOf(key) : first.length)
  return Object.entries(record).sort(([a], [b]) => rank(a) - rank(b))
}

/** A payload's amount in US cents (model.called's costUsdCents): named without the unit, as usd() writes it. */
const centsKey = /^(.+)UsdCents$/

function pair(key: string, value: unknown): string {
  const cents = centsKey.exec(key)
  if (cents && typeof value === 'number') return `${cents[1]}=${usd(value)}`
  const text =
    typeof value === 'string' && !/\s/.test(value) && value !== ''
      ? value
      : JSON.stringify(value ?? null)
  return `${key}=${text}`
}

function clockTime(iso: string): string {
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return [date.getHours(), date.getMinutes(), date.getSeconds()]
    .map((n) => String(n).padStart(2, '0'))
    .join(':')
}
