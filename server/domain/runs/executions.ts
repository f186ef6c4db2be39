import { ApiError } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import {
  boardLanes,
  type Board,
  type Execution,
  type ExecutionDetail,
  type ExecutionStatus,
  type executionSorts,
} from '../../../shared/schemas/executions.js'
import { unfinishedStatuses, type RunStatus } from '../../../shared/schemas/runs.js'
import type { Successor } from '../../../shared/schemas/tasks.js'
import { envelope, idPrefixFilter, orderBy, type PageRequest } from '../../db/paging.js'
import { literalIn, transaction, type Db, type Fragment } from '../../db/sql.js'
import { finishAll } from './ends.js'
import { isFinished, toRun, type RunRow } from './rows.js'
import { isUuid } from '../../../shared/ids.js'
import { pausesInForce } from '../pauses/index.js'

// Executions (spec: Concepts; Endpoints Executions; DESIGN 5): the runs linked by successors and
// retries. An execution's id is its first run's id; its status, cost and updatedAt derive from its runs.
// Refused starts (skipped_overlap) are runs of no execution anyone follows, so they are left out.

interface ExecutionRow {
  id: string
  status: ExecutionStatus
  closedAt: Date | null
  startedAt: Date
  updatedAt: Date
  runCount: number
  costMicros: number
  taskId: string
  taskSlug: string
  lastRunId: string
  lastStatus: RunStatus
  lastTaskId: string
  lastTaskSlug: string
  lastCreatedAt: Date
  teamIds: string[] | null
  memberIds: string[] | null
}

function toExecution(row: ExecutionRow): Execution {
  return {
    id: row.id,
    status: row.status,
    closed: row.closedAt !== null,
    closedAt: row.closedAt?.toISOString() ?? null,
    startedAt: row.startedAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    runCount: row.runCount,
    costUsdCents: row.costMicros / 10_000,
    taskId: row.taskId,
    taskSlug: row.taskSlug,
    lastRun: {
      id: row.lastRunId,
      status: row.lastStatus,
      taskId: row.lastTaskId,
      taskSlug: row.lastTaskSlug,
      createdAt: row.lastCreatedAt.toISOString(),
    },
    teamIds: row.teamIds ?? [],
    memberIds: row.memberIds ?? [],
  }
}

/**
 * The enterprise's executions as rows, derived from their runs, filtered by `where` (over the derived
 * columns). Status: any run running, else any at a gate (waiting), else any held (blocked), else any
 * pending or queued, else how the latest run ended.
 */
function executions(
  db: Db,
  enterpriseId: string,
  where: Fragment,
  tail: Fragment = db``,
  /** On the runs read, before they are grouped: an idPrefix of the execution's id (issue 51). */
  runs: Fragment = db``,
  /**
   * The executions wanted, as an array of their ids (`array(select ...)`, repeats allowed): only their
   * runs are read, each execution's through runs_execution, fenced (offset 0) so that neither the
   * enterprise's condition beside it nor `= any` of an array the planner cannot size makes a plan from
   * stale statistics read every run of the enterprise or of the table instead (DESIGN 14).
   */
  among?: Fragment,
) {
  return db<ExecutionRow[]>`
    with agg as (
      select r.execution_id as id,
             min(r.created_at) as started_at,
             max(r.updated_at) as updated_at,
             count(*)::int as run_count,
             sum(r.cost_usd_micros)::bigint as cost_micros,
             bool_or(r.status = 'running') as any_running,
             bool_or(r.status = 'waiting_on_gate') as any_waiting,
             bool_or(r.status in ('blocked', 'paused_spend')) as any_blocked,
             bool_or(r.status in ('pending', 'queued')) as any_queued,
             (array_agg(r.id order by r.created_at desc, r.id desc))[1] as last_run_id,
             array_agg(distinct r.team_id) filter (where r.team_id is not null) as team_ids,
             array_agg(distinct r.member_id) filter (where r.member_id is not null) as member_ids
        from ${
          among
            ? db`(select runs.* from (select distinct unnest(${among}) as id) wanted,
                   lateral (select * from runs where execution_id = wanted.id offset 0) runs)`
            : db`runs`
        } r
       where r.enterprise_id = ${enterpriseId} and r.status <> 'skipped_overlap' ${runs}
       group by r.execution_id
    ), ex as (
      select agg.*, last.status as last_status, last.task_id as last_task_id, last.task_slug as last_task_slug,
             last.created_at as last_created_at, first.task_id, first.task_slug, c.closed_at,
             case when any_running then 'running'
                  when any_waiting then 'waiting'
                  when any_blocked then 'blocked'
                  when any_queued then 'queued'
                  when last.status = 'failed' then 'failed'
                  when last.status = 'cancelled' then 'cancelled'
                  else 'complete' end as status
        from agg
        join runs last on last.id = agg.last_run_id
        join runs first on first.id = agg.id
        left join execution_closures c on c.execution_id = agg.id
    )
    select * from ex where ${where} ${tail}`
}

