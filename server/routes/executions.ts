import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  Board,
  CloseCompleted,
  Execution,
  ExecutionCounts,
  ExecutionDetail,
  ExecutionFilters,
  ExecutionListQuery,
  ExecutionPage,
  executionSorts,
} from '../../shared/schemas/executions.js'
import { readPage } from '../db/paging.js'
import {
  cancelExecution,
  closeCompleted,
  closeExecution,
  getBoard,
  getCounts,
  listExecutions,
  reopenExecution,
} from '../domain/runs/index.js'
import { executionDetail } from '../domain/retention/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

const ExecutionParams = z.object({ id: Uuid })

/** Executions (spec: Endpoints Executions). Any of an execution's run ids works as its id. */
export function executionRoutes({ sql, config }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'execution_not_found', params: ExecutionParams } as const

  route(
    app,
    {
      operationId: 'listExecutions',
      method: 'get',
      path: '/',
      summary:
        'Executions, paged; sort updatedAt, startedAt, runCount, costUsdCents, status; closed=true for closed ones',
      query: ExecutionListQuery,
      response: ExecutionPage,
    },
    async (c, { query }) =>
      listExecutions(sql, c.var.caller.enterpriseId, query, readPage(query, executionSorts)),
  )

  route(
    app,
    {
      operationId: 'getExecutionBoard',
      method: 'get',
      path: '/board',
      summary: 'Every lane of the board with its open executions',
      query: ExecutionFilters,
      response: Board,
    },
    async (c, { query }) => getBoard(sql, c.var.caller.enterpriseId, query),
  )

  route(
    app,
    {
      operationId: 'getExecutionCounts',
      method: 'get',
      path: '/counts',
      summary: 'Executions and runs running, queued and waiting',
      response: ExecutionCounts,
    },
    async (c) => getCounts(sql, c.var.caller.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'closeCompletedExecutions',
      method: 'post',
      path: '/close-completed',
      summary:
        'Close every execution in the Complete lane under the given filters; answers how many',
      body: CloseCompleted,
      response: z.object({ closed: z.number().int() }),
    },
    async (c, { body }) => ({ closed: await closeCompleted(sql, c.var.caller.enterpriseId, body) }),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getExecution',
      method: 'get',
      path: '/{id}',
      summary:
        'The execution, its runs, their links and the task graph; an archived one too (archived: true)',
      response: ExecutionDetail,
      errors: ['archive_unavailable'],
    },
    // An execution the retention pass archived answers from the archive (archived: true; issue 46).
    async (c, { params }) =>
      executionDetail(sql, config.archiveDir, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'cancelExecution',
      method: 'post',
      path: '/{id}/cancel',
      summary: 'Stop every open run, pending delayed successors too',
      response: Execution,
    },
    async (c, { params }) => cancelExecution(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'closeExecution',
      method: 'post',
      path: '/{id}/close',
      summary: 'Take a finished execution off the board; repeating changes nothing',
      response: Execution,
      errors: ['illegal_transition'],
    },
    async (c, { params }) => closeExecution(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'reopenExecution',
      method: 'post',
      path: '/{id}/reopen',
      summary: 'Put a closed execution back; repeating changes nothing',
      response: Execution,
    },
    async (c, { params }) => reopenExecution(sql, c.var.caller.enterpriseId, params.id),
  )

  return app
}
