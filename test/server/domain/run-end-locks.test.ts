import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { transaction, type Db, type Sql } from '../../../server/db/sql.js'
import { createSql } from '../../../server/db/sql.js'
import { laneKey } from '../../../server/db/locks.js'
import {
  advance,
  finishAll,
  laneOf,
  loadRun,
  type RunRow,
} from '../../../server/domain/runs/index.js'
import { completeDeterministic } from '../../../server/engine/runs/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { apiStart, llmTask } from '../../helpers/runs.js'

// A run's end and the engine's step, held at the points where each takes its locks (issue 42). Three
// runs of one task failing at once made PostgreSQL report `deadlock detected`: a run's end had locked
// its enterprise's running count and then waited for os-improve's lane, which the engine's admission
// held while it waited for that same count. PostgreSQL broke the circle by cancelling one of them: the
// run's end, whose lease then lapsed, so another engine took the run over and called the model again.

let t: TestApp
let other: Sql
const interval = process.env.OSD_IMPROVE_INTERVAL_MINUTES

beforeAll(async () => {
  // os-improve's trigger on: a failed run of a custom task calls for its improvement (DESIGN 10).
  process.env.OSD_IMPROVE_INTERVAL_MINUTES = '0'
  t = await createTestApp()
  other = createSql(t.dbUrl, { max: 2 })
})
afterAll(async () => {
  if (interval === undefined) delete process.env.OSD_IMPROVE_INTERVAL_MINUTES
  else process.env.OSD_IMPROVE_INTERVAL_MINUTES = interval
  await other?.end()
})

/** Running runs of a new llm task of `enterpriseId`'s, one per input, dispatched by a real step. */
async function runningRuns(token: string, enterpriseId: string, inputs: number): Promise<RunRow[]> {
  const task = await llmTask(t, { serializeOn: ['n'] }, token)
  const ids: string[] = []
  for (let n = 0; n < inputs; n++)
    ids.push((await apiStart(t.sql, enterpriseId, task.id, { n })).run.id)
  await advance(t.sql, 'locks-test', completeDeterministic)
  const runs = await Promise.all(ids.map((id) => loadRun(t.sql, enterpriseId, id)))
  for (const run of runs) expect(run.status).toBe('running')
  return runs
}

/**
 * A transaction on a connection of its own that runs what `run` is given, one statement at a time, as
 * the test says when: a transaction held at its lock points. `end` commits it.
 */
function heldTransaction() {
  const queue: {
    fn: (tx: Db) => Promise<unknown>
    done: (v: unknown) => void
    fail: (e: unknown) => void
  }[] = []
  let ending = false
  const finished = other
    .begin(async (tx) => {
      for (;;) {
        const next = queue.shift()
        if (next) {
          try {
            next.done(await next.fn(tx))
          } catch (err) {
            next.fail(err)
            throw err
          }
        } else if (ending) return
        else await new Promise((r) => setTimeout(r, 5))
      }
    })
    .catch(() => undefined) // a statement's failure is what the test reads, from run()
  return {
    run: <T>(fn: (tx: Db) => Promise<T>) =>
      new Promise<T>((done, fail) => queue.push({ fn, done: done as (v: unknown) => void, fail })),
    end: async () => {
      ending = true
      await finished
    },
  }
}

/** Whether a statement of `pid`'s is waiting for a lock now. */
async function waitingForLock(pid: number): Promise<boolean> {
  const [row] = await t.sql<{ waiting: boolean }[]>`
    select wait_event_type = 'Lock' as waiting from pg_stat_activity where pid = ${pid}`
  return row?.waiting === true
}

/** Settles within `ms`: what the promise answered or threw, or 'waiting' if it still waits. */
async function within<T>(promise: Promise<T>, ms: number) {
  return Promise.race([
    promise.then(
      (value) => ({ done: true as const, value }),
      (error: unknown) => ({ done: true as const, error }),
    ),
    new Promise<{ done: false }>((resolve) => setTimeout(() => resolve({ done: false }), ms)),
  ])
}

