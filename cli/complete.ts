import type { ApiClient } from './client.js'

// What a shell's completion asks osctl for as a person presses Tab (issue 51): the task slugs, the
// member names, the waiting gates of the daemon the profile names. `osctl __complete KIND` prints them
// one a line (main.ts runs it before the command tree is built, so it starts fast). A shell waits on
// it, so it gives up after about a second; and whatever goes wrong (no profile, no token, osd down or
// slow, an error answered) it prints nothing and exits 0: an error in the middle of a command line
// being typed helps nobody.

/** The kinds of value completion offers from the daemon. */
export const completionKinds = ['task', 'member', 'gate'] as const
export type CompletionKind = (typeof completionKinds)[number]

/** How long a Tab waits for the daemon. */
export const completionTimeoutMs = 1000

const readers: Record<
  CompletionKind,
  (client: ApiClient, signal: AbortSignal) => Promise<string[]>
> = {
  task: async (client, signal) => {
    const page = await client.get<{ data?: { slug?: unknown }[] }>('/tasks', { limit: 200 }, signal)
    return (page.data ?? []).map((t) => t.slug).filter((s): s is string => typeof s === 'string')
  },
  member: async (client, signal) => {
    const members = await client.get<{ name?: unknown }[]>('/members', undefined, signal)
    return (Array.isArray(members) ? members : [])
      .map((m) => m.name)
      .filter((n): n is string => typeof n === 'string')
  },
  gate: async (client, signal) => {
    const gates = await client.get<{ id?: unknown }[]>('/gates', { status: 'waiting' }, signal)
    return (Array.isArray(gates) ? gates : [])
      .map((g) => g.id)
      .filter((id): id is string => typeof id === 'string')
  },
}

/**
 * The values of `kind` as the daemon has them, or none: after `timeoutMs`, or on any failure. A value
 * with a line break or a control character (a name is a tenant's text) is left out: the shell would
 * take it for two, or act on it.
 */
export async function completionValues(
  kind: string,
  client: () => ApiClient | Promise<ApiClient>,
  timeoutMs = completionTimeoutMs,
): Promise<string[]> {
  const read = readers[kind as CompletionKind]
  if (!read) return []
  const signal = AbortSignal.timeout(timeoutMs)
  try {
    const values = await read(await client(), signal)
    return [...new Set(values)].filter((v) => v !== '' && !/[\x00-\x1f\x7f-\x9f]/.test(v))
  } catch {
    return []
  }
}

/** The client of the profile (or OSCTL_URL, OSCTL_TOKEN) osctl would use; deps.js brings the store. */
async function profileClient(): Promise<ApiClient> {
  return (await (await import('./deps.js')).loadDeps({})).client()
}

/** `osctl __complete KIND`: the values on stdout, one a line; exit 0 whatever happened. */
export async function runComplete(
  args: readonly string[],
  stdout: { write(text: string): unknown },
  client: () => ApiClient | Promise<ApiClient> = profileClient,
): Promise<void> {
  const values = await completionValues(args[0] ?? '', client)
  if (values.length) stdout.write(values.join('\n') + '\n')
}
