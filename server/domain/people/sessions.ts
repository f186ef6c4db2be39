import { lockSignIn } from '../../db/locks.js'
import { createHash, randomBytes } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import type {
  EnterpriseChosen,
  LoginAnswer,
  Me,
  MyEnterprise,
  PersonRole,
  User,
} from '../../../shared/schemas/people.js'
import { announceHere } from '../../db/notified-cache.js'
import { transaction, type Db } from '../../db/sql.js'
import {
  checkNewPassword,
  hashPassword,
  unmatchableHash,
  upgradePasswordHash,
  verifyPassword,
} from './passwords.js'
import {
  enterpriseOf,
  enterprisesOf,
  findUserByEmail,
  getUser,
  sessionChangedChannel,
} from './people.js'
import { hashSecret, newSecret } from '../secrets.js'

// Sessions (DESIGN 8): what a person's sign-in opens. The secret is answered once (and set as a cookie);
// only its SHA-256 is stored, as is the CSRF token's. A session ends when idle too long, at its absolute
// expiry, at logout, or when its person leaves the enterprise; every osd process hears of the last two at
// once (NOTIFY on sessionChangedChannel), the first two are checked by every lookup.

/** What a session secret starts with (newSecret('osds')); an API token starts osd_. */
export const sessionPrefix = 'osds_'
/**
 * Failed sign-ins (issue 44): five a client may make at an email in an hour without waiting; then it
 * waits 1 s, 2, 4 ... (at most 15 minutes) before each next try.
 */
export const lockout = { freeFailures: 5, windowMinutes: 60, maxDelaySeconds: 15 * 60 } as const

export interface SessionLifetime {
  idleMinutes: number
  maxHours: number
}

export interface SessionSummary {
  id: string
  /** The slug of the enterprise it acts in, or null. */
  enterprise: string | null
  current: boolean
  createdAt: string
  lastSeenAt: string
  expiresAt: string
  idleExpiresAt: string
}

/** What a request learns from a session's secret. */
export interface FoundSession {
  kind: 'session'
  sessionId: string
  userId: string
  /** '' when the person acts in no enterprise (they belong to none, or left the one chosen). */
  enterpriseId: string
  role: PersonRole | null
  csrfHash: Buffer
  /** Its absolute expiry, in ms: an event stream it holds ends then (http/limits.ts). */
  validUntil: number
}

const emailHash = (email: string) =>
  createHash('sha256').update(email.trim().toLowerCase(), 'utf8').digest()

/** Checks an email and password (checkCredentials) and opens a session in one of their enterprises. */
export async function login(
  db: Db,
  input: { email: string; password: string; enterprise?: string },
  lifetime: SessionLifetime,
  client = '',
): Promise<LoginAnswer> {
  const user = await checkCredentials(db, input.email, input.password, client)
  return openSession(db, user, input.enterprise, lifetime)
}

/** Seconds a client waits before its next try at an email after `failures` failures (issue 44). */
export function signInDelay(failures: number): number {
  if (failures < lockout.freeFailures) return 0
  return Math.min(2 ** (failures - lockout.freeFailures), lockout.maxDelaySeconds)
}

/**
 * The person with this email and password, or 401 invalid_credentials. Failures are counted per email
 * and client (its address; issue 44): after five within the hour, that client waits before its next try
 * at that email, 1 s, then 2, 4 ... up to 15 minutes (429 login_locked, Retry-After, not counted), while
 * anyone else, the person from their own address included, signs in as before. This holds whether or not
 * a person has that email, and a wrong email costs the same scrypt time as a wrong password: the answers
 * tell nothing of who exists. An attempt counts as a failure from before its password is checked, so
 * parallel guesses cannot outrun the delay. A hash of weaker parameters than today's is made again on
 * success.
 */