/** How an execution ends: the board's finished lanes; the others have a run not ended. */
const finishedExecution: ExecutionStatus[] = ['failed', 'cancelled', 'complete']

type ExecutionSort = (typeof executionSorts)[number]
const sortColumns: Record<ExecutionSort, string> = {
  updatedAt: 'updated_at',
  startedAt: 'started_at',
  runCount: 'run_count',
  costUsdCents: 'cost_micros',
  status: 'status',
}

export interface ExecutionFilters {
  /** Only executions whose id starts with this (GET /v1/executions; issue 51). */
  idPrefix?: string
  teamId?: string
  memberId?: string
  status?: string
  closed?: string
}

function filterFragment(db: Db, filters: ExecutionFilters): Fragment {
  const idIn = (value: string | undefined, column: string) =>
    value ? (isUuid(value) ? db`and ${value}::uuid = any(${db(column)})` : db`and false`) : db``
  return db`
    ${filters.closed === 'true' ? db`closed_at is not null` : db`closed_at is null`}
    ${idIn(filters.teamId, 'team_ids')}
    ${idIn(filters.memberId, 'member_ids')}
    ${filters.status ? db`and status = ${filters.status}` : db``}`
}

export async function listExecutions(
  db: Db,
  enterpriseId: string,
  filters: ExecutionFilters,
  page: PageRequest<ExecutionSort>,
): Promise<Paged<Execution>> {
  // An execution's id is its first run's: every run of it carries it (execution_id).
  const prefix = idPrefixFilter(db, 'r.execution_id', filters.idPrefix)
  if (!filters.status && page.sort !== 'status') {
    // What the page's order and the filters need of every execution, its status aside, needs no
    // ordered aggregate and none of its runs joined: the page's ids are taken from that and only
    // their executions are read whole, and the total counts it. Both are one pass over the
    // enterprise's runs: executions() for every execution cost five times as much (bench:views).
    const idIn = (value: string | undefined, column: string) =>
      value
        ? isUuid(value)
          ? db`and bool_or(${db(column)} = ${value}::uuid)`
          : db`and false`
        : db``
    const keys = db`
      select r.execution_id as id, min(r.created_at) as started_at, max(r.updated_at) as updated_at,
             count(*)::int as run_count, sum(r.cost_usd_micros)::bigint as cost_micros
        from runs r
       where r.enterprise_id = ${enterpriseId} and r.status <> 'skipped_overlap' ${prefix}
       group by r.execution_id
      having true ${idIn(filters.teamId, 'r.team_id')} ${idIn(filters.memberId, 'r.member_id')}`
    const closed = db`${filters.closed === 'true' ? db`` : db`not`} exists (
      select from execution_closures c where c.execution_id = k.id)`
    const [rows, [count]] = await Promise.all([
      executions(
        db,
        enterpriseId,
        db`true`,
        orderBy(db, page, sortColumns),
        db``,
        db`array(
          select id from (${keys}) k where ${closed}
          ${orderBy(db, page, sortColumns)} limit ${page.limit} offset ${page.offset})`,
      ),
      db<{ n: number }[]>`select count(*)::int as n from (${keys}) k where ${closed}`,
    ])
    return envelope(rows.map(toExecution), count!.n, page)
  }
  // An execution running, waiting, blocked or queued has a run not ended: only the executions of
  // those runs are read (runs_open), as the counts and the board's open lanes are. A finished status
  // or the order by status needs every execution.
  const among =
    filters.status && !finishedExecution.includes(filters.status as ExecutionStatus)
      ? openExecutions(db, enterpriseId)
      : undefined
  const [rows, [count]] = await Promise.all([
    executions(
      db,
      enterpriseId,
      filterFragment(db, filters),
      db`${orderBy(db, page, sortColumns)} limit ${page.limit} offset ${page.offset}`,
      prefix,
      among,
    ),
    db<{ n: number }[]>`
      select count(*)::int as n
        from (${executions(db, enterpriseId, filterFragment(db, filters), db``, prefix, among)}) e`,
  ])
  return envelope(rows.map(toExecution), count!.n, page)
}

