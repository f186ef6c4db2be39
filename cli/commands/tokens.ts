import type { Command } from 'commander'
import { briefScopes, parseScopes, type Scope } from '../../shared/scopes.js'
import type { ApiToken, ApiTokenCreated } from '../../shared/schemas/tokens.js'
import { maxGraceSeconds } from '../../shared/values.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printFields, printTable, show } from '../output.js'
import { asPerson } from '../people.js'
import { looksLikePrefix, resolveId, resolveRef } from '../resolve.js'
import { about } from './about.js'

// API tokens, managed by a signed-in person (issue 20; spec: Authentication 6): a token cannot make,
// list, change, rotate or revoke tokens, so these verbs need a session (`osctl auth login --email`).

export type { ApiToken }

const path = '/enterprise/api-tokens'

export async function listTokens(deps: Deps, opts: { includeRevoked?: boolean }): Promise<void> {
  const rows = await asPerson(deps, (client) =>
    client.get<ApiToken[]>('/enterprise/api-tokens', {
      includeRevoked: opts.includeRevoked ? 'true' : undefined,
    }),
  )
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'ID', value: (t) => t.id },
      { header: 'NAME', value: (t) => t.name },
      { header: 'TOKEN', value: (t) => `…${t.lastChars}` },
      { header: 'SCOPES', value: (t) => briefScopes(t.scopes).join(' ') },
      { header: 'LAST USED', value: (t) => t.lastUsedAt ?? 'never' },
      { header: 'EXPIRES', value: (t) => expiryText(t) },
      { header: 'CREATED BY', value: (t) => t.createdBy?.email },
      { header: 'CREATED', value: (t) => t.createdAt },
      ...(opts.includeRevoked
        ? [
            {
              header: 'REVOKED',
              value: (t: ApiToken) =>
                t.revokedAt &&
                `${t.revokedAt}${t.revokedReason === 'creator_removed' ? ' (maker removed)' : ''}`,
            },
          ]
        : []),
    ]),
  )
}

/** When a token expires, in words: never, the time, or the time with "(expired)". */
function expiryText(t: ApiToken, now = Date.now()): string {
  const expiresAt = t.expiresAt ?? null
  if (!expiresAt) return 'never'
  return Date.parse(expiresAt) <= now ? `${expiresAt} (expired)` : expiresAt
}

/** The scopes of a comma-separated list; a usage error (exit 2) names any unknown, or none given. */
export function requiredScopes(text: string): Scope[] {
  const { scopes, unknown } = parseScopes(text)
  if (unknown.length || scopes.length === 0)
    throw new UsageError(
      `unknown scopes: ${unknown.join(', ') || '(none given)'}; scopes are <resource>:read|write, ` +
        '<resource>:* or * for all',
    )
  return scopes
}

/** Whole days from --expires-in-days: 1 to 3650. */
function expiryDays(value: string): number {
  const days = Number(value)
  if (!/^\d+$/.test(value.trim()) || days < 1 || days > 3650)
    throw new UsageError(
      `--expires-in-days takes a whole number of days, 1 to 3650; got "${value}"`,
    )
  return days
}

/**
 * Makes a token with the scopes given (`*` for every one, `tasks:*` for both levels of a resource; an
 * unknown scope is a usage error, not dropped), expiring after --expires-in-days or at --expires (a
 * date, as update takes it) if given. The secret is printed once: the API keeps only its hash.
 */
export async function createToken(
  deps: Deps,
  opts: { name: string; scopes: string; expiresInDays?: string; expires?: string },
): Promise<void> {
  const scopes = requiredScopes(opts.scopes)
  const body: Record<string, unknown> = { name: opts.name, scopes }
  if (opts.expiresInDays !== undefined && opts.expires !== undefined)
    throw new UsageError('give --expires-in-days or --expires, not both')
  if (opts.expiresInDays !== undefined) body.expiresInDays = expiryDays(opts.expiresInDays)
  if (opts.expires !== undefined) {
    const expiresAt = expiryValue(opts.expires)
    // never is what a token without either is; the API takes no null here.
    if (expiresAt !== null) body.expiresAt = expiresAt
  }
  const created = await asPerson(deps, (client) => client.post<ApiTokenCreated>(path, body))
  deps.out.error(
    `token ${created.name} (${created.id}): the secret is shown once, now; store it, osd keeps only its hash` +
      (created.expiresAt ? `; it expires ${created.expiresAt}\n` : '\n'),
  )
  show(deps.out, created, () => deps.out.write(created.token + '\n'))
}

