import { OrgTree } from '../../shared/schemas/organisation.js'
import { getOrgTree } from '../domain/org/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** The organisation as a tree (spec: Endpoints Organisation). */
export function orgRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  route(
    app,
    {
      operationId: 'getOrganisation',
      method: 'get',
      path: '/',
      summary: 'Teams, their members, the roles each holds, and the tasks of each role',
      response: OrgTree,
    },
    async (c) => getOrgTree(sql, c.var.caller.enterpriseId),
  )
  return app
}
