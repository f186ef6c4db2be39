import { laneKey } from '../../db/locks.js'
import { randomUUID } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import { underWayStatuses, type Run } from '../../../shared/schemas/runs.js'
import {
  isRetryable,
  literalIn,
  notifyAfterCommit,
  onCommit,
  transaction,
  type Db,
  type Sql,
} from '../../db/sql.js'
import { metrics, metricsEnabled } from '../../metrics.js'
import { newRunTraceParent } from '../../traces/index.js'
import { wakeEnginesFor } from '../engine-wake.js'
import { pausedTasks } from '../pauses/index.js'
import { taskColumns, taskNotFound, type TaskRow } from '../tasks/index.js'
import { type MemoryScope, type RunRow, runChannel } from './rows.js'
import { lockMembers, membersFor } from './members.js'

// Starting runs (DESIGN 5): lanes, the start target, inserting runs, API starts (which may refuse
// for overlap) and enqueued starts (schedules, webhooks, successors), batched across requests.

/** The lane key of a run (DESIGN 5): the task, and the values of its serializeOn input keys. */
export function laneOf(
  task: Pick<TaskRow, 'id' | 'serializeOn'>,
  input: Record<string, unknown>,
): string {
  if (!task.serializeOn) return task.id
  return `${task.id}:${JSON.stringify(task.serializeOn.map((key) => input[key] ?? null))}`
}

/**
 * Serialises what happens in lanes across every osd process, until the transaction ends. Locked in the
 * order of their keys, so two transactions locking several never deadlock.
 */
export async function lockLanes(tx: Db, lanes: string[]): Promise<void> {
  await tx`
    select pg_advisory_xact_lock(key)
      from (select distinct ${laneKey(tx, tx`lane`)} as key
              from unnest(${tx.array(lanes)}::text[]) as lane order by key) as keys`
}

/**
 * Takes the lanes without waiting, in the order of their keys: true if every one was free (then all
 * are held until the transaction ends), false if another transaction holds one (then none this call
 * took is worth anything to the caller, which leaves the lanes alone). For a transaction that already
 * holds row locks (a run's end): waiting for a lane there could close a circle with the engine's
 * admission, which holds lanes while it waits for rows (docs/locks.md).
 */
export async function tryLockLanes(tx: Db, lanes: string[]): Promise<boolean> {
  const [row] = await tx<{ all: boolean }[]>`
    select coalesce(bool_and(pg_try_advisory_xact_lock(key)), true) as all
      from (select distinct ${laneKey(tx, tx`lane`)} as key
              from unnest(${tx.array(lanes)}::text[]) as lane order by key) as keys`
  return row!.all
}

/**
 * The role a task's runs go to (spec: Task definition, assigneeRole), as a join on tasks `t`: the team
 * role of that slug on the task's team, else the enterprise-wide role of that slug.
 */
export function assigneeRoleJoin(db: Db) {
  return db`
    left join lateral (
      select id from roles
       where enterprise_id = t.enterprise_id and slug = t.assignee_role
         and (team_id = t.team_id or team_id is null)
       order by team_id nulls last
       limit 1) as assignee_role on true`
}

export async function assigneeRoleId(
  db: Db,
  task: Pick<TaskRow, 'id'>,
): Promise<string | undefined> {
  const [row] = await db<{ id: string | null }[]>`
    select assignee_role.id from tasks t ${assigneeRoleJoin(db)} where t.id = ${task.id}`
  return row?.id ?? undefined
}

/** A task as a start sees it: its row, its current version's overlapPolicy, and its assignee role. */
export interface StartTarget extends TaskRow {
  overlapPolicy: 'skip' | 'os'
  roleId: string | null
  /** Somebody (not removed) holds the role. */
  roleHeld: boolean
}

/**
 * Reads what a start needs in one query, by id or slug. With `lock`, a share lock: the task cannot be
 * deprecated or deleted while the start decides on it.
 */
export async function startTarget(
  db: Db,
  enterpriseId: string,
  by: TaskRef,
  lock = false,
): Promise<StartTarget | undefined> {
  const [row] = await db<StartTarget[]>`
    ${targetSelect(db)}
     where t.enterprise_id = ${enterpriseId}
       and ${'id' in by ? db`t.id = ${by.id}` : db`t.slug = ${by.slug}`}
     ${lock ? db`for share of t` : db``}`
  return row
}

/** A start's task, by id or by slug, as `lockedTargets` keys it. */
export type TaskRef = { id: string } | { slug: string }