export async function checkCredentials(
  db: Db,
  email: string,
  password: string,
  client = '',
): Promise<User> {
  const key = emailHash(email)
  const wait = await transaction(db, async (tx) => {
    await lockSignIn(tx, key.toString('hex'))
    const [counted] = await tx<{ failures: number; wait: number }[]>`
      select count(*)::int as failures,
             coalesce(extract(epoch from max(at) - now()), 0)::float8 as wait
        from login_failures
       where email_hash = ${key} and client_address = ${client}
         and at > now() - make_interval(mins => ${lockout.windowMinutes})`
    const seconds = Math.ceil(counted!.wait + signInDelay(counted!.failures))
    if (counted!.failures >= lockout.freeFailures && seconds > 0) return seconds
    await tx`insert into login_failures (email_hash, client_address) values (${key}, ${client})`
    return 0
  })
  if (wait > 0) throw lockedError(wait)

  const user = await findUserByEmail(db, email)
  const matches = await verifyPassword(
    password,
    user?.passwordHash ?? unmatchableHash(),
    client,
  ).catch(async (err: unknown) => {
    // Not checked at all (429 sign_in_busy): the attempt does not count against the email.
    await db`
      delete from login_failures
       where ctid = (select ctid from login_failures
                      where email_hash = ${key} and client_address = ${client}
                      order by at desc limit 1)`
    throw err
  })
  if (!user || !matches)
    throw new ApiError('invalid_credentials', 'The email or the password is wrong.')
  // Only this client's: a success here does not give guesses made elsewhere a fresh start.
  await db`delete from login_failures where email_hash = ${key} and client_address = ${client}`
  await upgradePasswordHash(db, user.id, password, user.passwordHash)
  return { id: user.id, email: user.email, name: user.name }
}

/**
 * A new session of the person, acting in `enterprise` (slug or id; 404 unless theirs) or else in the
 * first of theirs. Its secret and CSRF token are in this answer only.
 */
export async function openSession(
  db: Db,
  user: User,
  enterprise: string | undefined,
  lifetime: SessionLifetime,
): Promise<LoginAnswer> {
  const actsIn = enterprise
    ? await enterpriseOf(db, user.id, enterprise)
    : ((await enterprisesOf(db, user.id))[0] ?? null)
  const { sessionToken, csrfToken } = sessionSecrets()
  const [session] = await db<{ expiresAt: Date }[]>`
    insert into sessions (user_id, enterprise_id, token_hash, csrf_hash, expires_at)
    values (${user.id}, ${actsIn?.id ?? null}, ${hashSecret(sessionToken)}, ${hashSecret(csrfToken)},
            now() + make_interval(hours => ${lifetime.maxHours}))
    returning expires_at`
  // Old failures go with the sign-ins that find them.
  await db`delete from login_failures where at < now() - make_interval(mins => ${lockout.windowMinutes})`
  return {
    user,
    enterprise: actsIn,
    sessionToken,
    csrfToken,
    expiresAt: session!.expiresAt.toISOString(),
  }
}

/** A new session secret and CSRF token: answered once, stored as their SHA-256 only. */
function sessionSecrets(): { sessionToken: string; csrfToken: string } {
  return { sessionToken: newSecret('osds'), csrfToken: randomBytes(24).toString('base64url') }
}

function lockedError(seconds: number): ApiError {
  const wait = seconds < 120 ? `${seconds} seconds` : `${Math.ceil(seconds / 60)} minutes`
  return new ApiError(
    'login_locked',
    `Too many failed sign-ins for this email from here; try again in ${wait}.`,
    { retryAfterSeconds: Math.max(1, seconds) },
  )
}

/**
 * The caller a session secret stands for, or undefined when it is unknown, revoked or expired. A lookup
 * moves the idle expiry forward, at most once a minute (callers are cached for seconds: http/caches.ts).
 */