/**
 * The token a reference names: its id, a prefix of its id (issue 51), or its name among the live ones
 * (a prefix no id starts with is taken as a name).
 */
function tokenId(deps: Deps, ref: string): Promise<string> {
  return asPerson(deps, async (client) => {
    if (looksLikePrefix(ref)) {
      const id = await resolveId(client, 'token', ref)
      if (id !== ref) return id
    }
    return resolveRef(
      client,
      'token',
      ref,
      () => client.get<ApiToken[]>(path),
      (t, r) => t.name === r,
      (t) => `${t.name} (${t.id})`,
    )
  })
}

/**
 * An expiry from --expires: `never`, a number of days (`30d`), or an ISO 8601 date or date-time, which
 * the API checks.
 */
export function expiryValue(value: string, now = Date.now()): string | null {
  const text = value.trim()
  if (text === 'never') return null
  const days = /^(\d+)d$/.exec(text)
  if (days) {
    const n = Number(days[1])
    if (n < 1 || n > 3650) throw new UsageError(`--expires takes 1d to 3650d; got "${value}"`)
    return new Date(now + n * 24 * 3600 * 1000).toISOString()
  }
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) return text
  throw new UsageError(
    `--expires takes a date (2027-01-31), a date-time with its offset, a number of days (30d) or never; got "${value}"`,
  )
}

/** Changes a token's name, scopes or expiry: every osd process acts on it from its next request. */
export async function updateToken(
  deps: Deps,
  ref: string,
  opts: { name?: string; scopes?: string; expires?: string },
): Promise<void> {
  const body: Record<string, unknown> = {}
  if (opts.name !== undefined) body.name = opts.name
  if (opts.scopes !== undefined) body.scopes = requiredScopes(opts.scopes)
  if (opts.expires !== undefined) body.expiresAt = expiryValue(opts.expires)
  if (Object.keys(body).length === 0)
    throw new UsageError('give what to change: --name, --scopes or --expires')
  const id = await tokenId(deps, ref)
  const changed = await asPerson(deps, (client) =>
    client.patch<ApiToken>(`/enterprise/api-tokens/${id}`, body),
  )
  show(deps.out, changed, () =>
    printFields(deps.out, [
      ['id', changed.id],
      ['name', changed.name],
      ['scopes', changed.scopes.join(' ')],
      ['expires', expiryText(changed)],
    ]),
  )
}

/** Seconds from --grace: a number with s, m, h or d (1h), or bare seconds; at most 7 days. */
export function graceSeconds(value: string): number {
  const match = /^(\d+)\s*(s|m|h|d)?$/.exec(value.trim())
  const unit = { s: 1, m: 60, h: 3600, d: 86400 }[(match?.[2] ?? 's') as 's' | 'm' | 'h' | 'd']
  const seconds = match ? Number(match[1]) * unit : NaN
  if (!Number.isFinite(seconds) || seconds > maxGraceSeconds)
    throw new UsageError(
      `--grace takes a duration of at most 7 days (90s, 15m, 1h, 7d); got "${value}"`,
    )
  return seconds
}

/**
 * Gives a token a new secret, printed once on stdout as `create` does; the old secret keeps working
 * for --grace (none by default) so what uses it can move to the new one.
 */
