import { randomUUID } from 'node:crypto'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { decideGate } from '../../../server/domain/gates/index.js'
import { bindKey, setCap } from '../../../server/domain/models/index.js'
import { cancelRun, enqueueRun, startRunsIn } from '../../../server/domain/runs/index.js'
import { transaction } from '../../../server/db/sql.js'
import { apiStart } from '../../helpers/runs.js'
import { createTask } from '../../../server/domain/tasks/index.js'
import { createTeam } from '../../../server/domain/org/index.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { engineHarness, engineIdOf } from '../../helpers/engines.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Engines as real processes on one database (DESIGN 5): limits hold across processes, a dead worker's
// runs are taken over, and a kill -9 loses no run and finishes none twice.

let db: TestDatabase
let model: FakeModelProvider
let harness: Awaited<ReturnType<typeof engineHarness>>

beforeAll(async () => {
  db = await createTestDatabase()
  model = await startFakeModelProvider()
  harness = await engineHarness(db, model.url)
})
// Each test starts the engines it needs: none may pick up another test's runs.
afterEach(async () => {
  await harness?.stopAll()
})
afterAll(async () => {
  await model?.close()
})

const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }],
}

async function statusOf(runId: string): Promise<string> {
  const [row] = await db.sql<{ status: string }[]>`select status from runs where id = ${runId}`
  return row!.status
}

async function until(runId: string, status: string, ms = 30_000): Promise<void> {
  await eventually(
    async () => (await statusOf(runId)) === status,
    ms,
    `run ${runId} to be ${status}`,
  )
}

async function llmEnterprise(name: string) {
  const enterprise = await harness.enterprise(`${name} ${randomUUID().slice(0, 6)}`)
  const key = `key-${randomUUID()}`
  await bindKey(db.sql, harness.sealer, enterprise.id, {
    apiKey: key,
    provider: 'provider_a',
    layer: 'enterprise',
  })
  await db.sql`update enterprises set concurrent_run_limit = 100 where id = ${enterprise.id}`
  return { enterprise, key }
}

describe('two engine processes', () => {
  it('never run more than a team limit of 2 at once', async () => {
    const { enterprise, key } = await llmEnterprise('Limited')
    model.onRequest((r) => (r.key === key ? { ...finish, delayMs: 800 } : undefined))
    const team = await createTeam(db.sql, enterprise.id, {
      name: 'Two At Once',
      concurrentRunLimit: 2,
    })
    const taskId = await createTask(db.sql, enterprise.id, {
      name: 'Slow',
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['i'],
    })
    await Promise.all([harness.engine(), harness.engine()])
    const runs = []
    for (let i = 0; i < 8; i++)
      runs.push(await enqueueRun(db.sql, enterprise.id, taskId, { i }, { origin: 'webhook' }))
    let most = 0
    const sampling = (async () => {
      while (
        (
          await db.sql`select 1 from runs where team_id = ${team.id} and status not in ('succeeded', 'failed')`
        ).length > 0
      ) {
        const [row] = await db.sql<
          { n: number }[]
        >`select count(*)::int as n from runs where team_id = ${team.id} and status = 'running'`
        most = Math.max(most, row!.n)
        await new Promise((r) => setTimeout(r, 25))
      }
    })()
    for (const run of runs) await until(run.id, 'succeeded')
    await sampling
    expect(most).toBe(2)
    const [count] = await db.sql<
      { runningCount: number }[]
    >`select running_count from teams where id = ${team.id}`
    expect(count!.runningCount).toBe(0)
    model.onRequest(() => undefined)
  }, 90_000)
})