/** The executions of an open run, for executions() `among`: found through runs_open. */
function openExecutions(db: Db, enterpriseId: string): Fragment {
  return db`array(
    select execution_id from runs where enterprise_id = ${enterpriseId} and ${literalIn(db, 'status', unfinishedStatuses)})`
}

const laneSize = 100

/**
 * The rows of the board's finished lanes (not closed, under the filters), at most 100 a lane, most
 * recently moved first. An execution moved last when its latest run did, so the executions that moved
 * at or after a run's updated_at are those of the runs at or after it: runs_enterprise_updated is
 * walked down from the newest, 1,000 runs and then eight times as many each time, until each lane has
 * its 100 among the executions that moved since, or every run is read; past 64,000 runs (a lane that
 * holds fewer than 100, a filter that matches few) every execution is read, as before. Closed
 * executions are left out before their runs are read, each walked run's probed (a fenced `not
 * exists`: joined, the planner read every closure of the enterprise).
 */
async function finishedLaneRows(
  db: Db,
  enterpriseId: string,
  where: Fragment,
  lanes: ExecutionStatus[],
): Promise<ExecutionRow[]> {
  if (!lanes.length) return []
  for (let limit = 1000; ; limit *= 8) {
    const last = limit > 64_000
    const [edge] = last
      ? [{ walked: 0, since: null }]
      : await db<{ walked: number; since: Date | null }[]>`
          select count(*)::int as walked, min(updated_at) as since from (
            select updated_at from runs
             where enterprise_id = ${enterpriseId} and status <> 'skipped_overlap'
             order by updated_at desc limit ${limit}) w`
    // Past 64,000, every execution is read, as executions() reads them for the list.
    const among = last
      ? undefined
      : db`array(
          select w.execution_id from runs w
           where w.enterprise_id = ${enterpriseId} and w.updated_at >= ${edge!.since}
             and w.status <> 'skipped_overlap'
             and not exists (
               select from execution_closures c where c.execution_id = w.execution_id offset 0))`
    const rows = await db<ExecutionRow[]>`
      select * from (
        select e.*, row_number() over (partition by e.status order by e.updated_at desc, e.id desc) as lane_rank
          from (${executions(
            db,
            enterpriseId,
            db`${literalIn(db, 'status', lanes)} and ${where}`,
            db``,
            db``,
            among,
          )}) e) l
       where lane_rank <= ${laneSize}
       order by updated_at desc, id desc`
    if (last || !edge!.since || edge!.walked < limit) return rows
    if (lanes.every((lane) => rows.filter((r) => r.status === lane).length >= laneSize)) return rows
  }
}

/** Every lane of the board, each with its open executions, most recently moved first (at most 100 a lane). */
export async function getBoard(
  db: Db,
  enterpriseId: string,
  filters: ExecutionFilters,
): Promise<Board> {
  const where = filterFragment(db, { ...filters, closed: undefined })
  // An execution is running, waiting, blocked or queued only while one of its runs is open.
  const wanted = finishedExecution.filter((lane) => !filters.status || filters.status === lane)
  // The two sets share no lane, and each comes in the board's order.
  const [open, finished, pauses] = await Promise.all([
    executions(
      db,
      enterpriseId,
      where,
      db`order by updated_at desc, id desc`,
      db``,
      openExecutions(db, enterpriseId),
    ),
    finishedLaneRows(db, enterpriseId, where, wanted),
    pausesInForce(db, enterpriseId),
  ])
  const rows = [...open, ...finished]
  // Why an execution waits when its last run's task or the enterprise is paused (issue 50).
  const own = pauses.find((p) => p.taskId === null)
  const pauseOf = (row: ExecutionRow) => {
    if (finishedExecution.includes(row.status)) return {}
    const pause = own ?? pauses.find((p) => p.taskId === row.lastTaskId)
    if (!pause) return {}
    const scope = pause.taskId ? ('task' as const) : ('enterprise' as const)
    const at = pause.pausedAt.toISOString()
    return { paused: { scope, at, by: pause.pausedBy, reason: pause.reason } }
  }
  return {
    lanes: boardLanes.map((lane) => ({
      lane,
      executions: rows
        .filter((r) => r.status === lane)
        .slice(0, laneSize)
        .map((row) => ({ ...toExecution(row), ...pauseOf(row) })),
    })),
  }
}

