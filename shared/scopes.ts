// Scopes (spec: Authentication 3): a resource and a level. The resource of a route is the first path
// segment after /v1; the level is read for GET and write for every other method.
export const resources = [
  'tasks',
  'runs',
  'blockers',
  'executions',
  'gates',
  'chats',
  'plans',
  'memory',
  'recommendations',
  'spend',
  'llm',
  'tools',
  'teams',
  'members',
  'roles',
  'orgs',
  'enterprise',
  'catalog',
  'webhooks',
  // The one event feed (GET /v1/events, DESIGN 15): its own resource by the path rule; what a token
  // sees in it is further narrowed to the types of the resources it may read (feedResourceOf).
  'events',
] as const

export type Resource = (typeof resources)[number]
export type Level = 'read' | 'write'
export type Scope = `${Resource}:${Level}`

export const allScopes: Scope[] = resources.flatMap((r) => [`${r}:read`, `${r}:write`] as Scope[])

export function isResource(value: string): value is Resource {
  return (resources as readonly string[]).includes(value)
}

export function isScope(value: string): value is Scope {
  return (allScopes as string[]).includes(value)
}

export function levelFor(method: string): Level {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write'
}

/**
 * First path segments that are not resources of their own but belong to another's scope (issue 47):
 * outbound event subscriptions are webhooks, the outward half of the inbound ones, and take
 * `webhooks:read` / `webhooks:write` as the issue asks.
 */
const resourceAliases: Record<string, Resource> = { 'event-subscriptions': 'webhooks' }

/**
 * The resource a /v1 path belongs to: its first segment after /v1 (spec: Authentication 3), as
 * resourceAliases maps it, or undefined.
 */
export function resourceOf(path: string): string | undefined {
  const match = /^\/v1\/([^/?#]+)/.exec(path)
  const segment = match?.[1]
  return segment === undefined ? undefined : (resourceAliases[segment] ?? segment)
}

/**
 * Parses a comma-separated scope list. `*` and `all` stand for every scope and `tasks:*` for both
 * levels of a resource; anything unknown is reported so an operator's typo is not silently dropped.
 */
export function parseScopes(text: string): { scopes: Scope[]; unknown: string[] } {
  const scopes = new Set<Scope>()
  const unknown: string[] = []
  for (const raw of text.split(',')) {
    const item = raw.trim()
    if (!item) continue
    if (item === '*' || item === 'all') {
      allScopes.forEach((s) => scopes.add(s))
    } else if (item.endsWith(':*') && isResource(item.slice(0, -2))) {
      scopes.add(`${item.slice(0, -2)}:read` as Scope)
      scopes.add(`${item.slice(0, -2)}:write` as Scope)
    } else if (isScope(item)) {
      scopes.add(item)
    } else {
      unknown.push(item)
    }
  }
  return { scopes: allScopes.filter((s) => scopes.has(s)), unknown }
}

/**
 * Scopes as briefly as parseScopes reads them back: `*` for every scope, `tasks:*` for both levels of a
 * resource, else each as it is; in allScopes' order (osctl's token lists; issue 51 item 10).
 */
export function briefScopes(scopes: readonly string[]): string[] {
  const held = new Set(scopes)
  if (allScopes.every((s) => held.has(s))) return ['*']
  const brief: string[] = []
  for (const resource of resources) {
    const read = held.has(`${resource}:read`)
    const write = held.has(`${resource}:write`)
    if (read && write) brief.push(`${resource}:*`)
    else if (read) brief.push(`${resource}:read`)
    else if (write) brief.push(`${resource}:write`)
  }
  // A scope this osctl does not know (a newer daemon's) is shown as it is.
  return [...brief, ...scopes.filter((s) => !isScope(s))]
}