function targetKey(enterpriseId: string, task: TaskRef): string {
  return 'id' in task ? `${enterpriseId}:id:${task.id}` : `${enterpriseId}:slug:${task.slug}`
}

/** The start targets of several (enterprise, task) pairs, locked against changes until commit. */
async function lockedTargets(
  db: Db,
  tasks: { enterpriseId: string; task: TaskRef }[],
): Promise<Map<string, StartTarget>> {
  const byId = tasks.filter((t) => 'id' in t.task) as {
    enterpriseId: string
    task: { id: string }
  }[]
  const bySlug = tasks.filter((t) => 'slug' in t.task) as {
    enterpriseId: string
    task: { slug: string }
  }[]
  // Each kind of key looked up through its own index (an `or` of the two would scan every task).
  const rows = await db<StartTarget[]>`
    ${targetSelect(db)}
     where t.id in (
             select k.id from tasks k
               join unnest(${db.array(byId.map((t) => t.enterpriseId))}::uuid[],
                           ${db.array(byId.map((t) => t.task.id))}::uuid[]) as want(enterprise_id, id)
                 on k.id = want.id and k.enterprise_id = want.enterprise_id
             union all
             select k.id from tasks k
               join unnest(${db.array(bySlug.map((t) => t.enterpriseId))}::uuid[],
                           ${db.array(bySlug.map((t) => t.task.slug))}::text[]) as want(enterprise_id, slug)
                 on k.enterprise_id = want.enterprise_id and k.slug = want.slug)
     order by t.id
     for share of t`
  return new Map(
    rows.flatMap((row) => [
      [targetKey(row.enterpriseId, { id: row.id }), row],
      [targetKey(row.enterpriseId, { slug: row.slug }), row],
    ]),
  )
}

function targetSelect(db: Db) {
  return db`
    select ${taskColumns(db)},
           coalesce(v.definition ->> 'overlapPolicy', 'skip') as overlap_policy,
           assignee_role.id as role_id,
           exists (select 1 from role_members rm join members m on m.id = rm.member_id
                    where rm.role_id = assignee_role.id and m.removed_at is null) as role_held
      from tasks t
      join task_versions v on v.id = t.current_version_id
      ${assigneeRoleJoin(db)}`
}

/** Why a task cannot start a run now, or undefined (spec: Codes, task_not_runnable). */
export function notRunnable(task: StartTarget): string | undefined {
  if (task.status === 'deprecated') return `Task ${task.slug} is deprecated: it starts no new run.`
  if (!task.assigneeRole) return `Task ${task.slug} has no assigneeRole: nobody can run it.`
  if (!task.roleId)
    return `No role ${task.assigneeRole} exists on the task's team or enterprise-wide.`
  if (!task.roleHeld)
    return `Nobody holds the role ${task.assigneeRole} on the task's team or enterprise-wide.`
  return undefined
}

async function runnableTarget(tx: Db, enterpriseId: string, by: TaskRef) {
  const task = await startTarget(tx, enterpriseId, by, true)
  if (!task) throw taskNotFoundBy(by)
  const why = notRunnable(task)
  if (why) throw new ApiError('task_not_runnable', why)
  return task as StartTarget & { roleId: string }
}

export interface NewRun {
  /** Made by insertRuns unless given (for an event that names the run, written beside it). */
  id?: string
  task: TaskRow
  input: Record<string, unknown>
  origin: Run['origin']
  status: 'pending' | 'queued' | 'skipped_overlap'
  memberId?: string
  reason?: string
  executionId?: string
  previousRunId?: string
  notBefore?: Date
  successorEdge?: string
  issueKey?: string
  resumeFromRunId?: string
  /** The memory layer the run may write: a trusted caller's choice, never its input's (issue 41). */
  memoryScope?: MemoryScope
  /**
   * Who started it (`user:<id>` or `token:<id>`, the caller's actor): the person, or the person who
   * made the token, is mailed if it fails (issue 47). Starts of osd's own (schedules, successors) none.
   */
  startedBy?: string
  /** A fork (issue 50): the run and the step (from 1) it goes on live from. */
  forkedFrom?: { runId: string; step: number }
  /** The tier its model calls use instead of its version's (a fork's choice). */
  modelTier?: string
  /**
   * Who started it and why, in its first event (a fork's, a bulk retry's with its operation: issue
   * 50, every action recorded).
   */
  started?: { by: string; why?: string; bulkOperationId?: string }
  /**
   * The trace its passes continue (issue 49), a W3C traceparent: the request's that started it, its
   * predecessor's. Left out, a new trace when tracing is on, else none.
   */
  traceParent?: string
}

