import { randomUUID } from 'node:crypto'
import { ApiError } from '../../shared/errors.js'
import { isUuid } from '../../shared/ids.js'
import {
  finishedStatuses,
  underWayStatuses,
  type Run,
  type RunEvent,
  type RunResult,
  type RunStatus,
} from '../../shared/schemas/runs.js'
import {
  isRetryable,
  notifyAfterCommit,
  transaction,
  type Db,
  type Fragment,
  type Sql,
} from '../db/sql.js'
import { wakeEnginesFor } from './engine-wake.js'
import { taskColumns, taskNotFound, type TaskRow } from './tasks.js'

// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transitionAll() (transition() for one run),
// which checks it, writes the runs, keeps the running counts, and appends the events, in the caller's
// transaction. Admission and dispatch are in admission.ts; what is read about runs in run-views.ts.

/** NOTIFY channel of run events; the payload is the run id. Wakes long-polling readers. */
export const runChannel = 'osd_run'

export interface RunRow {
  id: string
  enterpriseId: string
  taskId: string
  taskVersionId: string
  taskSlug: string
  taskName: string
  teamId: string | null
  kind: 'llm' | 'deterministic'
  overlapPolicy: 'skip' | 'os'
  lane: string
  memberId: string | null
  status: RunStatus
  origin: Run['origin']
  input: Record<string, unknown>
  result: RunResult | null
  reason: string | null
  blockedReason: string | null
  executionId: string
  previousRunId: string | null
  successorEdge: string | null
  issueKey: string | null
  resumeFromRunId: string | null
  stoppedSuccessors: string[] | null
  costUsdMicros: number
  notBefore: Date | null
  leaseOwner: string | null
  leaseExpiresAt: Date | null
  attempts: number
  clearedAt: Date | null
  createdAt: Date
  queuedAt: Date | null
  startedAt: Date | null
  finishedAt: Date | null
  updatedAt: Date
}

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    status: row.status,
    input: row.input,
    costUsdCents: row.costUsdMicros / 10_000,
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    ...(row.status === 'blocked'
      ? { blockedReason: row.blockedReason ?? 'held for a reason outside the task' }
      : {}),
    taskId: row.taskId,
    taskVersionId: row.taskVersionId,
    taskSlug: row.taskSlug,
    memberId: row.memberId,
    executionId: row.executionId,
    previousRunId: row.previousRunId,
    origin: row.origin,
    result: row.result,
    reason: row.reason,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

export function runNotFound(id: string): ApiError {
  return new ApiError('run_not_found', `No run ${id} in this enterprise.`)
}

