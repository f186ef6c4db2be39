import { z } from 'zod'
import type { ErrorCode } from '../../shared/errors.js'
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
  type BindRight,
} from '../domain/tools/index.js'
import { apiBaseOf, type AppContext, type RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/**
 * What the caller may bind (spec: Authentication 10): the chief executive, a signed-in owner of the
 * enterprise, binds on the enterprise and sets mustGate lists; a member's session and every token do not.
 */
function rightOf(c: AppContext): BindRight {
  const caller = c.var.caller
  return { mayBindEnterprise: caller.kind === 'session' && caller.role === 'owner' }
}

/**
 * What creating or changing a connection may answer: the chief executive's rule, osd's own namespace,
 * the layer's owner, and an enterprise connection's name taken below it (DESIGN 15).
 */
const bindErrors: ErrorCode[] = [
  'ceo_bind_only',
  'tool_namespace_reserved',
  'tool_connection_shadows_enterprise',
  'enterprise_not_found',
  'team_not_found',
  'member_not_found',
  'role_not_found',
  'task_not_found',
  'url_not_allowed',
]

/** Tool connections (spec: Endpoints Tools): tokens are kept encrypted and never answered. */
export function toolRoutes(deps: RouteDeps) {
  const { sql, sealer, config } = deps
  const app = createRouter()
  const byId = { params: z.object({ id: Uuid }), notFound: 'tool_connection_not_found' } as const
  const redirectUri = (_c: AppContext) => `${apiBaseOf(deps)}/tools/oauth/callback`

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
        "Connect a tool on a layer: a tool server's url and token, or a browser system's sites and start page",
      description:
        "Only the chief executive (a signed-in owner of the enterprise) connects on the enterprise layer or gives a mustGate list; a token or a member's session that tries gets 403 ceo_bind_only and nothing is stored. Without a mustGate list, a connection named vcs starts with vcs.merge_pull_request on it. The name os is osd's own tool namespace (400 tool_namespace_reserved). Below the enterprise, a name an enterprise connection has is the chief executive's to take (409 tool_connection_shadows_enterprise). The url, sites and startPage must be addresses osd may connect to: http or https, and no host that is or resolves to a loopback, link-local, private, unspecified or multicast address or a cloud metadata name, unless the operator's OSD_EGRESS_ALLOW allows it (else 400 url_not_allowed, saying why); osd checks again when it connects.",
      body: ToolConnectionCreate,
      status: 201,
      response: ToolConnection,
      errors: bindErrors,
    },
    async (c, { body }) =>
      createToolConnection(sql, sealer, config.egress, c.var.caller.enterpriseId, body, rightOf(c)),
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
      description:
        "A connection on the enterprise layer, a move onto it, and any mustGate list are the chief executive's (a signed-in owner of the enterprise); a token or a member's session gets 403 ceo_bind_only and nothing changes. A url of another origin (scheme, host or port) drops the stored token, unless the same change sends a new one, and the OAuth sign-ins under way; sites taken off a browser connection lose their sign-ins. Names as on create: os is reserved (400 tool_namespace_reserved), and an enterprise connection's name below the enterprise is the chief executive's (409 tool_connection_shadows_enterprise). A url, sites or startPage the change gives must be addresses osd may connect to, as on create (400 url_not_allowed).",
      body: ToolConnectionPatch,
      response: ToolConnection,
      errors: bindErrors,
    },
    async (c, { params, body }) =>
      updateToolConnection(
        sql,
        sealer,
        config.egress,
        c.var.caller.enterpriseId,
        params.id,
        body,
        rightOf(c),
      ),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'deleteToolBinding',
      method: 'delete',
      path: '/bindings/{id}',
      summary:
        "Remove a connection; one on the enterprise layer is the chief executive's to remove",
      status: 204,
      errors: ['ceo_bind_only'],
    },
    async (c, { params }) =>
      deleteToolConnection(sql, c.var.caller.enterpriseId, params.id, rightOf(c)),
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
