import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { transaction } from '../../../server/db/sql.js'
import {
  bulkBatch,
  bulkItems,
  cancelRun,
  claimBulkOperations,
  finishRun,
  loadRun,
} from '../../../server/domain/runs/index.js'
import { BulkLoop } from '../../../server/engine/runs/index.js'
import { RunBulkCount, RunBulkOperation } from '../../../shared/schemas/run-bulk.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { signIn } from '../../helpers/people.js'
import { apiStart, llmTask } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

// POST /v1/runs/bulk and GET /v1/runs/bulk/{id} (issue 50: Act on a filter). No run engine runs here:
// the runs stay where the test puts them, and only the bulk loop (started when a test wants the
// operation acted on) moves them, as an engine of `osd serve` would.

let t: TestApp
let bulk: BulkLoop | undefined

beforeAll(async () => {
  t = await createTestApp()
})

afterAll(async () => {
  await bulk?.stop()
})

/** The bulk loop of an engine, started once: it acts on every operation made from then on. */
async function startBulkLoop() {
  if (bulk) return
  bulk = new BulkLoop({ sql: t.sql, log: t.log, engineId: 'bulk-test', sweepMs: 200 })
  await bulk.start()
}

/** A task of `e` whose runs each have a lane of their own (serializeOn n), and `n` runs of it queued. */
async function taskWithRuns(e: TestEnterprise, n: number) {
  const task = await llmTask(t, { serializeOn: ['n'] }, e.token)
  const runs: string[] = []
  for (let i = 0; i < n; i++) {
    const { run } = await apiStart(t.sql, e.id, task.id, { n: i })
    runs.push(run.id)
  }
  return { task, runs }
}

async function fail(enterpriseId: string, runId: string) {
  await transaction(t.sql, async (tx) =>
    finishRun(tx, await loadRun(tx, enterpriseId, runId, true), 'failed', {
      reason: 'provider outage',
    }),
  )
}

async function statusOf(runId: string): Promise<string> {
  const [row] = await t.sql<{ status: string }[]>`select status from runs where id = ${runId}`
  return row!.status
}

async function post(body: unknown, token?: string) {
  return t.call('POST', '/v1/runs/bulk', { body, ...(token ? { token } : {}) })
}

/** Follows an operation until it is completed; answers it. */
async function completed(id: string, token?: string) {
  let op: RunBulkOperation | undefined
  await eventually(
    async () => {
      const res = await t.call('GET', `/v1/runs/bulk/${id}`, token ? { token } : {})
      expect(res.status).toBe(200)
      op = RunBulkOperation.parse(res.body)
      return op.status === 'completed'
    },
    10_000,
    `bulk operation ${id} completed`,
  )
  return op!
}

