import type { Context } from 'hono'
import { ApiError, frameworkBody } from '../../shared/errors.js'
import type { Logger } from '../log.js'
import type { AppEnv } from './context.js'

/** Second error shape (spec: Errors): framework-level refusals, the code in `message`. */
export function frameworkError(
  c: Context,
  status: 401 | 404 | 500 | 503,
  message: string,
): Response {
  return c.json(frameworkBody(status, message), status)
}

/** The one error writer (DESIGN 4). Nothing of an unexpected failure (stack, SQL, secret) is answered. */
export function errorWriter(log: Logger) {
  return (err: Error, c: Context<AppEnv>): Response => {
    if (err instanceof ApiError) {
      return c.json(err.toBody(), err.status as 400)
    }
    log.error(
      { err, requestId: c.get('requestId'), method: c.req.method, path: c.req.path },
      'request failed',
    )
    return frameworkError(c, 500, 'Internal server error')
  }
}
