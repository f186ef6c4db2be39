import { ApiError } from '../../shared/errors.js'
import type { Paged } from '../../shared/schemas/common.js'
import {
  finishedStatuses,
  underWayStatuses,
  type Blockers,
  type Run,
  type RunDetail,
  type RunEvent,
  type RunRef,
  type RunResult,
  type RunStatus,
  type runSorts,
} from '../../shared/schemas/runs.js'
import { envelope, orderBy, type PageRequest } from '../db/paging.js'
import { randomUUID } from 'node:crypto'
import { transaction, type Db } from '../db/sql.js'
import { closeGatesOf, listRunGates } from './gates.js'
import { followSuccessors } from './successors.js'
import { loadTask, type TaskRow } from './tasks.js'

// Runs: starting them, moving them from state to state, and their events (spec: Run; States and
// transitions; DESIGN 5). Every status change goes through transition(), which checks it, writes the
// run, keeps the running counts, and appends the event, in the caller's transaction.

/** NOTIFY channel of run events; the payload is the run id. Wakes engines and long-polling readers. */
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
    select * from runs where enterprise_id = ${enterpriseId} and id = ${id} ${lock ? db`for update` : db``}`
  if (!row) throw runNotFound(id)
  return row
}

export const isFinished = (status: RunStatus) => finishedStatuses.includes(status)

// --- events -----------------------------------------------------------------------------------------

/** Appends an event and tells listeners (engines, long-polls) the run moved, in one round trip. */
export async function appendEvent(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId'>,
  type: string,
  payload: Record<string, unknown> = {},
): Promise<void> {
  await db`
    with event as (
      insert into run_events (enterprise_id, run_id, type, payload)
      values (${run.enterpriseId}, ${run.id}, ${type}, ${db.json(payload as never)})
      returning run_id
    )
    select pg_notify(${runChannel}, run_id::text) from event`
}

export async function listEvents(
  db: Db,
  runId: string,
  afterEventId?: string,
): Promise<RunEvent[]> {
  const rows = await db<
    { id: string; type: string; payload: Record<string, unknown>; createdAt: Date }[]
  >`
    select id, type, payload, created_at from run_events
     where run_id = ${runId}
       ${afterEventId ? db`and seq > coalesce((select seq from run_events where id = ${afterEventId} and run_id = ${runId}), 0)` : db``}
     order by seq`
  return rows.map((e) => ({
    id: e.id,
    type: e.type,
    payload: e.payload,
    createdAt: e.createdAt.toISOString(),
  }))
}

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

/**
 * Moves a run to `to`: checks the transition, writes the run (timestamps, lease), keeps the running
 * counts of its enterprise and team, and appends the event (`run.<to>`), all in `tx`. The caller holds
 * the run's row lock and, for `to: running`, has checked the limits under the counts' row locks.
 */
export async function transition(
  tx: Db,
  run: RunRow,
  to: RunStatus,
  fields: TransitionFields = {},
  event: Record<string, unknown> = {},
): Promise<RunRow> {
  if (!next[run.status].includes(to)) {
    throw new ApiError('illegal_transition', `A ${run.status} run cannot become ${to}.`, {
      status: run.status,
    })
  }
  const finishing = finishedStatuses.includes(to)
  const [row] = await tx<RunRow[]>`
    update runs
       set status = ${to},
           result = ${fields.result ? tx.json(fields.result as never) : tx`result`},
           reason = ${fields.reason ?? (finishing ? tx`reason` : null)},
           blocked_reason = ${to === 'blocked' ? (fields.blockedReason ?? null) : null},
           member_id = ${fields.memberId ?? tx`member_id`},
           not_before = ${fields.notBefore === undefined ? (to === 'pending' ? tx`not_before` : null) : fields.notBefore},
           lease_owner = ${to === 'running' ? (fields.leaseOwner ?? null) : null},
           lease_expires_at = ${to === 'running' ? tx`now() + make_interval(secs => ${fields.leaseSeconds ?? 30})` : null},
           queued_at = ${to === 'queued' ? tx`now()` : tx`queued_at`},
           started_at = ${to === 'running' ? tx`coalesce(started_at, now())` : tx`started_at`},
           finished_at = ${finishing ? tx`now()` : null},
           updated_at = now()
     where id = ${run.id}
     returning *`
  const moved = row!
  if (run.status === 'waiting_on_gate' && finishing) await closeGatesOf(tx, run.id, `run ${to}`)
  if (run.status === 'running' || to === 'running') {
    const change = to === 'running' ? 1 : -1
    await tx`update enterprises set running_count = running_count + ${change} where id = ${run.enterpriseId}`
    if (run.teamId) {
      await tx`update teams set running_count = running_count + ${change} where id = ${run.teamId}`
    }
  }
  const payload: Record<string, unknown> = { ...event }
  if (to === 'succeeded' && fields.result) payload.result = fields.result
  if (fields.reason) payload.reason = fields.reason
  if (to === 'blocked' && fields.blockedReason) payload.blockedReason = fields.blockedReason
  if (fields.memberId) payload.memberId = fields.memberId
  await appendEvent(tx, moved, `run.${to}`, payload)
  return moved
}

/**
 * Ends a run (succeeded, failed or cancelled) and follows its successors, in the caller's transaction:
 * the end of a run and what it starts are one change (DESIGN 3).
 */
export async function finishRun(
  tx: Db,
  run: RunRow,
  to: 'succeeded' | 'failed' | 'cancelled',
  fields: TransitionFields = {},
  options: { stopping?: boolean } = {},
): Promise<RunRow> {
  const ended = await transition(tx, run, to, {
    ...fields,
    result:
      fields.result ??
      (to === 'succeeded' ? { outcome: 'succeeded' } : { outcome: to, summary: fields.reason }),
  })
  await followSuccessors(tx, ended, options)
  return ended
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

/** Serialises what happens in one lane across every osd process, until the transaction ends. */
async function lockLane(tx: Db, lane: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${lane}, 0))`
}

