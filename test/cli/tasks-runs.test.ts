import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import type { TestDatabase } from '../helpers/db.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// osctl tasks, runs, executions, webhooks and blockers in process against a real daemon (issue 28).
// A run followed across a restart of osd is test/cli/wait-restart.test.ts; through pipes,
// test/cli/pipes.test.ts.

let daemon: CliDaemon['daemon']
let db: TestDatabase
let env: Record<string, string>
let enterpriseId: string
let enterpriseSlug: string
let json: CliDaemon['json']

const isUnfinished = (status: string) =>
  ['pending', 'queued', 'running', 'blocked', 'paused_spend'].includes(status)

beforeAll(async () => {
  const cli = await startCliDaemon('Runs Cli')
  daemon = cli.daemon
  db = cli.db
  env = cli.env
  enterpriseId = cli.enterprise.id
  enterpriseSlug = cli.enterprise.slug
  json = cli.json
  // A deterministic task on the built-in ceo role runs at once and succeeds with output = input.
  await json(['tasks', 'create', '--name', 'Echo', '--kind', 'deterministic', '--role', 'ceo'])
})

describe('osctl tasks', () => {
  it('creates, reads by slug, publishes with --base and refuses a stale base', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-task-'))
    await writeFile(
      join(dir, 'def.json'),
      JSON.stringify({
        name: 'Digest',
        kind: 'deterministic',
        assigneeRole: 'ceo',
        goal: 'Sum up',
      }),
    )
    const created = await json(['tasks', 'create', '-f', join(dir, 'def.json'), '--slug', 'dg'])
    expect(created).toMatchObject({ slug: 'dg', name: 'Digest', kind: 'deterministic' })
    const v1 = created.currentVersionId

    const read = await json(['tasks', 'get', 'dg'])
    expect(read.id).toBe(created.id)
    const human = await osctl(['tasks', 'get', 'dg'], env)
    expect(human.stdout).toMatch(/^slug\s+dg$/m)
    expect(human.stdout).toMatch(/^webhook\s+POST http.*\/webhooks\/runs-cli\/tasks\/dg/m)

    const published = await json([
      'tasks',
      'publish',
      'dg',
      '-d',
      '{"goal":"Sum up the day"}',
      '--base',
      v1,
    ])
    expect(published).toMatchObject({ number: 2, definition: { goal: 'Sum up the day' } })

    const stale = await osctl(
      ['tasks', 'publish', 'dg', '-d', '{"goal":"Late"}', '--base', v1],
      env,
    )
    expect(stale.exitCode).toBe(1)
    expect(stale.stderr).toMatch(/^error: task_version_conflict: .*\(409\)$/m)
    expect((await osctl(['tasks', 'publish', 'dg'], env)).exitCode).toBe(2)

    const versions = await json(['tasks', 'versions', 'dg'])
    expect(versions.map((v: { number: number }) => v.number)).toEqual([2, 1])
    expect(versions[0].current).toBe(true)
    const first = await json(['tasks', 'version', 'dg', v1])
    expect(first).toMatchObject({ number: 1, current: false, definition: { goal: 'Sum up' } })
    const firstHuman = await osctl(['tasks', 'version', 'dg', v1], env)
    expect(firstHuman.stdout).toMatch(/^current\s+no$/m)
    expect(firstHuman.stdout).toContain('# dg')
    const workflow = await json(['tasks', 'workflow', 'dg'])
    expect(workflow.currentVersion).toMatchObject({ number: 2, id: published.id })
  })

  it('copies, lists page by page or --all, filters, and deletes', async () => {
    const copy = await json([
      'tasks',
      'copy',
      'echo',
      '--team',
      'general',
      '--name',
      'Echo Copy',
      '--slug',
      'echo-2',
    ])
    expect(copy).toMatchObject({ slug: 'echo-2', origin: 'copy', assigneeRole: 'ceo' })
    await json(['tasks', 'create', '--name', 'Third', '--kind', 'deterministic'])

    const page = await json(['tasks', 'list', '--limit', '1', '--sort', 'slug', '--order', 'asc'])
    expect(page).toMatchObject({ page: 1, limit: 1 })
    expect(page.pages).toBeGreaterThan(1)
    const all = await json(['tasks', 'list', '--all', '--limit', '1'])
    expect(Array.isArray(all)).toBe(true)
    expect(all).toHaveLength(page.total)
    expect(new Set(all.map((t: { id: string }) => t.id)).size).toBe(page.total)

    const copies = await json(['tasks', 'list', '--origin', 'copy', '--team', 'general'])
    expect(copies.data.map((t: { slug: string }) => t.slug)).toEqual(['echo-2'])
    const byName = await json(['tasks', 'list', '--name', 'ECHO', '--all'])
    expect(byName.map((t: { slug: string }) => t.slug).sort()).toEqual(['echo', 'echo-2'])

    const table = await osctl(['tasks', 'list', '--all', '--sort', 'slug', '--order', 'asc'], env)
    expect(table.stdout).toMatch(/^SLUG\s+NAME\s+KIND\s+STATUS/)
    expect(table.stdout).toMatch(/^echo-2\s+Echo Copy\s+deterministic\s+active\s+ceo/m)
    const paged = await osctl(['tasks', 'list', '--limit', '1'], env)
    expect(paged.stderr).toMatch(/page 1 of \d+/)

    expect((await osctl(['tasks', 'delete', 'echo-2'], env)).exitCode).toBe(2) // needs --yes off a terminal
    expect((await osctl(['tasks', 'delete', 'echo-2', '--yes'], env)).exitCode).toBe(0)
    expect((await osctl(['tasks', 'get', 'echo-2'], env)).stderr).toContain('no task "echo-2"')
  })

  it('sets a schedule from flags and clears it', async () => {
    const schedule = await json([
      'tasks',
      'schedule',
      'set',
      'echo',
      '--cron',
      '0 9 * * 1-5',
      '--tz',
      'Europe/Paris',
      '--input',
      'region=eu',
      '--input',
      'days=7',
    ])
    expect(schedule).toMatchObject({
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      input: { region: 'eu', days: 7 },
      enabled: true,
    })
    expect(schedule.nextFireAt).not.toBeNull()
    const disabled = await json([
      'tasks',
      'schedule',
      'set',
      'echo',
      '--cron',
      '0 9 * * *',
      '--disabled',
    ])
    expect(disabled).toMatchObject({ enabled: false, nextFireAt: null, input: {} })
    expect((await json(['tasks', 'get', 'echo'])).schedule.cron).toBe('0 9 * * *')

    expect((await osctl(['tasks', 'schedule', 'clear', 'echo'], env)).exitCode).toBe(2)
    expect((await osctl(['tasks', 'schedule', 'clear', 'echo', '--yes'], env)).exitCode).toBe(0)
    expect((await json(['tasks', 'get', 'echo'])).schedule).toBeNull()
  })
})

