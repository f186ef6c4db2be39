import { lockInvites } from '../../db/locks.js'
import { ApiError } from '../../../shared/errors.js'
import type { LoginAnswer, PersonRole, User } from '../../../shared/schemas/people.js'
import type { InviteCreated, PendingInvite } from '../../../shared/schemas/users.js'
import { announceHere } from '../../db/notified-cache.js'
import { transaction, type Db, type Fragment } from '../../db/sql.js'
import { checkNewPassword } from './passwords.js'
import { createUser, findUserByEmail, sessionChangedChannel, validEmail } from './people.js'
import { hashSecret, newSecret } from '../secrets.js'
import { checkCredentials, openSession, type SessionLifetime } from './sessions.js'

// Invites (spec: Portal-only routes, POST /v1/users): an owner invites an email with a role; no mail is
// sent, so the answer holds the invite's secret, which the owner hands over. Only its SHA-256 is stored.
// An invite is used once, lasts 7 days, and holds only while the owner who made it is still an owner of
// the enterprise: removing a person voids what they were handing out.

export const inviteDays = 7

const notFound = () =>
  new ApiError(
    'invite_not_found',
    'No such invite: it may have been used, withdrawn or have expired; ask for a new one.',
  )

/** Whether invite `i` may still be accepted. */
const acceptable = (db: Db): Fragment => db`
  i.accepted_at is null and i.expires_at > now()
  and exists (select 1 from enterprise_people o
               where o.enterprise_id = i.enterprise_id and o.user_id = i.invited_by and o.role = 'owner')`

/**
 * A new invite of `email` into the enterprise with `role`, made by the owner `invitedBy`; 409
 * already_member when a person of the enterprise has that email. It replaces the email's pending invite.
 */
export async function createInvite(
  db: Db,
  enterpriseId: string,
  invitedBy: string,
  input: { email: string; role?: PersonRole },
): Promise<InviteCreated> {
  const email = validEmail(input.email)
  const role = input.role ?? 'member'
  const inviteToken = newSecret('osdi')
  const row = await transaction(db, async (tx) => {
    // Two invites of one email at once: one after the other, so one stays pending.
    await lockInvites(tx, enterpriseId, email)
    const [member] = await tx`
      select 1 from enterprise_people p join users u on u.id = p.user_id
       where p.enterprise_id = ${enterpriseId} and lower(u.email) = lower(${email})`
    if (member)
      throw new ApiError('already_member', `${email} is already a person of this enterprise.`)
    await tx`
      delete from invites
       where enterprise_id = ${enterpriseId} and accepted_at is null
         and (lower(email) = lower(${email}) or expires_at < now())`
    const [created] = await tx<{ id: string; email: string; role: PersonRole; expiresAt: Date }[]>`
      insert into invites (enterprise_id, email, role, token_hash, invited_by, expires_at)
      values (${enterpriseId}, ${email}, ${role}, ${hashSecret(inviteToken)}, ${invitedBy},
              now() + make_interval(days => ${inviteDays}))
      returning id, email, role, expires_at`
    return created!
  })
  return { invite: { ...row, expiresAt: row.expiresAt.toISOString() }, inviteToken }
}

/** The enterprise's invites that may still be accepted, newest first. */
export async function listInvites(db: Db, enterpriseId: string): Promise<PendingInvite[]> {
  const rows = await db<
    {
      id: string
      email: string
      role: PersonRole
      expiresAt: Date
      createdAt: Date
      invitedBy: string | null
      invitedByEmail: string | null
    }[]
  >`
    select i.id, i.email, i.role, i.expires_at, i.created_at, i.invited_by, u.email as invited_by_email
      from invites i left join users u on u.id = i.invited_by
     where i.enterprise_id = ${enterpriseId} and ${acceptable(db)}
     order by i.created_at desc, i.id desc`
  return rows.map((r) => ({
    id: r.id,
    email: r.email,
    role: r.role,
    expiresAt: r.expiresAt.toISOString(),
    createdAt: r.createdAt.toISOString(),
    invitedBy:
      r.invitedBy && r.invitedByEmail ? { userId: r.invitedBy, email: r.invitedByEmail } : null,
  }))
}

/** Withdraws an invite not yet accepted; 404 invite_not_found otherwise. */
export async function withdrawInvite(db: Db, enterpriseId: string, id: string): Promise<void> {
  const gone = await db`
    delete from invites where enterprise_id = ${enterpriseId} and id = ${id} and accepted_at is null
    returning id`
  if (gone.length === 0) throw notFound()
}

/**
 * Accepts an invite and signs the person in, acting in the enterprise: the login answer. A person new to
 * osd is made with `password`; a person who exists gives their own password, checked and counted by the
 * lockout of login (401 invalid_credentials, 429 login_locked). An invite used, withdrawn, expired or
 * unknown answers the same 404 invite_not_found.
 */
export async function acceptInvite(
  db: Db,
  input: { inviteToken: string; password: string; name?: string },
  lifetime: SessionLifetime,
  client = '',
): Promise<LoginAnswer> {
  const hash = hashSecret(input.inviteToken)
  const [invite] = await db<
    { id: string; enterpriseId: string; email: string; role: PersonRole }[]
  >`
    select i.id, i.enterprise_id, i.email, i.role from invites i
     where i.token_hash = ${hash} and ${acceptable(db)}`
  if (!invite) throw notFound()

  // The password is checked before the invite is used: a wrong one leaves it pending.
  const existing = await findUserByEmail(db, invite.email)
  let user: User | undefined =
    existing && (await checkCredentials(db, invite.email, input.password, client))
  if (!existing) checkNewPassword(input.password)

  await transaction(db, async (tx) => {
    // Used once: of two acceptances at once, the second finds it used.
    const [used] = await tx`
      update invites i set accepted_at = now()
       where i.id = ${invite.id} and ${acceptable(tx)}
      returning i.id`
    if (!used) throw notFound()
    user ??= await createUser(tx, {
      email: invite.email,
      password: input.password,
      name: input.name,
    })
    await tx`update invites set accepted_by = ${user.id} where id = ${invite.id}`
    // A person who became a member meanwhile keeps the role they have.
    await tx`
      insert into enterprise_people (enterprise_id, user_id, role)
      values (${invite.enterpriseId}, ${user.id}, ${invite.role})
      on conflict (enterprise_id, user_id) do nothing`
    await tx`select pg_notify(${sessionChangedChannel}, ${user.id})`
    announceHere(tx, sessionChangedChannel, [user.id])
  })
  return openSession(db, user!, invite.enterpriseId, lifetime)
}
