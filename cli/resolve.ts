import { isUuid } from '../shared/ids.js'
import type { ApiClient } from './client.js'
import { CliError, UsageError } from './errors.js'
import { didYouMean } from './suggest.js'

export { isUuid }

/** An id the user typed where the API has no slugs: refused at once (exit 2) when it is not one. */
export function idRef(ref: string, what: string, by = 'its id'): string {
  if (!isUuid(ref)) throw new UsageError(`${what} is named by ${by}; got "${ref}"`)
  return ref
}

/** What a name that matched nothing is compared with, for "did you mean" (issue 51). */
export interface Suggestions<T> {
  /** The names of a record a user may type (a slug; a member's name and email). */
  names: (record: T) => string[]
  /** The records to compare with, when `list` answers only those that match (the task list by slug). */
  all?: () => Promise<T[]>
}

/**
 * An id from what the user typed: an id as it is, else the one record of `path`'s list whose fields
 * match (a slug, an email, a name). Arguments accept an id or a slug where the API has slugs (DESIGN 9).
 * A name that matches nothing says which names are close, as a mistyped command does.
 */
export async function resolveRef<T extends { id: string }>(
  client: ApiClient,
  what: string,
  ref: string,
  list: () => Promise<T[]>,
  matches: (record: T, ref: string) => boolean,
  describe: (record: T) => string = (r) => r.id,
  suggestions?: Suggestions<T>,
): Promise<string> {
  if (isUuid(ref)) return ref
  const listed = await list()
  const found = listed.filter((record) => matches(record, ref))
  if (found.length === 1) return found[0]!.id
  if (found.length === 0) {
    const candidates = suggestions
      ? ((await suggestions.all?.()) ?? listed).flatMap(suggestions.names)
      : []
    throw new CliError(`no ${what} "${ref}"${didYouMean(ref, candidates)}`)
  }
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
    undefined,
    { names: (t) => [t.slug] },
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
    { names: (m) => [m.name, m.email] },
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
    { names: (role) => [role.slug] },
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
    undefined,
    // The list above answers only the slug asked for: a miss compares with every task's.
    { names: (t) => [t.slug], all: () => client.all<{ id: string; slug: string }>('/tasks') },
  )
}