describe('osctl runs', () => {
  it('starts a run with --input and --wait: exit 0 and the run JSON on stdout', async () => {
    const res = await osctl(['runs', 'start', 'echo', '--input', 'a=1', '--wait'], env)
    expect(res.exitCode, res.stderr).toBe(0)
    const run = JSON.parse(res.stdout)
    expect(run).toMatchObject({
      status: 'succeeded',
      input: { a: 1 },
      result: { output: { a: 1 } },
    })
    expect(res.stderr).toContain(`started run ${run.id} of echo`)
    expect(res.stderr).toMatch(/run\.succeeded\s+outcome=succeeded output=\{"a":1\}/)
    expect(res.stderr).not.toMatch(/\x1b/) // no spinner when stderr is not a terminal
  })

  it("checks the input against the task's declared inputs before sending (issue 51)", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-inputs-'))
    const inputs = [
      { key: 'region', label: 'Region', type: 'string', required: true },
      { key: 'days', label: 'Days', type: 'number' },
    ]
    await writeFile(
      join(dir, 'def.json'),
      JSON.stringify({ name: 'Inputs', kind: 'deterministic', assigneeRole: 'ceo', inputs }),
    )
    await json(['tasks', 'create', '-f', join(dir, 'def.json'), '--slug', 'with-inputs'])

    const refused = await osctl(
      ['--json', 'runs', 'start', 'with-inputs', '--input', 'dasy=7'],
      env,
    )
    expect(refused.exitCode).toBe(2)
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: 'usage', exitCode: 2 })
    expect(refused.stderr).toContain(
      'error: task with-inputs: missing required input "region"; unknown input "dasy" ' +
        '(did you mean "days"?); it declares region (string, required), days (number, optional)',
    )
    expect((await json(['runs', 'list', '--task', 'with-inputs'])).data).toEqual([])

    const started = await json(['runs', 'start', 'with-inputs', '--input', 'region=eu', '--wait'])
    expect(started).toMatchObject({ status: 'succeeded', input: { region: 'eu' } })
    // The API's rule is the input as sent: unchecked, an unknown key reaches the run. (Followed to
    // its end: the ceo holds one run at a time, and the next test starts another.)
    const unchecked = await json([
      'runs',
      'start',
      'with-inputs',
      '-d',
      '{"x":1}',
      '--no-input-check',
      '--wait',
    ])
    expect(unchecked.input).toEqual({ x: 1 })
  })

  it('lays --input over -d, and reads a run, its events after one, its os-tool view and its log', async () => {
    const res = await osctl(
      ['runs', 'start', 'echo', '-d', '{"a":0,"b":[1]}', '--input', 'a=x', '--wait', '--json'],
      env,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    const run = JSON.parse(res.stdout)
    expect(run.result.output).toEqual({ a: 'x', b: [1] })

    const detail = await json(['runs', 'get', run.id])
    expect(detail.run.id).toBe(run.id)
    const types = detail.events.map((e: { type: string }) => e.type)
    expect(types.at(-1)).toBe('run.succeeded')
    const after = await json(['runs', 'get', run.id, '--after', detail.events[0].id])
    expect(after.events).toHaveLength(detail.events.length - 1)
    const human = await osctl(['runs', 'get', run.id], env)
    expect(human.stdout).toMatch(/^status\s+succeeded$/m)
    expect(human.stdout).toMatch(/^ {2}\S+\s+run\.succeeded\s+outcome=succeeded/m)

    const view = await json(['runs', 'os-tool', run.id])
    expect(view).toMatchObject({
      status: 'succeeded',
      task: { slug: 'echo' },
      input: { a: 'x', b: [1] },
    })
    expect(view.events.at(-1).type).toBe('run.succeeded')
    const short = await osctl(['runs', 'os-tool', run.id], env)
    expect(short.stdout).toMatch(/^task\s+echo \(/m)
    expect(short.stdout).toMatch(/^ {2}\S+\s+run\.succeeded/m)

    const missing = await osctl(['runs', 'log', run.id], env)
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toContain('log_not_found')
    await db.sql`insert into run_logs (run_id, enterprise_id, body) values (${run.id}, ${enterpriseId}, 'line one')`
    const log = await osctl(['runs', 'log', run.id], env)
    expect(log.stdout).toBe('line one\n') // osctl ends the body with a newline

    // A finished run: wait and watch answer at once; cancel is refused by the API.
    expect((await osctl(['runs', 'wait', run.id], env)).exitCode).toBe(0)
    expect((await osctl(['runs', 'watch', run.id], env)).exitCode).toBe(0)
    const cancel = await osctl(['runs', 'cancel', run.id, '--yes'], env)
    expect(cancel.exitCode).toBe(1)
    expect(cancel.stderr).toContain('illegal_transition')
  })

  it('retries a run on the current version, and lists runs page by page or --all', async () => {
    const [first] = (await json(['runs', 'list', '--task', 'echo', '--limit', '1'])).data
    const retry = await json(['runs', 'retry', first.id])
    expect(retry.input.priorRunId).toBe(first.id)
    expect((await osctl(['runs', 'wait', retry.id, '--timeout', '20'], env)).exitCode).toBe(0)

    const page = await json(['runs', 'list', '--task', 'echo', '--limit', '2'])
    expect(page.total).toBeGreaterThanOrEqual(3)
    expect(page.pages).toBeGreaterThan(1)
    const all = await json(['runs', 'list', '--task', 'echo', '--all', '--limit', '2'])
    expect(all).toHaveLength(page.total)
    expect(new Set(all.map((r: { id: string }) => r.id)).size).toBe(page.total)
    const version = await json(['runs', 'list', '--task-version', first.taskVersionId, '--all'])
    expect(version.length).toBeGreaterThan(0)
    expect(
      version.every((r: { taskVersionId: string }) => r.taskVersionId === first.taskVersionId),
    ).toBe(true)
    const succeeded = await json(['runs', 'list', '--status', 'succeeded', '--all'])
    expect(succeeded.every((r: { status: string }) => r.status === 'succeeded')).toBe(true)
    const table = await osctl(['runs', 'list', '--task', 'echo'], env)
    expect(table.stdout).toMatch(/^ID\s+TASK\s+STATUS\s+ORIGIN/)
    expect(table.stdout).toMatch(/\secho\s+succeeded\s+retry\s/)
  })

  it('keeps stdout pure JSON with --json, on success and on refusal', async () => {
    const [run] = (await json(['runs', 'list', '--task', 'echo', '--limit', '1'])).data
    for (const args of [
      ['tasks', 'list', '--all'],
      ['tasks', 'versions', 'echo'],
      ['runs', 'get', run.id],
      ['runs', 'wait', run.id],
      ['runs', 'watch', run.id],
      ['blockers'],
      ['executions', 'board'],
      ['webhooks', 'list', '--all'],
    ]) {
      const res = await osctl(['--json', ...args], env)
      expect(res.exitCode, `${args.join(' ')}: ${res.stderr}`).toBe(0)
      expect(() => JSON.parse(res.stdout), args.join(' ')).not.toThrow()
    }
    const refused = await osctl(['--json', 'runs', 'cancel', run.id, '--yes'], env)
    expect(refused.exitCode).toBe(1)
    expect(JSON.parse(refused.stdout).error).toBe('illegal_transition')
  })

  // Bad flags refused before calling the API: test/cli/usage.test.ts, in process.

  it('sends --input numbers only when they read back as typed: versions and long ids stay strings', async () => {
    const run = await json([
      'runs',
      'start',
      'echo',
      '--input',
      'version=1.10',
      '--input',
      'id=12345678901234567890',
      '--input',
      'n=7',
      '--input',
      'quoted="true"',
    ])
    expect(run.input).toEqual({ version: '1.10', id: '12345678901234567890', n: 7, quoted: 'true' })
  })

  describe('on a run that does not end (kind llm: no model provider is configured)', () => {
    let runId: string

    beforeAll(async () => {
      await json(['tasks', 'create', '-d', '{"name":"Slow","kind":"llm","assigneeRole":"ceo"}'])
      // The echo runs above that were started without --wait hold the one ceo until they end; on a
      // loaded machine that is after this block's first start, which would then be member_busy.
      await eventually(
        async () => {
          const [row] = await db.sql<{ n: number }[]>`
            select count(*)::int as n from runs
             where enterprise_id = ${enterpriseId}
               and status in ('pending', 'queued', 'running')`
          return row!.n === 0
        },
        30_000,
        'the echo runs ending',
      )
    }, 40_000)

    /** Cancels whatever run of the slow task is still under way (blocked for want of a key, say). */
    async function freeSlowLane() {
      const runs = (await json(['runs', 'list', '--task', 'slow', '--all'])) as {
        id: string
        status: string
      }[]
      for (const run of runs.filter((r) => isUnfinished(r.status)))
        expect((await osctl(['runs', 'cancel', run.id, '--yes'], env)).exitCode).toBe(0)
    }

    it('runs wait --timeout exits 8 with the run, still unfinished, on stdout', async () => {
      runId = (await json(['runs', 'start', 'slow'])).id
      const started = Date.now()
      const res = await osctl(['runs', 'wait', runId, '--timeout', '2'], env)
      expect(res.exitCode, res.stderr).toBe(8)
      expect(Date.now() - started).toBeLessThan(10_000)
      const run = JSON.parse(res.stdout)
      expect(run.id).toBe(runId)
      expect(['pending', 'queued', 'running', 'blocked']).toContain(run.status)
      expect(res.stderr).toContain(`error: run ${runId} is still ${run.status} after 2s`)
      expect(res.stderr).toMatch(/run\.queued/)
    })

    it('runs wait exits 1 when another osctl cancels the run', async () => {
      const waiter = osctl(['runs', 'wait', runId], env)
      // The waiter has read the run (and printed its events) before the cancel.
      await eventually(
        () => waiter.printed().stderr.includes('run.queued'),
        10_000,
        'the waiter following',
      )
      expect((await osctl(['runs', 'cancel', runId, '--yes'], env)).exitCode).toBe(0)
      const res = await waiter
      expect(res.exitCode).toBe(1)
      expect(JSON.parse(res.stdout)).toMatchObject({ id: runId, status: 'cancelled' })
      expect(res.stderr).toMatch(/run\.cancelled/)
      expect(res.stderr).toContain(`error: run ${runId} cancelled`)
    })

    it('runs watch prints events as they come and exits 0 when the run ends', async () => {
      const id = (await json(['runs', 'start', 'slow'])).id
      const watcher = osctl(['runs', 'watch', id], env)
      await eventually(
        () => watcher.printed().stderr.includes('run.queued'),
        10_000,
        'the watcher following',
      )
      expect((await osctl(['runs', 'cancel', id, '--yes'], env)).exitCode).toBe(0)
      const res = await watcher
      expect(res.exitCode).toBe(0)
      expect(res.stdout).toMatch(new RegExp(`^${id}\\s+cancelled`))
      expect(res.stderr).toMatch(/run\.cancelled/)
    })

    it('runs start --wait --timeout exits 8, the run still unfinished on stdout', async () => {
      await freeSlowLane()
      const res = await osctl(['runs', 'start', 'slow', '--wait', '--timeout', '1'], env)
      expect(res.exitCode, res.stderr).toBe(8)
      const run = JSON.parse(res.stdout)
      expect(isUnfinished(run.status)).toBe(true)
      expect(res.stderr).toContain(`is still ${run.status} after 1s`)
    })

    it('names the run that keeps a refused start: exit 1, overlap, and the id to read it by', async () => {
      const res = await osctl(['runs', 'start', 'slow'], env) // the run above is still under way
      expect(res.exitCode).toBe(1)
      const kept = /kept as run (\S+)\./.exec(res.stderr)
      expect(res.stderr).toMatch(/^error: overlap: /)
      expect(kept, res.stderr).not.toBeNull()
      expect((await json(['runs', 'get', kept![1]!])).run.status).toBe('skipped_overlap')
      const refused = await osctl(['--json', 'runs', 'start', 'slow'], env)
      expect(JSON.parse(refused.stdout)).toMatchObject({
        error: 'overlap',
        runId: expect.any(String),
      })
    })

    it('runs start --wait exits 1 when the run does not succeed', async () => {
      await freeSlowLane()
      const waiter = osctl(['runs', 'start', 'slow', '--wait'], env)
      const started = () => /started run (\S+)/.exec(waiter.printed().stderr)
      await eventually(() => started() !== null, 10_000, 'the run started')
      const id = started()![1]!
      expect((await osctl(['runs', 'cancel', id, '--yes'], env)).exitCode).toBe(0)
      const res = await waiter
      expect(res.exitCode).toBe(1)
      expect(JSON.parse(res.stdout).status).toBe('cancelled')
    })
  })
})

