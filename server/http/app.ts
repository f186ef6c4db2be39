import { apiTokenRoutes } from '../routes/api-tokens.js'
import { authRoutes } from '../routes/auth.js'
import { appConnectionRoutes, consentRoutes } from '../routes/consent.js'
import { enterpriseRoutes } from '../routes/enterprise.js'
import { blockerRoutes } from '../routes/blockers.js'
import { catalogRoutes } from '../routes/catalog.js'
import { configRoutes } from '../routes/config.js'
import { executionRoutes } from '../routes/executions.js'
import { ChangeWatch } from '../db/change-watch.js'
import { chatChannel } from '../domain/chats/index.js'
import { chatRoutes } from '../routes/chats.js'
import { gateRoutes } from '../routes/gates.js'
import { healthRoutes } from '../routes/health.js'
import { llmRoutes } from '../routes/llm.js'
import { planRoutes } from '../routes/plans.js'
import { memoryRoutes } from '../routes/memory.js'
import { recommendationRoutes } from '../routes/recommendations.js'
import { spendRoutes } from '../routes/spend.js'
import { toolRoutes } from '../routes/tools.js'
import { createProviders } from '../engine/models/index.js'
import { runChannel, StartBatcher } from '../domain/runs/index.js'
import { runRoutes } from '../routes/runs.js'
import { runBulkRoutes } from '../routes/runs-bulk.js'
import { webhookRoutes } from '../routes/webhooks.js'
import { eventRoutes } from '../routes/events.js'
import { eventSubscriptionRoutes } from '../routes/event-subscriptions.js'
import { memberRoutes } from '../routes/members.js'
import { orgRoutes } from '../routes/orgs.js'
import { roleRoutes } from '../routes/roles.js'
import { taskRoutes } from '../routes/tasks.js'
import { teamRoutes } from '../routes/teams.js'
import { inviteAcceptRoutes, userRoutes } from '../routes/users.js'
import { installLearning } from '../domain/learning/index.js'
import { authenticate, PublicRoutes } from './auth.js'
import { createCaches } from './caches.js'
import { TokenUses } from './token-uses.js'
import { createLimits } from './limits.js'
import { readBody } from './body.js'
import type { AppDeps } from './context.js'
import { errorWriter, frameworkError } from './errors.js'
import { requestLog, traceRequest } from './headers.js'
import { tracingOn } from '../traces/index.js'
import { finishDocument, isPublic, openApiDocument } from './document.js'
import { KnownPaths, methodCheck } from './methods.js'
import { addErrorCodes, createRouter, type Responses, type Router } from './router.js'

/**
 * The whole HTTP app, middleware and errors included (STYLE: createApp(deps)). Tests call
 * `app.request(...)` on the same app that `osd serve` listens with.
 */
