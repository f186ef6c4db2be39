import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { RunEvent } from '../../shared/schemas/runs.js'
import { getRun, startRun, waitRun, watchRun } from '../../cli/commands/runs.js'
import type { Deps } from '../../cli/deps.js'
import { CliError } from '../../cli/errors.js'
import { formatEvent, summarisePayload } from '../../cli/events.js'
import { clearLine } from '../../cli/output.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

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

  it('keeps to one line, cut to a width when one is given', () => {
    const summary = summarisePayload({ text: 'x'.repeat(500), more: 'a\nb' }, 40)
    expect(summary).toHaveLength(40)
    expect(summary.endsWith('…')).toBe(true)
    expect(summarisePayload({ note: 'a\nb' })).not.toContain('\n')
  })

  it('is never cut off a terminal, whatever the width; on one it fits the columns', () => {
    const long = event('run.failed', { reason: `${'x'.repeat(300)} \x1b[2J END` })
    const whole = formatEvent(long, { isTTY: false, columns: 40 })
    expect(whole).toMatch(/reason="x{300} \\u001b\[2J END"$/)
    const fitted = formatEvent(long, { isTTY: true, columns: 50 })
    expect(fitted).toHaveLength(50)
    expect(fitted).toMatch(/^\d\d:\d\d:\d\d {2}run\.failed {14}reason="x+…$/)
  })
})

// Event lines of `runs watch`, `runs wait` and `runs start --wait` (issue 51 item 9): on a pipe the
// whole line, control characters escaped; on a terminal fitted to its width.
describe('event lines of a follow', () => {
  const taskId = randomUUID()
  const runId = randomUUID()
  const tail = 'THE END OF A LONG REASON'
  const reason = `${'the model said '.repeat(20)}\x1b]52;c;aGk=\x07 ${tail}`
  const run = (status: string) => ({
    id: runId,
    taskId,
    taskSlug: 'nightly-report',
    status,
    reason: status === 'failed' ? 'no' : null,
    createdAt: '2026-11-22T09:30:00.000Z',
  })
  const api = () =>
    new FakeApi((req) => {
      if (req.method === 'POST') return { status: 201, body: run('pending') }
      if (req.path === `/tasks/${taskId}`) return { body: { id: taskId, slug: 'nightly-report' } }
      return {
        body: {
          run: run('failed'),
          events: [event('run.running', {}, 'e1'), event('run.failed', { reason }, 'e2')],
          gates: [],
          next: [],
          previous: null,
        },
      }
    })
  const follows: [string, (deps: Deps) => Promise<void>][] = [
    ['runs watch', (deps) => watchRun(deps, runId)],
    ['runs wait', (deps) => waitRun(deps, runId, {})],
    ['runs start --wait', (deps) => startRun(deps, taskId, { wait: true })],
  ]

  it.each(follows)('%s prints the whole line on a pipe, escaped', async (_, command) => {
    const f = fakeDeps(api(), { columns: 60 })
    await command(f.deps).catch((err: unknown) => expect(err).toBeInstanceOf(CliError))
    const line = f
      .stderr()
      .split('\n')
      .find((l) => l.includes('run.failed'))!
    expect(line).toContain(`\\u001b]52;c;aGk=\\u0007 ${tail}"`)
    expect(line.length).toBeGreaterThan(300)
    expect(f.stderr()).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/)
  })

  it.each(follows)('%s fits each line to the terminal', async (_, command) => {
    const f = fakeDeps(api(), { columns: 60, errorTty: true })
    await command(f.deps).catch((err: unknown) => expect(err).toBeInstanceOf(CliError))
    // What the terminal keeps: each line after the spinner's last clearing of it.
    const lines = f
      .stderr()
      .split('\n')
      .map((l) => l.split(clearLine).at(-1)!)
    const failed = lines.find((l) => l.includes('run.failed'))!
    expect(failed).toHaveLength(60)
    expect(failed.endsWith('…')).toBe(true)
    expect(lines.find((l) => l.includes('run.running'))!.length).toBeLessThanOrEqual(60)
  })

  it('runs get prints the events whole on a pipe and fitted on a terminal', async () => {
    const pipe = fakeDeps(api(), { columns: 60 })
    await getRun(pipe.deps, runId, {})
    expect(pipe.stdout()).toContain(`${tail}"\n`)
    const terminal = fakeDeps(api(), { columns: 60, tty: true })
    await getRun(terminal.deps, runId, {})
    const failed = terminal
      .stdout()
      .split('\n')
      .find((l) => l.includes('run.failed'))!
    expect(failed).toHaveLength(60)
    expect(failed.startsWith('  ')).toBe(true)
  })
})
