import { ApiError } from '../../../shared/errors.js'
import type {
  BulkAction,
  RunBulkCount,
  RunBulkOperation,
  RunBulkRequest,
  RunFilter,
} from '../../../shared/schemas/run-bulk.js'
import { finishedStatuses, unfinishedStatuses, type RunStatus } from '../../../shared/values.js'
import {
  isUniqueViolation,
  literalIn,
  notifyAfterCommit,
  onCommit,
  transaction,
  unflushedCommit,
  type Db,
  type Sql,
} from '../../db/sql.js'
import { finishAll } from './ends.js'
import type { RunRow } from './rows.js'
import { enqueueRuns } from './start.js'

// Acting on runs by a filter (issue 50: Act on a filter; docs/api-in-brief.md). An operation writes
// down the runs its filter matches when it is made (run_bulk_items), so `matched` is known at once
// and what it acts on is fixed; the engines claim it like a run (a lease renewed while they work,
// taken over once it lapses: engine/runs/bulk-loop.ts) and act on its items a batch per
// transaction. Each run is moved as the one-run routes move it: a cancel by finishAll (its
// successors, its gates, the running counts), a retry by enqueueRuns (a pending run in the same
// execution, input.priorRunId the original). A run that moved since it was matched is skipped and
// counted, with its reason on its item. This module is the one writer of run_bulk_operations and
// run_bulk_items.

/** NOTIFY channel of bulk operations an engine may claim; the payload is the operation's id. */
export const bulkChannel = 'osd_runs_bulk'

/** Runs a batch acts on in one transaction: a few hundred, short enough never to hold the engine up. */
export const bulkBatchSize = 250

/** What each action acts on besides the filter: cancel what has not ended, retry what has. */
const actsOn: Record<BulkAction, readonly RunStatus[]> = {
  cancel: unfinishedStatuses,
  retry: finishedStatuses,
}

interface OperationRow {
  id: string
  enterpriseId: string
  action: BulkAction
  filter: RunFilter
  idempotencyKey: string
  createdBy: string
  reason: string | null
  status: 'running' | 'completed'
  matched: number
  done: number
  failed: number
  skipped: number
  createdAt: Date
  finishedAt: Date | null
}

function toOperation(row: OperationRow): RunBulkOperation {
  return {
    id: row.id,
    action: row.action,
    filter: row.filter,
    status: row.status,
    matched: row.matched,
    done: row.done,
    failed: row.failed,
    skipped: row.skipped,
    createdBy: row.createdBy,
    reason: row.reason,
    createdAt: row.createdAt.toISOString(),
    finishedAt: row.finishedAt?.toISOString() ?? null,
  }
}

/**
 * The condition a run `r` must meet to be acted on: the enterprise's, in a status the action acts on,
 * and every field of the filter. "Started" is when the run was made (its start request), so a run that
 * never left pending is found by time too. Statuses as literals: the plans use the partial indexes.
 */
function matching(db: Db, enterpriseId: string, action: BulkAction, filter: RunFilter) {
  const statuses = filter.status
    ? actsOn[action].filter((s) => s === filter.status)
    : actsOn[action]
  return db`
    r.enterprise_id = ${enterpriseId}
    and ${statuses.length ? literalIn(db, 'r.status', statuses) : db`false`}
    ${filter.taskId ? db`and r.task_id = ${filter.taskId}` : db``}
    ${filter.origin ? db`and r.origin = ${filter.origin}` : db``}
    ${filter.startedAfter ? db`and r.created_at >= ${filter.startedAfter}::timestamptz` : db``}
    ${filter.startedBefore ? db`and r.created_at < ${filter.startedBefore}::timestamptz` : db``}`
}

/**
 * The runs an operation is made with: those matching, and for a retry only the last of each chain
 * of retries. A run retried already (its retry made, whatever became of it) is left to its retry,
 * which the filter may match in its turn: a failed run and its failed retry are not both retried,
 * nor a run retried again by a second operation of the same filter (runs_retried, migration 0046).
 */