/** Inserts a run on its task's current version, with its first event, in one statement. */
export async function insertRun(tx: Db, fields: NewRun): Promise<RunRow> {
  const [run] = await insertRuns(tx, [fields])
  return run!
}

/**
 * Inserts runs, each on its task's current version and with its first event, in one statement however
 * many (a batch of starts). Answers them in the order given.
 */
export async function insertRuns(tx: Db, runs: readonly NewRun[]): Promise<RunRow[]> {
  if (runs.length === 0) return []
  const rows = runs.map((fields, ord) => {
    const { task } = fields
    // Ids are made here so that a new execution's id is its first run's id in one statement.
    const id = fields.id ?? randomUUID()
    const payload: Record<string, unknown> = { origin: fields.origin }
    if (fields.memberId) payload.memberId = fields.memberId
    if (fields.reason) payload.reason = fields.reason
    if (fields.previousRunId) payload.previousRunId = fields.previousRunId
    if (fields.notBefore) payload.notBefore = fields.notBefore.toISOString()
    if (fields.forkedFrom) payload.forkedFrom = fields.forkedFrom
    if (fields.started) Object.assign(payload, fields.started)
    return {
      id,
      ord,
      enterprise_id: task.enterpriseId,
      task_id: task.id,
      version_id: task.currentVersionId,
      task_slug: task.slug,
      task_name: task.name,
      team_id: task.teamId,
      kind: task.kind,
      lane: laneOf(task, fields.input),
      member_id: fields.memberId ?? null,
      status: fields.status,
      origin: fields.origin,
      input: fields.input,
      reason: fields.reason ?? null,
      execution_id: fields.executionId ?? id,
      previous_run_id: fields.previousRunId ?? null,
      not_before: fields.notBefore?.toISOString() ?? null,
      successor_edge: fields.successorEdge ?? null,
      issue_key: fields.issueKey ?? null,
      resume_from_run_id: fields.resumeFromRunId ?? null,
      memory_scope: fields.memoryScope ?? null,
      started_by: fields.startedBy ?? null,
      forked_from_run_id: fields.forkedFrom?.runId ?? null,
      forked_from_step: fields.forkedFrom?.step ?? null,
      model_tier: fields.modelTier ?? null,
      trace_parent:
        fields.traceParent ??
        newRunTraceParent({ 'osd.run.id': id, 'osd.run.origin': fields.origin }) ??
        null,
      event: fields.status === 'skipped_overlap' ? 'run.skipped' : `run.${fields.status}`,
      payload,
    }
  })
  const written = await tx<RunRow[]>`
    with d as (
      -- One statement has one timestamp: each run's times are a microsecond after the one before, so
      -- that admission, dispatch and the member waited-longest order keep the order of the starts.
      select d.*, statement_timestamp() + d.ord * interval '1 microsecond' as at
        from jsonb_to_recordset(${tx.json(rows as never)})
          as d(id uuid, ord int, enterprise_id uuid, task_id uuid, version_id uuid, task_slug text, task_name text,
               team_id uuid, kind text, lane text, member_id uuid, status text, origin text, input jsonb,
               reason text, execution_id uuid, previous_run_id uuid, not_before timestamptz,
               successor_edge text, issue_key text, resume_from_run_id uuid, memory_scope jsonb,
               started_by text, forked_from_run_id uuid, forked_from_step int, model_tier text,
               trace_parent text, event text, payload jsonb)
    ), run as (
      insert into runs (id, enterprise_id, task_id, task_version_id, task_slug, task_name, team_id, kind,
                        overlap_policy, lane, member_id, status, origin, input, reason, execution_id,
                        previous_run_id, not_before, successor_edge, issue_key, resume_from_run_id,
                        memory_scope, started_by, forked_from_run_id, forked_from_step, model_tier,
                        trace_parent, created_at, updated_at, queued_at, finished_at)
      select d.id, d.enterprise_id, d.task_id, v.id, d.task_slug, d.task_name, d.team_id, d.kind,
             coalesce(v.definition ->> 'overlapPolicy', 'skip'), d.lane, d.member_id, d.status, d.origin,
             d.input, d.reason, d.execution_id, d.previous_run_id, d.not_before, d.successor_edge,
             d.issue_key, d.resume_from_run_id, d.memory_scope,
             -- A person, or the person who made the token (none for a token osd made itself).
             case when d.started_by like 'user:%' then substr(d.started_by, 6)::uuid
                  when d.started_by like 'token:%'
                    then (select t.created_by_user from api_tokens t
                           where t.id = substr(d.started_by, 7)::uuid and t.enterprise_id = d.enterprise_id)
             end,
             d.forked_from_run_id, d.forked_from_step, d.model_tier, d.trace_parent, d.at, d.at,
             case when d.status = 'queued' then d.at end,
             case when d.status = 'skipped_overlap' then d.at end
        from d join task_versions v on v.id = d.version_id
      returning *
    ), event as (
      insert into run_events (enterprise_id, run_id, type, payload)
      select d.enterprise_id, d.id, d.event, d.payload from d join run on run.id = d.id
    )
    select * from run`
  const ids = rows.map((row) => row.id)
  if (metricsEnabled()) onCommit(tx, () => metrics.runsStarted(written))
  notifyAfterCommit(tx, runChannel, ids)
  wakeEnginesFor(tx, ids)
  // A task version is never deleted while its task can start runs; a missing one is a broken invariant.
  if (written.length !== rows.length)
    throw new Error('a run was not written: its task version is gone')
  const byId = new Map(written.map((run) => [run.id, run]))
  return ids.map((id) => byId.get(id)!)
}

