import type { Context, MiddlewareHandler } from 'hono'
import type { IncomingMessage } from 'node:http'
import type { Logger } from '../log.js'
import type { AppEnv } from './context.js'

/**
 * A request header. Under `osd serve` it is read from node's own request: c.req.header() makes the
 * node adapter build a whole Headers object, which costs more per call than the rest of a cached
 * read. Under app.request (tests) it falls back to Hono's.
 */
export function requestHeader(c: Context, lowerCaseName: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming
  if (incoming) {
    const value = incoming.headers[lowerCaseName]
    return Array.isArray(value) ? value[0] : value
  }
  return c.req.header(lowerCaseName)
}

/**
 * A request id per request (taken from x-request-id when the caller sent a sane one), answered in
 * x-request-id and written with the request's line in the log.
 */
export function requestLog(log: Logger): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now()
    const sent = requestHeader(c, 'x-request-id')
    const id = sent && sent.length <= 255 && !/[^\w\-=]/.test(sent) ? sent : crypto.randomUUID()
    c.set('requestId', id)
    c.header('x-request-id', id)
    await next()
    log.info(
      {
        requestId: id,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
      },
      'request',
    )
  }
}
