import type { Context, MiddlewareHandler } from 'hono'
import { getCookie } from 'hono/cookie'
import { ApiError, type ErrorCode } from '../../shared/errors.js'
import { allScopes, isResource, levelFor, resourceOf } from '../../shared/scopes.js'
import { apiTokenShape } from '../../shared/token-format.js'
import type { Db } from '../db/sql.js'
import { matchesHash } from '../domain/secrets.js'
import {
  findCallerByHash,
  findSessionCaller,
  type SessionLifetime,
  type TokenCaller,
  sessionPrefix,
} from '../domain/people/index.js'
import type { Caches } from './caches.js'
import type { Limits } from './limits.js'
import type { AppEnv } from './env.js'
import { frameworkError, invalidTokenChallenge } from './errors.js'
import { requestHeader } from './headers.js'
import { routeOf } from './methods.js'
import type { TokenUses } from './token-uses.js'

// Portal-only routes (spec: Authentication 6-7, Portal-only routes): refused to every token, whatever its
// scopes, before anything else. Matched on whole path segments.
const portalOnly: { prefix: string; code: ErrorCode; message: string }[] = [
  {
    prefix: '/v1/enterprise/api-tokens',
    code: 'api_token_cannot_manage_tokens',
    message:
      'API tokens are created, rotated, changed and revoked only by a signed-in person in the portal.',
  },
  {
    prefix: '/v1/enterprise/connections',
    code: 'api_token_cannot_manage_connections',
    message: 'Connected apps are managed only by a signed-in person in the portal.',
  },
  ...['/v1/users', '/v1/enterprises', '/v1/auth', '/v1/consent'].map((prefix) => ({
    prefix,
    code: 'api_token_scope' as const,
    message: `${prefix} is for signed-in people in the portal; API tokens cannot use it.`,
  })),
]

function underPrefix(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(prefix + '/')
}

/** The operations served without a token, taken from the routes declared public. */
export class PublicRoutes {
  /** `GET /v1/health`, as Hono names the route that matched (`:id` for `{id}`). */
  private routes = new Set<string>()
  private patterns: { method: string; pattern: RegExp }[] = []