describe('POST /v1/runs/bulk', () => {
  it('dryRun counts the matching runs and moves nothing', async () => {
    const { task, runs } = await taskWithRuns(t.acme, 3)
    const res = await post({
      action: 'cancel',
      filter: { taskId: task.id },
      dryRun: true,
      idempotencyKey: randomUUID(),
    })
    expect(res.status).toBe(200)
    expect(RunBulkCount.parse(res.body)).toEqual({
      dryRun: true,
      action: 'cancel',
      filter: { taskId: task.id },
      matched: 3,
      maxRuns: t.config.bulkMaxRuns,
    })
    for (const id of runs) expect(await statusOf(id)).toBe('queued')
    // Nothing was made either: the dry run's key is free.
    const [row] = await t.sql<{ n: number }[]>`select count(*)::int as n from run_bulk_operations`
    const n = row!.n
    expect(n).toBe(0)
  })

  it('retries each chain of retries once: a run retried already is left to its retry', async () => {
    const { task, runs } = await taskWithRuns(t.acme, 3)
    const [a, b, c] = runs as [string, string, string]
    for (const id of runs) await fail(t.acme.id, id)
    // a was retried by hand and its retry failed too: a second retry of a would run it twice.
    const again = await t.call('POST', `/v1/runs/${a}/retry`)
    expect(again.status, again.text).toBe(201)
    await fail(t.acme.id, again.body.id)
    const body = { action: 'retry', filter: { taskId: task.id, status: 'failed' } }
    const dry = await post({ ...body, dryRun: true, idempotencyKey: randomUUID() })
    expect(dry.body.matched).toBe(3) // b, c and a's retry
    const res = await post({ ...body, idempotencyKey: randomUUID() })
    expect(res.status, res.text).toBe(202)
    expect(res.body.matched).toBe(3)
    // c is retried by hand before the engine gets to it, and that retry has already started.
    const meanwhile = await t.call('POST', `/v1/runs/${c}/retry`)
    expect(meanwhile.status, meanwhile.text).toBe(201)
    await t.sql`update runs set status = 'queued' where id = ${meanwhile.body.id}`
    expect(await claimBulkOperations(t.sql, 'chain-engine', 30, 5)).toEqual([
      expect.objectContaining({ id: res.body.id }),
    ])
    while (!(await bulkBatch(t.sql, 'chain-engine', res.body.id)).completed);
    const items = await bulkItems(t.sql, t.acme.id, res.body.id)
    expect(items.map((i) => [i.runId, i.outcome]).sort()).toEqual(
      [
        [again.body.id, 'done'],
        [b, 'done'],
        [c, 'skipped'],
      ].sort(),
    )
    expect(items.find((i) => i.runId === c)!.reason).toBe(
      `it was retried meanwhile as run ${meanwhile.body.id}`,
    )
    const [row] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where previous_run_id = ${a} and origin = 'retry'`
    expect(row!.n).toBe(1)
  })

  it('cancels by task and status exactly the matching runs, records the ones that moved, and resumes after a crash', async () => {
    const { task, runs } = await taskWithRuns(t.acme, 4)
    const other = await taskWithRuns(t.acme, 1)
    await fail(t.acme.id, runs[3]!) // ended: a cancel does not match it
    const res = await post({
      action: 'cancel',
      filter: { taskId: task.id, status: 'queued' },
      idempotencyKey: randomUUID(),
    })
    expect(res.status, res.text).toBe(202)
    const op = RunBulkOperation.parse(res.body)
    expect(op).toMatchObject({ action: 'cancel', status: 'running', matched: 3, done: 0 })
    expect(op.createdBy).toMatch(/^token:/)
    // One of them moves before the engine gets to it: cancelled by hand.
    await cancelRun(t.sql, t.acme.id, runs[0]!)
    // An engine claims it, acts on one run and dies: once its lease lapses, another finishes the rest.
    expect(await claimBulkOperations(t.sql, 'dead-engine', 30, 5)).toEqual([
      expect.objectContaining({ id: op.id }),
    ])
    expect(await bulkBatch(t.sql, 'dead-engine', op.id, 1)).toEqual({
      settled: 1,
      completed: false,
    })
    await t.sql`update run_bulk_operations set lease_expires_at = now() - interval '1 second'
                 where id = ${op.id}`
    await startBulkLoop()
    const end = await completed(op.id)
    expect(end).toMatchObject({ matched: 3, done: 2, failed: 0, skipped: 1 })
    expect(end.finishedAt).not.toBeNull()
    expect(await statusOf(runs[1]!)).toBe('cancelled')
    expect(await statusOf(runs[2]!)).toBe('cancelled')
    expect(await statusOf(runs[3]!)).toBe('failed')
    expect(await statusOf(other.runs[0]!)).toBe('queued')
    const items = await bulkItems(t.sql, t.acme.id, op.id)
    const skipped = items.find((i) => i.runId === runs[0])
    expect(skipped).toMatchObject({
      outcome: 'skipped',
      reason: expect.stringContaining('cancelled'),
    })
    // Each run was moved as a one-run cancel moves it, its event naming the operation.
    const detail = await t.call('GET', `/v1/runs/${runs[1]}`)
    expect(detail.body.run.reason).toBe(`Cancelled by bulk operation ${op.id}.`)
    const event = detail.body.events.find((e: { type: string }) => e.type === 'run.cancelled')
    expect(event.payload).toMatchObject({ bulkOperationId: op.id, by: op.createdBy })
    expect(op.reason).toBeNull()
  })

  it('keeps why it was made: with the operation, in each run it cancels and in its event', async () => {
    const { task, runs } = await taskWithRuns(t.acme, 1)
    const res = await post({
      action: 'cancel',
      filter: { taskId: task.id },
      idempotencyKey: randomUUID(),
      reason: 'the new version sends wrong mail',
    })
    expect(res.status, res.text).toBe(202)
    const op = RunBulkOperation.parse(res.body)
    expect(op.reason).toBe('the new version sends wrong mail')
    await startBulkLoop()
    expect(await completed(op.id)).toMatchObject({
      done: 1,
      reason: 'the new version sends wrong mail',
    })
    const detail = await t.call('GET', `/v1/runs/${runs[0]}`)
    expect(detail.body.run.reason).toBe(
      `Cancelled by bulk operation ${op.id}: the new version sends wrong mail`,
    )
    const event = detail.body.events.find((e: { type: string }) => e.type === 'run.cancelled')
    expect(event.payload).toMatchObject({
      by: op.createdBy,
      why: 'the new version sends wrong mail',
    })
    const blank = await post({
      action: 'cancel',
      filter: { taskId: task.id },
      idempotencyKey: randomUUID(),
      reason: '  ',
    })
    expect(blank.status).toBe(400)
  })

  it('retries failed runs as new runs whose input.priorRunId is the original, never another enterprise', async () => {
    const mine = await taskWithRuns(t.acme, 2)
    const theirs = await taskWithRuns(t.other, 2)
    for (const id of mine.runs) await fail(t.acme.id, id)
    for (const id of theirs.runs) await fail(t.other.id, id)
    // By another enterprise's task id: nothing of theirs matches.
    const foreign = await post({
      action: 'retry',
      filter: { taskId: theirs.task.id },
      dryRun: true,
      idempotencyKey: randomUUID(),
    })
    expect(foreign.body.matched).toBe(0)
    await startBulkLoop()
    const res = await post({
      action: 'retry',
      filter: { status: 'failed', origin: 'api' },
      idempotencyKey: randomUUID(),
    })
    expect(res.status, res.text).toBe(202)
    const end = await completed(res.body.id)
    expect(end.failed).toBe(0)
    expect(end.done).toBe(end.matched)
    const items = await bulkItems(t.sql, t.acme.id, end.id)
    expect(items.map((i) => i.runId)).toEqual(expect.arrayContaining(mine.runs))
    expect(items.map((i) => i.runId)).not.toEqual(expect.arrayContaining([theirs.runs[0]]))
    for (const original of mine.runs) {
      const item = items.find((i) => i.runId === original)!
      const retry = (await t.call('GET', `/v1/runs/${item.newRunId}`)).body.run
      expect(retry).toMatchObject({
        origin: 'retry',
        status: 'pending',
        previousRunId: original,
        input: { priorRunId: original },
      })
    }
    const [row] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where enterprise_id = ${t.other.id} and origin = 'retry'`
    expect(row!.n).toBe(0)
  })

  it('records who retried and why on each run it makes, as a one-run retry records who', async () => {
    const person = await signIn(t, 'member')
    const { task, runs } = await taskWithRuns(t.acme, 3)
    for (const id of runs) await fail(t.acme.id, id)
    // One retried by hand first: its retry stands for it, so the operation leaves it alone.
    const one = await t.call('POST', `/v1/runs/${runs[0]}/retry`, { token: person.session })
    expect(one.status, one.text).toBe(201)
    await startBulkLoop()
    const res = await post(
      {
        action: 'retry',
        filter: { taskId: task.id, status: 'failed' },
        idempotencyKey: randomUUID(),
        reason: 'the provider is back',
      },
      person.session,
    )
    expect(res.status, res.text).toBe(202)
    const end = await completed(res.body.id)
    expect(end).toMatchObject({ matched: 2, done: 2, skipped: 0, createdBy: `user:${person.id}` })
    const made = (await bulkItems(t.sql, t.acme.id, end.id)).filter((i) => i.newRunId)
    expect(made).toHaveLength(2)
    for (const item of made) {
      const detail = await t.call('GET', `/v1/runs/${item.newRunId}`)
      expect(detail.body.events[0]).toMatchObject({
        type: 'run.pending',
        payload: {
          origin: 'retry',
          previousRunId: item.runId,
          bulkOperationId: end.id,
          by: end.createdBy,
          why: 'the provider is back',
        },
      })
    }
    // Who is mailed if it fails (issue 47): the person, as for the retry of one run.
    const startedBy = await t.sql<{ startedBy: string | null }[]>`
      select started_by from runs
       where id = any(${[one.body.id, ...made.map((i) => i.newRunId!)]}::uuid[])`
    expect(startedBy.map((r) => r.startedBy)).toEqual([person.id, person.id, person.id])
  })

  it('answers the same operation for the same key, and 409 for the key on another request', async () => {
    const { task } = await taskWithRuns(t.acme, 2)
    const key = randomUUID()
    const body = { action: 'cancel', filter: { taskId: task.id }, idempotencyKey: key }
    const first = await post(body)
    const again = await post(body)
    expect(first.status).toBe(202)
    expect(again.status).toBe(202)
    expect(again.body.id).toBe(first.body.id)
    const other = await post({ ...body, action: 'retry' })
    expect(other.status).toBe(409)
    expect(other.body.error).toBe('bulk_idempotency_key_reused')
    // Per enterprise: the other enterprise's same key makes its own.
    const theirs = await post(body, t.other.token)
    expect(theirs.status).toBe(202)
    expect(theirs.body.id).not.toBe(first.body.id)
    expect(theirs.body.matched).toBe(0)
    await completed(first.body.id)
  })

  it('refuses a filter matching more runs than one operation acts on, naming the bound; makes nothing', async () => {
    const { task } = await taskWithRuns(t.acme, 3)
    const was = t.config.bulkMaxRuns
    Object.assign(t.config, { bulkMaxRuns: 2 })
    try {
      const body = { action: 'cancel', filter: { taskId: task.id }, idempotencyKey: randomUUID() }
      // The dry run counts them all and says the bound, so a caller can narrow the filter first.
      const dry = await post({ ...body, dryRun: true })
      expect(dry.status).toBe(200)
      expect(RunBulkCount.parse(dry.body)).toMatchObject({ matched: 3, maxRuns: 2 })
      const before = await t.sql<
        { n: number }[]
      >`select count(*)::int as n from run_bulk_operations`
      const res = await post(body)
      expect(res.status, res.text).toBe(400)
      expect(res.body).toMatchObject({ error: 'bulk_too_many_runs', maxRuns: 2 })
      expect(res.body.message).toMatch(/more than 2 runs match.*narrow the filter/)
      const after = await t.sql<{ n: number }[]>`select count(*)::int as n from run_bulk_operations`
      expect(after[0]!.n).toBe(before[0]!.n)
      // At the bound, it acts.
      Object.assign(t.config, { bulkMaxRuns: 3 })
      const fits = await post({ ...body, idempotencyKey: randomUUID() })
      expect(fits.status, fits.text).toBe(202)
      expect(fits.body.matched).toBe(3)
    } finally {
      Object.assign(t.config, { bulkMaxRuns: was })
    }
  })

  it('refuses a filter that is not one', async () => {
    const res = await post({ action: 'delete', filter: {}, idempotencyKey: 'k' })
    expect(res.status).toBe(400)
    const bad = await post({ action: 'cancel', filter: { status: 'lost' }, idempotencyKey: 'k' })
    expect(bad.status).toBe(400)
  })
})

