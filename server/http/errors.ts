import type { Context } from 'hono'
import { ApiError, frameworkBody } from '../../shared/errors.js'
import { isDatabaseUnavailable } from '../db/sql.js'
import type { Logger } from '../log.js'
import type { AppEnv } from './env.js'
import { metrics } from '../metrics.js'
import { logFields } from '../traces/index.js'

/** Seconds a caller is told to wait (Retry-After) while the database cannot be reached. */
export const databaseRetryAfterSeconds = 2

/**
 * RFC 9110 11.6.1, RFC 6750 3: every 401 names how to authenticate, in WWW-Authenticate. Written here,
 * once, for every 401 whoever answered it (the auth middleware, a route's own invalid_credentials, the
 * inbound webhooks): `Bearer`, with `error="invalid_token"` when a bearer credential was sent and
 * refused, or the challenge the refusal set (c.var.challenge). Called on every answer by requestLog.
 */
export function challengeUnauthorized(c: Context<AppEnv>): void {
  if (c.res.status !== 401 || c.res.headers.has('WWW-Authenticate')) return
  c.res.headers.set('WWW-Authenticate', c.get('challenge') ?? bearerChallenge)
}

export const bearerChallenge = 'Bearer'
/** The challenge of a bearer credential that was sent and refused (unknown, revoked, expired). */
export const invalidTokenChallenge = 'Bearer error="invalid_token"'

/** Second error shape (spec: Errors): framework-level refusals, the code in `message`. */
export function frameworkError(
  c: Context,
  status: 401 | 404 | 500 | 503,
  message: string,
): Response {
  return c.json(frameworkBody(status, message), status)
}

/**
 * The one error writer (DESIGN 4). Nothing of an unexpected failure (stack, SQL, secret) is answered.
 * A database that cannot be reached (the server restarting, DATABASE_URL's server away) is not a fault
 * of the request: 503 database_unavailable with Retry-After, so that callers try again.
 */
export function errorWriter(log: Logger) {
  return (err: Error, c: Context<AppEnv>): Response => {
    if (err instanceof ApiError) {
      const wait = err.extra?.retryAfterSeconds
      if (typeof wait === 'number') c.header('Retry-After', String(wait))
      return c.json(err.toBody(), err.status as 400)
    }
    const where = {
      requestId: c.get('requestId'),
      method: c.req.method,
      path: c.req.path,
      ...logFields(c.var.trace),
    }
    metrics.statementError(err)
    if (isDatabaseUnavailable(err)) {
      log.warn({ ...where, code: (err as { code?: string }).code }, 'database unavailable')
      return databaseUnavailable(c)
    }
    log.error({ err, ...where }, 'request failed')
    return frameworkError(c, 500, 'Internal server error')
  }
}

/** Seconds a caller is told to wait (Retry-After) while osd stops: about what a restart takes. */
export const stoppingRetryAfterSeconds = 2

/**
 * 503 shutting_down, in the first error shape, with Retry-After and `Connection: close` (issue 51): a
 * request that reached osd on a connection still open while it stops. Not served, so that a client that
 * asks again at once (a long-poll, an event stream reconnecting) cannot keep osd from stopping.
 */
export function shuttingDown(c: Context): Response {
  const err = new ApiError('shutting_down', 'osd is stopping; try again shortly.')
  c.header('Retry-After', String(stoppingRetryAfterSeconds))
  c.header('Connection', 'close')
  return c.json(err.toBody(), 503)
}

/** 503 database_unavailable, in the first error shape, with Retry-After. */
export function databaseUnavailable(c: Context): Response {
  const err = new ApiError(
    'database_unavailable',
    'The database cannot be reached just now; try again shortly.',
  )
  c.header('Retry-After', String(databaseRetryAfterSeconds))
  return c.json(err.toBody(), 503)
}