describe('osctl executions', () => {
  it('reads, draws, boards, counts, closes and reopens the execution of a finished run', async () => {
    const res = await osctl(['runs', 'start', 'echo', '--wait'], env)
    expect(res.exitCode, res.stderr).toBe(0)
    const run = JSON.parse(res.stdout)

    const detail = await json(['executions', 'get', run.id])
    expect(detail.execution).toMatchObject({ id: run.executionId, status: 'complete' })
    expect(detail.runs.map((r: { id: string }) => r.id)).toEqual([run.id])
    const tree = await osctl(['executions', 'get', run.executionId], env)
    expect(tree.exitCode, tree.stderr).toBe(0)
    expect(tree.stdout).toContain(`execution ${run.executionId}  complete`)
    expect(tree.stdout).toMatch(new RegExp(`^echo\\s+succeeded\\s+${run.id}$`, 'm'))

    const board = await json(['executions', 'board'])
    const complete = board.lanes.find((l: { lane: string }) => l.lane === 'complete')
    expect(complete.executions.map((e: { id: string }) => e.id)).toContain(run.executionId)
    expect((await osctl(['executions', 'board'], env)).stdout).toMatch(/^complete \(\d+\)$/m)
    const counts = await json(['executions', 'counts'])
    expect(counts).toMatchObject({ executions: { running: expect.any(Number) } })
    expect((await osctl(['executions', 'counts'], env)).stdout).toMatch(
      /^\s+RUNNING\s+QUEUED\s+WAITING\n^executions\s+\d+/m,
    )

    expect((await json(['executions', 'close', run.executionId])).closed).toBe(true)
    const closed = await json(['executions', 'list', '--closed', '--all'])
    expect(closed.map((e: { id: string }) => e.id)).toContain(run.executionId)
    expect((await json(['executions', 'reopen', run.executionId])).closed).toBe(false)
    const list = await osctl(['executions', 'list', '--status', 'complete'], env)
    expect(list.stdout).toMatch(/^ID\s+TASK\s+STATUS\s+RUNS/)

    expect((await osctl(['executions', 'close-completed'], env)).exitCode).toBe(2)
    const done = await json(['executions', 'close-completed', '--team', 'general', '--yes'])
    expect(done.closed).toBeGreaterThanOrEqual(0)
    const all = await json(['executions', 'close-completed', '--yes'])
    expect(typeof all.closed).toBe('number')
    expect((await json(['executions', 'get', run.id])).execution.closed).toBe(true)
  })
})