  add(method: string, openApiPath: string): void {
    const upper = method.toUpperCase()
    this.routes.add(`${upper} ${openApiPath.replace(/\{(\w+)\}/g, ':$1')}`)
    const source = openApiPath
      .split(/\{\w+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+')
    this.patterns.push({ method: upper, pattern: new RegExp(`^${source}/?$`) })
  }

  /**
   * Whether the request is for a public operation: the route that matched, looked up (HEAD matches
   * as GET). A request no route matches (a trailing slash, a 404) is tested against the patterns.
   */
  has(c: Context): boolean {
    const route = routeOf(c)
    if (route) return this.routes.has(`${route.method} ${route.path}`)
    const method = c.req.method === 'HEAD' ? 'GET' : c.req.method
    const path = c.req.path
    return this.patterns.some((p) => p.method === method && p.pattern.test(path))
  }
}

/** Paths a session may call while it acts in no enterprise: the person's own, and choosing one. */
const enterpriseFree = ['/v1/auth', '/v1/enterprises', '/v1/consent']

export const sessionCookie = 'osd_session'
export const csrfHeader = 'x-osd-csrf'
/**
 * On an answer to a token that expires: when (ISO 8601), so a client can warn before it happens
 * (GitHub's GitHub-Authentication-Token-Expiration).
 */
export const tokenExpiresHeader = 'x-osd-token-expires-at'

/**
 * Authentication and the scope rule (spec: Authentication 1-7; DESIGN 4, 8). A bearer API token acts with
 * its scopes, the scope derived from the path, never declared per route; paths of no known resource fall
 * through to 404. A person's session (the cookie, or `Bearer osds_...` from the command line) acts with
 * every scope of its enterprise and may call the portal-only routes; a state-changing call by cookie
 * needs the CSRF header the login answered.
 */
export function authenticate(
  db: Db,
  publicRoutes: PublicRoutes,
  caches: Pick<Caches, 'callers' | 'sessions'>,
  lifetime: SessionLifetime,
  uses: TokenUses,
  limits: Limits,
): MiddlewareHandler<AppEnv> {
  // Keyed by the secret itself: hashing it costs ~3% of a cached read, and this process's memory holds
  // every secret in flight anyway. At rest, they exist only as hashes (DESIGN 3). Kept no longer than
  // the secret signs in (its expiry, the end of a rotation's grace): then it is looked up again, and
  // found no more, exactly as an unknown token.
  //
  // In order, each step cheaper than the next (issue 45): the cache (a token found before needs no
  // other check); the token's shape, so a mistyped or cut one (its checksum wrong) is refused without
  // a look-up; then the cache of secrets that named nobody and the address's rate (issue 44,
  // limits.ts); then the database.
  async function callerOf(c: Context<AppEnv>, token: string): Promise<TokenCaller | undefined> {
    const cached = caches.callers.get(token)
    if (cached !== undefined) return cached
    if (apiTokenShape(token) === 'malformed') return undefined
    return limits.lookUp(
      c,
      token,
      caches.callers,
      (hash) => findCallerByHash(db, hash),
      (caller) => caller.validUntil,
    )
  }
  function sessionOf(c: Context<AppEnv>, secret: string) {
    return limits.lookUp(c, secret, caches.sessions, (hash) =>
      findSessionCaller(db, hash, lifetime),
    )
  }

  return async (c, next) => {
    const path = c.req.path
    const method = c.req.method
    if (publicRoutes.has(c)) {
      limits.publicCall(c) // issue 44 hook: counted per client address
      return next()
    }

    const bearer = bearerOf(c)
    const cookie = bearer === undefined ? getCookie(c, sessionCookie) : undefined
    const secret = bearer ?? cookie
    if (!secret || secret.length > 200) return unauthorized(c, bearer)

    if (secret.startsWith(sessionPrefix)) {
      const session = await sessionOf(c, secret)
      if (!session) return unauthorized(c, bearer)
      limits.spend(c, session.sessionId) // issue 44 hook: the session's own rate
      c.header('Cache-Control', 'no-store')
      if (cookie !== undefined && method !== 'GET' && method !== 'HEAD') {
        const presented = requestHeader(c, csrfHeader)
        if (!presented || !matchesHash(presented, session.csrfHash)) {
          throw new ApiError(
            'csrf_required',
            `A change made with the session cookie needs the ${csrfHeader} header the sign-in answered.`,
          )
        }
      }
      c.set('session', session)
      if (session.role) {
        c.set('caller', {
          kind: 'session',
          sessionId: session.sessionId,
          userId: session.userId,
          role: session.role,
          enterpriseId: session.enterpriseId,
          scopes: everyScope,
          actor: `user:${session.userId}`,
        })
      } else if (!enterpriseFree.some((prefix) => underPrefix(path, prefix))) {
        throw new ApiError(
          'enterprise_not_chosen',
          'This session acts in no enterprise: choose one with POST /v1/auth/enterprise.',
        )
      }
      return next()
    }

    // The cookie carries only sessions: a token in it is refused as an unknown one.
    const caller = cookie === undefined ? await callerOf(c, secret) : undefined
    if (!caller) return unauthorized(c, bearer)
    limits.spend(c, caller.tokenId) // issue 44 hook: the token's own rate
    uses.note(caller.tokenId)
    if (caller.expiresAt) c.header(tokenExpiresHeader, caller.expiresAt)
    c.header('Cache-Control', 'no-store')

    const resource = resourceOf(path)
    const portal = portalOnly.find((p) => underPrefix(path, p.prefix))
    if (resource && (isResource(resource) || portal)) {
      const needed = `${resource}:${levelFor(method)}`
      // A token without the enterprise scope hears api_token_scope first, even on portal-only paths.
      if (!caller.scopes.has(needed) && (!portal || portal.code !== 'api_token_scope')) {
        const held = [...caller.scopes].join(', ') || 'none'
        throw new ApiError(
          'api_token_scope',
          `This route needs the scope ${needed}; the token holds ${held}.`,
          { needed, held: [...caller.scopes] },
        )
      }
    }
    if (portal) throw new ApiError(portal.code, portal.message)

    c.set('caller', caller)
    return next()
  }
}

/**
 * 401 Unauthorized (spec: Authentication 5). A bearer credential sent and refused (unknown, malformed,
 * revoked, expired, a session ended) says so in its challenge (RFC 6750 3.1); without one, or with
 * the cookie, the challenge is the plain one (errors.ts writes it).
 */
export function unauthorized(c: Context<AppEnv>, bearer = bearerOf(c)): Response {
  if (bearer) c.set('challenge', invalidTokenChallenge)
  return frameworkError(c, 401, 'Unauthorized')
}

function bearerOf(c: Context<AppEnv>): string | undefined {
  const header = requestHeader(c, 'authorization')
  return header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined
}

const everyScope: ReadonlySet<string> = new Set(allScopes)

/**
 * The refusals this middleware can answer on an operation that takes a credential, for the document:
 * a token without the scope (or on a portal-only path), the portal-only path's own code, a session in
 * no enterprise, a change by cookie without the CSRF header.
 */
export function authRefusals(method: string, path: string): ErrorCode[] {
  const codes: ErrorCode[] = ['api_token_scope']
  const portal = portalOnly.find((p) => underPrefix(path, p.prefix))
  if (portal) codes.push(portal.code)
  if (!enterpriseFree.some((prefix) => underPrefix(path, prefix)))
    codes.push('enterprise_not_chosen')
  if (method !== 'GET' && method !== 'HEAD') codes.push('csrf_required')
  return codes
}
