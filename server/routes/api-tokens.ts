import { z } from 'zod'
import { ApiError } from '../../shared/errors.js'
import { validName } from '../../shared/names.js'
import { IdParam } from '../../shared/schemas/common.js'
import {
  ApiToken,
  ApiTokenCreated,
  ApiTokenInput,
  ApiTokenListQuery,
} from '../../shared/schemas/tokens.js'
import { allScopes, isScope, type Scope } from '../../shared/scopes.js'
import { createToken, getToken, listTokens, revokeToken } from '../domain/people/index.js'
import { sessionCaller } from '../http/caller.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

// API tokens managed by a signed-in person (spec: Authentication 6; Portal-only routes): tokens never
// reach these (the auth middleware answers them 403 api_token_cannot_manage_tokens, or api_token_scope
// first when they lack the enterprise scope). Any person of the enterprise may make and list tokens; a
// token is revoked by the person who made it or by an owner.

/** The spec's scopes among `given`, each once, in the spec's order; 400 naming any other. */
export function validScopes(given: readonly string[]): Scope[] {
  const unknown = [...new Set(given.filter((s) => !isScope(s)))]
  if (unknown.length > 0) {
    const message = `unknown scopes ${unknown.join(', ')}; a scope is <resource>:read or <resource>:write`
    throw new ApiError('invalid_request', `scopes: ${message}.`, {
      issues: [{ field: 'scopes', message }],
      unknown,
    })
  }
  const scopes = allScopes.filter((s) => given.includes(s))
  if (scopes.length === 0) {
    const message = 'at least one scope'
    throw new ApiError('invalid_request', `scopes: ${message}.`, {
      issues: [{ field: 'scopes', message }],
    })
  }
  return scopes
}

export function apiTokenRoutes({ sql, caches }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'listApiTokens',
      method: 'get',
      path: '/',
      summary: "The enterprise's API tokens, newest first, never their secrets",
      description:
        'Revoked tokens are listed only with includeRevoked=true. Portal-only: a token gets 403 api_token_cannot_manage_tokens.',
      query: ApiTokenListQuery,
      response: z.array(ApiToken),
      errors: ['api_token_cannot_manage_tokens'],
    },
    async (c, { query }) => {
      const person = sessionCaller(c.var.caller)
      return listTokens(sql, person.enterpriseId, {
        includeRevoked: query.includeRevoked === 'true',
      })
    },
  )

  route(
    app,
    {
      operationId: 'createApiToken',
      method: 'post',
      path: '/',
      summary: 'A new API token with the chosen scopes; its secret is in this answer only',
      description:
        'Scopes are those of the spec (resource:read or resource:write); an unknown one is refused 400 invalid_request naming it. Only the SHA-256 of the secret is stored. Portal-only: a token gets 403 api_token_cannot_manage_tokens.',
      body: ApiTokenInput,
      status: 201,
      response: ApiTokenCreated,
      errors: ['invalid_name', 'api_token_cannot_manage_tokens'],
    },
    async (c, { body }) => {
      const person = sessionCaller(c.var.caller)
      const name = validName(body.name)
      const scopes = validScopes(body.scopes)
      c.header('Cache-Control', 'no-store')
      return createToken(sql, person.enterpriseId, { name, scopes, createdBy: person.userId })
    },
  )

  route(
    app,
    {
      operationId: 'revokeApiToken',
      method: 'delete',
      path: '/{id}',
      summary: 'Revoke a token: it stops working at once in every osd process',
      description:
        'The person who made the token, or an owner of the enterprise (else 403 owner_only). Revoking a revoked token changes nothing. Portal-only: a token gets 403 api_token_cannot_manage_tokens.',
      params: IdParam,
      notFound: 'token_not_found',
      response: ApiToken,
      errors: ['owner_only', 'api_token_cannot_manage_tokens'],
    },
    async (c, { params }) => {
      const person = sessionCaller(c.var.caller)
      const token = await getToken(sql, person.enterpriseId, params.id)
      if (person.role !== 'owner' && token.createdBy?.userId !== person.userId) {
        throw new ApiError(
          'owner_only',
          'A token is revoked by the person who made it or by an owner of the enterprise.',
        )
      }
      const revoked = await revokeToken(sql, person.enterpriseId, params.id)
      // Other processes forget it when the NOTIFY reaches them; this one at once.
      caches.callers.invalidate(revoked.id)
      return revoked
    },
  )

  return app
}
