import { beforeAll, describe, expect, it } from 'vitest'
import { timeFlag } from '../../cli/commands/runs-bulk.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// osctl runs cancel|retry by a filter (issue 50: Act on a filter), in process against a real daemon
// whose engine acts on the operations. The one-run forms are test/cli/tasks-runs.test.ts.

let cli: CliDaemon

beforeAll(async () => {
  // One operation acts on 3 runs at most here, so that a filter past the bound is quick to make.
  cli = await startCliDaemon('Bulk Cli', { OSD_BULK_MAX_RUNS: '3' })
  await cli.json(['tasks', 'create', '--name', 'Echo', '--kind', 'deterministic', '--role', 'ceo'])
  await cli.json(['tasks', 'create', '--name', 'Talk', '--kind', 'llm', '--role', 'ceo'])
})

const run = (args: string[]) => osctl(args, cli.env)

describe('osctl runs retry with a filter', () => {
  it('--dry-run says the count and does nothing; off a terminal it needs --yes; --yes retries them', async () => {
    const started: { id: string }[] = []
    for (const n of [1, 2])
      started.push(await cli.json(['runs', 'start', 'echo', '--input', `n=${n}`, '--wait']))
    const dry = await run(['runs', 'retry', '--task', 'echo', '--status', 'succeeded', '--dry-run'])
    expect(dry.exitCode, dry.stderr).toBe(0)
    expect(dry.stdout).toBe('2 runs would be retried\n')
    const asJson = await cli.json(['runs', 'retry', '--task', 'echo', '--dry-run'])
    expect(asJson).toMatchObject({ dryRun: true, action: 'retry', matched: 2 })

    const refused = await run(['runs', 'retry', '--task', 'echo', '--status', 'succeeded'])
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toContain('Retry 2 runs: refusing without --yes')
    const list = (await cli.json(['runs', 'list', '--task', 'echo'])).data
    expect(list.filter((r: { origin: string }) => r.origin === 'retry')).toEqual([])

    const done = await run(['runs', 'retry', '--task', 'echo', '--status', 'succeeded', '--yes'])
    expect(done.exitCode, done.stderr).toBe(0)
    expect(done.stdout).toMatch(/^matched\s+2$/m)
    expect(done.stdout).toMatch(/^done\s+2$/m)
    expect(done.stdout).toMatch(/^failed\s+0$/m)
    expect(done.stdout).toMatch(/^skipped\s+0$/m)
    await eventually(async () => {
      const runs = (await cli.json(['runs', 'list', '--task', 'echo'])).data
      const retries = runs.filter((r: { origin: string }) => r.origin === 'retry')
      return (
        retries.length === 2 &&
        retries
          .map((r: { input: { priorRunId: string } }) => r.input.priorRunId)
          .sort()
          .join() ===
          started
            .map((r) => r.id)
            .sort()
            .join()
      )
    }, 10_000)
  })
})

