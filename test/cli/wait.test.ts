import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { startRun, waitRun } from '../../cli/commands/runs.js'
import { CliError, exitCodes } from '../../cli/errors.js'
import { report } from '../../cli/report.js'
import type { Run, RunEvent, RunStatus } from '../../shared/schemas/runs.js'
import { FakeApi, fakeDeps, type Sent } from '../helpers/cli.js'

// The end of `runs start --wait` and `runs wait` (issue 27), in process: on a terminal a short
// summary a person reads, on a pipe or with --json the run's JSON as scripts always read it; and a
// run that stops at a gate said once, with the command that decides it.

const task = randomUUID()
const runId = randomUUID()
const gateId = randomUUID()
const started = '2026-11-22T09:30:00.000Z'

function run(status: RunStatus, overrides: Partial<Run> = {}): Run {
  return {
    id: runId,
    status,
    input: {},
    costUsdCents: 3,
    costUnpriced: false,
    startedAt: started,
    finishedAt: ['succeeded', 'failed', 'cancelled'].includes(status)
      ? '2026-11-22T09:30:02.400Z'
      : null,
    taskId: task,
    taskVersionId: randomUUID(),
    taskSlug: 'nightly-report',
    memberId: null,
    executionId: randomUUID(),
    previousRunId: null,
    origin: 'api',
    result: null,
    reason: null,
    traceId: null,
    createdAt: started,
    updatedAt: started,
    ...overrides,
  }
}

let eventNumber = 0
const event = (type: string, payload: Record<string, unknown> = {}): RunEvent => ({
  id: `e${++eventNumber}`,
  type,
  payload,
  createdAt: started,
})

/** A daemon whose run reads answer `reads` in turn (the last one again once they run out). */
function daemon(reads: { run: Run; events: RunEvent[] }[]) {
  const left = [...reads]
  return new FakeApi((req: Sent) => {
    if (req.method === 'POST') return { status: 201, body: run('pending') }
    // The task `runs start` checks the input against (issue 51): it declares none.
    if (req.path === `/tasks/${task}`)
      return { body: { id: task, slug: 'nightly-report', currentVersion: { definition: {} } } }
    const next = left.length > 1 ? left.shift()! : { ...left[0]!, events: [] }
    return { body: { ...next, gates: [], next: [], previous: null } }
  })
}

const succeeded = run('succeeded', {
  result: { outcome: 'sent', summary: 'Sent the report to 3 people' },
})

/** What a command line shows: its output, and the exit code run.ts would give its error. */
async function wait(
  command: (deps: ReturnType<typeof fakeDeps>['deps']) => Promise<void>,
  reads: { run: Run; events: RunEvent[] }[],
  opts: { tty?: boolean; json?: boolean } = {},
) {
  const f = fakeDeps(daemon(reads), opts)
  let stderr = ''
  let code: number = exitCodes.ok
  await command(f.deps).catch((err: unknown) => {
    expect(err).toBeInstanceOf(CliError)
    code = report(err, Boolean(opts.json), {
      stdout: { write: () => undefined },
      stderr: { write: (s: string) => (stderr += s) },
    })
  })
  return { code, stdout: f.stdout(), stderr: f.stderr() + stderr }
}

const start = (deps: ReturnType<typeof fakeDeps>['deps']) => startRun(deps, task, { wait: true })

