import { describe, expect, it } from 'vitest'
import type { RunEvent } from '../../shared/schemas/runs.js'
import { formatEvent, summarisePayload } from '../../cli/events.js'

const event = (type: string, payload: Record<string, unknown> = {}, id = 'e1'): RunEvent => ({
  id,
  type,
  payload,
  createdAt: '2026-11-22T09:30:00.000Z',
})

describe('formatEvent', () => {
  it('is the ISO time, the type and the payload off a terminal', () => {
    expect(formatEvent(event('run.queued', { origin: 'api' }), { isTTY: false })).toBe(
      '2026-11-22T09:30:00.000Z  run.queued              origin=api',
    )
  })

  it('flattens the result and quotes strings with spaces', () => {
    const line = formatEvent(
      event('run.succeeded', { result: { output: { a: 1 }, outcome: 'succeeded' } }),
      { isTTY: false },
    )
    // The outcome first, whatever order the stored JSON kept.
    expect(line).toMatch(/run\.succeeded\s+outcome=succeeded output=\{"a":1\}$/)
    expect(summarisePayload({ reason: 'no key bound' })).toBe('reason="no key bound"')
  })

  it('shows the clock time on a terminal and has no trailing space without a payload', () => {
    const line = formatEvent(event('run.running'), { isTTY: true })
    expect(line).toMatch(/^\d\d:\d\d:\d\d {2}run\.running$/)
  })

  it('keeps to one line of bounded width', () => {
    const summary = summarisePayload({ text: 'x'.repeat(500), more: 'a\nb' }, 40)
    expect(summary).toHaveLength(40)
    expect(summary.endsWith('…')).toBe(true)
    expect(summarisePayload({ note: 'a\nb' })).not.toContain('\n')
  })
})