/** Executions and runs running, queued (pending or queued) and waiting (at a gate). */
export async function getCounts(db: Db, enterpriseId: string) {
  const [[runs], [execs]] = await Promise.all([
    db<{ running: number; queued: number; waiting: number }[]>`
      select count(*) filter (where status = 'running')::int as running,
             count(*) filter (where status in ('pending', 'queued'))::int as queued,
             count(*) filter (where status = 'waiting_on_gate')::int as waiting
        from runs where enterprise_id = ${enterpriseId} and status in ('running', 'pending', 'queued', 'waiting_on_gate')`,
    // Only an execution with an open run is running, queued or waiting.
    db<{ running: number; queued: number; waiting: number }[]>`
      select count(*) filter (where status = 'running')::int as running,
             count(*) filter (where status = 'queued')::int as queued,
             count(*) filter (where status = 'waiting')::int as waiting
        from (${executions(db, enterpriseId, db`status in ('running', 'queued', 'waiting')`, db``, db``, openExecutions(db, enterpriseId))}) e`,
  ])
  return { executions: execs!, runs: runs! }
}

/**
 * The execution a run belongs to; any of its run ids and its own id find it. Its own id is its first
 * run's, which may be a refused start that a retry carried on from, so it is matched as an execution id
 * too.
 */
async function executionIdOf(db: Db, enterpriseId: string, id: string): Promise<string> {
  const [row] = await db<{ executionId: string }[]>`
    select execution_id from runs
     where enterprise_id = ${enterpriseId} and (id = ${id} or execution_id = ${id})
       and status <> 'skipped_overlap'
     limit 1`
  if (!row)
    throw new ApiError('execution_not_found', `No execution with the run ${id} in this enterprise.`)
  return row.executionId
}

export async function getExecution(db: Db, enterpriseId: string, id: string): Promise<Execution> {
  return executionById(db, enterpriseId, await executionIdOf(db, enterpriseId, id))
}

/** An execution by its own id, once executionIdOf found it. */
async function executionById(db: Db, enterpriseId: string, executionId: string) {
  const [row] = await executions(db, enterpriseId, db`id = ${executionId}`)
  return toExecution(row!)
}

/** The execution, its runs, the links between them, and the task graph of the successors involved. */
export async function getExecutionDetail(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<ExecutionDetail> {
  const execution = await getExecution(db, enterpriseId, id)
  const runs = await db<RunRow[]>`
    select * from runs where execution_id = ${execution.id} and status <> 'skipped_overlap' order by created_at, id`
  return executionDetailOf(db, enterpriseId, execution, runs)
}

/**
 * An execution's detail from its runs (oldest first): the links between them, and the task graph of
 * the successors involved, read from their versions and the enterprise's tasks as they are now. A live
 * execution's and an archived one's (domain/retention/read.ts).
 */
export async function executionDetailOf(
  db: Db,
  enterpriseId: string,
  execution: Execution,
  runs: RunRow[],
): Promise<ExecutionDetail> {
  const versionIds = [...new Set(runs.map((r) => r.taskVersionId))]
  const versions = await db<{ id: string; taskId: string; successors: Successor[] | null }[]>`
    select v.id, v.task_id, v.definition -> 'successors' as successors
      from task_versions v where v.id = any(${db.array(versionIds)}::uuid[])`
  const slugOfVersion = new Map(runs.map((r) => [r.taskVersionId, r.taskSlug]))
  const edges = versions.flatMap((v) =>
    (v.successors ?? []).map((s) => ({
      from: slugOfVersion.get(v.id)!,
      to: s.slug,
      on: s.on ?? 'succeeded',
      when: typeof s.when === 'string' ? s.when : null,
      delayMinutes: typeof s.delayMinutes === 'number' ? s.delayMinutes : null,
    })),
  )
  const slugs = [...new Set([...runs.map((r) => r.taskSlug), ...edges.map((e) => e.to)])]
  const tasks = await db<{ id: string; slug: string; name: string }[]>`
    select id, slug, name from tasks where enterprise_id = ${enterpriseId} and slug = any(${db.array(slugs)}::text[])
     order by slug`
  return {
    execution,
    runs: runs.map(toRun),
    links: runs
      .filter((r) => r.previousRunId)
      .map((r) => ({
        from: r.previousRunId!,
        to: r.id,
        kind:
          r.origin === 'retry' || r.origin === 'fork'
            ? (r.origin as 'retry' | 'fork')
            : ('successor' as const),
      })),
    graph: {
      tasks,
      edges: [...new Map(edges.map((e) => [`${e.from}>${e.to}>${e.on}`, e])).values()],
    },
  }
}

/**
 * An execution as the board derives it (executions above, in SQL), from its runs held here: an
 * archived execution's, whose runs are no longer in the table the SQL reads. Status: any run running,
 * else any at a gate, else any held, else any pending or queued, else how the latest run ended.
 */
export function executionOfRuns(runs: RunRow[], closedAt: Date | null): Execution {
  const counted = runs.filter((r) => r.status !== 'skipped_overlap')
  const byAge = [...counted].sort(
    (a, b) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : 1),
  )
  const first = runs.find((r) => r.id === r.executionId) ?? byAge[0]!
  const last = byAge[byAge.length - 1]!
  const any = (...statuses: RunStatus[]) => counted.some((r) => statuses.includes(r.status))
  const status: ExecutionStatus = any('running')
    ? 'running'
    : any('waiting_on_gate')
      ? 'waiting'
      : any('blocked', 'paused_spend')
        ? 'blocked'
        : any('pending', 'queued')
          ? 'queued'
          : last.status === 'failed' || last.status === 'cancelled'
            ? last.status
            : 'complete'
  const distinct = (ids: (string | null)[]) =>
    [...new Set(ids.filter((id): id is string => id !== null))].sort()
  return toExecution({
    id: first.executionId,
    status,
    closedAt,
    startedAt: byAge[0]!.createdAt,
    updatedAt: new Date(Math.max(...counted.map((r) => r.updatedAt.getTime()))),
    runCount: counted.length,
    costMicros: counted.reduce((sum, r) => sum + Number(r.costUsdMicros), 0),
    taskId: first.taskId,
    taskSlug: first.taskSlug,
    lastRunId: last.id,
    lastStatus: last.status,
    lastTaskId: last.taskId,
    lastTaskSlug: last.taskSlug,
    lastCreatedAt: last.createdAt,
    teamIds: distinct(counted.map((r) => r.teamId)),
    memberIds: distinct(counted.map((r) => r.memberId)),
  })
}