describe('GET /v1/runs/bulk/{id}', () => {
  it("answers 404 for another enterprise's operation", async () => {
    const res = await post(
      { action: 'cancel', filter: {}, idempotencyKey: randomUUID() },
      t.other.token,
    )
    expect(res.status).toBe(202)
    const foreign = await t.call('GET', `/v1/runs/bulk/${res.body.id}`)
    expect(foreign.status).toBe(404)
    expect(foreign.body.error).toBe('bulk_operation_not_found')
    expect(
      (await t.call('GET', `/v1/runs/bulk/${res.body.id}`, { token: t.other.token })).status,
    ).toBe(200)
  })
})

describe('scopes', () => {
  let foreignOp: string
  beforeAll(async () => {
    const res = await post(
      { action: 'retry', filter: { status: 'failed' }, idempotencyKey: randomUUID() },
      t.other.token,
    )
    foreignOp = res.body.id
  })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/runs/bulk',
    body: () => ({ action: 'cancel', filter: {}, dryRun: true, idempotencyKey: randomUUID() }),
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/runs/bulk/${foreignOp}`,
    foreign: () => ({ path: `/v1/runs/bulk/${foreignOp}` }),
    notFoundCode: 'bulk_operation_not_found',
  })

  it('acting needs runs:write, as cancel and retry of one run do', async () => {
    const reader = await t.tokenWith(['runs:read'])
    const res = await post({ action: 'retry', filter: {}, idempotencyKey: randomUUID() }, reader)
    expect(res.status).toBe(403)
    expect(res.body.error).toBe('api_token_scope')
  })
})
