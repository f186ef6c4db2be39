import type { MiddlewareHandler } from 'hono'
import { frameworkBody } from '../../shared/errors.js'
import type { AppEnv } from './context.js'

/**
 * The paths of the document's operations and the methods each has. A method a known path does not have
 * answers 405 with Allow, and OPTIONS answers 204 with Allow, before authentication: what a path offers
 * is no secret (the document itself is public), and a refusal that names the wrong cause (401, 403) sends
 * a caller looking in the wrong place.
 */
export class KnownPaths {
  /** Patterns by method and shape (segment count and resource), so a request tests only a few. */
  private byKey = new Map<string, RegExp[]>()
  private all: { pattern: RegExp; key: string; method: string }[] = []

  add(method: string, openApiPath: string): void {
    const source = openApiPath
      .split(/\{\w+\}/)
      .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]+')
    const pattern = new RegExp(`^${source}$`)
    const upper = method.toUpperCase()
    const key = shapeKey(openApiPath)
    this.byKey.set(`${upper} ${key}`, [...(this.byKey.get(`${upper} ${key}`) ?? []), pattern])
    this.all.push({ pattern, key, method: upper })
  }

  /** Whether `method` has an operation at `path` (HEAD wherever GET has one). */
  has(method: string, path: string): boolean {
    const key = `${method === 'HEAD' ? 'GET' : method} ${shapeKey(path)}`
    return this.byKey.get(key)?.some((pattern) => pattern.test(path)) ?? false
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

/** 405 (or 204 to OPTIONS) with Allow for a method a known path does not have. */
export function methodCheck(paths: KnownPaths): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method
    const path = c.req.path
    if (method !== 'OPTIONS' && paths.has(method, path)) return next()
    const allowed = paths.allowed(path)
    if (allowed.length === 0) return next()
    c.header('Allow', allowed.join(', '))
    if (method === 'OPTIONS') return c.body(null, 204)
    return c.json(frameworkBody(405, 'Method Not Allowed'), 405)
  }
}
