import type { MiddlewareHandler } from 'hono'
import { ApiError, type ErrorCode } from '../../shared/errors.js'
import { isResource, levelFor, resourceOf } from '../../shared/scopes.js'
import type { Db } from '../db/sql.js'
import { hashSecret } from '../domain/secrets.js'
import { findCallerByHash } from '../domain/tokens.js'
import type { NotifiedCache } from '../db/notified-cache.js'
import type { Caller } from './caller.js'
import type { AppEnv } from './context.js'
import { frameworkError } from './errors.js'
import { requestHeader } from './headers.js'

// Portal-only routes (spec: Authentication 6-7, Portal-only routes): refused to every token, whatever its
// scopes, before anything else. Matched on whole path segments.
const portalOnly: { prefix: string; code: ErrorCode; message: string }[] = [
  {
    prefix: '/v1/enterprise/api-tokens',
    code: 'api_token_cannot_manage_tokens',
    message:
      'API tokens are created, rotated and revoked only by a signed-in person in the portal.',
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

/** Method and path patterns served without a token, taken from the routes declared public. */
export class PublicRoutes {
  private patterns: { method: string; pattern: RegExp }[] = []

  add(method: string, openApiPath: string): void {
    const source = openApiPath
      .split(/\{\w+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+')
    this.patterns.push({ method: method.toUpperCase(), pattern: new RegExp(`^${source}/?$`) })
  }

  has(method: string, path: string): boolean {
    return this.patterns.some((p) => p.method === method && p.pattern.test(path))
  }
}

/**
 * Bearer-token authentication and the scope rule (spec: Authentication 1-7; DESIGN 4): the scope is
 * derived from the path, never declared per route. Paths of no known resource fall through to 404.
 */
export function authenticate(
  db: Db,
  publicRoutes: PublicRoutes,
  callers: NotifiedCache<Caller>,
): MiddlewareHandler<AppEnv> {
  // Keyed by the token itself: hashing it costs ~3% of a cached read, and this process's memory holds
  // every token in flight anyway. At rest, tokens exist only as hashes (DESIGN 3).
  function callerOf(token: string) {
    return callers.through(token, () => findCallerByHash(db, hashSecret(token)))
  }

  return async (c, next) => {
    const path = c.req.path
    const method = c.req.method
    if (publicRoutes.has(method, path)) return next()

    const header = requestHeader(c, 'authorization')
    const token = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined
    const caller = token && token.length <= 200 ? await callerOf(token) : undefined
    if (!caller) return frameworkError(c, 401, 'Unauthorized')

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
