import type { Context, MiddlewareHandler } from 'hono'
import { matchedRoutes } from 'hono/route'
import type { IncomingMessage } from 'node:http'
import type { Logger } from '../log.js'
import { metrics, metricsEnabled, routeTemplate } from '../metrics.js'
import { logFields, requestSpan } from '../traces/index.js'
import type { AppEnv } from './env.js'
import { challengeUnauthorized, shuttingDown } from './errors.js'

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
 * x-request-id and written with the request's line in the log; with metrics on, its duration is
 * observed by method, route template and status class (decided once here: off, nothing is added).
 *
 * Once `shutdown` aborts (osd stops; issue 51) a request is no longer served: 503 shutting_down, before
 * its token is even read; the health probes still answer (readiness says osd stops). Every answer then,
 * those of requests in flight too, closes its connection, so that no client holds osd up by asking
 * again on a connection kept alive.
 */
export function requestLog(log: Logger, shutdown?: AbortSignal): MiddlewareHandler<AppEnv> {
  const measured = metricsEnabled()
  return async (c, next) => {
    const started = performance.now()
    const sent = requestHeader(c, 'x-request-id')
    const id = sent && sent.length <= 255 && !/[^\w\-=]/.test(sent) ? sent : crypto.randomUUID()
    c.set('requestId', id)
    c.header('x-request-id', id)
    if (shutdown?.aborted && !c.req.path.startsWith('/v1/health')) c.res = shuttingDown(c)
    else await next()
    if (shutdown?.aborted) c.res.headers.set('Connection', 'close')
    // Every answer (issue 44): a browser never reads one as another type than it says.
    c.res.headers.set('X-Content-Type-Options', 'nosniff')
    challengeUnauthorized(c)
    const ms = performance.now() - started
    log.info(
      {
        requestId: id,
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(ms * 10) / 10,
        ...logFields(c.var.trace),
      },
      'request',
    )
    if (measured) metrics.httpRequest(c.req.method, matchedRoute(c), c.res.status, ms / 1000)
  }
}

/**
 * The request's span (issue 49), first of the middleware so that every line the request logs carries
 * its trace: the caller's traceparent its parent (a malformed one is ignored: a new trace, never a
 * 400), named by the route template that answered and never by the path sent, with the status.
 * Installed only when tracing is on (createApp).
 */
export function traceRequest(): MiddlewareHandler<AppEnv> {
  return (c, next) =>
    requestSpan(
      c.req.method,
      (name) => requestHeader(c, name),
      async (span) => {
        c.set('trace', span.trace)
        await next()
        span.answered(matchedRoute(c), c.res.status)
      },
    )
}

/**
 * The template of the route that answered (`/v1/tasks/{id}`), never the path a caller sent: a label of
 * a bounded set. When the middleware answered first (401, 403, 413), the route that would have
 * answered; undefined when no route matches (404 of an unknown path, 405): labelled `unmatched`.
 */
function matchedRoute(c: Context): string | undefined {
  const matched = matchedRoutes(c)
  // Middleware is registered for every method ('ALL'); a route, for its own.
  const route =
    matched[c.req.routeIndex]?.method !== 'ALL'
      ? matched[c.req.routeIndex]
      : matched.find((r) => r.method !== 'ALL')
  if (!route) return undefined
  let template = templates.get(route.path)
  if (template === undefined) templates.set(route.path, (template = routeTemplate(route.path)))
  return template
}

/** Each route's template, made once: as many as the app has routes. */
const templates = new Map<string, string>()
