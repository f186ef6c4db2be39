import { ApiError } from '../../../shared/errors.js'
import type { MyEnterprise, PersonRole, User } from '../../../shared/schemas/people.js'
import { Email } from '../../../shared/schemas/people.js'
import type { Person } from '../../../shared/schemas/users.js'
import { announceHere } from '../../db/notified-cache.js'
import { isUniqueViolation, transaction, type Db, type Tx } from '../../db/sql.js'
import { checkNewPassword, hashPassword } from './passwords.js'
import { revokeTokensOfMaker } from './tokens.js'

// People (DESIGN 8): a person has an email, a password and memberships in enterprises with a role there;
// the owner of an enterprise holds its chief executive role.

/** NOTIFY channel of what makes a person's sessions stale: the payload is a session, user or enterprise id. */
export const sessionChangedChannel = 'osd_session_changed'

export function validEmail(email: string): string {
  const parsed = Email.safeParse(email)
  if (!parsed.success) throw new ApiError('invalid_request', 'email: not an email address.')
  return parsed.data
}

export async function createUser(
  db: Db,
  input: { email: string; password: string; name?: string },
): Promise<User> {
  validEmail(input.email)
  checkNewPassword(input.password)
  const passwordHash = await hashPassword(input.password)
  return createUserWithHash(db, { email: input.email, name: input.name, passwordHash })
}

/**
 * A person whose password is already hashed (hashPassword): for the test suite, which makes many people
 * with one password hashed once (each hash takes a few hundred ms at OWASP's cost).
 */
export async function createUserWithHash(
  db: Db,
  input: { email: string; passwordHash: string; name?: string },
): Promise<User> {
  const email = validEmail(input.email)
  try {
    const [user] = await db<User[]>`
      insert into users (email, name, password_hash)
      values (${email}, ${input.name?.trim() ?? ''}, ${input.passwordHash})
      returning id, email, name`
    return user!
  } catch (err) {
    if (isUniqueViolation(err, 'users_email_key'))
      throw new ApiError('email_taken', `A person with the email ${email} exists.`)
    throw err
  }
}

export async function findUserByEmail(
  db: Db,
  email: string,
): Promise<(User & { passwordHash: string }) | undefined> {
  const [row] = await db<(User & { passwordHash: string })[]>`
    select id, email, name, password_hash from users where lower(email) = lower(${email.trim()})`
  return row
}

export async function getUser(db: Db, id: string): Promise<User> {
  const [row] = await db<User[]>`select id, email, name from users where id = ${id}`
  if (!row) throw new ApiError('user_not_found')
  return row
}

/**
 * Adds the person to the enterprise with the role, or changes their role there. A change of role ends
 * the person's sessions acting in that enterprise, at once in every osd process (issue 41; OWASP ASVS
 * 3.2: a session whose rights change is not kept with its old secret, and only its holder could be given
 * a new one): they sign in again and act with the new role. Their sessions elsewhere go on.
 */
export async function setMembership(
  db: Db,
  enterpriseId: string,
  userId: string,
  role: PersonRole,
): Promise<void> {
  // One statement, so `before` is the role as it was; the NOTIFY is part of it: delivered when it
  // commits, never lost to a crash before.
  await db`
    with before as (
      select role from enterprise_people where enterprise_id = ${enterpriseId} and user_id = ${userId}
    ), member as (
      insert into enterprise_people (enterprise_id, user_id, role)
      values (${enterpriseId}, ${userId}, ${role})
      on conflict (enterprise_id, user_id) do update set role = excluded.role
      returning user_id
    ), ended as (
      update sessions set revoked_at = now()
       where user_id = ${userId} and enterprise_id = ${enterpriseId} and revoked_at is null
         and exists (select 1 from before where role <> ${role})
    )
    select pg_notify(${sessionChangedChannel}, user_id::text) from member`
  announceHere(db, sessionChangedChannel, [userId])
}

/**
 * The person's membership, read with every other of the enterprise under a lock (so two owners taking
 * each other out, or demoting each other, cannot both succeed); 409 last_owner when what is done to it
 * (`leaving`: removed, made a member) would take away the last owner.
 */
