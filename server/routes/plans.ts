import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import { Plan, PlanDetail } from '../../shared/schemas/plans.js'
import { getPlan, listPlans } from '../domain/runs/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Plans (spec: Plans (planned)): what runs wrote with os.write_plan. */
export function planRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  route(
    app,
    {
      operationId: 'listPlans',
      method: 'get',
      path: '/',
      summary: 'Plans, newest first; filters status, kind, chatSessionId, producedByRunId',
      query: z.object({
        status: z.string().optional(),
        kind: z.string().optional(),
        chatSessionId: z.string().optional(),
        producedByRunId: z.string().optional(),
      }),
      response: z.array(Plan),
    },
    async (c, { query }) => listPlans(sql, c.var.caller.enterpriseId, query),
  )
  route(
    app,
    {
      operationId: 'getPlan',
      method: 'get',
      path: '/{id}',
      summary: 'One plan, its items, the run and the gates behind it',
      params: z.object({ id: Uuid }),
      notFound: 'plan_not_found',
      response: PlanDetail,
    },
    async (c, { params }) => getPlan(sql, c.var.caller.enterpriseId, params.id),
  )
  return app
}