describe('the end of a wait', () => {
  const reads = [
    { run: run('running'), events: [event('run.created'), event('run.running')] },
    { run: succeeded, events: [event('run.succeeded', { outcome: 'sent' })] },
  ]

  it('on a terminal is a short summary: status, outcome, summary, cost, duration, run id', async () => {
    const res = await wait(start, reads, { tty: true })
    expect(res.code).toBe(exitCodes.ok)
    expect(res.stdout).toBe(
      [
        'status    succeeded',
        'outcome   sent',
        'summary   Sent the report to 3 people',
        'cost      $0.03',
        'duration  2.4s',
        `run       ${runId} (nightly-report)`,
        '',
      ].join('\n'),
    )
    expect(res.stderr).toContain(`started run ${runId} of nightly-report`)
  })

  it('on a terminal says why a run failed in the summary, exit 1 and no second telling', async () => {
    const failed = run('failed', { reason: 'the model refused the task' })
    const res = await wait(
      (deps) => waitRun(deps, runId, {}),
      [{ run: failed, events: [event('run.failed', { reason: failed.reason })] }],
      { tty: true },
    )
    expect(res.code).toBe(exitCodes.failed)
    expect(res.stdout).toMatch(/^status {4}failed\nreason {4}the model refused the task\n/)
    expect(res.stderr).not.toContain('error:')
  })

  it('on a pipe, or with --json, is the run JSON as before; a failure is also said on stderr', async () => {
    const piped = await wait(start, reads)
    expect(JSON.parse(piped.stdout)).toEqual(succeeded)
    const json = await wait(start, reads, { tty: true, json: true })
    expect(JSON.parse(json.stdout)).toEqual(succeeded)
    const failed = run('failed', { reason: 'boom' })
    const res = await wait(
      (deps) => waitRun(deps, runId, {}),
      [{ run: failed, events: [event('run.failed')] }],
    )
    expect([res.code, JSON.parse(res.stdout).status]).toEqual([exitCodes.failed, 'failed'])
    expect(res.stderr).toContain(`error: run ${runId} failed: boom`)
  })

  it('on a terminal, a run still under way when the timeout runs out: exit 8, the summary so far', async () => {
    const res = await wait(
      (deps) => waitRun(deps, runId, { timeout: '0' }),
      [{ run: run('running'), events: [event('run.running')] }],
      { tty: true },
    )
    expect(res.code).toBe(exitCodes.pending)
    expect(res.stdout).toMatch(/^status {4}running\n/)
    expect(res.stdout).toMatch(/\nduration {2}\S+ so far\n/)
    expect(res.stderr).toContain(`error: run ${runId} is still running after 0s`)
  })
})

describe('a run that waits at a gate', () => {
  const atGate = (kind: string, tool: string | null) => ({
    run: run('waiting_on_gate'),
    events: [event('run.running'), event('run.waiting_on_gate', { gateId, kind, tool })],
  })

  it('is said once, with the command that decides it, and the wait goes on to the end', async () => {
    const res = await wait(
      start,
      [
        atGate('tool', 'vcs.merge_pull_request'),
        // Nothing new for a while: the gate is not said again.
        { run: run('waiting_on_gate'), events: [] },
        { run: run('waiting_on_gate'), events: [] },
        { run: succeeded, events: [event('gate.decided'), event('run.succeeded')] },
      ],
      { tty: true },
    )
    expect(res.code).toBe(exitCodes.ok)
    const said = res.stderr.split('\n').filter((l) => l.includes('waits at gate'))
    expect(said).toEqual([
      `the run waits at gate ${gateId}, a tool call (vcs.merge_pull_request): decide it with ` +
        `\`osctl gates decide ${gateId} --approve\` (or --reject --note WHY), or in ` +
        '`osctl gates review`; still waiting',
    ])
    expect(res.stdout).toMatch(/^status {4}succeeded\n/)
  })

  it('a question is answered with gates answer; a gate of the past is not said', async () => {
    const question = await wait(
      (deps) => waitRun(deps, runId, {}),
      [atGate('question', 'os.ask_ceo'), { run: succeeded, events: [event('run.succeeded')] }],
    )
    expect(question.stderr).toContain(
      `the run waits at gate ${gateId}, a question: answer it with ` +
        `\`osctl gates answer ${gateId} --answer TEXT\`, or in \`osctl gates review\``,
    )
    const past = await wait(
      (deps) => waitRun(deps, runId, {}),
      [
        {
          run: run('running'),
          events: [
            event('run.waiting_on_gate', { gateId, kind: 'tool', tool: 'x' }),
            event('gate.decided'),
            event('run.running'),
          ],
        },
        { run: succeeded, events: [event('run.succeeded')] },
      ],
    )
    expect(past.stderr).not.toContain('waits at gate')
  })

  it('is said at the read whose events end at the gate, though the run read with them predates it', async () => {
    // A read answers the run and its events from two queries: the row may still say running.
    const res = await wait(
      (deps) => waitRun(deps, runId, { timeout: '0' }),
      [
        {
          run: run('running'),
          events: [event('run.running'), event('run.waiting_on_gate', { gateId, kind: 'tool' })],
        },
        { run: run('waiting_on_gate'), events: [] },
      ],
    )
    expect(res.code).toBe(exitCodes.pending) // one read, then the timeout: no second read said it
    expect(res.stderr).toContain(`the run waits at gate ${gateId}, a tool call: decide it with`)
  })
})
