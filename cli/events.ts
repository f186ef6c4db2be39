import type { RunEvent } from '../shared/schemas/runs.js'
import { safeText } from './safe-text.js'

/** How long a payload summary may grow before it is cut with an ellipsis. */
const summaryWidth = 100

/**
 * One line for a run event: its time, its type, and a short summary of its payload. On a terminal the
 * time is the local clock time; elsewhere the ISO time as recorded, so logs can be compared. The
 * server's text in it (a reason, a tool's name, a model's summary) has its control characters escaped.
 */
export function formatEvent(event: RunEvent, options: { isTTY: boolean }): string {
  const time = safeText(options.isTTY ? clockTime(event.createdAt) : event.createdAt)
  const summary = summarisePayload(event.payload)
  return [time, safeText(event.type).padEnd(22), summary].join('  ').trimEnd()
}

/**
 * The payload as `key=value` pairs, the run's result first and flattened (outcome, summary, output),
 * strings unquoted unless they hold spaces, cut to one readable line: its control characters escaped
 * before it is measured (JSON leaves C1 and the bidi controls as they are; a bare string all of them).
 */
export function summarisePayload(payload: Record<string, unknown>, width = summaryWidth): string {
  const { result, ...rest } = payload
  const parts: string[] = []
  if (result && typeof result === 'object' && !Array.isArray(result)) {
    for (const [key, value] of inOrder(result as Record<string, unknown>))
      parts.push(pair(key, value))
  } else if (result !== undefined) {
    parts.push(pair('result', result))
  }
  for (const [key, value] of inOrder(rest)) parts.push(pair(key, value))
  const line = safeText(parts.join(' ').replace(/\s*\n\s*/g, ' '))
  return line.length > width ? line.slice(0, width - 1) + '…' : line
}

/** What says most about an event comes first (stored JSON keeps no order of its own). */
const first = ['outcome', 'summary', 'reason', 'blockedReason']

function inOrder(record: Record<string, unknown>): [string, unknown][] {
  const rank = (key: string) => (first.includes(key) ? first.indexOf(key) : first.length)
  return Object.entries(record).sort(([a], [b]) => rank(a) - rank(b))
}

function pair(key: string, value: unknown): string {
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