/** A start's outcome: its run, and for a refused API start the refusal its run records. */
export type Started = { run: RunRow; refusal?: ApiError }

export interface StartRequest {
  enterpriseId: string
  task: TaskRef
  input: Record<string, unknown>
  /**
   * api: goes at once or is refused (409 overlap, member_busy); webhook: like an API start, but where
   * an API start is refused it waits pending for admission instead (DESIGN 5).
   */
  origin: 'api' | 'webhook'
  /**
   * Writes what the caller keeps of the start (a webhook's delivery) in the start's transaction, so
   * both commit or neither does. Called once per transaction the start is decided in, refusals too.
   */
  keep?: (tx: Db, outcome: Started | ApiError) => Promise<unknown>
  /** The memory layer the run may write; only POST /v1/memory/train's start gives one (issue 41). */
  memoryScope?: MemoryScope
  /** The caller's actor (NewRun.startedBy). */
  startedBy?: string
  /**
   * The request's trace context (NewRun.traceParent), given by the caller: each start of a batch
   * (one transaction for many requests) keeps its own request's.
   */
  traceParent?: string
}

/** What starts runs for a caller that has no transaction of its own: the app's StartBatcher. */
export interface RunStarts {
  start(start: StartRequest): Promise<Started>
}

/**
 * Starts a run by API (POST /v1/tasks/{id}/runs) or by webhook (spec: States and transitions; DESIGN 5).
 * The input is stored as sent. An API start is queued at once with a free holder of the role, or
 * refused 409 overlap (the lane has a run under way) or 409 member_busy, the refusal recorded as a
 * skipped_overlap run. A webhook start never refuses for overlap: it is queued at once the same way
 * when it can be, and otherwise waits pending.
 *
 * In the caller's transaction, or in one of its own on a pool: never batched with other starts. The
 * routes start through their app's StartBatcher instead.
 */
export async function startRun(db: Db, start: StartRequest): Promise<Started> {
  const [outcome] = await transaction(db, (tx) => startRunsIn(tx, [start]))
  return answer(outcome!)
}

interface Waiting {
  start: StartRequest
  resolve: (started: Started) => void
  reject: (err: unknown) => void
}

const maxStartsPerBatch = 64

/**
 * Starts runs as startRun does, batched: the starts that arrive in the same turn of the event loop
 * share one transaction (startRunsIn), each decided as if it came after the ones before it; a start
 * that one of them makes fail goes again on its own. One per app (createApp makes it, issue 43), so
 * what batches together is the starts of one app, never those of another app on the same pool.
 */
export class StartBatcher implements RunStarts {
  private gathering: Waiting[] | undefined

  constructor(private readonly pool: Sql) {}

  start(start: StartRequest): Promise<Started> {
    return new Promise((resolve, reject) => {
      let batch = this.gathering
      if (!batch) {
        this.gathering = batch = []
        setImmediate(() => {
          this.gathering = undefined
          for (let i = 0; i < batch!.length; i += maxStartsPerBatch)
            void this.startBatch(batch!.slice(i, i + maxStartsPerBatch))
        })
      }
      batch.push({ start, resolve, reject })
    })
  }

