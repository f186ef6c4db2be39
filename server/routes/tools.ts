import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  SignIn,
  ToolConnection,
  ToolConnectionCreate,
  ToolConnectionPatch,
  ToolConnectionQuery,
  ToolOAuthStart,
} from '../../shared/schemas/tools.js'
import {
  createToolConnection,
  deleteToolConnection,
  forgetSignIn,
  listSignIns,
  listToolConnections,
  startToolOAuth,
  updateToolConnection,
} from '../domain/tool-connections.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Tool connections (spec: Endpoints Tools): tokens are kept encrypted and never answered. */
export function toolRoutes({ sql, sealer, config }: RouteDeps) {
  const app = createRouter()
  const byId = { params: z.object({ id: Uuid }), notFound: 'tool_connection_not_found' } as const
  const redirectUri = (c: AppContext) =>
    `${config.publicUrl ?? `${new URL(c.req.url).origin}/v1`}/tools/oauth/callback`

  route(
    app,
    {
      operationId: 'listToolBindings',
      method: 'get',
      path: '/bindings',
      summary: 'Tool connections, without secrets; query layer, layerId',
      query: ToolConnectionQuery,
      response: z.array(ToolConnection),
      errors: [
        'enterprise_not_found',
        'team_not_found',
        'member_not_found',
        'role_not_found',
        'task_not_found',
      ],
    },
    async (c, { query }) => listToolConnections(sql, c.var.caller.enterpriseId, query),
  )
  route(
    app,
    {
      operationId: 'createToolBinding',
      method: 'post',
      path: '/bindings',
      summary:
        "Connect a tool on a team, member, role or task: a tool server's url and token, or a browser system's sites and start page",
      description:
        'A token may not connect on the enterprise, nor set a mustGate list (403 ceo_bind_only). A connection named vcs starts with vcs.merge_pull_request on its mustGate.',
      body: ToolConnectionCreate,
      status: 201,
      response: ToolConnection,
      errors: [
        'ceo_bind_only',
        'team_not_found',
        'member_not_found',
        'role_not_found',
        'task_not_found',
      ],
    },
    async (c, { body }) => createToolConnection(sql, sealer, c.var.caller.enterpriseId, body),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'updateToolBinding',
      method: 'patch',
      path: '/bindings/{id}',
      summary:
        'Change a connection or move it to another layer; only the chief executive may change mustGate',
      body: ToolConnectionPatch,
      response: ToolConnection,
      errors: ['ceo_bind_only'],
    },
    async (c, { params, body }) =>
      updateToolConnection(sql, sealer, c.var.caller.enterpriseId, params.id, body),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'deleteToolBinding',
      method: 'delete',
      path: '/bindings/{id}',
      summary: 'Remove a connection',
      status: 204,
      errors: ['ceo_bind_only'],
    },
    async (c, { params }) => deleteToolConnection(sql, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'listToolSignIns',
      method: 'get',
      path: '/bindings/{id}/sign-ins',
      summary: "Sign-ins saved on a browser connection's sites",
      response: z.array(SignIn),
    },
    async (c, { params }) => listSignIns(sql, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'deleteToolSignIn',
      method: 'delete',
      path: '/bindings/{id}/sign-ins/{memberId}',
      summary: "Forget one member's sign-in, on one site (query site) or all",
      params: z.object({ id: Uuid, memberId: Uuid }),
      query: z.object({ site: z.string().optional() }),
      status: 204,
    },
    async (c, { params, query }) =>
      forgetSignIn(sql, c.var.caller.enterpriseId, params.id, params.memberId, query.site),
  )
  route(
    app,
    {
      operationId: 'getToolOAuthRedirectUri',
      method: 'get',
      path: '/oauth/redirect-uri',
      summary: 'The redirect address to register with a provider',
      response: z.object({ redirectUri: z.string() }),
    },
    async (c) => ({ redirectUri: redirectUri(c) }),
  )
  route(
    app,
    {
      operationId: 'startToolOAuth',
      method: 'post',
      path: '/oauth/start',
      summary:
        'Start OAuth for a connection; it completes in the signed-in browser of the person who started it',
      body: ToolOAuthStart,
      response: z.object({ url: z.string(), state: z.string() }),
      errors: ['tool_connection_not_found'],
    },
    async (c, { body }) => startToolOAuth(sql, c.var.caller.enterpriseId, body, redirectUri(c)),
  )
  return app
}