describe('osctl webhooks', () => {
  it('lists, reads and replays a delivery; the same --key answers the same replay', async () => {
    const rotated = await json(['webhook-secret', 'rotate', '--yes'])
    const answer = await fetch(`${daemon.url}/webhooks/${enterpriseSlug}/tasks/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-os-webhook-secret': rotated.secret },
      body: JSON.stringify({ from: 'hook' }),
    })
    expect(answer.status).toBe(202)
    const accepted = (await answer.json()) as { deliveryId: string; runId: string }
    expect((await osctl(['runs', 'wait', accepted.runId, '--timeout', '20'], env)).exitCode).toBe(0)

    const list = await json(['webhooks', 'list', '--kind', 'task'])
    expect(list.data.map((d: { id: string }) => d.id)).toContain(accepted.deliveryId)
    const all = await json(['webhooks', 'list', '--all', '--status', 'accepted'])
    expect(all.map((d: { id: string }) => d.id)).toContain(accepted.deliveryId)
    const table = await osctl(['webhooks', 'list'], env)
    expect(table.stdout).toMatch(/^ID\s+KIND\s+TARGET\s+STATUS/)

    const delivery = await json(['webhooks', 'get', accepted.deliveryId])
    expect(delivery).toMatchObject({ kind: 'task', target: 'echo', runId: accepted.runId })
    expect(JSON.stringify(delivery)).not.toContain(rotated.secret)
    expect((await osctl(['webhooks', 'get', accepted.deliveryId], env)).stdout).toMatch(
      /^target\s+echo$/m,
    )

    const key = 'replay-key-0123456789'
    const replay = await json(['webhooks', 'replay', accepted.deliveryId, '--key', key])
    expect(replay).toMatchObject({ replayOf: accepted.deliveryId })
    expect(replay.id).not.toBe(accepted.deliveryId)
    const again = await json(['webhooks', 'replay', accepted.deliveryId, '--key', key])
    expect(again.id).toBe(replay.id)
    expect((await osctl(['runs', 'wait', replay.runId, '--timeout', '20'], env)).exitCode).toBe(0)

    const fresh = await osctl(['--json', 'webhooks', 'replay', accepted.deliveryId], env)
    expect(fresh.exitCode, fresh.stderr).toBe(0)
    const printed = /idempotency key ([A-Za-z0-9_-]{32}) /.exec(fresh.stderr)
    expect(printed).not.toBeNull()
    const repeated = await json(['webhooks', 'replay', accepted.deliveryId, '--key', printed![1]!])
    expect(repeated.id).toBe(JSON.parse(fresh.stdout).id)
    const freshRun = JSON.parse(fresh.stdout).runId
    expect((await osctl(['runs', 'wait', freshRun, '--timeout', '20'], env)).exitCode).toBe(0)

    expect(
      (await osctl(['webhooks', 'replay', accepted.deliveryId, '--key', 'short'], env)).exitCode,
    ).toBe(2)
  })
})

describe('osctl blockers', () => {
  it('lists each section and clears failed runs', async () => {
    await json([
      'tasks',
      'create',
      '-d',
      '{"name":"Chain","kind":"deterministic","successors":[{"slug":"nowhere"}]}',
    ])
    const res = await osctl(['runs', 'start', 'echo', '--wait'], env)
    const failedRun = JSON.parse(res.stdout)
    // No task of this service fails by itself without a model; mark one failed as a worker would.
    await db.sql`update runs set status = 'failed', reason = 'broke on purpose' where id = ${failedRun.id}`
    const second = JSON.parse((await osctl(['runs', 'start', 'echo', '--wait'], env)).stdout)
    await db.sql`update runs set status = 'failed', reason = 'broke too' where id = ${second.id}`

    const blockers = await json(['blockers', '--page-size', '1'])
    expect(blockers.failed).toMatchObject({ total: 2, pages: 2, limit: 1 })
    expect(blockers.taskProblems.map((p: { slug: string }) => p.slug)).toContain('chain')
    const page2 = await json(['blockers', 'list', '--page', '2', '--page-size', '1'])
    expect(page2.failed.page).toBe(2)

    const human = await osctl(['blockers'], env)
    expect(human.exitCode, human.stderr).toBe(0)
    expect(human.stdout).toMatch(/^Failed runs \(2\)$/m)
    expect(human.stdout).toMatch(/broke on purpose/)
    expect(human.stdout).toMatch(/^Stopped pipelines \(0\)\n\(none\)$/m)
    expect(human.stdout).toMatch(/^chain\s+warning\s+successor_unknown_slug/m)

    expect((await json(['runs', 'clear', failedRun.id])).id).toBe(failedRun.id)
    expect((await json(['blockers'])).failed.total).toBe(1)
    expect((await osctl(['blockers', 'clear'], env)).exitCode).toBe(2)
    expect(await json(['blockers', 'clear', '--yes'])).toEqual({ section: 'failed', cleared: 1 })
    expect((await json(['blockers'])).failed.total).toBe(0)
  })
})
