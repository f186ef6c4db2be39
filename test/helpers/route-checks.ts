import { randomUUID } from 'node:crypto'
import { expect, it } from 'vitest'
import { allScopes, levelFor, resourceOf, type Scope } from '../../shared/scopes.js'
import type { TestApp } from './app.js'

export interface RouteCase {
  method: string
  /** A path of this route naming acme's own resources. */
  path: () => string
  body?: () => unknown
  /** The same route naming the other enterprise's resource: must answer exactly like a missing one. */
  foreign?: () => { path: string; body?: unknown }
  /** Code of that 404 (the route's own not-found code). */
  notFoundCode?: string
  /** Scopes the route needs beside its path's (a price needs spend:write as well as llm:write). */
  alsoNeeds?: Scope[]
}

/**
 * The checks every authenticated route gets (STYLE, tests; unkey's runCommonRouteTests): no token, a wrong
 * token, a revoked token, a token without the scope, a token with only that scope, and a foreign id.
 */
export function commonRouteChecks(t: () => TestApp, route: RouteCase): void {
  const label = `${route.method} `
  const needed = () => `${resourceOf(route.path())}:${levelFor(route.method)}` as Scope

  it(`${label}answers 401 without a token`, async () => {
    const res = await t().call(route.method, route.path(), { token: null, body: route.body?.() })
    expect(res.status).toBe(401)
    expect(res.body).toMatchObject({ message: 'Unauthorized', statusCode: 401 })
  })

  it(`${label}answers 401 with a wrong token`, async () => {
    const res = await t().call(route.method, route.path(), {
      token: 'osd_' + 'x'.repeat(43),
      body: route.body?.(),
    })
    expect(res.status).toBe(401)
  })

  it(`${label}answers 403 api_token_scope without its scope, naming it`, async () => {
    const token = await t().tokenWith(allScopes.filter((s) => s !== needed()))
    const res = await t().call(route.method, route.path(), { token, body: route.body?.() })
    expect(res.status).toBe(403)
    expect(res.body.error).toBe('api_token_scope')
    expect(res.body.message).toContain(needed())
  })

  it(`${label}is let through with exactly its scope`, async () => {
    const token = await t().tokenWith([needed(), ...(route.alsoNeeds ?? [])])
    const res = await t().call(route.method, route.path(), { token, body: route.body?.() })
    expect([401, 403]).not.toContain(res.status)
  })

  if (route.foreign) {
    it(`${label}answers 404 for another enterprise's id, as for a missing one`, async () => {
      const foreign = route.foreign!()
      const res = await t().call(route.method, foreign.path, { body: foreign.body })
      expect(res.status).toBe(404)
      if (route.notFoundCode) expect(res.body.error).toBe(route.notFoundCode)
      const uuids =
        foreign.path.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? []
      const missing = uuids.reduce((p, id) => p.replace(id, randomUUID()), foreign.path)
      const absent = await t().call(route.method, missing, { body: foreign.body })
      expect(absent.status).toBe(404)
      expect(res.body.error).toBe(absent.body.error)
    })
  }
}
