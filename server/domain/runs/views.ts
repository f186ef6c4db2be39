import type { Paged } from '../../../shared/schemas/common.js'
import { ApiError } from '../../../shared/errors.js'
import type { Blockers, Run, RunDetail, RunRef, runSorts } from '../../../shared/schemas/runs.js'
import { envelope, idFilter, idPrefixFilter, orderBy, type PageRequest } from '../../db/paging.js'
import type { Db, Fragment } from '../../db/sql.js'
import { longPoll, type LongPollWait } from '../long-poll/index.js'
import { listRunGates } from './gates.js'
import { forksOf } from './forks.js'
import { modelCallTotals } from './journal.js'
import { listEvents, toEvent, type EventRow } from './events.js'
import { withPauses } from './pausing.js'
import { isFinished, loadRun, toRun, type RunRow } from './rows.js'

// What is read about runs: a run with everything around it, lists, logs, the os tool's view, and
// Blockers (spec: Endpoints Runs, Blockers).

const refOf = (r: RunRow): RunRef => ({
  id: r.id,
  status: r.status,
  taskId: r.taskId,
  taskSlug: r.taskSlug,
  createdAt: r.createdAt.toISOString(),
})

/**
 * GET /v1/runs/{id} (spec: Run): the run, its events (after afterEventId), its gates, the task and
 * version it ran, what came before and after it, its execution and its cost. With afterEventId and
 * waitSeconds (up to 30; DESIGN 5) and a `wait`, the answer is held until an event after that one
 * exists.
 */
export async function getRunDetail(
  db: Db,
  enterpriseId: string,
  id: string,
  query: { afterEventId?: string; waitSeconds?: number } = {},
  wait?: LongPollWait,
): Promise<RunDetail> {
  const after = query.afterEventId
  return longPoll({
    key: id,
    waitSeconds: after ? query.waitSeconds : undefined,
    wait,
    read: () => readRunDetail(db, enterpriseId, id, after),
    // A finished run has no event to come: it answers at once, whatever waitSeconds asks (issue 51).
    answers: (detail) => detail.events.length > 0 || isFinished(detail.run.status),
    // The run is the caller's (the first read found it); until its next event only its events are read.
    changed: async () => (await listEvents(db, id, after)).length > 0,
  })
}

async function readRunDetail(
  db: Db,
  enterpriseId: string,
  id: string,
  afterEventId: string | undefined,
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
    modelCallTotals(db, id),
    // Why it waits, when its task or enterprise is paused (issue 50): set on the row for toRun.
    withPauses(db, enterpriseId, [run]),
  ])
  const forks = forksOf(nextRuns)
  return {
    run: toRun(run),
    events,
    gates,
    task: task[0] ?? null,
    version: version[0] ?? null,
    previous: previous[0] ? refOf(previous[0]) : null,
    next: nextRuns.map(refOf),
    execution: { id: run.executionId, runCount: execution[0]!.n },
    cost: {
      usdCents: run.costUsdMicros / 10_000,
      unpriced: (run.unpricedCalls ?? 0) > 0,
      ...calls,
    },
    ...(forks.length ? { forks } : {}),
  }
}

type RunSort = (typeof runSorts)[number]
const runSortColumns: Record<RunSort, string> = {
  createdAt: 'created_at',
  status: 'status',
  finishedAt: 'finished_at',
}

export interface RunFilters {
  /** Only runs whose id starts with this (issue 51; the route checked it). */
  idPrefix?: string
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
  // A prefix reads its range of the primary key first, fenced (offset 0) so that the planner plans it on
  // its own: with the enterprise's condition beside it, a plan from stale statistics read every run of
  // the enterprise through runs_task and filtered them (DESIGN 14; test/server/db/plans.test.ts).
  const runs = filters.idPrefix
    ? db`(select * from runs where true ${idPrefixFilter(db, 'id', filters.idPrefix)} offset 0) runs`
    : db`runs`
  const where = db`
    enterprise_id = ${enterpriseId}
    ${idFilter(db, 'task_id', filters.taskId)}
    ${idFilter(db, 'task_version_id', filters.taskVersionId)}
    ${filters.status ? db`and status = ${filters.status}` : db``}
    ${filters.live === 'true' ? db`and status in ('pending', 'queued', 'running', 'waiting_on_gate')` : db``}`
  const [rows, [count]] = await Promise.all([
    db<
      RunRow[]
    >`select * from ${runs} where ${where} ${orderBy(db, page, runSortColumns, 'id', ['createdAt', 'status'])} limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from ${runs} where ${where}`,
  ])
  return envelope((await withPauses(db, enterpriseId, rows)).map(toRun), count!.n, page)
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
  const events = await db<EventRow[]>`
    select * from (select id, type, payload, created_at, seq from run_events where run_id = ${id} order by seq desc limit 8) e
     order by seq`
  return {
    status: run.status,
    task: { id: run.taskId, slug: run.taskSlug, name: run.taskName },
    input: run.input,
    events: events.map(toEvent),
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
  const failedWhere = failedSection(db, enterpriseId)
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

/**
 * POST /v1/blockers/clear with section failed: every run of the failed section off Blockers; answers
 * how many. Stopped pipelines are a section of their own, each cleared by POST /v1/runs/{id}/clear.
 */
export async function clearFailed(db: Db, enterpriseId: string): Promise<number> {
  const rows = await db`
    update runs set cleared_at = now() where ${failedSection(db, enterpriseId)} returning id`
  return rows.length
}

/** The runs of the failed section of Blockers: failed, not cleared, not a stopped pipeline. */
function failedSection(db: Db, enterpriseId: string): Fragment {
  return db`
    enterprise_id = ${enterpriseId} and status = 'failed' and cleared_at is null and stopped_successors is null`
}