export async function rotateToken(
  deps: Deps,
  ref: string,
  opts: { grace?: string; yes?: boolean },
): Promise<void> {
  const grace = opts.grace === undefined ? 0 : graceSeconds(opts.grace)
  const id = await tokenId(deps, ref)
  if (grace === 0)
    await confirmDestructive(
      deps,
      opts.yes,
      `Rotate token ${ref} (its current secret stops working at once; --grace keeps it working a while)`,
    )
  const rotated = await asPerson(deps, (client) =>
    client.post<ApiTokenCreated>(`/enterprise/api-tokens/${id}/rotate`, { graceSeconds: grace }),
  )
  deps.out.error(
    `token ${rotated.name} (${rotated.id}): the new secret is shown once, now; ` +
      (rotated.graceEndsAt
        ? `the old one works until ${rotated.graceEndsAt}\n`
        : 'the old one no longer works\n'),
  )
  show(deps.out, rotated, () => deps.out.write(rotated.token + '\n'))
}

/** Revokes a token (by id, or by its name among the live ones): it stops working at once. */
export async function revokeToken(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const id = await tokenId(deps, ref)
  await confirmDestructive(deps, opts.yes, `Revoke token ${ref} (it stops working at once)`)
  const revoked = await asPerson(deps, (client) =>
    client.delete<ApiToken>(`/enterprise/api-tokens/${id}`),
  )
  show(deps.out, revoked, () =>
    deps.out.write(`revoked token ${revoked.name} (${revoked.id}, …${revoked.lastChars})\n`),
  )
}

export function registerTokens(program: Command, makeDeps: MakeDeps): void {
  const tokens = program.command('tokens').description(about.tokens)
  examples(
    tokens
      .command('list')
      .description('API tokens, newest first: name, scopes, last used, expiry, who made them')
      .option('--include-revoked', 'show revoked tokens too')
      .action(actionOf(makeDeps, listTokens)),
    'osctl tokens list',
    'osctl tokens list --include-revoked --json',
  )
  examples(
    tokens
      .command('create')
      .description('make an API token; its secret is printed once, on stdout')
      .requiredOption('--name <name>', 'what the token is for')
      .requiredOption(
        '--scopes <list>',
        'comma-separated scopes, e.g. tasks:read,runs:write; tasks:* for both levels; * for all',
      )
      .option(
        '--expires-in-days <n>',
        'the token stops working after this many days (never unless given)',
      )
      .option(
        '--expires <when>',
        'or when it stops working: a date (2027-01-31), a date-time, a number of days (30d)',
      )
      .action(actionOf(makeDeps, createToken)),
    'osctl tokens create --name ci --scopes tasks:read,runs:write --expires-in-days 90 > ci-token',
    'osctl tokens create --name release --scopes runs:write --expires 2027-01-31 > release-token',
    'osctl tokens create --name ops --scopes "*" --json',
  )
  examples(
    tokens
      .command('update')
      .argument('<token>', 'token id, its first 8+ characters, or its name')
      .description(
        "change a token's name, scopes or expiry; every osd process acts on it from its next request",
      )
      .option('--name <name>', 'a new name')
      .option('--scopes <list>', 'the new scopes, replacing the old (as for create)')
      .option(
        '--expires <when>',
        'a date (2027-01-31), a date-time, a number of days (30d), or never',
      )
      .action(actionOf(makeDeps, updateToken)),
    'osctl tokens update ci --scopes tasks:read,runs:read',
    'osctl tokens update ci --expires 2027-01-31',
    'osctl tokens update ci --expires never',
  )
  examples(
    tokens
      .command('rotate')
      .argument('<token>', 'token id, its first 8+ characters, or its name')
      .description(
        'give a token a new secret, printed once on stdout; the old one stops working, or after --grace',
      )
      .option('--grace <duration>', 'how long the old secret keeps working: 90s, 15m, 1h, up to 7d')
      .option('-y, --yes', 'do not ask (needed off a terminal without --grace)')
      .action(actionOf(makeDeps, rotateToken)),
    'osctl tokens rotate ci --grace 1h > ci-token',
    'osctl tokens rotate ci --yes --json',
  )
  examples(
    tokens
      .command('revoke')
      .argument('<token>', 'token id, its first 8+ characters, or its name')
      .option('-y, --yes', 'do not ask')
      .description('revoke an API token: it stops working at once')
      .action(actionOf(makeDeps, revokeToken)),
    'osctl tokens revoke ci --yes',
  )
}