  private async startBatch(batch: Waiting[], attempt = 1): Promise<void> {
    let outcomes: (Started | ApiError)[]
    try {
      outcomes = await transaction(this.pool, (tx) =>
        startRunsIn(
          tx,
          batch.map((w) => w.start),
        ),
      )
    } catch (err) {
      // A start PostgreSQL stopped to break a deadlock did nothing: it goes again, a few times.
      if (batch.length === 1 && isRetryable(err) && attempt < 4)
        return this.startBatch(batch, attempt + 1)
      if (batch.length === 1) return batch[0]!.reject(err)
      for (const waiting of batch) void this.startBatch([waiting])
      return
    }
    outcomes.forEach((outcome, i) => {
      if (outcome instanceof ApiError) batch[i]!.reject(outcome)
      else batch[i]!.resolve(outcome)
    })
  }
}

function answer(outcome: Started | ApiError): Started {
  if (outcome instanceof ApiError) throw outcome
  return outcome
}

/**
 * Decides starts in order in the caller's transaction: a start the task refuses (task_not_found,
 * task_not_runnable) answers its error and writes no run. The tasks are locked against change first,
 * then the lanes (in one order, so two batches never deadlock) and, for tasks that wait for a free
 * member, the holders; the lanes and holders are read by later statements, whose snapshots therefore
 * see every start that held those locks before.
 */
export async function startRunsIn(tx: Db, starts: StartRequest[]): Promise<(Started | ApiError)[]> {
  const targets = await lockedTargets(tx, starts)
  const outcomes: (Started | ApiError | undefined)[] = []
  const runnable: { i: number; task: StartTarget & { roleId: string }; lane: string }[] = []
  starts.forEach((start, i) => {
    const task = targets.get(targetKey(start.enterpriseId, start.task))
    const why = task && notRunnable(task)
    if (!task) outcomes[i] = taskNotFoundBy(start.task)
    else if (why) outcomes[i] = new ApiError('task_not_runnable', why)
    else
      runnable.push({
        i,
        task: task as StartTarget & { roleId: string },
        lane: laneOf(task, start.input),
      })
  })
  if (runnable.length > 0) {
    const lanes = [...new Set(runnable.map((r) => r.lane))]
    const waiting = runnable.filter((r) => r.task.overlapPolicy !== 'os')
    // Pipelined: the server runs them in this order, each after the one before has its locks. The
    // pauses are read after the tasks' share locks: a task's pause holds its row lock to its commit,
    // so a start either commits before the pause (which then sends its queued run back to pending) or
    // sees it here (issue 50).
    const [, , busyLanes, holders, paused] = await Promise.all([
      lockLanes(tx, lanes),
      lockMembers(tx, { roleIds: [...new Set(waiting.map((r) => r.task.roleId))] }),
      tx<{ lane: string }[]>`
        select distinct lane from runs
         where lane = any(${tx.array(lanes)}::text[])
           and ${literalIn(tx, 'status', underWayStatuses)}`,
      membersFor(tx, { roleIds: [...new Set(runnable.map((r) => r.task.roleId))] }),
      pausedTasks(
        tx,
        runnable.map((r) => ({ enterpriseId: r.task.enterpriseId, taskId: r.task.id })),
      ),
    ])
    const busy = new Set(busyLanes.map((row) => row.lane))
    const decided = runnable.map(({ i, task, lane }) => {
      const { input, origin, memoryScope, startedBy, traceParent } = starts[i]!
      // A paused task's start is accepted and waits pending, whatever its lane and holders: admission
      // passes it over until the resume (issue 50).
      const pause = paused.get(task.id)
      if (pause)
        return {
          refusal: undefined,
          pause,
          run: {
            task,
            input,
            origin,
            memoryScope,
            startedBy,
            traceParent,
            status: 'pending',
          } satisfies NewRun,
        }
      const memberId = busy.has(lane) ? undefined : holders.take(task.roleId, task.overlapPolicy)
      const refusal = busy.has(lane)
        ? new ApiError('overlap', `Task ${task.slug} already has a run under way in this lane.`)
        : memberId
          ? undefined
          : new ApiError('member_busy', `Every holder of the role ${task.assigneeRole} is busy.`)
      // Queued, or waiting in the lane: either way the lane now has a run under way.
      if (!refusal || origin !== 'api') busy.add(lane)
      return {
        refusal,
        pause,
        run: startedRun(
          { task, input, origin, memberId, memoryScope, startedBy, traceParent },
          refusal,
        ),
      }
    })
    // Decided above in order; written together.
    const runs = await insertRuns(
      tx,
      decided.map((d) => d.run),
    )
    const started = decided.map(({ refusal, pause }, k): Started => {
      const run = runs[k]!
      if (pause) run.pause = pause
      // A start that waits (pending) was not refused.
      if (!refusal || run.status !== 'skipped_overlap') return { run }
      return { run, refusal: new ApiError(refusal.code, refusal.message, { runId: run.id }) }
    })
    runnable.forEach(({ i }, k) => (outcomes[i] = started[k]))
  }
  await Promise.all(starts.map((start, i) => start.keep?.(tx, outcomes[i]!)))
  return outcomes as (Started | ApiError)[]
}