interface Holder {
  id: string
  busy: boolean
}

/**
 * The role a task's runs go to (spec: Task definition, assigneeRole): the team role of that slug on the
 * task's team, else the enterprise-wide role of that slug.
 */
export async function assigneeRoleId(
  db: Db,
  task: Pick<TaskRow, 'enterpriseId' | 'teamId' | 'assigneeRole'>,
) {
  if (!task.assigneeRole) return undefined
  const [role] = await db<{ id: string }[]>`
    select id from roles
     where enterprise_id = ${task.enterpriseId} and slug = ${task.assigneeRole}
       and (team_id = ${task.teamId} or team_id is null)
     order by team_id nulls last
     limit 1`
  return role?.id
}

/**
 * The role's holders, the one who waited longest first: a member's last assignment is the latest
 * queued_at of its runs (never assigned counts as longest). Busy: holds a queued or running run. For a
 * task that waits while its member is busy (overlapPolicy skip) the holders are locked, so no other start
 * gives one of them a second run meanwhile; one that runs beside other work needs no lock, and so no
 * start waits on another for a shared holder.
 */
async function holdersOf(tx: Db, enterpriseId: string, roleId: string, overlapPolicy: string): Promise<Holder[]> {
  const lock = overlapPolicy !== 'os'
  return tx<Holder[]>`
    select m.id,
           exists (select 1 from runs r where r.member_id = m.id and r.status in ('queued', 'running')) as busy
      from members m join role_members rm on rm.member_id = m.id
     where rm.role_id = ${roleId} and m.enterprise_id = ${enterpriseId} and m.removed_at is null
     order by (select max(r.queued_at) from runs r where r.member_id = m.id) asc nulls first, m.id
     ${lock ? tx`for update of m` : tx``}`
}

/** The free holder who waited longest, or anyone longest-waiting when the task runs beside other work. */
function pick(holders: Holder[], overlapPolicy: string): Holder | undefined {
  return overlapPolicy === 'os' ? holders[0] : holders.find((h) => !h.busy)
}

