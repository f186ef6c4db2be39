import { z } from 'zod'
import { ApiError } from '../../shared/errors.js'
import { validName } from '../../shared/names.js'
import { IdParam } from '../../shared/schemas/common.js'
import {
  ApiToken,
  ApiTokenChange,
  ApiTokenCreated,
  ApiTokenInput,
  ApiTokenListQuery,
  ApiTokenRotation,
} from '../../shared/schemas/tokens.js'
import { allScopes, isScope, type Scope } from '../../shared/scopes.js'
import {
  createToken,
  getToken,
  listTokens,
  revokeToken,
  rotateToken,
  updateToken,
} from '../domain/people/index.js'
import { sessionCaller, type SessionCaller } from '../http/caller.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

// API tokens managed by a signed-in person (spec: Authentication 6; Portal-only routes): tokens never
// reach these (the auth middleware answers them 403 api_token_cannot_manage_tokens, or api_token_scope
// first when they lack the enterprise scope). Any person of the enterprise may make and list tokens; a
// token is changed, rotated and revoked by the person who made it or by an owner.

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

function invalid(field: string, message: string): ApiError {
  return new ApiError('invalid_request', `${field}: ${message}.`, { issues: [{ field, message }] })
}

const dateOnly = /^\d{4}-\d{2}-\d{2}$/
const dateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/

/** An expiry as sent: an ISO 8601 date-time with its offset, or a date (00:00 UTC); in the future. */
export function validExpiry(text: string, field = 'expiresAt'): Date {
  const when = dateOnly.test(text) || dateTime.test(text) ? new Date(text) : undefined
  // Date rolls 2027-02-30 over to March: the day must be one of its month.
  const [year, month, day] = text.slice(0, 10).split('-').map(Number)
  const real = new Date(Date.UTC(year!, month! - 1, day!))
  if (!when || Number.isNaN(when.getTime()) || real.getUTCMonth() !== month! - 1)
    throw invalid(field, 'an ISO 8601 date-time with its offset (2027-01-31T12:00:00Z) or a date')
  if (when.getTime() <= Date.now()) throw invalid(field, 'a time in the future')
  return when
}

/** The expiry of a new token: expiresInDays from now, or expiresAt, or never; not both. */
function expiryOf(body: { expiresInDays?: number; expiresAt?: string }): Date | null {
  if (body.expiresInDays !== undefined && body.expiresAt !== undefined)
    throw invalid('expiresAt', 'give expiresInDays or expiresAt, not both')
  if (body.expiresInDays !== undefined)
    return new Date(Date.now() + body.expiresInDays * 24 * 3600 * 1000)
  return body.expiresAt === undefined ? null : validExpiry(body.expiresAt)
}

export function apiTokenRoutes({ sql }: RouteDeps) {
  /** The token, if the person may change it: its maker or an owner (403 owner_only otherwise). */
  async function ownToken(person: SessionCaller, id: string, verb: string): Promise<ApiToken> {
    const token = await getToken(sql, person.enterpriseId, id)
    if (person.role !== 'owner' && token.createdBy?.userId !== person.userId) {
      throw new ApiError(
        'owner_only',
        `A token is ${verb} by the person who made it or by an owner of the enterprise.`,
      )
    }
    return token
  }

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
        idPrefix: query.idPrefix,
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
        'Scopes are those of the spec (resource:read or resource:write); an unknown one is refused 400 invalid_request naming it. expiresInDays or expiresAt (not both) make it expire: from then on it answers 401, as an unknown token. The secret is osd_, 43 random characters and a CRC32 checksum of them (6 characters), so a mistyped token is refused without a look-up and secret scanners recognise it. Only the SHA-256 of the secret is stored. Portal-only: a token gets 403 api_token_cannot_manage_tokens.',
      body: ApiTokenInput,
      status: 201,
      response: ApiTokenCreated,
      errors: ['invalid_name', 'api_token_cannot_manage_tokens'],
    },
    async (c, { body }) => {
      const person = sessionCaller(c.var.caller)
      const name = validName(body.name)
      const scopes = validScopes(body.scopes)
      const expiresAt = expiryOf(body)
      c.header('Cache-Control', 'no-store')
      return createToken(sql, person.enterpriseId, {
        name,
        scopes,
        createdBy: person.userId,
        expiresAt,
      })
    },
  )

  route(
    app,
    {
      operationId: 'changeApiToken',
      method: 'patch',
      path: '/{id}',
      summary:
        "Change a token's name, scopes or expiry: every osd process acts on it from its next request",
      description:
        "What is not sent stays; expiresAt null: it never expires. The person who made the token, or an owner (else 403 owner_only). A revoked token is refused 409 token_revoked; a connected app's token 409 token_of_connected_app (it is managed under /v1/enterprise/connections). Portal-only: a token gets 403 api_token_cannot_manage_tokens.",
      params: IdParam,
      notFound: 'token_not_found',
      body: ApiTokenChange,
      response: ApiToken,
      errors: [
        'invalid_name',
        'owner_only',
        'token_revoked',
        'token_of_connected_app',
        'api_token_cannot_manage_tokens',
      ],
    },
    async (c, { params, body }) => {
      const person = sessionCaller(c.var.caller)
      const change = {
        name: body.name === undefined ? undefined : validName(body.name),
        scopes: body.scopes === undefined ? undefined : validScopes(body.scopes),
        expiresAt:
          body.expiresAt === undefined || body.expiresAt === null
            ? body.expiresAt
            : validExpiry(body.expiresAt),
      }
      await ownToken(person, params.id, 'changed')
      const changed = await updateToken(sql, person.enterpriseId, params.id, change)
      return changed
    },
  )

  route(
    app,
    {
      operationId: 'rotateApiToken',
      method: 'post',
      path: '/{id}/rotate',
      summary:
        'A new secret for the token, in this answer only; the old one works for graceSeconds more',
      description:
        "The secret it replaces keeps working for graceSeconds (default 0: it stops at once; at most 604800, 7 days), then answers 401 as an unknown token; a rotation during the grace of another ends that grace. Name, scopes, expiry and last use stay. The person who made the token, or an owner (else 403 owner_only). A revoked token is refused 409 token_revoked, an expired one 409 token_expired (give it a new expiresAt first), a connected app's 409 token_of_connected_app. Portal-only: a token gets 403 api_token_cannot_manage_tokens.",
      params: IdParam,
      notFound: 'token_not_found',
      body: ApiTokenRotation,
      response: ApiTokenCreated,
      errors: [
        'owner_only',
        'token_revoked',
        'token_expired',
        'token_of_connected_app',
        'api_token_cannot_manage_tokens',
      ],
    },
    async (c, { params, body }) => {
      const person = sessionCaller(c.var.caller)
      await ownToken(person, params.id, 'rotated')
      const rotated = await rotateToken(sql, person.enterpriseId, params.id, body.graceSeconds ?? 0)
      c.header('Cache-Control', 'no-store')
      return rotated
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
      await ownToken(person, params.id, 'revoked')
      const revoked = await revokeToken(sql, person.enterpriseId, params.id)
      return revoked
    },
  )

  return app
}