/**
 * The run a decided start writes: queued with its member; refused, an API start's is a skipped_overlap
 * run and any other's a pending run that waits for admission.
 */
function startedRun(
  start: Pick<
    NewRun,
    'task' | 'input' | 'origin' | 'memberId' | 'memoryScope' | 'startedBy' | 'traceParent'
  >,
  refusal: ApiError | undefined,
): NewRun {
  if (!refusal) return { ...start, status: 'queued' }
  if (start.origin !== 'api') return { ...start, memberId: undefined, status: 'pending' }
  return { ...start, memberId: undefined, status: 'skipped_overlap', reason: refusal.message }
}

function taskNotFoundBy(task: TaskRef): ApiError {
  return 'id' in task
    ? taskNotFound(task.id)
    : new ApiError('task_not_found', `No task has the slug ${task.slug}.`)
}

export interface EnqueueOptions {
  origin: Run['origin']
  /** NewRun.startedBy. */
  startedBy?: string
  executionId?: string
  previousRunId?: string
  notBefore?: Date
  /** A version of the task other than its current one (a fork's). */
  versionId?: string
  /**
   * The run whose conversation it goes on with (NewRun.resumeFromRunId): a retry's or a fork's of a
   * successor that resumed its predecessor's, as the run it stands for did.
   */
  resumeFromRunId?: string
  forkedFrom?: NewRun['forkedFrom']
  modelTier?: string
  started?: NewRun['started']
}

/**
 * A run that waits instead of refusing (schedule, successor and retry starts; DESIGN 5):
 * pending until admission finds its lane and a holder free. Refused only when the task cannot run at
 * all (task_not_runnable).
 */
export async function enqueueRun(
  db: Db,
  enterpriseId: string,
  taskId: string,
  input: Record<string, unknown>,
  options: EnqueueOptions,
): Promise<RunRow> {
  return transaction(db, async (tx) => {
    const target = await runnableTarget(tx, enterpriseId, { id: taskId })
    const { versionId, ...rest } = options
    const task = versionId ? { ...target, currentVersionId: versionId } : target
    return insertRun(tx, { task, input, status: 'pending', ...rest })
  })
}

/**
 * enqueueRun for many tasks in the caller's transaction, with one read of the tasks and one insert of
 * the runs however many (a minute's schedule fires, a batch of a bulk retry). Answers each start's
 * run, or the error that refused it (task_not_found, task_not_runnable), in the order given. A start's
 * own execution and previous run, if it names them, are laid over `options`.
 */
export async function enqueueRuns(
  tx: Db,
  starts: {
    enterpriseId: string
    taskId: string
    input: Record<string, unknown>
    executionId?: string
    previousRunId?: string
    resumeFromRunId?: string
  }[],
  options: EnqueueOptions,
): Promise<(RunRow | ApiError)[]> {
  const targets = await lockedTargets(
    tx,
    starts.map((s) => ({ enterpriseId: s.enterpriseId, task: { id: s.taskId } })),
  )
  const outcomes: (RunRow | ApiError)[] = []
  const runs: { i: number; run: NewRun }[] = []
  starts.forEach((start, i) => {
    const task = targets.get(targetKey(start.enterpriseId, { id: start.taskId }))
    const why = task && notRunnable(task)
    if (!task) outcomes[i] = taskNotFound(start.taskId)
    else if (why) outcomes[i] = new ApiError('task_not_runnable', why)
    else
      runs.push({
        i,
        run: {
          task,
          input: start.input,
          status: 'pending',
          ...options,
          executionId: start.executionId ?? options.executionId,
          previousRunId: start.previousRunId ?? options.previousRunId,
          resumeFromRunId: start.resumeFromRunId ?? options.resumeFromRunId,
        },
      })
  })
  const written = await insertRuns(
    tx,
    runs.map((r) => r.run),
  )
  runs.forEach(({ i }, k) => (outcomes[i] = written[k]!))
  return outcomes
}
