import { Blockers, BlockersClear, BlockersQuery } from '../../shared/schemas/runs.js'
import { z } from 'zod'
import { readPage } from '../db/paging.js'
import { clearFailed, getBlockers } from '../domain/runs/index.js'
import { taskProblems } from '../domain/tasks/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Blockers (spec: Endpoints Blockers). */
export function blockerRoutes({ sql }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'getBlockers',
      method: 'get',
      path: '/',
      summary:
        "Everything on Blockers by section; failed runs paged by failedPage and pageSize; active tasks' warnings under taskProblems",
      query: BlockersQuery,
      response: Blockers,
    },
    async (c, { query }) => {
      const page = readPage({ page: query.failedPage, limit: query.pageSize }, ['finishedAt'])
      return getBlockers(sql, c.var.caller.enterpriseId, page, taskProblems)
    },
  )

  route(
    app,
    {
      operationId: 'clearFailedRuns',
      method: 'post',
      path: '/clear',
      summary: 'Take every failed run off Blockers (section failed); answers how many',
      body: BlockersClear,
      response: z.object({ section: z.literal('failed'), cleared: z.number().int() }),
    },
    async (c) => ({
      section: 'failed' as const,
      cleared: await clearFailed(sql, c.var.caller.enterpriseId),
    }),
  )

  return app
}
