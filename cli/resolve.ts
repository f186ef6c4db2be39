import { isUuid } from '../shared/ids.js'
import type { ApiClient } from './client.js'
import { CliError, UsageError } from './errors.js'

export { isUuid }

/** An id the user typed where the API has no slugs: refused at once (exit 2) when it is not one. */
export function idRef(ref: string, what: string, by = 'its id'): string {
  if (!isUuid(ref)) throw new UsageError(`${what} is named by ${by}; got "${ref}"`)
  return ref
}

/**
 * An id from what the user typed: an id as it is, else the one record of `path`'s list whose fields
 * match (a slug, an email, a name). Arguments accept an id or a slug where the API has slugs (DESIGN 9).
 */
export async function resolveRef<T extends { id: string }>(
  client: ApiClient,
  what: string,
  ref: string,
  list: () => Promise<T[]>,
  matches: (record: T, ref: string) => boolean,
  describe: (record: T) => string = (r) => r.id,
): Promise<string> {
  if (isUuid(ref)) return ref
  const found = (await list()).filter((record) => matches(record, ref))
  if (found.length === 1) return found[0]!.id
  if (found.length === 0) throw new CliError(`no ${what} "${ref}"`)
  throw new CliError(
    `"${ref}" names ${found.length} ${what}s: ${found.map(describe).join(', ')}; use an id`,
  )
}

export function teamId(client: ApiClient, ref: string): Promise<string> {
  return resolveRef(
    client,
    'team',
    ref,
    () => client.get<{ id: string; slug: string }[]>('/teams'),
    (t, r) => t.slug === r,
  )
}

export function memberId(client: ApiClient, ref: string): Promise<string> {
  return resolveRef(
    client,
    'member',
    ref,
    () => client.get<{ id: string; email: string; name: string }[]>('/members'),
    (m, r) => m.email.toLowerCase() === r.toLowerCase() || m.name === r,
    (m) => `${m.name} <${m.email}> (${m.id})`,
  )
}

export function roleId(client: ApiClient, ref: string): Promise<string> {
  return resolveRef(
    client,
    'role',
    ref,
    () => client.get<{ id: string; slug: string; teamId: string | null }[]>('/roles'),
    (role, r) => role.slug === r,
    (role) =>
      `${role.slug} (${role.teamId ? `team ${role.teamId}` : 'enterprise-wide'}: ${role.id})`,
  )
}

export function taskId(client: ApiClient, ref: string): Promise<string> {
  if (isUuid(ref)) return Promise.resolve(ref)
  // The task list finds a slug exactly (spec: GET /v1/tasks, "slug also usable to find a task").
  return resolveRef(
    client,
    'task',
    ref,
    async () =>
      (
        await client.get<{ data: { id: string; slug: string }[] }>('/tasks', {
          slug: ref,
          limit: 200,
        })
      ).data,
    (t, r) => t.slug === r,
  )
}