function selecting(db: Db, enterpriseId: string, action: BulkAction, filter: RunFilter) {
  return db`${matching(db, enterpriseId, action, filter)}
    ${
      action === 'retry'
        ? db`and not exists (select 1 from runs x where x.previous_run_id = r.id and x.origin = 'retry')`
        : db``
    }`
}

/** The filter as given, without the fields left out (stored, and compared for a repeated key). */
function cleanFilter(filter: RunFilter): RunFilter {
  return Object.fromEntries(Object.entries(filter).filter(([, v]) => v !== undefined)) as RunFilter
}

/**
 * POST /v1/runs/bulk with dryRun: how many runs the operation would act on, and the most one acts
 * on (`maxRuns`, Config.bulkMaxRuns), so a caller narrows a filter past it before asking; nothing
 * is done.
 */
export async function countBulkMatches(
  db: Db,
  enterpriseId: string,
  request: Pick<RunBulkRequest, 'action' | 'filter'>,
  maxRuns: number,
): Promise<RunBulkCount> {
  const filter = cleanFilter(request.filter)
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from runs r where ${selecting(db, enterpriseId, request.action, filter)}`
  return { dryRun: true, action: request.action, filter, matched: row!.n, maxRuns }
}

/**
 * POST /v1/runs/bulk: makes the operation, with the runs it matches now as its items, and wakes the
 * engines to act on it. The same idempotency key in the same enterprise answers the operation it
 * made (409 bulk_idempotency_key_reused if it was for another action or filter). A filter matching
 * more than `maxRuns` is refused (400 bulk_too_many_runs): counted first, up to one past the bound
 * (an index read, a tenth of a second for 100,000), and no more than that written should runs have
 * come meanwhile, so the request's work is bounded however many runs the filter matches.
 */
export async function startBulkOperation(
  sql: Sql,
  enterpriseId: string,
  createdBy: string,
  request: RunBulkRequest,
  maxRuns: number,
): Promise<RunBulkOperation> {
  const filter = cleanFilter(request.filter)
  const earlier = await operationByKey(sql, enterpriseId, request.idempotencyKey)
  if (earlier) return sameRequest(earlier, request.action, filter)
  const [counted] = await sql<{ n: number }[]>`
    select count(*)::int as n from (
      select 1 from runs r where ${selecting(sql, enterpriseId, request.action, filter)}
       limit ${maxRuns + 1}) m`
  if (counted!.n > maxRuns) throw tooMany(maxRuns)
  try {
    return await transaction(sql, async (tx) => {
      const [op] = await tx<OperationRow[]>`
        insert into run_bulk_operations (enterprise_id, action, filter, idempotency_key, created_by,
                                         reason, matched)
        values (${enterpriseId}, ${request.action}, ${tx.json(filter)}, ${request.idempotencyKey},
                ${createdBy}, ${request.reason ?? null}, 0)
        returning *`
      const [count] = await tx<{ n: number }[]>`
        with items as (
          insert into run_bulk_items (operation_id, enterprise_id, run_id)
          select ${op!.id}, r.enterprise_id, r.id from runs r
           where ${selecting(tx, enterpriseId, request.action, filter)}
           limit ${maxRuns + 1}
          returning 1)
        select count(*)::int as n from items`
      const n = count!.n
      if (n > maxRuns) throw tooMany(maxRuns)
      const [row] = await tx<OperationRow[]>`
        update run_bulk_operations
           set matched = ${n},
               status = ${n === 0 ? 'completed' : 'running'},
               finished_at = ${n === 0 ? tx`now()` : null}
         where id = ${op!.id}
        returning *`
      if (n > 0) wakeBulkEngines(tx, op!.id)
      return toOperation(row!)
    })
  } catch (err) {
    // Two requests with one key at once: the second finds the first's.
    if (!isUniqueViolation(err)) throw err
    const raced = await operationByKey(sql, enterpriseId, request.idempotencyKey)
    if (!raced) throw err
    return sameRequest(raced, request.action, filter)
  }
}

function tooMany(maxRuns: number): ApiError {
  return new ApiError(
    'bulk_too_many_runs',
    `more than ${maxRuns} runs match, the most one bulk operation acts on: narrow the filter (taskId, status, origin, or startedAfter and startedBefore to cut it by time) and make several; a dry run counts them`,
    { maxRuns },
  )
}

async function operationByKey(
  db: Db,
  enterpriseId: string,
  key: string,
): Promise<OperationRow | undefined> {
  const [row] = await db<OperationRow[]>`
    select * from run_bulk_operations where enterprise_id = ${enterpriseId} and idempotency_key = ${key}`
  return row
}

function sameRequest(row: OperationRow, action: BulkAction, filter: RunFilter): RunBulkOperation {
  const same =
    row.action === action && JSON.stringify(sorted(row.filter)) === JSON.stringify(sorted(filter))
  if (!same)
    throw new ApiError(
      'bulk_idempotency_key_reused',
      `The idempotency key was used for another bulk operation (${row.id}).`,
      { operationId: row.id },
    )
  return toOperation(row)
}

const sorted = (o: object) =>
  Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)))

/** GET /v1/runs/bulk/{id}: the operation as it stands; another enterprise's is not found. */
export async function getBulkOperation(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<RunBulkOperation> {
  const [row] = await db<OperationRow[]>`
    select * from run_bulk_operations where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row)
    throw new ApiError('bulk_operation_not_found', `No bulk operation ${id} in this enterprise.`)
  return toOperation(row)
}