describe("a run's end beside the engine's step", () => {
  it("never waits for os-improve's lane while it holds the enterprise's running count", async () => {
    const [run] = await runningRuns(t.acme.token, t.acme.id, 1)
    const [improve] = await t.sql<{ id: string; serializeOn: string[] | null }[]>`
      select id, serialize_on from tasks where enterprise_id = ${t.acme.id} and slug = 'os-improve'`
    const lane = laneOf(improve!, { taskId: run!.taskId })

    // The engine's step, as admission and dispatch take their locks: os-improve's lane (a pending
    // os-improve run of this task being admitted), then the enterprise's running count.
    const step = heldTransaction()
    const [got] = await step.run(
      (tx) =>
        tx<
          { got: boolean }[]
        >`select pg_try_advisory_xact_lock(${laneKey(tx, tx`${lane}::text`)}) as got`,
    )
    expect(got!.got).toBe(true)

    // The run's end, as the agent loop makes it when the provider refused the call.
    let endPid = 0
    const ending = transaction(t.sql, async (tx) => {
      const [me] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`
      endPid = me!.pid
      const locked = await loadRun(tx, t.acme.id, run!.id, true)
      await finishAll(tx, 'failed', [{ run: locked, fields: { reason: 'The provider said 400.' } }])
    })
    const early = await within(ending, 3_000)
    if (!early.done) expect(await waitingForLock(endPid)).toBe(true) // today: waits for the lane

    // The step now wants the running count: it gets it once the end has committed, and neither side
    // is cancelled for a deadlock.
    const counted = await within(
      step.run((tx) => tx`select 1 from enterprises where id = ${t.acme.id} for no key update`),
      10_000,
    )
    await step.end()
    const ended = early.done ? early : await within(ending, 10_000)
    expect(ended).toMatchObject({ done: true })
    expect('error' in ended ? (ended.error as { code?: string }).code : undefined).toBeUndefined()
    expect(counted).toMatchObject({ done: true })
    expect(
      'error' in counted ? (counted.error as { code?: string }).code : undefined,
    ).toBeUndefined()
    const after = await loadRun(t.sql, t.acme.id, run!.id)
    expect(after.status).toBe('failed')
  }, 30_000)

  it('locks the running counts of several enterprises in one order, as dispatch does', async () => {
    const other2 = await t.createEnterprise('Second Counts')
    const [a] = await runningRuns(t.acme.token, t.acme.id, 1)
    const [b] = await runningRuns(other2.token, other2.id, 1)
    const [low, high] = [a!, b!].sort((x, y) => (x.enterpriseId < y.enterpriseId ? -1 : 1))

    // Dispatch locks the enterprises' rows in id order: the lower one first.
    const dispatch = heldTransaction()
    await dispatch.run(
      (tx) => tx`select 1 from enterprises where id = ${low!.enterpriseId} for no key update`,
    )
    // Runs of both end in one transaction (a takeover failing runs that lapsed too often), the higher
    // enterprise's run first.
    const ending = transaction(t.sql, async (tx) => {
      const runs = await Promise.all(
        [high!, low!].map((r) => loadRun(tx, r.enterpriseId, r.id, true)),
      )
      await finishAll(
        tx,
        'failed',
        runs.map((run) => ({ run, fields: { reason: 'Lapsed.' } })),
      )
    })
    const early = await within(ending, 2_000)
    const second = await within(
      dispatch.run(
        (tx) => tx`select 1 from enterprises where id = ${high!.enterpriseId} for no key update`,
      ),
      10_000,
    )
    await dispatch.end()
    const ended = early.done ? early : await within(ending, 10_000)
    expect('error' in second ? (second.error as { code?: string }).code : undefined).toBeUndefined()
    expect('error' in ended ? (ended.error as { code?: string }).code : undefined).toBeUndefined()
    expect(ended).toMatchObject({ done: true })
    const counts = await t.sql<{ runningCount: number }[]>`
      select running_count from enterprises where id in (${low!.enterpriseId}, ${high!.enterpriseId})`
    expect(counts.map((c) => c.runningCount)).toEqual([0, 0])
  }, 30_000)
})