async function lockMembership(
  tx: Tx,
  enterpriseId: string,
  userId: string,
  leaving: string | undefined,
): Promise<{ role: PersonRole }> {
  const people = await tx<{ userId: string; role: PersonRole }[]>`
    select user_id, role from enterprise_people
     where enterprise_id = ${enterpriseId} for update`
  const person = people.find((p) => p.userId === userId)
  if (!person) throw new ApiError('user_not_found', `No person ${userId} in this enterprise.`)
  if (leaving && person.role === 'owner' && people.filter((p) => p.role === 'owner').length === 1)
    throw new ApiError('last_owner', `The last owner of an enterprise cannot be ${leaving}.`)
  return person
}

/**
 * Makes a person of the enterprise an owner or a member; their sessions acting in it end at once in
 * every osd process (setMembership), the caller's own too when it is their own role: they sign in again
 * with the new role. The last owner stays one (409 last_owner). The same role changes nothing.
 */
export async function changeRole(
  db: Db,
  enterpriseId: string,
  userId: string,
  role: PersonRole,
): Promise<Person> {
  return transaction(db, async (tx) => {
    const leaving = role === 'member' ? 'made a member' : undefined
    const person = await lockMembership(tx, enterpriseId, userId, leaving)
    if (person.role !== role) await setMembership(tx, enterpriseId, userId, role)
    const [changed] = await listPeople(tx, enterpriseId, { userId })
    return changed!
  })
}

/**
 * Takes the person out of the enterprise; their sessions acting there stop at once in every osd process,
 * and so do the API tokens they made there (revokedReason creator_removed: issue 45). The last owner
 * stays (409 last_owner): an enterprise always has a chief executive. Answers the person as they were,
 * and the ids of the tokens revoked.
 */
export async function removeMembership(
  db: Db,
  enterpriseId: string,
  userId: string,
): Promise<{ removed: Person; revokedTokens: string[] }> {
  return transaction(db, async (tx) => {
    await lockMembership(tx, enterpriseId, userId, 'removed')
    const [removed] = await listPeople(tx, enterpriseId, { userId })
    await tx`delete from enterprise_people where enterprise_id = ${enterpriseId} and user_id = ${userId}`
    await tx`
      update sessions set revoked_at = now()
       where user_id = ${userId} and enterprise_id = ${enterpriseId} and revoked_at is null`
    await tx`select pg_notify(${sessionChangedChannel}, ${userId})`
    announceHere(tx, sessionChangedChannel, [userId])
    const revokedTokens = await revokeTokensOfMaker(tx, enterpriseId, userId)
    return { removed: removed!, revokedTokens }
  })
}

/** The enterprises the person belongs to, with their role in each, by name. */
export async function enterprisesOf(db: Db, userId: string): Promise<MyEnterprise[]> {
  return db<MyEnterprise[]>`
    select e.id, e.slug, e.name, p.role
      from enterprise_people p join enterprises e on e.id = p.enterprise_id
     where p.user_id = ${userId}
     order by e.name, e.id`
}

/** One of the person's enterprises by slug or id; 404 enterprise_not_found for any other. */
export async function enterpriseOf(
  db: Db,
  userId: string,
  slugOrId: string,
): Promise<MyEnterprise> {
  const found = (await enterprisesOf(db, userId)).find(
    (e) => e.slug === slugOrId || e.id === slugOrId,
  )
  if (!found)
    throw new ApiError('enterprise_not_found', `You belong to no enterprise "${slugOrId}".`)
  return found
}

/** The people of the enterprise with their roles, in the order they joined. */
export async function listPeople(
  db: Db,
  enterpriseId: string,
  only?: { userId: string },
): Promise<Person[]> {
  const rows = await db<(Omit<Person, 'joinedAt'> & { joinedAt: Date })[]>`
    select u.id, u.email, u.name, p.role, p.created_at as joined_at
      from enterprise_people p join users u on u.id = p.user_id
     where p.enterprise_id = ${enterpriseId} ${only ? db`and p.user_id = ${only.userId}` : db``}
     order by p.created_at, u.id`
  return rows.map((row) => ({ ...row, joinedAt: row.joinedAt.toISOString() }))
}