/**
 * Stops every open run of the execution, pending delayed successors too; the stopped runs start no
 * successors of their own.
 */
export async function cancelExecution(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<Execution> {
  const executionId = await executionIdOf(db, enterpriseId, id)
  await transaction(db, async (tx) => {
    // Locked in id order, as every locker of several runs locks them (docs/locks.md).
    const open = await tx<RunRow[]>`
      select * from runs where execution_id = ${executionId} order by id for no key update`
    await finishAll(
      tx,
      'cancelled',
      open
        .filter((run) => !isFinished(run.status))
        .map((run) => ({ run, fields: { reason: 'The execution was cancelled.' } })),
      { stopping: true },
    )
  })
  return executionById(db, enterpriseId, executionId)
}

/** Takes a finished execution off the board; repeating changes nothing. */
export async function closeExecution(db: Db, enterpriseId: string, id: string): Promise<Execution> {
  const execution = await getExecution(db, enterpriseId, id)
  if (!finishedExecution.includes(execution.status)) {
    throw new ApiError(
      'illegal_transition',
      `Execution ${execution.id} is ${execution.status}; only a finished one closes.`,
      {
        status: execution.status,
      },
    )
  }
  await db`
    insert into execution_closures (execution_id, enterprise_id) values (${execution.id}, ${enterpriseId})
    on conflict do nothing`
  return executionById(db, enterpriseId, execution.id)
}

/** Puts a closed execution back on the board; repeating changes nothing. */
export async function reopenExecution(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<Execution> {
  const executionId = await executionIdOf(db, enterpriseId, id)
  await db`delete from execution_closures where enterprise_id = ${enterpriseId} and execution_id = ${executionId}`
  return executionById(db, enterpriseId, executionId)
}

/** Closes every execution of the Complete lane under the filters; answers how many. */
export async function closeCompleted(
  db: Db,
  enterpriseId: string,
  filters: { teamId?: string; memberId?: string },
): Promise<number> {
  const rows = await db`
    insert into execution_closures (execution_id, enterprise_id)
    select id, ${enterpriseId}::uuid from (${executions(db, enterpriseId, db`${filterFragment(db, { ...filters, status: 'complete' })}`)}) e
    on conflict do nothing
    returning execution_id`
  return rows.length
}