/** What an item became, as one batch decides it. */
interface ItemOutcome {
  run_id: string
  outcome: 'done' | 'failed' | 'skipped'
  reason: string | null
  new_run_id: string | null
}

/** What a batch did: how many items it settled, and whether the operation is complete. */
export interface BulkStep {
  settled: number
  completed: boolean
}

/**
 * Acts on the next batch of an operation's items in one transaction, as the engine that holds its
 * lease (`engineId`); a lease lost meanwhile undoes the batch. Runs another transaction holds locked
 * (an engine's step, a worker's write) are left for a later batch rather than waited for, so a batch
 * never holds an engine up and the engine never holds it. Answers how many items it settled; with none
 * left, the operation is completed.
 */
export async function bulkBatch(
  sql: Sql,
  engineId: string,
  operationId: string,
  batchSize = bulkBatchSize,
): Promise<BulkStep> {
  return transaction(sql, async (tx) => {
    // Sent together, as the later pair is (one round trip each, not two).
    const [[op], items] = await Promise.all([
      tx<OperationRow[]>`
        select * from run_bulk_operations
         where id = ${operationId} and lease_owner = ${engineId} and status = 'running'`,
      tx<{ runId: string }[]>`
        select run_id from run_bulk_items
         where operation_id = ${operationId} and outcome is null
         order by run_id
         limit ${batchSize}`,
    ])
    if (!op) return { settled: 0, completed: true }
    if (items.length === 0) {
      await tx`
        update run_bulk_operations
           set status = 'completed', finished_at = now(), updated_at = now(),
               lease_owner = null, lease_expires_at = null
         where id = ${operationId}`
      return { settled: 0, completed: true }
    }
    const ids = items.map((i) => i.runId)
    // Locked in id order (docs/locks.md, 2. Runs), those another transaction holds skipped; whether
    // each still matches is decided on the locked row.
    const [locked, retried] = await Promise.all([
      tx<(RunRow & { matches: boolean })[]>`
        select r.*, (${matching(tx, op.enterpriseId, op.action, op.filter)}) as matches
          from runs r
         where r.id = any(${tx.array(ids)}::uuid[]) and r.enterprise_id = ${op.enterpriseId}
         order by r.id
         for no key update of r skip locked`,
      op.action === 'retry' ? retriesOf(tx, op.enterpriseId, ids) : new Map<string, Retry>(),
    ])
    const lockedIds = new Set(locked.map((r) => r.id))
    const notLocked = ids.filter((id) => !lockedIds.has(id))
    // Of those not locked: gone from the live tables (retention) is skipped; busy is left for later.
    const present = notLocked.length
      ? new Set(
          (
            await tx<{ id: string }[]>`
              select id from runs where id = any(${tx.array(notLocked)}::uuid[])`
          ).map((r) => r.id),
        )
      : new Set<string>()
    const outcomes: ItemOutcome[] = notLocked
      .filter((id) => !present.has(id))
      .map((id) => skip(id, 'it is no longer in the live tables'))
    const acting: RunRow[] = []
    for (const run of locked) {
      if (run.matches) acting.push(run)
      else outcomes.push(skip(run.id, `it is ${run.status} now and no longer matches`))
    }
    if (op.action === 'cancel') outcomes.push(...(await cancelBatch(tx, op, acting)))
    else outcomes.push(...(await retryBatch(tx, op, acting, retried)))
    const count = (o: ItemOutcome['outcome']) => outcomes.filter((x) => x.outcome === o).length
    const [, held] = await Promise.all([
      outcomes.length &&
        tx`
          update run_bulk_items i
             set outcome = d.outcome, reason = d.reason, new_run_id = d.new_run_id
            from jsonb_to_recordset(${tx.json(outcomes as never)})
                 as d(run_id uuid, outcome text, reason text, new_run_id uuid)
           where i.operation_id = ${operationId} and i.run_id = d.run_id`,
      tx`
        update run_bulk_operations
           set done = done + ${count('done')}, failed = failed + ${count('failed')},
               skipped = skipped + ${count('skipped')}, updated_at = now()
         where id = ${operationId} and lease_owner = ${engineId}
        returning id`,
    ])
    // The lease was taken over while this batch worked: the other engine acts on these items.
    if (held.length === 0) throw new Error(`bulk operation ${operationId} is no longer held`)
    return { settled: outcomes.length, completed: false }
  })
}