export function createApp(deps: AppDeps): Router {
  // A run cancelled or a gate turned down here calls for its task's improvement (DESIGN 10).
  installLearning()
  const app = createRouter()
  const publicRoutes = new PublicRoutes()
  const knownPaths = new KnownPaths()
  const runWatch = new ChangeWatch(runChannel)
  runWatch.follow(deps.sql, (err) => deps.log.error({ err }, 'cannot follow run events'))
  const chatWatch = deps.chatWatch ?? new ChangeWatch(chatChannel)
  chatWatch.follow(deps.sql, (err) => deps.log.error({ err }, 'cannot follow chat messages'))
  const providers = deps.providers ?? createProviders({ baseUrls: deps.config.providerBaseUrls })
  const routeDeps = {
    ...deps,
    caches: createCaches(deps.sql, deps.log),
    limits: createLimits(deps.sql, deps.config, deps.log),
    runWatch,
    chatWatch,
    providers,
    starts: new StartBatcher(deps.sql),
  }

  // DESIGN 4: request id (and its log line) -> a method the path does not have (405, OPTIONS) ->
  // authentication, scope and rate limits -> body limit and JSON body -> route -> errors. A body is read
  // only for a caller who may send it (issue 44). Each is one middleware: every level of Hono's dispatch
  // costs on a hot read.
  // Traced (issue 49), the request's span comes first, so that its log line is inside it.
  if (tracingOn()) app.use('*', traceRequest())
  app.use(
    '*',
    requestLog(deps.log, deps.shutdown),
    methodCheck(knownPaths),
    authenticate(
      deps.sql,
      publicRoutes,
      routeDeps.caches,
      deps.config.session,
      deps.tokenUses ?? new TokenUses(deps.sql, deps.log),
      routeDeps.limits,
    ),
    readBody,
  )

  app.route('/v1', healthRoutes(routeDeps))
  app.route('/v1', authRoutes(routeDeps))
  app.route('/v1/auth/invites', inviteAcceptRoutes(routeDeps))
  app.route('/v1/enterprise/api-tokens', apiTokenRoutes(routeDeps))
  app.route('/v1/enterprise', enterpriseRoutes(routeDeps))
  app.route('/v1/enterprise/connections', appConnectionRoutes(routeDeps))
  app.route('/v1/consent', consentRoutes(routeDeps))
  app.route('/v1/users', userRoutes(routeDeps))
  app.route('/v1/teams', teamRoutes(routeDeps))
  app.route('/v1/members', memberRoutes(routeDeps))
  app.route('/v1/roles', roleRoutes(routeDeps))
  app.route('/v1/orgs', orgRoutes(routeDeps))
  app.route('/v1/tasks', taskRoutes(routeDeps))
  app.route('/v1/runs/bulk', runBulkRoutes(routeDeps))
  app.route('/v1/runs', runRoutes(routeDeps))
  app.route('/v1/blockers', blockerRoutes(routeDeps))
  app.route('/v1/executions', executionRoutes(routeDeps))
  app.route('/v1/gates', gateRoutes(routeDeps))
  app.route('/v1/chats', chatRoutes(routeDeps))
  app.route('/v1/llm', llmRoutes(routeDeps))
  app.route('/v1/spend', spendRoutes(routeDeps))
  app.route('/v1/tools', toolRoutes(routeDeps))
  app.route('/v1/plans', planRoutes(routeDeps))
  app.route('/v1/memory', memoryRoutes(routeDeps))
  app.route('/v1/recommendations', recommendationRoutes(routeDeps))
  app.route('/v1/webhooks', webhookRoutes(routeDeps))
  app.route('/v1/catalog', catalogRoutes(routeDeps))
  app.route('/v1/config', configRoutes(routeDeps))
  // The event feed and outbound subscriptions (issue 47).
  app.route('/v1/events', eventRoutes(routeDeps))
  app.route('/v1/event-subscriptions', eventSubscriptionRoutes(routeDeps))

  finishDocument(app)
  app.openAPIRegistry.registerPath({
    operationId: 'getOpenApiDocument',
    method: 'get',
    path: '/v1/openapi.json',
    summary: 'This document',
    tags: ['service'],
    security: [],
    responses: openApiResponses() as never,
  })
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== 'route') continue
    const { method, path } = definition.route
    knownPaths.add(method, path)
    // Routes declared public are the ones the auth middleware lets through without a token.
    if (isPublic(definition.route)) publicRoutes.add(method, path)
  }
  const document = openApiDocument(app, deps.config.version)
  app.get('/v1/openapi.json', (c) => c.json(document()))

  app.notFound((c) => frameworkError(c, 404, 'Not Found'))
  app.onError(errorWriter(deps.log))
  return app
}

/** GET /v1/openapi.json's answers: the document, or 503 while osd stops (requestLog). */
function openApiResponses(): Responses {
  const responses: Responses = {
    200: {
      description: 'the OpenAPI 3.1 document of every route',
      content: { 'application/json': { schema: { type: 'object' } } },
    },
  }
  addErrorCodes(responses, ['shutting_down'])
  return responses
}
