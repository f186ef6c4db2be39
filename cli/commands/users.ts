import type { Command } from 'commander'
import type {
  InviteCreated,
  PendingInvite,
  Person,
  PersonRemoved,
} from '../../shared/schemas/users.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printTable, show } from '../output.js'
import { asPerson, personText } from '../people.js'
import { idRef, resolveRef } from '../resolve.js'
import { about } from './about.js'

// The people of the enterprise (issue 20): listed, invited and removed by its owners, signed in.
// (Not `osctl members`: those are the enterprise's AI members.)

export async function listUsers(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) => client.get<Person[]>('/users'))
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'ID', value: (u) => u.id },
      { header: 'EMAIL', value: (u) => u.email },
      { header: 'NAME', value: (u) => u.name },
      { header: 'ROLE', value: (u) => u.role },
      { header: 'JOINED', value: (u) => u.joinedAt },
    ]),
  )
}

/**
 * Invites a person by email. No mail is sent: the invite token is printed once, for the person to
 * accept with `osctl auth accept-invite`.
 */
export async function inviteUser(
  deps: Deps,
  email: string,
  opts: { owner?: boolean },
): Promise<void> {
  if (!email.includes('@')) throw new UsageError(`expected an email address; got "${email}"`)
  const invited = await asPerson(deps, (client) =>
    client.post<InviteCreated>('/users', { email, role: opts.owner ? 'owner' : 'member' }),
  )
  deps.out.error(
    `invited ${invited.invite.email} as ${invited.invite.role} until ${invited.invite.expiresAt}; ` +
      'no mail is sent: give them this invite token (shown once), to run ' +
      '`osctl auth accept-invite TOKEN`\n',
  )
  show(deps.out, invited, () => deps.out.write(invited.inviteToken + '\n'))
}

/** The id of a person of the enterprise named by id or email. */
function personId(deps: Deps, ref: string): Promise<string> {
  return asPerson(deps, (client) =>
    resolveRef(
      client,
      'person',
      ref,
      () => client.get<Person[]>('/users'),
      (u, r) => u.email.toLowerCase() === r.toLowerCase(),
      (u) => `${personText(u)} (${u.id})`,
    ),
  )
}

/** Makes a person (by id or email) an owner or a member; their sessions act with it at once. */
export async function changeUserRole(deps: Deps, ref: string, role: string): Promise<void> {
  if (role !== 'owner' && role !== 'member')
    throw new UsageError(`the role is owner or member; got "${role}"`)
  const id = await personId(deps, ref)
  const person = await asPerson(deps, (client) => client.patch<Person>(`/users/${id}`, { role }))
  show(deps.out, person, () => deps.out.write(`${personText(person)} is now ${person.role}\n`))
}

/**
 * Removes a person (by id or email) from the enterprise; their sessions there end at once, and so do
 * the API tokens they made there: the answer says how many.
 */
export async function removeUser(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  let who = ref
  const id = await personId(deps, ref)
  if (id !== ref) who = `${ref} (${id})`
  await confirmDestructive(
    deps,
    opts.yes,
    `Remove ${who} from the enterprise (their sessions and the API tokens they made in it end at once)`,
  )
  // An osd from before issue 45 answers 204, without the count.
  const answer = await asPerson(deps, (client) =>
    client.delete<PersonRemoved | undefined>(`/users/${id}`),
  )
  const revoked = answer?.revokedTokens
  show(deps.out, answer ?? { removed: id }, () =>
    deps.out.write(
      `removed ${who} from the enterprise` +
        (revoked === undefined
          ? '\n'
          : revoked === 0
            ? '; they had made no API token in it\n'
            : `; revoked the ${revoked === 1 ? 'API token' : `${revoked} API tokens`} they made in it\n`),
    ),
  )
}

/** The invites that may still be accepted (owners only). */
export async function listInvites(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) => client.get<PendingInvite[]>('/users/invites'))
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'ID', value: (i) => i.id },
      { header: 'EMAIL', value: (i) => i.email },
      { header: 'ROLE', value: (i) => i.role },
      { header: 'INVITED BY', value: (i) => i.invitedBy?.email },
      { header: 'CREATED', value: (i) => i.createdAt },
      { header: 'EXPIRES', value: (i) => i.expiresAt },
    ]),
  )
}

/** Withdraws an invite not yet accepted: its token no longer signs anyone in. */
export async function withdrawInvite(deps: Deps, ref: string): Promise<void> {
  const id = idRef(ref, 'an invite')
  await asPerson(deps, (client) => client.delete(`/users/invites/${id}`))
  show(deps.out, { withdrawn: id }, () => deps.out.write(`withdrew invite ${id}\n`))
}

export function registerUsers(program: Command, makeDeps: MakeDeps): void {
  const users = program.command('users').description(about.users)
  examples(
    users
      .command('list')
      .description('the people of the enterprise and their roles')
      .action(actionOf(makeDeps, listUsers)),
    'osctl users list',
  )
  examples(
    users
      .command('invite')
      .argument('<email>')
      .option('--owner', 'invite as an owner (default: a member)')
      .description('invite a person; the invite token is printed once (no mail is sent)')
      .action(actionOf(makeDeps, inviteUser)),
    'osctl users invite grace@example.com',
    'osctl users invite ada@example.com --owner --json',
  )
  examples(
    users
      .command('invites')
      .description('the invites that may still be accepted, newest first')
      .action(actionOf(makeDeps, listInvites)),
    'osctl users invites',
  )
  examples(
    users
      .command('withdraw-invite')
      .argument('<id>', 'invite id')
      .description('withdraw an invite not yet accepted')
      .action(actionOf(makeDeps, withdrawInvite)),
    'osctl users withdraw-invite 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    users
      .command('role')
      .argument('<user>', 'id or email')
      .argument('<role>', 'owner or member')
      .description(
        'make a person an owner (a chief executive) or a member; the last owner stays one',
      )
      .action(actionOf(makeDeps, changeUserRole)),
    'osctl users role grace@example.com owner',
  )
  examples(
    users
      .command('remove')
      .argument('<user>', 'id or email')
      .option('-y, --yes', 'do not ask')
      .description(
        'remove a person from the enterprise; their sessions in it and the API tokens they made there end at once',
      )
      .action(actionOf(makeDeps, removeUser)),
    'osctl users remove grace@example.com --yes',
  )
}
