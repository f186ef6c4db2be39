import { SpendCapInput, SpendEnabledInput, SpendView } from '../../shared/schemas/spend.js'
import { getSpend, setCap, setEnabled } from '../domain/models/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Spend (spec: Endpoints Spend). */
export function spendRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  route(
    app,
    {
      operationId: 'getSpend',
      method: 'get',
      path: '/',
      summary: "Today's spend and runs by layer, every cap, and whether limits are on",
      response: SpendView,
    },
    async (c) => getSpend(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      operationId: 'setSpendCap',
      method: 'patch',
      path: '/caps',
      summary:
        'Set a daily cap in cents on a layer (enterprise, team, task, member); null removes it; raising queues paused runs again',
      body: SpendCapInput,
      response: SpendView,
      errors: ['enterprise_not_found', 'team_not_found', 'member_not_found', 'task_not_found'],
    },
    async (c, { body }) => setCap(sql, c.var.caller.enterpriseId, body),
  )
  route(
    app,
    {
      operationId: 'setSpendEnabled',
      method: 'patch',
      path: '/enabled',
      summary: 'Turn spend limits on or off; off queues paused runs again',
      body: SpendEnabledInput,
      response: SpendView,
    },
    async (c, { body }) => setEnabled(sql, c.var.caller.enterpriseId, body.enabled),
  )
  return app
}