function skip(runId: string, why: string): ItemOutcome {
  return { run_id: runId, outcome: 'skipped', reason: why, new_run_id: null }
}

/** Cancels the runs as POST /v1/runs/{id}/cancel does, in one change; the reason names the operation. */
async function cancelBatch(tx: Db, op: OperationRow, runs: RunRow[]): Promise<ItemOutcome[]> {
  await finishAll(
    tx,
    'cancelled',
    runs.map((run) => ({
      run,
      fields: {
        reason: `Cancelled by bulk operation ${op.id}${op.reason ? `: ${op.reason}` : '.'}`,
      },
      event: {
        bulkOperationId: op.id,
        by: op.createdBy,
        ...(op.reason ? { why: op.reason } : {}),
      },
    })),
  )
  return runs.map((run) => ({ run_id: run.id, outcome: 'done', reason: null, new_run_id: null }))
}

/**
 * Retries the runs as POST /v1/runs/{id}/retry does: a pending run on the task's current version,
 * in the same execution, whose input carries priorRunId, started by the operation's maker (mailed
 * if it fails) and saying in its first event who, why and which operation. A run retried meanwhile
 * is skipped, its retry standing for it as at the operation's making (selecting); one whose retry
 * is still pending is the one-run route's answer too. A task that cannot run fails it.
 */
async function retryBatch(
  tx: Db,
  op: OperationRow,
  runs: RunRow[],
  retried: ReadonlyMap<string, Retry>,
): Promise<ItemOutcome[]> {
  if (runs.length === 0) return []
  const outcomes: ItemOutcome[] = []
  const retrying: RunRow[] = []
  for (const run of runs) {
    const already = retried.get(run.id)
    if (!already) retrying.push(run)
    else if (already.status === 'pending')
      outcomes.push(skip(run.id, `its retry ${already.id} is already pending`))
    else outcomes.push(skip(run.id, `it was retried meanwhile as run ${already.id}`))
  }
  const made = await enqueueRuns(
    tx,
    retrying.map((run) => ({
      enterpriseId: run.enterpriseId,
      taskId: run.taskId,
      input: { ...run.input, priorRunId: run.id },
      executionId: run.executionId,
      previousRunId: run.id,
      resumeFromRunId: run.resumeFromRunId ?? undefined,
    })),
    {
      origin: 'retry',
      startedBy: op.createdBy,
      started: {
        bulkOperationId: op.id,
        by: op.createdBy,
        ...(op.reason ? { why: op.reason } : {}),
      },
    },
  )
  made.forEach((result, i) => {
    const run = retrying[i]!
    outcomes.push(
      result instanceof ApiError
        ? { run_id: run.id, outcome: 'failed', reason: result.message, new_run_id: null }
        : { run_id: run.id, outcome: 'done', reason: null, new_run_id: result.id },
    )
  })
  return outcomes
}