/** Why a task cannot start a run now, or undefined (spec: Codes, task_not_runnable). */
export async function notRunnable(
  db: Db,
  task: TaskRow,
): Promise<{ message: string } | { roleId: string }> {
  if (task.status === 'deprecated')
    return { message: `Task ${task.slug} is deprecated: it starts no new run.` }
  if (!task.assigneeRole)
    return { message: `Task ${task.slug} has no assigneeRole: nobody can run it.` }
  const roleId = await assigneeRoleId(db, task)
  if (!roleId)
    return { message: `No role ${task.assigneeRole} exists on the task's team or enterprise-wide.` }
  const [holder] = await db`
    select 1 from role_members rm join members m on m.id = rm.member_id
     where rm.role_id = ${roleId} and m.removed_at is null limit 1`
  if (!holder)
    return {
      message: `Nobody holds the role ${task.assigneeRole} on the task's team or enterprise-wide.`,
    }
  return { roleId }
}

async function requireRunnable(db: Db, task: TaskRow): Promise<string> {
  const verdict = await notRunnable(db, task)
  if ('message' in verdict) throw new ApiError('task_not_runnable', verdict.message)
  return verdict.roleId
}

export interface NewRun {
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

export async function insertRun(tx: Db, fields: NewRun): Promise<RunRow> {
  const { task } = fields
  // Ids are made here so that a new execution's id is its first run's id in one statement.
  const id = randomUUID()
  const [run] = await tx<RunRow[]>`
    insert into runs (id, enterprise_id, task_id, task_version_id, task_slug, task_name, team_id, kind,
                      overlap_policy, lane, member_id, status, origin, input, reason, execution_id,
                      previous_run_id, not_before, successor_edge, issue_key, resume_from_run_id,
                      queued_at, finished_at)
    select ${id}, ${task.enterpriseId}, ${task.id}, v.id, ${task.slug}, ${task.name}, ${task.teamId}, ${task.kind},
           coalesce(v.definition ->> 'overlapPolicy', 'skip'), ${laneOf(task, fields.input)}, ${fields.memberId ?? null},
           ${fields.status}, ${fields.origin}, ${tx.json(fields.input as never)}, ${fields.reason ?? null},
           ${fields.executionId ?? id}, ${fields.previousRunId ?? null}, ${fields.notBefore ?? null},
           ${fields.successorEdge ?? null}, ${fields.issueKey ?? null}, ${fields.resumeFromRunId ?? null},
           ${fields.status === 'queued' ? tx`now()` : null}, ${fields.status === 'skipped_overlap' ? tx`now()` : null}
      from task_versions v where v.id = ${task.currentVersionId}
    returning *`
  const payload: Record<string, unknown> = { origin: fields.origin }
  if (fields.memberId) payload.memberId = fields.memberId
  if (fields.reason) payload.reason = fields.reason
  if (fields.previousRunId) payload.previousRunId = fields.previousRunId
  if (fields.notBefore) payload.notBefore = fields.notBefore.toISOString()
  await appendEvent(
    tx,
    run!,
    fields.status === 'skipped_overlap' ? 'run.skipped' : `run.${fields.status}`,
    payload,
  )
  return run!
}

export type ApiStart = { run: RunRow; refusal?: ApiError }

/**
 * POST /v1/tasks/{id}/runs (spec: States and transitions; DESIGN 5): queued at once with a free holder
 * of the role, or refused 409 overlap (the lane has a run under way) or 409 member_busy, the refusal
 * recorded as a skipped_overlap run. The input is stored as sent.
 */
export async function startApiRun(
  db: Db,
  enterpriseId: string,
  taskId: string,
  input: Record<string, unknown>,
): Promise<ApiStart> {
  return transaction(db, async (tx) => {
    // A share lock: the task cannot be deprecated or deleted while a start decides on it.
    const task = await loadTaskForStart(tx, enterpriseId, taskId)
    const roleId = await requireRunnable(tx, task)
    const lane = laneOf(task, input)
    await lockLane(tx, lane)
    const [busyLane] = await tx`
      select 1 from runs where lane = ${lane} and status = any(${tx.array([...underWayStatuses])}::text[]) limit 1`
    if (busyLane) {
      const message = `Task ${task.slug} already has a run under way in this lane.`
      const run = await insertRun(tx, {
        task,
        input,
        origin: 'api',
        status: 'skipped_overlap',
        reason: message,
      })
      return { run, refusal: new ApiError('overlap', message, { runId: run.id }) }
    }
    const overlapPolicy = await overlapPolicyOf(tx, task)
    const holder = pick(await holdersOf(tx, enterpriseId, roleId, overlapPolicy), overlapPolicy)
    if (!holder) {
      const message = `Every holder of the role ${task.assigneeRole} is busy.`
      const run = await insertRun(tx, {
        task,
        input,
        origin: 'api',
        status: 'skipped_overlap',
        reason: message,
      })
      return { run, refusal: new ApiError('member_busy', message, { runId: run.id }) }
    }
    return {
      run: await insertRun(tx, {
        task,
        input,
        origin: 'api',
        status: 'queued',
        memberId: holder.id,
      }),
    }
  })
}

async function loadTaskForStart(tx: Db, enterpriseId: string, taskId: string): Promise<TaskRow> {
  const [row] = await tx<{ id: string }[]>`
    select id from tasks where enterprise_id = ${enterpriseId} and id = ${taskId} for share`
  if (!row) throw new ApiError('task_not_found', `No task ${taskId} in this enterprise.`)
  return loadTask(tx, enterpriseId, taskId)
}

async function overlapPolicyOf(tx: Db, task: TaskRow): Promise<string> {
  const [row] = await tx<{ p: string }[]>`
    select definition ->> 'overlapPolicy' as p from task_versions where id = ${task.currentVersionId}`
  return row?.p ?? 'skip'
}

export interface EnqueueOptions {
  origin: Run['origin']
  executionId?: string
  previousRunId?: string
  notBefore?: Date
}

/**
 * A run that waits instead of refusing (schedule, webhook, successor and retry starts; DESIGN 5):
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
    const task = await loadTaskForStart(tx, enterpriseId, taskId)
    await requireRunnable(tx, task)
    return insertRun(tx, { task, input, status: 'pending', ...options })
  })
}

// --- admission and dispatch (DESIGN 5) -------------------------------------------------------------

/**
 * Admits pending runs: the oldest due run of each lane becomes queued when no run of its lane is
 * queued, running, blocked or paused, and a holder of the role is free (the holder it already had, for
 * a run coming back from a gate). One transaction per lane, under the lane's lock. Answers how many.
 */
export async function admitPending(db: Db, limit = 200): Promise<number> {
  await resumeDueHolds(db)
  const candidates = await db<{ id: string; lane: string; enterpriseId: string }[]>`
    select distinct on (lane) id, lane, enterprise_id
      from runs
     where status = 'pending' and (not_before is null or not_before <= now())
     order by lane, created_at, id
     limit ${limit}`
  let admitted = 0
  for (const candidate of candidates) {
    if (await admitOne(db, candidate.enterpriseId, candidate.id, candidate.lane)) admitted++
  }
  return admitted
}

async function admitOne(
  db: Db,
  enterpriseId: string,
  runId: string,
  lane: string,
): Promise<boolean> {
  return transaction(db, async (tx) => {
    await lockLane(tx, lane)
    const [run] = await tx<RunRow[]>`select * from runs where id = ${runId} for update`
    if (!run || run.status !== 'pending' || (run.notBefore && run.notBefore > new Date()))
      return false
    const [occupied] = await tx`
      select 1 from runs
       where lane = ${lane} and id <> ${run.id}
         and (status in ('queued', 'running', 'blocked', 'paused_spend')
              or (status = 'pending' and (created_at, id) < (${run.createdAt}, ${run.id})
                  and (not_before is null or not_before <= now())))
       limit 1`
    if (occupied) return false
    let memberId = run.memberId
    if (memberId) {
      if (run.overlapPolicy !== 'os') {
        const [busy] = await tx`
          select 1 from runs where member_id = ${memberId} and status in ('queued', 'running') limit 1`
        if (busy) return false
      }
    } else {
      const task = await loadTask(tx, enterpriseId, run.taskId).catch(() => undefined)
      const roleId = task && (await assigneeRoleId(tx, task))
      if (!task || !roleId) {
        await finishRun(tx, run, 'failed', {
          reason: task
            ? `Nobody can take the role ${task.assigneeRole} any more.`
            : 'The task was deleted.',
        })
        return true
      }
      const holder = pick(await holdersOf(tx, enterpriseId, roleId, run.overlapPolicy), run.overlapPolicy)
      if (!holder) return false
      memberId = holder.id
    }
    await transition(tx, run, 'queued', { memberId })
    return true
  })
}

/**
 * Blocked runs whose back-off is over go back to pending (DESIGN 6: they retry by themselves); with an
 * enterprise named, all of its blocked runs go at once (a key was bound).
 */
export async function resumeDueHolds(db: Db, enterpriseId?: string): Promise<number> {
  return transaction(db, async (tx) => {
    const held = await tx<RunRow[]>`
      select * from runs
       where status = 'blocked'
         and ${enterpriseId ? tx`enterprise_id = ${enterpriseId}` : tx`(not_before is null or not_before <= now())`}
       order by not_before nulls first limit 200
       for update skip locked`
    for (const run of held) {
      await transition(
        tx,
        run,
        'pending',
        { notBefore: null },
        { because: enterpriseId ? 'a model key was bound' : 'retrying after a hold' },
      )
    }
    return held.length
  })
}

/** What a dispatch pass did: runs it completed itself, and runs it started for an executor. */
export interface Dispatched {
  completed: number
  started: RunRow[]
}

/**
 * Moves queued runs to running, oldest first, within the enterprise's and each team's
 * concurrentRunLimit (DESIGN 5). Runs are claimed with `for update skip locked`, so engines share the
 * queue; the enterprises' and teams' rows are locked before their counts are read, so no two engines
 * exceed a limit. A deterministic run runs no model and acts on nothing: it goes queued -> running ->
 * succeeded in this same transaction, `complete` giving its end.
 */
export async function dispatchQueued(
  db: Db,
  engineId: string,
  complete: (tx: Db, run: RunRow) => Promise<void>,
  options: { limit?: number; leaseSeconds?: number } = {},
): Promise<Dispatched> {
  const { limit = 50, leaseSeconds = 30 } = options
  return transaction(db, async (tx) => {
    const claimed = await tx<RunRow[]>`
      select * from runs where status = 'queued' order by queued_at, id limit ${limit} for update skip locked`
    if (claimed.length === 0) return { completed: 0, started: [] }
    const enterprises = await tx<
      { id: string; runningCount: number; concurrentRunLimit: number }[]
    >`
      select id, running_count, concurrent_run_limit from enterprises
       where id = any(${tx.array([...new Set(claimed.map((r) => r.enterpriseId))])}::uuid[])
       order by id for update`
    const teamIds = [
      ...new Set(claimed.map((r) => r.teamId).filter((id): id is string => Boolean(id))),
    ]
    const teams = teamIds.length
      ? await tx<{ id: string; runningCount: number; concurrentRunLimit: number | null }[]>`
          select id, running_count, concurrent_run_limit from teams
           where id = any(${tx.array(teamIds)}::uuid[]) order by id for update`
      : []
    const room = new Map<string, number>()
    for (const e of enterprises) room.set(e.id, e.concurrentRunLimit - e.runningCount)
    for (const t of teams)
      room.set(
        t.id,
        t.concurrentRunLimit === null ? Infinity : t.concurrentRunLimit - t.runningCount,
      )

    const result: Dispatched = { completed: 0, started: [] }
    for (const run of claimed) {
      if ((room.get(run.enterpriseId) ?? 0) <= 0) continue
      if (run.teamId && (room.get(run.teamId) ?? Infinity) <= 0) continue
      const running = await transition(tx, run, 'running', { leaseOwner: engineId, leaseSeconds })
      if (run.kind === 'deterministic') {
        await complete(tx, running)
        result.completed++
      } else {
        room.set(run.enterpriseId, room.get(run.enterpriseId)! - 1)
        if (run.teamId) room.set(run.teamId, room.get(run.teamId)! - 1)
        result.started.push(running)
      }
    }
    return result
  })
}

// --- leases (DESIGN 5: a run whose worker died is taken over) ----------------------------------------

/** Extends this engine's leases; answers the ids it still holds (a cancelled run is no longer held). */
export async function renewLeases(
  db: Db,
  engineId: string,
  runIds: string[],
  leaseSeconds = 30,
): Promise<Set<string>> {
  if (runIds.length === 0) return new Set()
  const rows = await db<{ id: string }[]>`
    update runs set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
     where id = any(${db.array(runIds)}::uuid[]) and status = 'running' and lease_owner = ${engineId}
     returning id`
  return new Set(rows.map((r) => r.id))
}

/** Takes over running runs whose lease lapsed (their worker died), and says so in their events. */
export async function takeOverLapsed(db: Db, engineId: string, leaseSeconds = 30, limit = 20): Promise<RunRow[]> {
  return transaction(db, async (tx) => {
    const lapsed = await tx<RunRow[]>`
      select * from runs
       where status = 'running' and lease_expires_at < now()
       order by lease_expires_at limit ${limit}
       for update skip locked`
    const taken: RunRow[] = []
    for (const run of lapsed) {
      const [row] = await tx<RunRow[]>`
        update runs set lease_owner = ${engineId}, lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
                        attempts = attempts + 1, updated_at = now()
         where id = ${run.id} returning *`
      await appendEvent(tx, row!, 'run.lease_taken_over', {
        previousOwner: run.leaseOwner,
        engine: engineId,
      })
      taken.push(row!)
    }
    return taken
  })
}

// --- what people do to runs --------------------------------------------------------------------------

/** POST /v1/runs/{id}/cancel: any unfinished run is cancelled; a finished one is 409 illegal_transition. */
export async function cancelRun(
  db: Db,
  enterpriseId: string,
  id: string,
  reason = 'Cancelled.',
): Promise<RunRow> {
  return transaction(db, async (tx) => {
    const run = await loadRun(tx, enterpriseId, id, true)
    if (isFinished(run.status)) {
      throw new ApiError(
        'illegal_transition',
        `Run ${id} already ended ${run.status}; it cannot be cancelled.`,
        {
          status: run.status,
        },
      )
    }
    return finishRun(tx, run, 'cancelled', { reason })
  })
}

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

// --- reading runs ----------------------------------------------------------------------------------

const refOf = (r: RunRow): RunRef => ({
  id: r.id,
  status: r.status,
  taskId: r.taskId,
  taskSlug: r.taskSlug,
  createdAt: r.createdAt.toISOString(),
})

/**
 * GET /v1/runs/{id} (spec: Run): the run, its events (after afterEventId), its gates, the task and
 * version it ran, what came before and after it, its execution and its cost.
 */
export async function getRunDetail(
  db: Db,
  enterpriseId: string,
  id: string,
  afterEventId?: string,
): Promise<RunDetail> {
  const run = await loadRun(db, enterpriseId, id)
  const [events, gates, task, version, previous, nextRuns, execution, calls] = await Promise.all([
    listEvents(db, id, afterEventId),
    listRunGates(db, enterpriseId, id),
    db<{ id: string; slug: string; name: string; status: string }[]>`
      select id, slug, name, status from tasks where enterprise_id = ${enterpriseId} and id = ${run.taskId}`,
    db<
      { id: string; number: number }[]
    >`select id, number from task_versions where id = ${run.taskVersionId}`,
    run.previousRunId
      ? db<
          RunRow[]
        >`select * from runs where enterprise_id = ${enterpriseId} and id = ${run.previousRunId}`
      : Promise.resolve([]),
    db<
      RunRow[]
    >`select * from runs where enterprise_id = ${enterpriseId} and previous_run_id = ${id} order by created_at`,
    db<
      { n: number }[]
    >`select count(*)::int as n from runs where execution_id = ${run.executionId}`,
    db<
      { n: number }[]
    >`select count(*)::int as n from run_journal where run_id = ${id} and kind = 'model'`,
  ])
  return {
    run: toRun(run),
    events,
    gates,
    task: task[0] ?? null,
    version: version[0] ?? null,
    previous: previous[0] ? refOf(previous[0]) : null,
    next: nextRuns.map(refOf),
    execution: { id: run.executionId, runCount: execution[0]!.n },
    cost: { usdCents: run.costUsdMicros / 10_000, modelCalls: calls[0]!.n },
  }
}

type RunSort = (typeof runSorts)[number]
const runSortColumns: Record<RunSort, string> = {
  createdAt: 'created_at',
  status: 'status',
  finishedAt: 'finished_at',
}

export interface RunFilters {
  taskId?: string
  taskVersionId?: string
  status?: string
  live?: string
}

/** GET /v1/runs: newest first; live=true is the unfinished runs, blocked and paused left out. */
export async function listRuns(
  db: Db,
  enterpriseId: string,
  filters: RunFilters,
  page: PageRequest<RunSort>,
): Promise<Paged<Run>> {
  const uuid = /^[0-9a-f-]{36}$/i
  const id = (value: string | undefined, column: string) =>
    value ? (uuid.test(value) ? db`and ${db(column)} = ${value}` : db`and false`) : db``
  const where = db`
    enterprise_id = ${enterpriseId}
    ${id(filters.taskId, 'task_id')}
    ${id(filters.taskVersionId, 'task_version_id')}
    ${filters.status ? db`and status = ${filters.status}` : db``}
    ${filters.live === 'true' ? db`and status in ('pending', 'queued', 'running', 'waiting_on_gate')` : db``}`
  const [rows, [count]] = await Promise.all([
    db<
      RunRow[]
    >`select * from runs where ${where} ${orderBy(db, page, runSortColumns)} limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from runs where ${where}`,
  ])
  return envelope(rows.map(toRun), count!.n, page)
}

/** GET /v1/runs/{id}/log: the full log once stored, else 404 log_not_found. */
export async function getRunLog(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<{ runId: string; body: string }> {
  await loadRun(db, enterpriseId, id)
  const [row] = await db<{ body: string }[]>`select body from run_logs where run_id = ${id}`
  if (!row) throw new ApiError('log_not_found', `Run ${id} has no log stored yet.`)
  return { runId: id, body: row.body }
}

/** GET /v1/runs/{id}/os-tool: status, task, input and the last eight events. */
export async function getOsToolView(db: Db, enterpriseId: string, id: string) {
  const run = await loadRun(db, enterpriseId, id)
  const events = await db<
    { id: string; type: string; payload: Record<string, unknown>; createdAt: Date }[]
  >`
    select * from (select id, type, payload, created_at, seq from run_events where run_id = ${id} order by seq desc limit 8) e
     order by seq`
  return {
    status: run.status,
    task: { id: run.taskId, slug: run.taskSlug, name: run.taskName },
    input: run.input,
    events: events.map((e) => ({
      id: e.id,
      type: e.type,
      payload: e.payload,
      createdAt: e.createdAt.toISOString(),
    })),
  }
}

// --- Blockers (spec: Endpoints Blockers) -------------------------------------------------------------

/**
 * Everything on Blockers by section: failed runs (paged), stopped pipelines (failed runs whose
 * successors therefore never started), blocked and paused runs, and active tasks' warnings.
 */
export async function getBlockers(
  db: Db,
  enterpriseId: string,
  page: PageRequest,
  problems: (db: Db, enterpriseId: string) => Promise<Blockers['taskProblems']>,
): Promise<Blockers> {
  const failedWhere = db`
    enterprise_id = ${enterpriseId} and status = 'failed' and cleared_at is null and stopped_successors is null`
  const [failed, [failedCount], stopped, held, taskProblems] = await Promise.all([
    db<
      RunRow[]
    >`select * from runs where ${failedWhere} order by finished_at desc, id desc limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from runs where ${failedWhere}`,
    db<RunRow[]>`
      select * from runs
       where enterprise_id = ${enterpriseId} and status = 'failed' and cleared_at is null
         and stopped_successors is not null
       order by finished_at desc limit 200`,
    db<RunRow[]>`
      select * from runs where enterprise_id = ${enterpriseId} and status in ('blocked', 'paused_spend')
       order by updated_at desc limit 200`,
    problems(db, enterpriseId),
  ])
  return {
    failed: envelope(failed.map(toRun), failedCount!.n, page),
    stoppedPipelines: stopped.map((r) => ({
      executionId: r.executionId,
      run: toRun(r),
      successorsNotStarted: r.stoppedSuccessors ?? [],
    })),
    blocked: held.filter((r) => r.status === 'blocked').map(toRun),
    paused: held.filter((r) => r.status === 'paused_spend').map(toRun),
    taskProblems,
  }
}

/** POST /v1/blockers/clear with section failed: every failed run off Blockers; answers how many. */
export async function clearFailed(db: Db, enterpriseId: string): Promise<number> {
  const rows = await db`
    update runs set cleared_at = now()
     where enterprise_id = ${enterpriseId} and status = 'failed' and cleared_at is null
     returning id`
  return rows.length
}