describe('osctl runs cancel with a filter', () => {
  it('cancels every matching run not ended and prints the operation as JSON', async () => {
    // No model key: the run is held (blocked), not ended.
    const talk = await cli.json(['runs', 'start', 'talk'])
    const op = await cli.json([
      'runs',
      'cancel',
      '--task',
      'talk',
      '--since',
      '1h',
      '--reason',
      'stop it now',
      '--yes',
    ])
    expect(op).toMatchObject({
      action: 'cancel',
      status: 'completed',
      matched: 1,
      done: 1,
      reason: 'stop it now',
    })
    const cancelled = (await cli.json(['runs', 'get', talk.id])).run
    expect(cancelled.status).toBe('cancelled')
    expect(cancelled.reason).toBe(`Cancelled by bulk operation ${op.id}: stop it now`)
    // Nothing left to cancel: said, and no failure.
    const none = await run(['runs', 'cancel', '--task', 'talk', '--yes'])
    expect(none.exitCode).toBe(0)
    expect(none.stderr).toBe('no run that has not ended matches the filter: nothing to cancel\n')
    const nonePending = await run(['runs', 'cancel', '--task', 'talk', '--status', 'pending'])
    expect(nonePending.exitCode).toBe(0)
    expect(nonePending.stderr).toBe('no pending run matches the filter: nothing to cancel\n')
  })

  it('refuses a status the action never acts on (usage, exit 2), before anything is sent', async () => {
    // No task is named "nosuch": had osctl asked osd anything, it would have said so (exit 1).
    for (const dryRun of [[], ['--dry-run']]) {
      const cancel = await run([
        'runs',
        'cancel',
        '--task',
        'nosuch',
        '--status',
        'failed',
        ...dryRun,
      ])
      expect(cancel.exitCode).toBe(2)
      expect(cancel.stdout).toBe('')
      expect(cancel.stderr).toBe(
        'error: --status failed: a cancel acts on runs not ended only (pending, queued, running, waiting_on_gate, blocked, paused_spend)\n',
      )
      const retry = await run([
        'runs',
        'retry',
        '--task',
        'nosuch',
        '--status',
        'running',
        ...dryRun,
      ])
      expect(retry.exitCode).toBe(2)
      expect(retry.stdout).toBe('')
      expect(retry.stderr).toBe(
        'error: --status running: a retry acts on ended runs only (succeeded, failed, cancelled, skipped_overlap)\n',
      )
    }
    // A retry's status that matches nothing is no mistake: said, exit 0.
    const none = await run(['runs', 'retry', '--task', 'talk', '--status', 'skipped_overlap'])
    expect(none.exitCode, none.stderr).toBe(0)
    expect(none.stderr).toBe(
      'no skipped_overlap run not yet retried matches the filter: nothing to retry\n',
    )
  })

  it('takes a run id or a filter, not both and not neither', async () => {
    const id = '0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10'
    const both = await run(['runs', 'cancel', id, '--task', 'talk', '--yes'])
    expect(both.exitCode).toBe(2)
    expect(both.stderr).toContain('not both')
    const neither = await run(['runs', 'retry'])
    expect(neither.exitCode).toBe(2)
    expect(neither.stderr).toContain('give a run id, or a filter')
    const reasonOfOne = await run(['runs', 'cancel', id, '--reason', 'why', '--yes'])
    expect(reasonOfOne.exitCode).toBe(2)
    expect(reasonOfOne.stderr).toContain('--reason goes with a filter')
    const badTime = await run(['runs', 'retry', '--since', 'yesterday'])
    expect(badTime.exitCode).toBe(2)
  })
})

describe('a filter matching more runs than one operation acts on', () => {
  it('says so with the count and the bound, before asking, and makes nothing (exit 1)', async () => {
    await cli.json([
      'tasks',
      'create',
      '-d',
      JSON.stringify({
        name: 'Many',
        kind: 'llm',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        serializeOn: ['n'],
      }),
    ])
    for (const n of [1, 2, 3, 4]) await cli.json(['runs', 'start', 'many', '--input', `n=${n}`])
    const dry = await run(['runs', 'cancel', '--task', 'many', '--dry-run'])
    expect(dry.exitCode, dry.stderr).toBe(0)
    expect(dry.stdout).toBe(
      '4 runs would be cancelled: more than one operation acts on (3); narrow the filter\n',
    )
    const refused = await run(['runs', 'cancel', '--task', 'many', '--yes'])
    expect(refused.exitCode).toBe(1)
    expect(refused.stdout).toBe('')
    expect(refused.stderr).toBe(
      'error: 4 runs match, more than one operation acts on (3): narrow the filter (--since, --until, --status, --origin)\n',
    )
    const left = (await cli.json(['runs', 'list', '--task', 'many'])).data
    expect(left.map((r: { status: string }) => r.status)).not.toContain('cancelled')
  })
})

describe('timeFlag', () => {
  it('reads an ISO time or an age', () => {
    const now = Date.parse('2026-11-28T12:00:00.000Z')
    expect(timeFlag('since', '2h', now)).toBe('2026-11-28T10:00:00.000Z')
    expect(timeFlag('since', '7d', now)).toBe('2026-11-21T12:00:00.000Z')
    expect(timeFlag('until', '2026-11-28T09:30:00+01:00', now)).toBe('2026-11-28T08:30:00.000Z')
  })
})
