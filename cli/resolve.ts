import { idPrefixRange, isUuid, minIdPrefix } from '../shared/ids.js'
import type { Chat } from '../shared/schemas/chats.js'
import type { Paged } from '../shared/schemas/common.js'
import type { Execution } from '../shared/schemas/executions.js'
import type { Gate } from '../shared/schemas/gates.js'
import type { Run } from '../shared/schemas/runs.js'
import type { ApiToken } from '../shared/schemas/tokens.js'
import type { ApiClient } from './client.js'
import { CliError, UsageError } from './errors.js'
import { didYouMean } from './suggest.js'

export { isUuid }

/** An id the user typed where the API has no slugs: refused at once (exit 2) when it is not one. */
export function idRef(ref: string, what: string, by = 'its id'): string {
  if (!isUuid(ref)) throw new UsageError(`${what} is named by ${by}; got "${ref}"`)
  return ref
}

/** The kinds of object an id prefix may name (issue 51), as git names an object by a short id. */
export type PrefixKind = 'run' | 'gate' | 'chat' | 'execution' | 'token'

/** One object a prefix matched, as the ambiguity lists it: its id, a short what, when it was made. */
interface PrefixMatch {
  id: string
  what: string
  created: string
}

/** How many matches an ambiguity lists (the lookup asks for one more, to know there are more). */
const listedMatches = 10

/** The list of each kind, narrowed by `?idPrefix=`: the matches and how many there are in all. */
const prefixLookups: Record<
  PrefixKind,
  (client: ApiClient, idPrefix: string) => Promise<{ matches: PrefixMatch[]; total: number }>
> = {
  async run(client, idPrefix) {
    // The list shows live runs only: an archived one is found by its prefix too (issue 46).
    const [page, archived] = await Promise.all([
      client.get<Paged<Run>>('/runs', { idPrefix, limit: listedMatches + 1 }),
      client.get<Run[]>('/runs/archived', { idPrefix }),
    ])
    const matches = [
      ...page.data.map((r) => ({ r, at: '' })),
      ...archived.map((r) => ({ r, at: ' archived' })),
    ].map(({ r, at }) => ({
      id: r.id,
      what: `${r.taskSlug} ${r.status}${at}`,
      created: r.createdAt,
    }))
    return { matches, total: page.total + archived.length }
  },
  async execution(client, idPrefix) {
    // Open and closed executions are two lists: a prefix names either.
    const pages = await Promise.all(
      ['false', 'true'].map((closed) =>
        client.get<Paged<Execution>>('/executions', {
          idPrefix,
          closed,
          limit: listedMatches + 1,
        }),
      ),
    )
    const matches = pages
      .flatMap((page) => page.data)
      .map((x) => ({ id: x.id, what: `${x.taskSlug} ${x.status}`, created: x.startedAt }))
    return { matches, total: pages.reduce((n, page) => n + page.total, 0) }
  },
  async gate(client, idPrefix) {
    // The waiting gates and the decided ones are two lists: a prefix names either.
    const lists = await Promise.all(
      ['waiting', 'decided'].map((status) =>
        client.get<Gate[]>('/gates', { idPrefix, status, limit: listedMatches + 1 }),
      ),
    )
    const matches = lists.flat().map((g) => ({
      id: g.id,
      what: `${g.kind}${g.tool ? ` ${g.tool}` : ''} ${g.status}`,
      created: g.createdAt,
    }))
    return { matches, total: matches.length }
  },
  async chat(client, idPrefix) {
    const [chats, archived] = await Promise.all([
      client.get<Chat[]>('/chats', { idPrefix }),
      client.get<Chat[]>('/chats/archived', { idPrefix }),
    ])
    const matches = [
      ...chats.map((c) => ({ c, at: '' })),
      ...archived.map((c) => ({ c, at: ' archived' })),
    ].map(({ c, at }) => ({
      id: c.id,
      what: `chat ${c.status}${at} with member ${c.memberId}`,
      created: c.createdAt,
    }))
    return { matches, total: matches.length }
  },
  async token(client, idPrefix) {
    const tokens = await client.get<ApiToken[]>('/enterprise/api-tokens', { idPrefix })
    const matches = tokens.map((k) => ({ id: k.id, what: `token ${k.name}`, created: k.createdAt }))
    return { matches, total: matches.length }
  },
}

/** Whether the user typed something that can only be meant as an id's first characters. */
export function looksLikePrefix(ref: string): boolean {
  return !isUuid(ref) && /^[0-9a-f-]+$/i.test(ref) && /[0-9a-f]/i.test(ref)
}

/**
 * The id a run, gate, chat, execution or token is named by (issue 51): a whole id as it is; else its
 * first characters, at least 8 hex as the id prints, looked up with `?idPrefix=` on the kind's list
 * (and, for runs and chats, which the lists show live only, on the archived ones: an execution's id is
 * its first run's, so executionId finds an archived one as a run).
 * One match is its id; none, the prefix itself, which the daemon answers as it answers an id it does
 * not know (`run_not_found`...); several, exit 2 listing them. Fewer than 8 characters, or anything
 * but hex and the id's dashes: exit 2.
 */
export async function resolveId(
  client: ApiClient,
  kind: PrefixKind,
  ref: string,
  what = `${kind === 'execution' ? 'an' : 'a'} ${kind}`,
): Promise<string> {
  if (isUuid(ref)) return ref
  const named = `${what} is named by its id or its first ${minIdPrefix} or more characters`
  if (!looksLikePrefix(ref)) throw new UsageError(`${named}; got "${ref}"`)
  const hex = ref.replace(/-/g, '').length
  if (hex < minIdPrefix) throw new UsageError(`${named}; "${ref}" has ${hex}`)
  if (!idPrefixRange(ref))
    throw new UsageError(`"${ref}" is not the start of an id: its dashes fall where an id has none`)
  const { matches, total } = await prefixLookups[kind](client, ref)
  if (total === 1 && matches.length === 1) return matches[0]!.id
  if (total === 0) return ref
  const listed = matches.slice(0, listedMatches).map((m) => `  ${m.id}  ${m.what}  ${m.created}`)
  const more = total > listed.length ? [`  … and ${total - listed.length} more`] : []
  throw new UsageError(
    [`ambiguous ${kind} prefix ${ref}: matches ${total} ${kind}s`, ...listed, ...more].join('\n'),
  )
}

/**
 * An execution by its id, or by any of its runs' (as the API takes them), or a prefix of either: a
 * prefix no execution starts with is tried as a run's.
 */
export async function executionId(client: ApiClient, ref: string): Promise<string> {
  const what = "an execution (or a run's)"
  const id = await resolveId(client, 'execution', ref, what)
  return id === ref && !isUuid(ref) ? resolveId(client, 'run', ref, what) : id
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