export async function findSessionCaller(
  db: Db,
  hash: Buffer,
  lifetime: SessionLifetime,
): Promise<FoundSession | undefined> {
  const [row] = await db<
    {
      id: string
      userId: string
      enterpriseId: string | null
      role: PersonRole | null
      csrfHash: Buffer
      expiresAt: Date
    }[]
  >`
    with found as (
      select s.id, s.user_id, s.enterprise_id, s.csrf_hash, s.last_seen_at, s.expires_at, p.role
        from sessions s
        left join enterprise_people p on p.enterprise_id = s.enterprise_id and p.user_id = s.user_id
       where s.token_hash = ${hash} and s.revoked_at is null and s.expires_at > now()
         and s.last_seen_at > now() - make_interval(mins => ${lifetime.idleMinutes})
    ), touched as (
      update sessions set last_seen_at = now()
        from found
       where sessions.id = found.id and found.last_seen_at < now() - interval '1 minute'
    )
    select id, user_id, enterprise_id, csrf_hash, expires_at, role from found`
  if (!row) return undefined
  return {
    kind: 'session',
    sessionId: row.id,
    userId: row.userId,
    // A session whose person left its enterprise acts in none.
    enterpriseId: row.role ? row.enterpriseId! : '',
    role: row.role,
    csrfHash: row.csrfHash,
    validUntil: row.expiresAt.getTime(),
  }
}

/** Ends the session at once, in every osd process. */
export async function revokeSession(db: Db, sessionId: string): Promise<void> {
  await db`
    with ended as (
      update sessions set revoked_at = coalesce(revoked_at, now()) where id = ${sessionId} returning id
    )
    select pg_notify(${sessionChangedChannel}, id::text) from ended`
  announceHere(db, sessionChangedChannel, [sessionId])
}

/**
 * Moves the session to another of the person's enterprises (404 enterprise_not_found otherwise) with a
 * fresh secret and CSRF token (issue 41; OWASP ASVS 3.2: what the session may do changes, so does its
 * secret): the old secret stops working at once, in every osd process; the session keeps its id and its
 * absolute expiry. Undefined when the session ended meanwhile.
 */
export async function chooseEnterprise(
  db: Db,
  session: { sessionId: string; userId: string },
  slugOrId: string,
  lifetime: SessionLifetime,
): Promise<EnterpriseChosen | undefined> {
  const enterprise = await enterpriseOf(db, session.userId, slugOrId)
  const { sessionToken, csrfToken } = sessionSecrets()
  const [moved] = await db`
    with moved as (
      update sessions
         set enterprise_id = ${enterprise.id}, token_hash = ${hashSecret(sessionToken)},
             csrf_hash = ${hashSecret(csrfToken)}
       where id = ${session.sessionId} and revoked_at is null and expires_at > now()
       returning id
    )
    select pg_notify(${sessionChangedChannel}, id::text) from moved`
  if (!moved) return undefined
  announceHere(db, sessionChangedChannel, [session.sessionId])
  return { ...(await describeSession(db, session, lifetime)), sessionToken, csrfToken }
}

/** The person, the enterprise the session acts in, and when the session ends. */
export async function describeSession(
  db: Db,
  session: { sessionId: string; userId: string },
  lifetime: SessionLifetime,
): Promise<Me> {
  const [[row], user, enterprises] = await Promise.all([
    db<{ enterpriseId: string | null; createdAt: Date; expiresAt: Date; idleExpiresAt: Date }[]>`
      select enterprise_id, created_at, expires_at,
             least(expires_at, last_seen_at + make_interval(mins => ${lifetime.idleMinutes})) as idle_expires_at
        from sessions where id = ${session.sessionId}`,
    getUser(db, session.userId),
    enterprisesOf(db, session.userId),
  ])
  const enterprise: MyEnterprise | null =
    enterprises.find((e) => e.id === row?.enterpriseId) ?? null
  return {
    user,
    enterprise,
    session: {
      id: session.sessionId,
      createdAt: row!.createdAt.toISOString(),
      expiresAt: row!.expiresAt.toISOString(),
      idleExpiresAt: row!.idleExpiresAt.toISOString(),
    },
  }
}