export async function loadRun(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<RunRow> {
  const [row] = await db<RunRow[]>`
    select * from runs where enterprise_id = ${enterpriseId} and id = ${id} ${lock ? db`for no key update` : db``}`
  if (!row) throw runNotFound(id)
  return row
}

export const isFinished = (status: RunStatus) => finishedStatuses.includes(status)

// --- events -----------------------------------------------------------------------------------------

export interface NewEvent {
  run: Pick<RunRow, 'id' | 'enterpriseId'>
  type: string
  payload?: Record<string, unknown>
}

/**
 * Appends events in one statement, in the order given, and tells listeners (engines, long-polls) the
 * runs moved once they are committed, one notification per run.
 */
export async function appendEvents(db: Db, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return
  const rows = events.map((e, n) => ({
    n,
    enterprise_id: e.run.enterpriseId,
    run_id: e.run.id,
    type: e.type,
    payload: e.payload ?? {},
  }))
  await db`
    insert into run_events (enterprise_id, run_id, type, payload)
    select e.enterprise_id, e.run_id, e.type, e.payload
      from jsonb_to_recordset(${db.json(rows as never)})
           as e(n int, enterprise_id uuid, run_id uuid, type text, payload jsonb)
     order by e.n`
  notifyAfterCommit(db, runChannel, new Set(events.map((e) => e.run.id)))
}

export function appendEvent(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId'>,
  type: string,
  payload: Record<string, unknown> = {},
): Promise<void> {
  return appendEvents(db, [{ run, type, payload }])
}

/**
 * A run's events in order; with `afterEventId`, only those after it. An id that is not one of this run's
 * events (malformed, another run's, unknown) reads from the first: a follower skips ids it knows.
 */
export async function listEvents(
  db: Db,
  runId: string,
  afterEventId?: string,
): Promise<RunEvent[]> {
  const after = afterEventId && isUuid(afterEventId) ? afterEventId : undefined
  const rows = await db<EventRow[]>`
    select id, type, payload, created_at from run_events
     where run_id = ${runId}
       ${after ? db`and seq > coalesce((select seq from run_events where id = ${after} and run_id = ${runId}), 0)` : db``}
     order by seq`
  return rows.map(toEvent)
}

export interface EventRow {
  id: string
  type: string
  payload: Record<string, unknown>
  createdAt: Date
}

export const toEvent = (e: EventRow): RunEvent => ({
  id: e.id,
  type: e.type,
  payload: e.payload,
  createdAt: e.createdAt.toISOString(),
})

// --- transitions ------------------------------------------------------------------------------------

// Which status may follow which (spec: States and transitions; DESIGN 5). A run that leaves a gate or
// a hold goes back to pending: admission puts it in its lane again, so a lane never has two under way.
const next: Record<RunStatus, readonly RunStatus[]> = {
  pending: ['queued', 'cancelled', 'failed'],
  queued: ['running', 'pending', 'cancelled', 'failed'],
  running: [
    'succeeded',
    'failed',
    'cancelled',
    'waiting_on_gate',
    'blocked',
    'paused_spend',
    'pending',
  ],
  waiting_on_gate: ['pending', 'cancelled', 'failed'],
  blocked: ['pending', 'cancelled', 'failed'],
  paused_spend: ['pending', 'cancelled', 'failed'],
  succeeded: [],
  failed: [],
  cancelled: [],
  skipped_overlap: [],
}

export interface TransitionFields {
  result?: RunResult
  reason?: string
  blockedReason?: string
  memberId?: string
  notBefore?: Date | null
  leaseOwner?: string | null
  /** How long the lease of a run going to running lasts (DESIGN 5; the engine renews it). */
  leaseSeconds?: number
}

/** One run's move: the fields it gets and what its event says besides them. */
export interface Move {
  run: RunRow
  fields?: TransitionFields
  event?: Record<string, unknown>
}

/**
 * Moves runs to `to`: checks each transition, writes the runs (timestamps, lease), keeps the running
 * counts of their enterprises and teams, and appends the events (`run.<to>`), all in `tx` and in a
 * fixed number of statements however many runs move. With `through`, each run passes through that
 * status on the way, in the same statement, and its event says so too (a deterministic run goes
 * queued -> running -> succeeded at once: admission.dispatchQueued). The caller holds the runs' row
 * locks and, for `to: running`, has checked the limits under the counts' row locks. Answers the moved
 * runs in order. Times are the statement's, not the transaction's: an engine step moves a pipeline
 * several steps in one transaction, and each step's times must follow the one before.
 */
export async function transitionAll(
  tx: Db,
  to: RunStatus,
  moves: readonly Move[],
  { through }: { through?: 'running' } = {},
): Promise<RunRow[]> {
  if (moves.length === 0) return []
  for (const { run } of moves) {
    const path = through ? [run.status, through, to] : [run.status, to]
    for (let i = 1; i < path.length; i++) {
      if (!next[path[i - 1]!].includes(path[i]!)) {
        throw new ApiError('illegal_transition', `A ${run.status} run cannot become ${to}.`, {
          status: run.status,
        })
      }
    }
  }
  const finishing = isFinished(to)
  // Every value is decided here from the locked row, so one statement writes every run.
  const rows = moves.map(({ run, fields = {} }) => ({
    id: run.id,
    from_status: run.status,
    result: fields.result ?? run.result,
    reason: fields.reason ?? (finishing ? run.reason : null),
    blocked_reason: to === 'blocked' ? (fields.blockedReason ?? null) : null,
    member_id: fields.memberId ?? run.memberId,
    not_before:
      fields.notBefore === undefined ? (to === 'pending' ? run.notBefore : null) : fields.notBefore,
    lease_owner: to === 'running' ? (fields.leaseOwner ?? null) : null,
    lease_seconds: fields.leaseSeconds ?? 30,
  }))
  // The gates, the counts and the events are decided from the caller's rows, as the update is: all
  // go to the server together (one round trip, not four). Should the update find a run that moved,
  // the throw below undoes them all with the caller's transaction.
  const atGate = finishing
    ? moves.filter((m) => m.run.status === 'waiting_on_gate').map((m) => m.run.id)
    : []
  const [written] = await Promise.all([
    tx<RunRow[]>`
    update runs r
       set status = ${to},
           result = d.result,
           reason = d.reason,
           blocked_reason = d.blocked_reason,
           member_id = d.member_id,
           not_before = d.not_before,
           lease_owner = d.lease_owner,
           lease_expires_at = ${to === 'running' ? tx`statement_timestamp() + make_interval(secs => d.lease_seconds)` : null},
           queued_at = ${to === 'queued' ? tx`statement_timestamp()` : tx`r.queued_at`},
           started_at = ${to === 'running' || through === 'running' ? tx`coalesce(r.started_at, statement_timestamp())` : tx`r.started_at`},
           finished_at = ${finishing ? tx`statement_timestamp()` : null},
           updated_at = statement_timestamp()
      from jsonb_to_recordset(${tx.json(rows as never)})
           as d(id uuid, from_status text, result jsonb, reason text, blocked_reason text, member_id uuid,
                not_before timestamptz, lease_owner text, lease_seconds int)
     where r.id = d.id and r.status = d.from_status
    returning r.*`,
    atGate.length ? closeGatesOf(tx, atGate, `run ${to}`) : undefined,
    keepRunningCounts(
      tx,
      moves.map(({ run }) => ({
        run,
        change: to === 'running' ? 1 : run.status === 'running' ? -1 : 0,
      })),
    ),
    appendEvents(
      tx,
      moves.flatMap(({ run, fields = {}, event = {} }) => {
        const payload: Record<string, unknown> = { ...event }
        if (to === 'succeeded' && fields.result) payload.result = fields.result
        if (fields.reason) payload.reason = fields.reason
        if (to === 'blocked' && fields.blockedReason) payload.blockedReason = fields.blockedReason
        if (fields.memberId) payload.memberId = fields.memberId
        const passed = through ? [{ run, type: `run.${through}` }] : []
        return [...passed, { run, type: `run.${to}`, payload }]
      }),
    ),
  ])
  // The check above and the running counts were decided from the caller's rows: a run that moved
  // since would be written over (an end undone, a count off for good). Callers lock and re-read the
  // runs they move, so this never happens; if it does, nothing of this change is kept.
  if (written.length !== moves.length)
    throw new Error(`${moves.length - written.length} run(s) moved under their lock`)
  const byId = new Map(written.map((r) => [r.id, r]))
  const moved = moves.map(({ run }) => byId.get(run.id)!)
  wakeEnginesFor(
    tx,
    moved.map((run) => run.id),
  )
  return moved
}

/** The running counts of enterprises and teams (DESIGN 5: the limits read them under row locks). */
async function keepRunningCounts(
  tx: Db,
  changes: readonly { run: RunRow; change: number }[],
): Promise<void> {
  const enterprises = new Map<string, number>()
  const teams = new Map<string, number>()
  for (const { run, change } of changes) {
    if (change === 0) continue
    enterprises.set(run.enterpriseId, (enterprises.get(run.enterpriseId) ?? 0) + change)
    if (run.teamId) teams.set(run.teamId, (teams.get(run.teamId) ?? 0) + change)
  }
  const deltas = (m: Map<string, number>) =>
    tx.json([...m].filter(([, n]) => n !== 0).map(([id, n]) => ({ id, n })) as never)
  await Promise.all([
    enterprises.size &&
      tx`
        update enterprises e set running_count = running_count + d.n
          from jsonb_to_recordset(${deltas(enterprises)}) as d(id uuid, n int) where e.id = d.id`,
    teams.size &&
      tx`
        update teams t set running_count = running_count + d.n
          from jsonb_to_recordset(${deltas(teams)}) as d(id uuid, n int) where t.id = d.id`,
  ])
}

/**
 * Runs that end while waiting close their waiting gates: nothing is left to decide. Part of a status
 * change, so here and not in gates.ts (which opens and decides gates through transition()).
 */
async function closeGatesOf(tx: Db, runIds: string[], why: string): Promise<void> {
  await tx`
    update gates set status = 'decided', decided_by = ${why}, decided_at = now()
     where run_id = any(${tx.array(runIds)}::uuid[]) and status = 'waiting'`
}

/** One run's transition (transitionAll with one move). */
export async function transition(
  tx: Db,
  run: RunRow,
  to: RunStatus,
  fields: TransitionFields = {},
  event: Record<string, unknown> = {},
): Promise<RunRow> {
  const [moved] = await transitionAll(tx, to, [{ run, fields, event }])
  return moved!
}

// --- starting runs ----------------------------------------------------------------------------------

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
      from (select distinct hashtextextended(lane, 0) as key
              from unnest(${tx.array(lanes)}::text[]) as lane order by key) as keys`
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
               successor_edge text, issue_key text, resume_from_run_id uuid, event text, payload jsonb)
    ), run as (
      insert into runs (id, enterprise_id, task_id, task_version_id, task_slug, task_name, team_id, kind,
                        overlap_policy, lane, member_id, status, origin, input, reason, execution_id,
                        previous_run_id, not_before, successor_edge, issue_key, resume_from_run_id,
                        created_at, updated_at, queued_at, finished_at)
      select d.id, d.enterprise_id, d.task_id, v.id, d.task_slug, d.task_name, d.team_id, d.kind,
             coalesce(v.definition ->> 'overlapPolicy', 'skip'), d.lane, d.member_id, d.status, d.origin,
             d.input, d.reason, d.execution_id, d.previous_run_id, d.not_before, d.successor_edge,
             d.issue_key, d.resume_from_run_id, d.at, d.at,
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
}

/**
 * Starts a run by API (POST /v1/tasks/{id}/runs) or by webhook (spec: States and transitions; DESIGN 5).
 * The input is stored as sent. An API start is queued at once with a free holder of the role, or
 * refused 409 overlap (the lane has a run under way) or 409 member_busy, the refusal recorded as a
 * skipped_overlap run. A webhook start never refuses for overlap: it is queued at once the same way
 * when it can be, and otherwise waits pending.
 *
 * Starts that arrive in the same turn of the event loop share one transaction (startRunsIn), each
 * decided as if it came after the ones before it; a start that one of them makes fail goes again on its
 * own. Given a transaction, the start happens in it.
 */
export function startRun(db: Db, start: StartRequest): Promise<Started> {
  if (typeof (db as Partial<Sql>).begin !== 'function')
    return startRunsIn(db, [start]).then(([outcome]) => answer(outcome!))
  return new Promise((resolve, reject) => {
    let batch = gathering.get(db as Sql)
    if (!batch) {
      gathering.set(db as Sql, (batch = []))
      setImmediate(() => {
        gathering.delete(db as Sql)
        for (let i = 0; i < batch!.length; i += maxStartsPerBatch)
          void startBatch(db as Sql, batch!.slice(i, i + maxStartsPerBatch))
      })
    }
    batch.push({ start, resolve, reject })
  })
}

interface Waiting {
  start: StartRequest
  resolve: (started: Started) => void
  reject: (err: unknown) => void
}

const maxStartsPerBatch = 64
const gathering = new WeakMap<Sql, Waiting[]>()

async function startBatch(pool: Sql, batch: Waiting[], attempt = 1): Promise<void> {
  let outcomes: (Started | ApiError)[]
  try {
    outcomes = await transaction(pool, (tx) =>
      startRunsIn(
        tx,
        batch.map((w) => w.start),
      ),
    )
  } catch (err) {
    // A start PostgreSQL stopped to break a deadlock did nothing: it goes again, a few times.
    if (batch.length === 1 && isRetryable(err) && attempt < 4)
      return startBatch(pool, batch, attempt + 1)
    if (batch.length === 1) return batch[0]!.reject(err)
    for (const waiting of batch) void startBatch(pool, [waiting])
    return
  }
  outcomes.forEach((outcome, i) => {
    if (outcome instanceof ApiError) batch[i]!.reject(outcome)
    else batch[i]!.resolve(outcome)
  })
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
    // Pipelined: the server runs them in this order, each after the one before has its locks.
    const [, , busyLanes, holders] = await Promise.all([
      lockLanes(tx, lanes),
      lockMembers(tx, { roleIds: [...new Set(waiting.map((r) => r.task.roleId))] }),
      tx<{ lane: string }[]>`
        select distinct lane from runs
         where lane = any(${tx.array(lanes)}::text[])
           and status = any(${tx.array([...underWayStatuses])}::text[])`,
      membersFor(tx, { roleIds: [...new Set(runnable.map((r) => r.task.roleId))] }),
    ])
    const busy = new Set(busyLanes.map((row) => row.lane))
    const decided = runnable.map(({ i, task, lane }) => {
      const { input, origin } = starts[i]!
      const memberId = busy.has(lane) ? undefined : holders.take(task.roleId, task.overlapPolicy)
      const refusal = busy.has(lane)
        ? new ApiError('overlap', `Task ${task.slug} already has a run under way in this lane.`)
        : memberId
          ? undefined
          : new ApiError('member_busy', `Every holder of the role ${task.assigneeRole} is busy.`)
      // Queued, or waiting in the lane: either way the lane now has a run under way.
      if (!refusal || origin !== 'api') busy.add(lane)
      return { refusal, run: startedRun({ task, input, origin, memberId }, refusal) }
    })
    // Decided above in order; written together.
    const runs = await insertRuns(
      tx,
      decided.map((d) => d.run),
    )
    const started = decided.map(({ refusal }, k): Started => {
      const run = runs[k]!
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
  start: Pick<NewRun, 'task' | 'input' | 'origin' | 'memberId'>,
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
  executionId?: string
  previousRunId?: string
  notBefore?: Date
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
    return insertRun(tx, { task: target, input, status: 'pending', ...options })
  })
}

/**
 * enqueueRun for many tasks in the caller's transaction, with one read of the tasks and one insert of
 * the runs however many (a minute's schedule fires). Answers each start's run, or the error that
 * refused it (task_not_found, task_not_runnable), in the order given.
 */
export async function enqueueRuns(
  tx: Db,
  starts: { enterpriseId: string; taskId: string; input: Record<string, unknown> }[],
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
    else runs.push({ i, run: { task, input: start.input, status: 'pending', ...options } })
  })
  const written = await insertRuns(
    tx,
    runs.map((r) => r.run),
  )
  runs.forEach(({ i }, k) => (outcomes[i] = written[k]!))
  return outcomes
}

// --- members a run can go to (DESIGN 5: the one who waited longest) ---------------------------------

/**
 * Locks members a start or admission may give a run to, in id order (so two lockers never deadlock):
 * the holders of the roles and the named members. Only runs that wait while their member is busy
 * (overlapPolicy skip) need this; one that runs beside other work takes no lock, so no start waits on
 * another for a shared holder. With `wait: false` it takes only what is free (`skip locked`) and
 * answers false when another transaction held one of them: for a caller already holding other locks,
 * which must not wait for more.
 */
export async function lockMembers(
  tx: Db,
  which: { roleIds?: string[]; memberIds?: string[] },
  { wait = true }: { wait?: boolean } = {},
): Promise<boolean> {
  const { roleIds = [], memberIds = [] } = which
  if (roleIds.length === 0 && memberIds.length === 0) return true
  const [row] = await tx<{ wanted: number; locked: number }[]>`
    with wanted as (
      select id from members
       where (removed_at is null
              and id in (select member_id from role_members where role_id = any(${tx.array(roleIds)}::uuid[])))
          or id = any(${tx.array(memberIds)}::uuid[])
    ), locked as (
      select id from members where id in (select id from wanted)
       order by id
       for no key update ${wait ? tx`` : tx`skip locked`}
    )
    select (select count(*) from wanted)::int as wanted, (select count(*) from locked)::int as locked`
  return row!.locked === row!.wanted
}

/** Whether a member holds a queued or running run (DESIGN 5: member busy), as a SQL condition. */
export function memberBusy(db: Db, memberId: Fragment): Fragment {
  return db`exists (select 1 from runs b where b.member_id = ${memberId} and b.status in ('queued', 'running'))`
}

/**
 * The members of the roles (and the named members), the one who waited longest first: a member's last
 * assignment is the latest queued_at of its runs, never assigned counting as longest. Busy: it holds a
 * queued or running run.
 */
export async function membersFor(
  tx: Db,
  which: { roleIds?: string[]; memberIds?: string[] },
): Promise<Members> {
  const { roleIds = [], memberIds = [] } = which
  const rows = await tx<{ id: string; roleIds: string[]; busy: boolean }[]>`
    select m.id,
           array_remove(array_agg(rm.role_id), null) as role_ids,
           ${memberBusy(tx, tx`m.id`)} as busy
      from members m
      left join role_members rm on rm.member_id = m.id and rm.role_id = any(${tx.array(roleIds)}::uuid[])
     where (m.removed_at is null and rm.role_id is not null) or m.id = any(${tx.array(memberIds)}::uuid[])
     group by m.id
     order by (select max(r.queued_at) from runs r where r.member_id = m.id) asc nulls first, m.id`
  return new Members(rows)
}

/** Members in waited-longest order, as assignments within one transaction change it. */
export class Members {
  constructor(private readonly order: { id: string; roleIds: string[]; busy: boolean }[]) {}

  /**
   * Gives a run of the role to the free holder who waited longest, or to the longest-waiting holder
   * when the task runs beside other work (overlapPolicy os); that member then waited least.
   */
  take(roleId: string, overlapPolicy: string): string | undefined {
    const i = this.order.findIndex(
      (m) => m.roleIds.includes(roleId) && (overlapPolicy === 'os' || !m.busy),
    )
    if (i < 0) return undefined
    const [member] = this.order.splice(i, 1)
    this.order.push({ ...member!, busy: true })
    return member!.id
  }

  /** Gives a run back to the member it already had (coming back from a gate) if it may have it now. */
  retake(memberId: string, overlapPolicy: string): boolean {
    const i = this.order.findIndex((m) => m.id === memberId)
    const member = this.order[i]
    if (member?.busy && overlapPolicy !== 'os') return false
    if (member) {
      this.order.splice(i, 1)
      this.order.push({ ...member, busy: true })
    }
    return true
  }
}

// --- what people do to runs --------------------------------------------------------------------------

/**
 * POST /v1/runs/{id}/retry: a new pending run on the task's current version, in the same execution,
 * whose input carries priorRunId. Repeated while that run is still pending, the same run answers.
 */
export async function retryRun(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<{ run: RunRow; created: boolean }> {
  return transaction(db, async (tx) => {
    const original = await loadRun(tx, enterpriseId, id, true)
    const [pending] = await tx<RunRow[]>`
      select * from runs
       where enterprise_id = ${enterpriseId} and previous_run_id = ${id} and origin = 'retry' and status = 'pending'
       order by created_at desc limit 1`
    if (pending) return { run: pending, created: false }
    const run = await enqueueRun(
      tx,
      enterpriseId,
      original.taskId,
      { ...original.input, priorRunId: original.id },
      {
        origin: 'retry',
        executionId: original.executionId,
        previousRunId: original.id,
      },
    )
    return { run, created: true }
  })
}

/** POST /v1/runs/{id}/clear: takes a failed run off Blockers; a second call changes nothing. */
export async function clearRun(db: Db, enterpriseId: string, id: string): Promise<RunRow> {
  const run = await loadRun(db, enterpriseId, id)
  if (run.status !== 'failed') {
    throw new ApiError(
      'illegal_transition',
      `Only a failed run or a stopped pipeline is on Blockers; run ${id} is ${run.status}.`,
    )
  }
  const [row] = await db<RunRow[]>`
    update runs set cleared_at = coalesce(cleared_at, now()) where id = ${id} returning *`
  return row!
}
