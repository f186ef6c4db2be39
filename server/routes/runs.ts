import { z } from 'zod'
import { ArchivedQuery, Uuid } from '../../shared/schemas/common.js'
import {
  OsToolView,
  Run,
  RunDetail,
  RunDetailQuery,
  RunListQuery,
  RunLog,
  RunPage,
  runSorts,
} from '../../shared/schemas/runs.js'
import { ForkRequest, RunSteps } from '../../shared/schemas/forks.js'
import { readPage } from '../db/paging.js'
import {
  cancelRun,
  clearRun,
  forkRun,
  getOsToolView,
  listRuns,
  retryRun,
  toRun,
} from '../domain/runs/index.js'
import { archivedByPrefix, runDetail, runLog, runSteps } from '../domain/retention/index.js'
import type { RouteDeps } from '../http/context.js'
import { longPollBound } from '../http/limits.js'
import { createRouter, route } from '../http/router.js'

const RunParams = z.object({ id: Uuid })

/** Runs (spec: Endpoints Runs). */
export function runRoutes({ sql, runWatch, shutdown, config, limits }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'run_not_found', params: RunParams } as const

  route(
    app,
    {
      operationId: 'listRuns',
      method: 'get',
      path: '/',
      summary:
        'Runs, paged, newest first; sort createdAt, status, finishedAt; live=true for unfinished',
      query: RunListQuery,
      response: RunPage,
    },
    async (c, { query }) =>
      listRuns(sql, c.var.caller.enterpriseId, query, readPage(query, runSorts)),
  )

  route(
    app,
    {
      operationId: 'findArchivedRuns',
      method: 'get',
      path: '/archived',
      summary:
        'The archived runs whose id starts with idPrefix (20 at most), which no list shows (beyond the spec)',
      description:
        'What osctl names a run by, its first characters, finds an archived run here: the lists show live runs only (issue 46).',
      query: ArchivedQuery('archived runs'),
      response: z.array(Run),
      errors: ['archive_unavailable'],
    },
    async (c, { query }) =>
      archivedByPrefix(sql, config.archiveDir, c.var.caller.enterpriseId, 'run', query.idPrefix),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getRun',
      method: 'get',
      path: '/{id}',
      summary:
        'The run, its events, gates, task, version, neighbours, execution and cost; an archived run too (archived: true)',
      description:
        'afterEventId returns only later events. With waitSeconds (up to 30, beyond the spec) the answer is held until such an event exists, so callers follow a run without polling. ' +
        longPollBound,
      query: RunDetailQuery,
      response: RunDetail,
      errors: ['archive_unavailable'],
    },
    async (c, { params, query }) =>
      // Held within the caller's share of long-polls (limits.ts), else answered at once.
      limits.longPoll(c, query.waitSeconds, (waitSeconds) =>
        // A run the retention pass archived answers from the archive (archived: true; issue 46).
        runDetail(
          sql,
          config.archiveDir,
          c.var.caller.enterpriseId,
          params.id,
          { ...query, waitSeconds },
          { watch: runWatch, signal: shutdown },
        ),
      ),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getRunLog',
      method: 'get',
      path: '/{id}/log',
      summary: 'The full log, once stored',
      response: RunLog,
      errors: ['log_not_found', 'archive_unavailable'],
    },
    async (c, { params }) => runLog(sql, config.archiveDir, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getRunOsTool',
      method: 'get',
      path: '/{id}/os-tool',
      summary: 'Status, task, input and the last eight events',
      response: OsToolView,
    },
    async (c, { params }) => getOsToolView(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'cancelRun',
      method: 'post',
      path: '/{id}/cancel',
      summary: 'Cancel a run that has not ended; an ended one is 409 illegal_transition',
      response: Run,
      errors: ['illegal_transition'],
    },
    async (c, { params }) =>
      toRun(await cancelRun(sql, c.var.caller.enterpriseId, params.id, c.var.caller.actor)),
  )

  route(
    app,
    {
      ...common,
      operationId: 'retryRun',
      method: 'post',
      path: '/{id}/retry',
      summary:
        "A new pending run on the task's current version, its input carrying priorRunId; repeated while it is pending, the same run",
      status: 201,
      response: Run,
      otherAnswers: {
        200: { description: 'repeated while the retry is still pending: that run', schema: Run },
      },
      errors: ['task_not_found', 'task_not_runnable'],
    },
    async (c, { params }) => {
      const { run, created } = await retryRun(
        sql,
        c.var.caller.enterpriseId,
        params.id,
        c.var.caller.actor,
      )
      return created ? toRun(run) : c.json(toRun(run), 200)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'listRunSteps',
      method: 'get',
      path: '/{id}/steps',
      summary:
        "The run's journal as numbered steps (model call, tool call, gate): what each was, cost and took, and whether a fork may go on from it; an archived run's too (none forkable)",
      response: RunSteps,
      errors: ['archive_unavailable'],
    },
    async (c, { params }) => runSteps(sql, config.archiveDir, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'forkRun',
      method: 'post',
      path: '/{id}/fork',
      summary:
        'A new pending run of the same task and input whose steps before fromStep are copied from this run at no cost, going on live from fromStep',
      description:
        "No model or tool call of the copied steps is made again, nor counted (cost 0, no usage). On the run's own version unless versionId names another of its task's; a version other than the task's current one also needs tasks:write (403 api_token_scope). modelTier sets the tier of its model calls. 400 fork_step_invalid names why a step cannot be a fork point: out of range, a step before it not ended, or a gated call waiting for its decision at or before it.",
      body: ForkRequest,
      status: 201,
      response: Run,
      errors: [
        'fork_step_invalid',
        'version_not_found',
        'task_not_found',
        'task_not_runnable',
        'api_token_scope',
      ],
    },
    async (c, { params, body }) => {
      const { enterpriseId, actor, scopes } = c.var.caller
      // Running a version the task no longer runs is tasks:write's, as making a version is.
      const mayRunOtherVersions = scopes.has('tasks:write')
      return toRun(await forkRun(sql, enterpriseId, params.id, body, actor, mayRunOtherVersions))
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'clearRun',
      method: 'post',
      path: '/{id}/clear',
      summary:
        'Take a failed run or a stopped pipeline off Blockers; a second call changes nothing',
      response: Run,
      errors: ['illegal_transition'],
    },
    async (c, { params }) => toRun(await clearRun(sql, c.var.caller.enterpriseId, params.id)),
  )

  return app
}