/** The person's open sessions, newest first; `current` marks the one asking. */
export async function listSessions(
  db: Db,
  session: { sessionId: string; userId: string },
  lifetime: SessionLifetime,
): Promise<SessionSummary[]> {
  const rows = await db<
    (Omit<
      SessionSummary,
      'createdAt' | 'expiresAt' | 'idleExpiresAt' | 'lastSeenAt' | 'current'
    > & {
      createdAt: Date
      lastSeenAt: Date
      expiresAt: Date
      idleExpiresAt: Date
    })[]
  >`
    select s.id, e.slug as enterprise, s.created_at, s.last_seen_at, s.expires_at,
           least(s.expires_at, s.last_seen_at + make_interval(mins => ${lifetime.idleMinutes})) as idle_expires_at
      from sessions s left join enterprises e on e.id = s.enterprise_id
     where s.user_id = ${session.userId} and s.revoked_at is null and s.expires_at > now()
       and s.last_seen_at > now() - make_interval(mins => ${lifetime.idleMinutes})
     order by s.created_at desc, s.id`
  return rows.map((r) => ({
    id: r.id,
    enterprise: r.enterprise,
    current: r.id === session.sessionId,
    createdAt: r.createdAt.toISOString(),
    lastSeenAt: r.lastSeenAt.toISOString(),
    expiresAt: r.expiresAt.toISOString(),
    idleExpiresAt: r.idleExpiresAt.toISOString(),
  }))
}

/** Ends one of the person's own sessions (404 session_not_found for any other id). */
export async function revokeOwnSession(db: Db, userId: string, sessionId: string): Promise<void> {
  const [row] = await db`
    with ended as (
      update sessions set revoked_at = coalesce(revoked_at, now())
       where id = ${sessionId} and user_id = ${userId}
       returning id
    )
    select pg_notify(${sessionChangedChannel}, id::text) from ended`
  if (!row) throw new ApiError('session_not_found', `You have no session ${sessionId}.`)
  announceHere(db, sessionChangedChannel, [sessionId])
}

/**
 * Changes the person's password, given the current one (401 invalid_credentials, counted like a failed
 * sign-in), and ends every other session of theirs at once: whoever knew the old one is signed out.
 */
export async function changePassword(
  db: Db,
  session: { sessionId: string; userId: string },
  input: { currentPassword: string; newPassword: string },
  client = '',
): Promise<void> {
  checkNewPassword(input.newPassword)
  const user = await getUser(db, session.userId)
  await checkCredentials(db, user.email, input.currentPassword, client)
  await setPassword(db, session.userId, input.newPassword, session.sessionId)
}

/**
 * Gives the person a new password and ends their sessions at once in every osd process, all but `keep`
 * (the session that changed it). An operator's reset (osd admin user password) keeps none.
 */
export async function setPassword(
  db: Db,
  userId: string,
  password: string,
  keep?: string,
): Promise<void> {
  checkNewPassword(password)
  const passwordHash = await hashPassword(password)
  await transaction(db, async (tx) => {
    await tx`update users set password_hash = ${passwordHash}, updated_at = now() where id = ${userId}`
    await tx`
      with ended as (
        update sessions set revoked_at = now()
         where user_id = ${userId} and id is distinct from ${keep ?? null}::uuid and revoked_at is null
         returning id
      )
      select pg_notify(${sessionChangedChannel}, id::text) from ended`
    // The kept one too, here: it is read again at its next call.
    announceHere(tx, sessionChangedChannel, [userId])
    // A reset also lifts the delays on the email: the person can sign in with the new one at once.
    await tx`
      delete from login_failures
       where email_hash = (select sha256(convert_to(lower(email), 'UTF8')) from users where id = ${userId})`
  })
}
