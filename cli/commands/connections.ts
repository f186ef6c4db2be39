import type { Command } from 'commander'
import type { AppConnection } from '../../shared/schemas/consent.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { printTable, show } from '../output.js'
import { asPerson } from '../people.js'
import { idRef } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'

// Apps connected with the enterprise's consent (issue 20; spec: Authentication 6): a signed-in person
// lists them and revokes one; a token cannot (api_token_cannot_manage_connections).

export async function listConnections(
  deps: Deps,
  opts: { includeRevoked?: boolean } = {},
): Promise<void> {
  const rows = await asPerson(deps, (client) =>
    client.get<AppConnection[]>('/enterprise/connections', {
      includeRevoked: opts.includeRevoked ? 'true' : undefined,
    }),
  )
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'ID', value: (c) => c.id },
      { header: 'APP', value: (c) => c.appName },
      { header: 'SCOPES', value: (c) => c.scopes.join(' ') },
      { header: 'APPROVED BY', value: (c) => c.approvedBy?.email },
      { header: 'APPROVED', value: (c) => c.approvedAt },
      { header: 'LAST USED', value: (c) => c.lastUsedAt },
      { header: 'REVOKED', value: (c) => c.revokedAt },
    ]),
  )
}

/** Revokes a connected app: its token stops working at once. */
export async function revokeConnection(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const id = idRef(ref, 'a connected app')
  await confirmDestructive(deps, opts.yes, `Revoke connected app ${id} (its token stops at once)`)
  const revoked = await asPerson(deps, (client) =>
    client.delete<AppConnection>(`/enterprise/connections/${id}`),
  )
  show(deps.out, revoked, () =>
    deps.out.write(`revoked connected app ${safeText(revoked.appName)} (${revoked.id})\n`),
  )
}

export function registerConnections(program: Command, makeDeps: MakeDeps): void {
  const connections = program.command('connections').description(about.connections)
  examples(
    connections
      .command('list')
      .description('connected apps: scopes, who approved them, last use')
      .option('--include-revoked', 'show revoked ones too')
      .action(actionOf(makeDeps, listConnections)),
    'osctl connections list',
  )
  examples(
    connections
      .command('revoke')
      .argument('<id>', 'connected app id')
      .option('-y, --yes', 'do not ask')
      .description('revoke a connected app: its token stops working at once')
      .action(actionOf(makeDeps, revokeConnection)),
    'osctl connections revoke 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10 --yes',
  )
}