/** A run's retry, as a batch finds it. */
interface Retry {
  id: string
  status: RunStatus
}

/**
 * The retries of these runs, by the run retried, a pending one first (sent after the statement
 * locking them; runs_retried).
 */
async function retriesOf(
  tx: Db,
  enterpriseId: string,
  runIds: string[],
): Promise<Map<string, Retry>> {
  const retries = await tx<(Retry & { previousRunId: string })[]>`
    select distinct on (previous_run_id) previous_run_id, id, status from runs
     where previous_run_id = any(${tx.array(runIds)}::uuid[])
       and origin = 'retry' and enterprise_id = ${enterpriseId}
     order by previous_run_id, status = 'pending' desc, created_at desc`
  return new Map(retries.map(({ previousRunId, ...retry }) => [previousRunId, retry]))
}

/** The items of an operation and what became of each (tests, and a person asking why one skipped). */
export async function bulkItems(
  db: Db,
  enterpriseId: string,
  operationId: string,
): Promise<
  { runId: string; outcome: string | null; reason: string | null; newRunId: string | null }[]
> {
  return db`
    select run_id, outcome, reason, new_run_id from run_bulk_items
     where operation_id = ${operationId} and enterprise_id = ${enterpriseId}
     order by run_id`
}

// The engine's side: claiming operations, keeping and handing back their leases (engine/runs/bulk-loop.ts).

/** Claims up to `room` running operations no engine holds (or whose lease lapsed). */
export async function claimBulkOperations(
  sql: Sql,
  engineId: string,
  leaseSeconds: number,
  room: number,
): Promise<{ id: string }[]> {
  if (room <= 0) return []
  return sql<{ id: string }[]>`
    update run_bulk_operations o
       set lease_owner = ${engineId}, lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
      from (select id from run_bulk_operations
             where status = 'running' and (lease_expires_at is null or lease_expires_at < now())
             order by created_at
             limit ${room}
             for update skip locked) c
     where o.id = c.id
    returning o.id, ${unflushedCommit(sql)}`
}

/** Renews this engine's leases of these operations; answers the ids it still holds. */
export async function renewBulkOperations(
  sql: Sql,
  engineId: string,
  ids: string[],
  leaseSeconds: number,
): Promise<Set<string>> {
  const rows = await sql<{ id: string }[]>`
    update run_bulk_operations
       set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
     where id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId} and status = 'running'
    returning id, ${unflushedCommit(sql)}`
  return new Set(rows.map((r) => r.id))
}

/** Whether this engine still holds the operation (running, its lease). */
export async function holdsBulkOperation(sql: Sql, engineId: string, id: string): Promise<boolean> {
  const [row] = await sql`
    select 1 from run_bulk_operations where id = ${id} and lease_owner = ${engineId} and status = 'running'`
  return Boolean(row)
}

/** Hands these leases back at once (the engine is stopping): another engine goes on at once. */
export async function releaseBulkOperations(
  sql: Sql,
  engineId: string,
  ids: string[],
): Promise<void> {
  await sql`
    update run_bulk_operations set lease_owner = null, lease_expires_at = null
     where id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId}`
}

/** Engines of this process, told at the commit itself. */
const local = new Set<(payload: string) => void>()

/** Hears operations made by this process's own commits before their NOTIFY comes back. */
export function listenBulkLocally(wake: (payload: string) => void): () => void {
  local.add(wake)
  return () => local.delete(wake)
}

function wakeBulkEngines(db: Db, id: string): void {
  notifyAfterCommit(db, bulkChannel, [id])
  if (local.size > 0) onCommit(db, () => local.forEach((wake) => wake(id)))
}
