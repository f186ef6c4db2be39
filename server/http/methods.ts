import type { Context, MiddlewareHandler } from 'hono'
import { matchedRoutes } from 'hono/route'
import { frameworkBody } from '../../shared/errors.js'
import type { AppEnv } from './env.js'

/**
 * The paths of the document's operations and the methods each has. A method a known path does not have
 * answers 405 with Allow, and OPTIONS answers 204 with Allow, before authentication: what a path offers
 * is no secret (the document itself is public), and a refusal that names the wrong cause (401, 403) sends
 * a caller looking in the wrong place.
 */
export class KnownPaths {
  private all: { pattern: RegExp; key: string; method: string }[] = []

  add(method: string, openApiPath: string): void {
    const source = openApiPath
      .split(/\{\w+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+')
    const pattern = new RegExp(`^${source}$`)
    this.all.push({ pattern, key: shapeKey(openApiPath), method: method.toUpperCase() })
  }

  /** The methods `path` has, as Allow lists them; empty for a path no operation has. */
  allowed(path: string): string[] {
    const key = shapeKey(path)
    const methods = new Set(
      this.all.filter((p) => p.key === key && p.pattern.test(path)).map((p) => p.method),
    )
    if (methods.size === 0) return []
    if (methods.has('GET')) methods.add('HEAD')
    return [...methods.add('OPTIONS')].sort()
  }
}

/** Segment count and the first segment after /v1: paths of one shape are the only ones that can match. */
function shapeKey(path: string): string {
  let count = 0
  for (let i = 0; i < path.length; i++) if (path.charCodeAt(i) === 0x2f) count++
  const resource = path.split('/', 3)[2] ?? ''
  return `${count} ${resource.startsWith('{') ? '*' : resource}`
}

/**
 * The route, not a middleware, that matched the request's method and path; HEAD is matched as GET.
 * Hono has matched it before the first middleware runs: asking costs nothing on a hot read.
 */
export function routeOf(c: Context): { method: string; path: string } | undefined {
  return matchedRoutes(c).find((r) => r.method !== 'ALL')
}

/** 405 (or 204 to OPTIONS) with Allow for a method a known path does not have. */
export function methodCheck(paths: KnownPaths): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method
    // A route of this method matched: the path has the method. Only requests no route answers (a
    // 404, a 405, OPTIONS) test the path against the patterns.
    if (method !== 'OPTIONS' && routeOf(c)) return next()
    const allowed = paths.allowed(c.req.path)
    if (allowed.length === 0) return next()
    c.header('Allow', allowed.join(', '))
    if (method === 'OPTIONS') return c.body(null, 204)
    return c.json(frameworkBody(405, 'Method Not Allowed'), 405)
  }
}