describe('two engine processes with a capacity of 2 each (OSD_ENGINE_CONCURRENCY)', () => {
  it('share 16 slow runs, each doing 35-65% of them, and neither ever runs more than 2 at once', async () => {
    const { enterprise, key } = await llmEnterprise('Shared')
    const taskId = await createTask(db.sql, enterprise.id, {
      name: 'Slow and many',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['i'],
    })
    const engines = await Promise.all([
      harness.engine({ OSD_ENGINE_CONCURRENCY: '2' }),
      harness.engine({ OSD_ENGINE_CONCURRENCY: '2' }),
    ])
    const ids = engines.map((e) => engineIdOf(e)!)
    // Which engine ran each run, and the most each ran at once, from the running runs' leases. Each
    // model call is answered only once a sample has been taken since it came, so every run is seen
    // running, whatever the machine's speed.
    let samples = 0
    const ranBy = new Map<string, string>()
    const most = new Map<string, number>()
    model.onRequest(async (r) => {
      if (r.key !== key) return undefined
      const seen = samples
      await eventually(() => samples >= seen + 2, 30_000, 'a sample of the running runs')
      return { ...finish, delayMs: 200 }
    })
    const runs = []
    for (let i = 0; i < 16; i++)
      runs.push(await enqueueRun(db.sql, enterprise.id, taskId, { i }, { origin: 'webhook' }))
    let done = false
    const sampling = (async () => {
      while (!done) {
        const running = await db.sql<{ id: string; leaseOwner: string }[]>`
          select id, lease_owner from runs where enterprise_id = ${enterprise.id} and status = 'running'`
        const counts = new Map<string, number>()
        for (const run of running) {
          ranBy.set(run.id, run.leaseOwner)
          counts.set(run.leaseOwner, (counts.get(run.leaseOwner) ?? 0) + 1)
        }
        for (const [owner, n] of counts) most.set(owner, Math.max(most.get(owner) ?? 0, n))
        samples++
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    try {
      for (const run of runs) await until(run.id, 'succeeded', 60_000)
    } finally {
      done = true
      await sampling
      model.onRequest(() => undefined)
    }
    expect(ranBy.size).toBe(16)
    expect([...new Set(ranBy.values())].sort()).toEqual([...ids].sort())
    for (const id of ids) {
      const share = [...ranBy.values()].filter((owner) => owner === id).length / 16
      expect(share, `engine ${id}'s share`).toBeGreaterThanOrEqual(0.35)
      expect(share, `engine ${id}'s share`).toBeLessThanOrEqual(0.65)
      expect(most.get(id), `engine ${id} at once`).toBe(2)
    }
    // 17-25 s with the machine loaded (two engines starting, 16 runs four at a time): three times that.
  }, 90_000)
})

describe('a worker that dies', () => {
  it('has its running run taken over after the lease lapses, and the events say so', async () => {
    const { enterprise, key } = await llmEnterprise('Takeover')
    model.script(key, { ...finish, delayMs: 60_000 }, finish)
    const taskId = await createTask(db.sql, enterprise.id, {
      name: 'Long call',
      assigneeRole: 'ceo',
    })
    const first = await harness.engine()
    const { run } = await apiStart(db.sql, enterprise.id, taskId, {})
    await until(run.id, 'running')
    await eventually(() => model.callsWith(key).length === 1, 10_000)
    await first.kill()
    const second = await harness.engine()
    await until(run.id, 'succeeded', 30_000)
    const events = await db.sql<{ type: string; payload: Record<string, string> }[]>`
      select type, payload from run_events where run_id = ${run.id} order by seq`
    const takeover = events.find((e) => e.type === 'run.lease_taken_over')
    expect(takeover?.payload).toMatchObject({
      previousOwner: engineIdOf(first),
      engine: engineIdOf(second),
    })
    expect(events.filter((e) => e.type === 'run.succeeded')).toHaveLength(1)
    expect(model.callsWith(key)).toHaveLength(2) // the interrupted call again, no more
  }, 90_000)
})

describe('a worker that stalls past its lease (SIGSTOP) and wakes again (SIGCONT)', () => {
  it('writes nothing more for the run another engine took over meanwhile', async () => {
    const { enterprise, key } = await llmEnterprise('Stalled')
    model.script(key, { ...finish, delayMs: 4000 }, finish)
    const taskId = await createTask(db.sql, enterprise.id, { name: 'Stalls', assigneeRole: 'ceo' })
    const stalled = await harness.engine()
    const { run } = await apiStart(db.sql, enterprise.id, taskId, {})
    await eventually(() => model.callsWith(key).length === 1, 10_000)
    stalled.process.kill('SIGSTOP')
    try {
      const other = await harness.engine()
      await until(run.id, 'succeeded', 30_000)
      const settled = await facts(run.id)
      stalled.process.kill('SIGCONT')
      // Awake again, the stalled engine gets its model answer and hears of the takeover.
      await new Promise((r) => setTimeout(r, 6000))
      expect(await facts(run.id)).toEqual(settled)
      expect(settled.events.filter((t) => t === 'run.succeeded')).toHaveLength(1)
      expect(settled.events).toContain('run.lease_taken_over')
      expect(await statusOf(run.id)).toBe('succeeded')
      expect(engineIdOf(other)).toBeDefined()
    } finally {
      stalled.process.kill('SIGCONT')
    }
  }, 90_000)
})

/** What a run has left in the database that a stray worker could change. */
async function facts(runId: string) {
  const events = await db.sql<{ type: string }[]>`
    select type from run_events where run_id = ${runId} and type <> 'model.called' order by seq`
  const journal = await db.sql<{ step: number; state: string }[]>`
    select step, state from run_journal where run_id = ${runId} order by step`
  const [run] = await db.sql<{ status: string; result: unknown }[]>`
    select status, result from runs where id = ${runId}`
  return { events: events.map((e) => e.type), journal, run }
}

describe('kill -9 of an engine with runs in every state', () => {
  it('loses no run and finishes none twice; each reaches an end or keeps waiting where it should', async () => {
    const { enterprise, key } = await llmEnterprise('Crash')
    const blockedEnterprise = await harness.enterprise(`No key ${randomUUID().slice(0, 6)}`)
    const slow = { ...finish, delayMs: 60_000 }
    // Answers by the run's input: the slow one stalls in its model call until the crash.
    model.onRequest((r) => {
      if (r.key !== key) return undefined
      const text = JSON.stringify(r.body.messages)
      if (text.includes('ask-me')) {
        return text.includes('tool_result')
          ? finish
          : { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Go ahead?'] } }] }
      }
      // The first call about the slow run stalls; the one after the crash answers.
      const earlier = model
        .callsWith(key)
        .filter((c) => JSON.stringify(c.body.messages).includes('slow'))
      return text.includes('slow') && earlier.length === 1 ? slow : finish
    })
    const team = await createTeam(db.sql, enterprise.id, {
      name: 'Single Slot',
      concurrentRunLimit: 1,
    })
    const llm = await createTask(db.sql, enterprise.id, {
      name: 'Slow Llm',
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    })
    const det = await createTask(db.sql, enterprise.id, {
      name: 'Same Team Det',
      kind: 'deterministic',
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    })
    const later = await createTask(db.sql, enterprise.id, {
      name: 'Later',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    })
    const chain = await createTask(db.sql, enterprise.id, {
      name: 'Chain',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      successors: [{ slug: 'later', delayMinutes: 1 }],
    })
    const asker = await createTask(db.sql, enterprise.id, {
      name: 'Asker',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      tools: ['os.ask_ceo', 'os.write_plan'],
      gates: [{ tool: 'os.ask_ceo', owner: 'ceo', approval: 'specific' }],
    })
    const capped = await createTask(db.sql, enterprise.id, {
      name: 'Capped',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    })
    await setCap(db.sql, enterprise.id, { layer: 'task', layerId: capped, moneyCentsDay: 0 })
    const keyless = await createTask(db.sql, blockedEnterprise.id, {
      name: 'Keyless',
      assigneeRole: 'ceo',
    })

    const engine = await harness.engine()
    const done = (await apiStart(db.sql, enterprise.id, det, { warmup: true })).run
    await until(done.id, 'succeeded')
    const running = (await apiStart(db.sql, enterprise.id, llm, { word: 'slow' })).run
    await until(running.id, 'running')
    const pendingInLane = await enqueueRun(
      db.sql,
      enterprise.id,
      llm,
      { word: 'second' },
      { origin: 'webhook' },
    )
    const queued = (await apiStart(db.sql, enterprise.id, det, { n: 2 })).run // the team's one slot is taken
    const gated = (await apiStart(db.sql, enterprise.id, asker, { word: 'ask-me' })).run
    const paused = (await apiStart(db.sql, enterprise.id, capped, {})).run
    const blocked = (await apiStart(db.sql, blockedEnterprise.id, keyless, {})).run
    const head = (await apiStart(db.sql, enterprise.id, chain, {})).run
    // Cancelled in the transaction that made it: an engine could otherwise end it first.
    const cancelled = await transaction(db.sql, async (tx) => {
      const run = await enqueueRun(tx, enterprise.id, later, { n: 'c' }, { origin: 'webhook' })
      return cancelRun(tx, enterprise.id, run.id)
    })
    await Promise.all([
      until(gated.id, 'waiting_on_gate'),
      until(paused.id, 'paused_spend'),
      until(blocked.id, 'blocked'),
      until(head.id, 'succeeded'),
    ])
    const [delayed] = await db.sql<
      { id: string }[]
    >`select id from runs where previous_run_id = ${head.id}`
    expect(await statusOf(delayed!.id)).toBe('pending')
    expect(await statusOf(queued.id)).toBe('queued')
    expect(await statusOf(pendingInLane.id)).toBe('pending')
    expect(await statusOf(running.id)).toBe('running')

    await engine.kill()
    const recovered = await harness.engine()

    // The dead worker's run is taken over and finishes; what waited on it follows.
    for (const run of [running, pendingInLane, queued]) await until(run.id, 'succeeded', 40_000)
    // What waits for a person, a key, a cap or a timer keeps waiting.
    expect(await statusOf(gated.id)).toBe('waiting_on_gate')
    expect(await statusOf(blocked.id)).toBe('blocked')
    expect(await statusOf(paused.id)).toBe('paused_spend')
    expect(await statusOf(delayed!.id)).toBe('pending')
    // ... and moves on when it comes.
    const [gate] = await db.sql<{ id: string }[]>`select id from gates where run_id = ${gated.id}`
    await decideGate(
      db.sql,
      enterprise.id,
      gate!.id,
      { decision: 'approve', answers: ['yes'] },
      'test',
    )
    await setCap(db.sql, enterprise.id, { layer: 'task', layerId: capped, moneyCentsDay: null })
    await db.sql`update runs set not_before = now() where id = ${delayed!.id}`
    const lateKey = `key-${randomUUID()}`
    model.script(lateKey, finish)
    await bindKey(db.sql, harness.sealer, blockedEnterprise.id, {
      apiKey: lateKey,
      provider: 'provider_a',
      layer: 'enterprise',
    })
    for (const run of [gated, paused, delayed!, blocked]) await until(run.id, 'succeeded', 40_000)

    // Nothing finished twice, and no answered model call was made again.
    const ends = await db.sql<{ runId: string; n: number }[]>`
      select run_id, count(*)::int as n from run_events
       where type in ('run.succeeded', 'run.failed', 'run.cancelled') group by run_id having count(*) > 1`
    expect(ends).toEqual([])
    const callsAbout = (word: string) =>
      model.callsWith(key).filter((c) => JSON.stringify(c.body.messages).includes(word))
    expect(callsAbout('ask-me')).toHaveLength(2) // the question before the crash, the finish after the answer
    expect(callsAbout('slow')).toHaveLength(2) // the call the crash interrupted, made once more
    const [journal] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from run_journal where run_id = ${gated.id} and kind = 'model' and state = 'done'`
    expect(journal!.n).toBe(2)
    expect(await statusOf(cancelled.id)).toBe('cancelled')
    // The counts the limits are read from came back to nothing running, and no reservation is held.
    const counts = await db.sql<{ n: number }[]>`
      select running_count as n from enterprises where id = ${enterprise.id}
      union all select running_count from teams where id = ${team.id}`
    expect(counts.map((c) => c.n)).toEqual([0, 0])
    const [reserved] = await db.sql<{ n: number }[]>`
      select coalesce(sum(reserved_usd_micros), 0)::int as n from spend_days where enterprise_id = ${enterprise.id}`
    expect(reserved!.n).toBe(0)
    expect(recovered.logs.some((l) => l.msg === 'engine started')).toBe(true)
    model.onRequest(() => undefined)
  }, 150_000)
})

describe('kill -9 of an engine in the middle of a burst of pipeline steps', () => {
  it('loses no step and runs none twice: every pipeline ends whole', async () => {
    const enterprise = await harness.enterprise(`Burst ${randomUUID().slice(0, 6)}`)
    await db.sql`update enterprises set concurrent_run_limit = 10000 where id = ${enterprise.id}`
    const steps = ['burst-a', 'burst-b', 'burst-c', 'burst-d']
    for (const [i, slug] of steps.entries()) {
      await createTask(db.sql, enterprise.id, {
        name: slug,
        slug,
        kind: 'deterministic',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        serializeOn: ['n'],
        ...(steps[i + 1] ? { successors: [{ slug: steps[i + 1]! }] } : {}),
      })
    }
    const [first] = await db.sql<{ id: string }[]>`
      select id from tasks where enterprise_id = ${enterprise.id} and slug = 'burst-a'`
    const pipelines = 150
    const engine = await harness.engine()
    const heads = await transaction(db.sql, (tx) =>
      startRunsIn(
        tx,
        Array.from({ length: pipelines }, (_, n) => ({
          enterpriseId: enterprise.id,
          task: { id: first!.id },
          input: { n },
          origin: 'api' as const,
        })),
      ),
    )
    // Killed as soon as it has begun to work through them.
    await eventually(
      async () =>
        (
          await db.sql`select 1 from runs where enterprise_id = ${enterprise.id} and status = 'succeeded' limit 1`
        ).length > 0,
      10_000,
    )
    await engine.kill()
    const [atKill] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from runs where enterprise_id = ${enterprise.id} and status = 'succeeded'`
    await harness.engine()
    await eventually(
      async () => {
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from runs where enterprise_id = ${enterprise.id} and status = 'succeeded'`
        return row!.n === pipelines * steps.length
      },
      60_000,
      'every step of every pipeline to succeed',
    )
    expect(atKill!.n).toBeLessThan(pipelines * steps.length) // the kill did land mid-burst
    const shapes = await db.sql<{ executionId: string; slugs: string[] }[]>`
      select execution_id, array_agg(task_slug order by created_at) as slugs
        from runs where enterprise_id = ${enterprise.id} group by execution_id`
    expect(shapes).toHaveLength(pipelines)
    for (const shape of shapes) expect(shape.slugs).toEqual(steps)
    expect(new Set(heads.map((h) => (h as { run: { id: string } }).run.id)).size).toBe(pipelines)
    const twice = await db.sql`
      select run_id from run_events e join runs r on r.id = e.run_id
       where r.enterprise_id = ${enterprise.id} and e.type in ('run.succeeded', 'run.failed', 'run.cancelled')
       group by run_id having count(*) > 1`
    expect(twice).toEqual([])
    const [counts] = await db.sql<{ n: number }[]>`
      select running_count as n from enterprises where id = ${enterprise.id}`
    expect(counts!.n).toBe(0)
  }, 120_000)
})
