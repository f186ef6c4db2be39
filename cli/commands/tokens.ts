import type { Command } from 'commander'
import { parseScopes, type Scope } from '../../shared/scopes.js'
import type { ApiToken, ApiTokenCreated } from '../../shared/schemas/tokens.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printTable, show } from '../output.js'
import { asPerson } from '../people.js'
import { resolveRef } from '../resolve.js'
import { about } from './about.js'

// API tokens, managed by a signed-in person (issue 20; spec: Authentication 6): a token cannot make,
// list or revoke tokens, so these verbs need a session (`osctl auth login --email`).

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
      { header: 'SCOPES', value: (t) => t.scopes.join(' ') },
      { header: 'LAST USED', value: (t) => t.lastUsedAt },
      { header: 'CREATED BY', value: (t) => t.createdBy?.email },
      { header: 'CREATED', value: (t) => t.createdAt },
      ...(opts.includeRevoked ? [{ header: 'REVOKED', value: (t: ApiToken) => t.revokedAt }] : []),
    ]),
  )
}

/**
 * Makes a token with the scopes given (`*` for every one, `tasks:*` for both levels of a resource; an
 * unknown scope is a usage error, not dropped). The secret is printed once: the API keeps only its hash.
 */
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

export async function createToken(
  deps: Deps,
  opts: { name: string; scopes: string },
): Promise<void> {
  const scopes = requiredScopes(opts.scopes)
  const created = await asPerson(deps, (client) =>
    client.post<ApiTokenCreated>(path, { name: opts.name, scopes }),
  )
  deps.out.error(
    `token ${created.name} (${created.id}): the secret is shown once, now; store it, osd keeps only its hash\n`,
  )
  show(deps.out, created, () => deps.out.write(created.token + '\n'))
}

/** Revokes a token (by id, or by its name among the live ones): it stops working at once. */
export async function revokeToken(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const id = await asPerson(deps, (client) =>
    resolveRef(
      client,
      'token',
      ref,
      () => client.get<ApiToken[]>(path),
      (t, r) => t.name === r,
      (t) => `${t.name} (${t.id})`,
    ),
  )
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
      .description('API tokens, newest first: name, scopes, last used, who made them')
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
      .action(actionOf(makeDeps, createToken)),
    'osctl tokens create --name ci --scopes tasks:read,runs:write > ci-token',
    'osctl tokens create --name ops --scopes "*" --json',
  )
  examples(
    tokens
      .command('revoke')
      .argument('<token>', 'token id, or its name')
      .option('-y, --yes', 'do not ask')
      .description('revoke an API token: it stops working at once')
      .action(actionOf(makeDeps, revokeToken)),
    'osctl tokens revoke ci --yes',
  )
}
