import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { parseDuration, waitGate, waitRun } from '../../cli/commands/wait.js'
import { CliError, UsageError, exitCodes } from '../../cli/errors.js'
import { report } from '../../cli/report.js'
import type { Gate } from '../../shared/schemas/gates.js'
import type { Run, RunStatus } from '../../shared/schemas/runs.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// osctl wait run|gate ID --for=STATUS [--timeout] (issue 48), in process against a daemon whose reads
// the test answers: exit 0 when reached, 1 when the run ends (the gate is decided) otherwise first, 8
// when the timeout passes first, 2 for a status that is none.

const runId = randomUUID()
const gateId = randomUUID()
const at = '2026-11-29T01:00:00.000Z'

const run = (status: RunStatus): Run => ({
  id: runId,
  status,
  input: {},
  costUsdCents: 0,
  costUnpriced: false,
  startedAt: at,
  finishedAt: null,
  taskId: randomUUID(),
  taskVersionId: randomUUID(),
  taskSlug: 'nightly',
  memberId: null,
  executionId: randomUUID(),
  previousRunId: null,
  origin: 'api',
  result: null,
  reason: status === 'failed' ? 'the model gave up' : null,
  traceId: null,
  createdAt: at,
  updatedAt: at,
})

const gate = (decision: Gate['decision']): Gate => ({
  id: gateId,
  kind: 'tool',
  status: decision ? 'decided' : 'waiting',
  tool: 'vcs.merge',
  arguments: {},
  owner: 'ceo',
  approval: null,
  summary: null,
  choices: null,
  questions: null,
  runId,
  chatId: null,
  taskId: null,
  taskSlug: null,
  decision,
  note: null,
  answers: null,
  choice: null,
  decidedBy: decision ? 'token:x' : null,
  decidedByName: decision ? 'ci' : null,
  decidedAt: decision ? at : null,
  createdAt: at,
})

/** A daemon whose reads of the run (or gate) answer `reads` in turn, the last one again after. */
function daemon<T>(reads: T[], kind: 'run' | 'gate') {
  const left = [...reads]
  let n = 0
  return new FakeApi(() => {
    const next = left.length > 1 ? left.shift()! : left[0]!
    if (kind === 'gate') return { body: next }
    return {
      body: {
        run: next,
        events: [{ id: `e${++n}`, type: 'run.status', payload: {}, createdAt: at }],
        gates: [],
        next: [],
        previous: null,
      },
    }
  })
}

async function exitOf(
  command: Promise<void>,
  json = true,
): Promise<{ code: number; stderr: string }> {
  let stderr = ''
  let code: number = exitCodes.ok
  await command.catch((err: unknown) => {
    expect(err).toBeInstanceOf(CliError)
    code = report(err, json, {
      stdout: { write: () => undefined },
      stderr: { write: (s: string) => (stderr += s) },
    })
  })
  return { code, stderr }
}

const noSleep = async () => undefined

describe('osctl wait run', () => {
  it('exits 0 once the run reaches the status, printing it', async () => {
    const f = fakeDeps(daemon([run('queued'), run('running'), run('succeeded')], 'run'), {
      json: true,
    })
    const res = await exitOf(waitRun(f.deps, runId, { for: 'running' }))
    expect(res.code).toBe(exitCodes.ok)
    expect(JSON.parse(f.stdout())).toMatchObject({ id: runId, status: 'running' })
  })

  it('exits 1 when the run ends otherwise first, saying how', async () => {
    const f = fakeDeps(daemon([run('running'), run('failed')], 'run'), { json: true })
    const res = await exitOf(waitRun(f.deps, runId, { for: 'succeeded' }))
    expect(res).toEqual({
      code: exitCodes.failed,
      stderr: `error: run ${runId} ended failed, not succeeded\n`,
    })
  })

  it('exits 8 when the timeout passes first', async () => {
    const f = fakeDeps(daemon([run('queued')], 'run'), { json: true })
    const res = await exitOf(waitRun(f.deps, runId, { for: 'succeeded', timeout: '0s' }))
    expect(res).toEqual({
      code: exitCodes.pending,
      stderr: `error: run ${runId} is still queued after 0s\n`,
    })
  })

  it('exits 2 for a status that is none, before any read', async () => {
    const api = daemon([run('queued')], 'run')
    const res = await exitOf(waitRun(fakeDeps(api).deps, runId, { for: 'done' }))
    expect(res.code).toBe(exitCodes.usage)
    expect(res.stderr).toMatch(/--for takes a run status: pending, queued, /)
    expect(api.sent).toEqual([])
  })
})

describe('osctl wait gate', () => {
  it('exits 0 once decided the way waited for, 1 when decided otherwise', async () => {
    const reads = [gate(null), gate(null), gate('approve')]
    const approved = fakeDeps(daemon(reads, 'gate'), { json: true })
    expect((await exitOf(waitGate(approved.deps, gateId, { for: 'approve' }, noSleep))).code).toBe(
      exitCodes.ok,
    )
    expect(JSON.parse(approved.stdout())).toMatchObject({ decision: 'approve' })
    const any = fakeDeps(daemon(reads, 'gate'), { json: true })
    expect((await exitOf(waitGate(any.deps, gateId, { for: 'decided' }, noSleep))).code).toBe(
      exitCodes.ok,
    )
    const rejected = fakeDeps(daemon([gate('approve')], 'gate'), { json: true })
    expect(await exitOf(waitGate(rejected.deps, gateId, { for: 'reject' }, noSleep))).toEqual({
      code: exitCodes.failed,
      stderr: `error: gate ${gateId} was decided approve, not reject\n`,
    })
  })

  it('exits 8 when the timeout passes first', async () => {
    const f = fakeDeps(daemon([gate(null)], 'gate'), { json: true })
    const res = await exitOf(waitGate(f.deps, gateId, { for: 'approve', timeout: '0' }, noSleep))
    expect(res).toEqual({
      code: exitCodes.pending,
      stderr: `error: gate ${gateId} still waits after 0\n`,
    })
  })
})

describe('--timeout durations', () => {
  it('takes seconds or units s, m, h', () => {
    expect(parseDuration('90')).toBe(90)
    expect(parseDuration('10m')).toBe(600)
    expect(parseDuration('1h30m')).toBe(5400)
    expect(parseDuration('1.5s')).toBe(1.5)
    for (const bad of ['ten', '10 m', '5d', '-1', ''])
      expect(() => parseDuration(bad), bad).toThrow(UsageError)
  })
})
