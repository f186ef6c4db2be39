import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import { requireScope } from '../http/caller.js'
import {
  LlmBinding,
  LlmBindingCreate,
  LlmBindingQuery,
  LlmConnection,
  LlmConnectionPatch,
  LlmModels,
  LlmPrice,
  LlmPriceInput,
  LlmPrices,
  LlmUsage,
  OAuthComplete,
  OAuthStart,
  OAuthStarted,
  TierOverride,
  Tiers,
} from '../../shared/schemas/models.js'
import {
  bindKey,
  completeOAuth,
  connectionUsage,
  getTiers,
  listBindings,
  listConnections,
  listPrices,
  offeredModels,
  overrideTier,
  removePrice,
  setPrice,
  startOAuth,
  unbindKey,
  updateConnection,
} from '../domain/models/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

/** Model connections, keys, tiers and models (spec: Endpoints Models). Keys are never answered. */
export function llmRoutes({ sql, sealer, providers, config }: RouteDeps) {
  const app = createRouter()
  const byId = { params: z.object({ id: Uuid }), notFound: 'connection_not_found' } as const

  route(
    app,
    {
      operationId: 'listLlmConnections',
      method: 'get',
      path: '/connections',
      summary: 'Model connections, without keys',
      response: z.array(LlmConnection),
    },
    async (c) => listConnections(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'updateLlmConnection',
      method: 'patch',
      path: '/connections/{id}',
      summary: 'Rename or describe a connection, or set the plan of a subscription-login one',
      body: LlmConnectionPatch,
      response: LlmConnection,
    },
    async (c, { params, body }) =>
      updateConnection(sql, c.var.caller.enterpriseId, params.id, body),
  )
  route(
    app,
    {
      ...byId,
      operationId: 'getLlmConnectionUsage',
      method: 'get',
      path: '/connections/{id}/usage',
      summary:
        'Tokens of each kind (input at full price, cache read, cache write, output) and cents by day and model',
      response: LlmUsage,
    },
    async (c, { params }) => connectionUsage(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      operationId: 'listLlmBindings',
      method: 'get',
      path: '/bindings',
      summary: 'Which keys are connected; layer=member and layerId narrow to one member',
      query: LlmBindingQuery,
      response: z.array(LlmBinding),
      errors: ['enterprise_not_found', 'team_not_found', 'member_not_found'],
    },
    async (c, { query }) => listBindings(sql, c.var.caller.enterpriseId, query),
  )
  route(
    app,
    {
      operationId: 'createLlmBinding',
      method: 'post',
      path: '/bindings',
      summary:
        'Bind an API key (provider_a by default) on the enterprise, a team or a member; the nearest layer wins',
      body: LlmBindingCreate,
      status: 201,
      response: LlmBinding,
      errors: ['enterprise_not_found', 'team_not_found', 'member_not_found'],
    },
    async (c, { body }) => bindKey(sql, sealer, c.var.caller.enterpriseId, body),
  )
  route(
    app,
    {
      operationId: 'deleteLlmBinding',
      method: 'delete',
      path: '/bindings',
      summary: 'Remove the key of a provider on a layer (query provider, layer, layerId)',
      description:
        "The enterprise layer takes the caller's own enterprise id as layerId, or none; any other layer the id of one of the enterprise's teams or members.",
      query: LlmBindingQuery,
      status: 204,
      errors: ['enterprise_not_found', 'team_not_found', 'member_not_found'],
    },
    async (c, { query }) => unbindKey(sql, c.var.caller.enterpriseId, query),
  )

  route(
    app,
    {
      operationId: 'startProviderBOAuth',
      method: 'post',
      path: '/provider_b/oauth/start',
      summary: 'Start a provider_b subscription sign-in: answers the address to sign in at',
      body: OAuthStart,
      response: OAuthStarted,
      errors: ['enterprise_not_found', 'team_not_found', 'member_not_found'],
    },
    async (c, { body }) =>
      startOAuth(sql, sealer, config.providerBOAuth, c.var.caller.enterpriseId, body),
  )
  route(
    app,
    {
      operationId: 'completeProviderBOAuth',
      method: 'post',
      path: '/provider_b/oauth/complete',
      summary: 'Complete the sign-in with the code and state it returned',
      body: OAuthComplete,
      status: 201,
      response: LlmConnection,
    },
    async (c, { body }) =>
      completeOAuth(sql, sealer, config.providerBOAuth, c.var.caller.enterpriseId, body),
  )

  route(
    app,
    {
      operationId: 'listLlmTiers',
      method: 'get',
      path: '/tiers',
      summary: 'The model per tier per provider',
      response: Tiers,
    },
    async (c) => getTiers(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      operationId: 'overrideLlmTier',
      method: 'post',
      path: '/tiers/override',
      summary: "Choose the enterprise's model for a tier of a provider",
      body: TierOverride,
      response: Tiers,
    },
    async (c, { body }) => {
      await overrideTier(sql, c.var.caller.enterpriseId, body)
      return getTiers(sql, c.var.caller.enterpriseId)
    },
  )
  route(
    app,
    {
      operationId: 'listLlmModels',
      method: 'get',
      path: '/models',
      summary: "The models the connections offer (the provider's list, else the shipped catalogue)",
      response: LlmModels,
    },
    async (c) => ({
      models: await offeredModels(
        sql,
        sealer,
        c.var.caller.enterpriseId,
        providers,
        config.providerBOAuth,
      ),
    }),
  )

  // Prices (issue 51; DESIGN 6): a model the list does not hold is priced as the enterprise sets it.
  const model = z.object({
    model: z.string().meta({
      description: 'the model as the provider names it; one holding a slash is sent encoded (%2F)',
    }),
  })
  route(
    app,
    {
      operationId: 'listLlmPrices',
      method: 'get',
      path: '/prices',
      summary:
        "Every price a model call is priced at: osd's list and the enterprise's own; and how a model with none is priced",
      description:
        "A model in neither is priced at 0 and answered as unpriced when its provider's address was set by the operator (OSD_PROVIDER_A_BASE_URL, OSD_PROVIDER_B_BASE_URL: a local server); otherwise as the provider's frontier model.",
      response: LlmPrices,
    },
    async (c) =>
      listPrices(sql, c.var.caller.enterpriseId, {
        provider_a: providers.provider_a.baseUrlSetByOperator === true,
        provider_b: providers.provider_b.baseUrlSetByOperator === true,
      }),
  )
  route(
    app,
    {
      operationId: 'setLlmPrice',
      method: 'put',
      path: '/prices/{model}',
      summary:
        "Set the price of a model osd's list does not hold, in US dollars per million tokens",
      description:
        "Model calls from then on are priced at it, their worst case reserved under the spend caps. A model of osd's list keeps the list's price (400). A price decides what the spend caps hold back, so a token needs spend:write as well as llm:write (403 api_token_scope).",
      params: model,
      body: LlmPriceInput,
      response: LlmPrice,
    },
    async (c, { params, body }) => {
      requireScope(c.var.caller, 'spend:write')
      return setPrice(sql, c.var.caller.enterpriseId, params.model, body)
    },
  )
  route(
    app,
    {
      operationId: 'deleteLlmPrice',
      method: 'delete',
      path: '/prices/{model}',
      summary: "Remove the enterprise's price of a model (again: no change)",
      description: 'As setting one, it needs spend:write as well as llm:write.',
      params: model,
      status: 204,
    },
    async (c, { params }) => {
      requireScope(c.var.caller, 'spend:write')
      return removePrice(sql, c.var.caller.enterpriseId, params.model)
    },
  )
  return app
}
