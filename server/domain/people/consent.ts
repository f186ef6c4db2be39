import { lockConsentRequests } from '../../db/locks.js'
import { randomBytes } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import type {
  AppConnection,
  ConsentPoll,
  ConsentRequestView,
  ConsentStatus,
} from '../../../shared/schemas/consent.js'
import type { MyEnterprise, User } from '../../../shared/schemas/people.js'
import type { Scope } from '../../../shared/scopes.js'
import { announceHere } from '../../db/notified-cache.js'
import { transaction, type Db } from '../../db/sql.js'
import { enterpriseOf, enterprisesOf } from './people.js'
import { hashSecret, lastChars, matchesHash, newSecret } from '../secrets.js'
import { newTokenSecret, tokenChangedChannel } from './tokens.js'
import { shorten } from '../../../shared/text.js'

// Connected apps (spec: Portal-only routes; DESIGN 8), by a device-style flow since no mail or browser
// redirect exists here:
// 1. the app asks (public): it gets a request id, a short user code for a person, and a poll token;
// 2. a person reads the code; an owner of one of their enterprises approves it there (a connection of
//    that enterprise), or anyone holding the code declines it;
// 3. the app polls with its poll token and collects its API token once: the token is made then, so its
//    secret is never stored, not even sealed.
// Revoking the connection revokes its token at once, in every osd process (the tokens' NOTIFY).
//
// A code is 8 characters of 32 (40 bits) and lives 15 minutes; at most 1,000 requests wait at once, so the
// public route cannot fill the database. An unknown or expired code answers 404 consent_request_not_found;
// one already decided 409 consent_request_decided (until it expires, then 404 too).

export const consentLimits = { minutes: 15, pending: 1000, keepDays: 1 } as const

/** No 0, O, 1 or I: a code read aloud or copied by hand is not mistaken. 32 letters: 5 bits a byte. */
const codeAlphabet = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789'

function newUserCode(): string {
  const code = [...randomBytes(8)].map((b) => codeAlphabet[b & 31]).join('')
  return `${code.slice(0, 4)}-${code.slice(4)}`
}

/** The stored form of a typed code (case, spaces and hyphens ignored), or undefined for none. */
export function normalUserCode(typed: string): string | undefined {
  const code = typed.toUpperCase().replace(/[\s-]/g, '')
  if (code.length !== 8 || [...code].some((ch) => !codeAlphabet.includes(ch))) return undefined
  return `${code.slice(0, 4)}-${code.slice(4)}`
}

const notFound = () =>
  new ApiError('consent_request_not_found', 'No consent request waits with that code.')

/** The app's request for access; its poll token is in this answer only. */
export async function createConsentRequest(
  db: Db,
  input: { appName: string; scopes: readonly Scope[] },
): Promise<{ id: string; userCode: string; pollToken: string; expiresAt: string }> {
  const pollToken = newSecret('osdp')
  const scopes = [...new Set(input.scopes)]
  return transaction(db, async (tx) => {
    // One request at a time counts and adds, so the cap holds under parallel requests.
    await lockConsentRequests(tx)
    // Requests long past (declined, expired, or approved and collected) go with the new ones.
    await tx`
      delete from consent_requests
       where expires_at < now() - make_interval(days => ${consentLimits.keepDays})
         and (status <> 'approved' or token_issued_at is not null)`
    const [waiting] = await tx<{ count: number; seconds: number | null }[]>`
      select count(*)::int as count, ceil(extract(epoch from min(expires_at) - now()))::int as seconds
        from consent_requests where status = 'pending' and expires_at > now()`
    if (waiting!.count >= consentLimits.pending)
      throw new ApiError(
        'too_many_consent_requests',
        'Too many consent requests wait for a decision; try again later.',
        { retryAfterSeconds: Math.max(1, waiting!.seconds ?? 60) },
      )
    // A code still held by a pending request (even an expired one) is drawn again.
    for (;;) {
      const [row] = await tx<{ id: string; userCode: string; expiresAt: Date }[]>`
        insert into consent_requests (app_name, scopes, user_code, poll_hash, expires_at)
        values (${input.appName}, ${tx.array(scopes as string[])}, ${newUserCode()}, ${hashSecret(pollToken)},
                now() + make_interval(mins => ${consentLimits.minutes}))
        on conflict (user_code) where status = 'pending' do nothing
        returning id, user_code, expires_at`
      if (row)
        return {
          id: row.id,
          userCode: row.userCode,
          pollToken,
          expiresAt: row.expiresAt.toISOString(),
        }
    }
  })
}

interface RequestRow {
  id: string
  appName: string
  scopes: string[]
  status: 'pending' | 'approved' | 'declined'
  expiresAt: Date
  expired: boolean
  decidedBy: string | null
  connectionId: string | null
  tokenIssuedAt: Date | null
}

const requestColumns = (tx: Db) =>
  tx`id, app_name, scopes, status, expires_at, expires_at <= now() as expired, decided_by, connection_id, token_issued_at`

/**
 * What the app learns by polling: the status, and once approved the API token, in one answer only. A
 * wrong or missing poll token answers as an unknown id does (404).
 */
export async function pollConsentRequest(
  db: Db,
  id: string,
  pollToken: string | undefined,
): Promise<ConsentPoll> {
  return transaction(db, async (tx) => {
    // Locked: two polls at once cannot both collect the token.
    const [row] = await tx<(RequestRow & { pollHash: Buffer })[]>`
      select ${requestColumns(tx)}, poll_hash from consent_requests where id = ${id} for update`
    if (!row || !pollToken || !matchesHash(pollToken, row.pollHash))
      throw new ApiError('consent_request_not_found', `No consent request ${id}.`)
    const expiresAt = row.expiresAt.toISOString()
    if (row.status !== 'approved') return { status: statusOf(row), expiresAt }

    // Locked too: a revocation either comes first (and is seen here) or finds the token made here.
    const [connection] = await tx<{ enterpriseId: string; revokedAt: Date | null }[]>`
      select enterprise_id, revoked_at from app_connections where id = ${row.connectionId} for update`
    if (!connection || connection.revokedAt) return { status: 'revoked', expiresAt }
    if (row.tokenIssuedAt) return { status: 'approved', expiresAt }

    const token = newTokenSecret()
    await tx`
      insert into api_tokens (enterprise_id, name, scopes, token_hash, last_chars, created_by_user, app_connection_id)
      values (${connection.enterpriseId}, ${shorten(`app: ${row.appName}`, 200)}, ${tx.array(row.scopes)},
              ${hashSecret(token)}, ${lastChars(token)}, ${row.decidedBy}, ${row.connectionId})`
    await tx`update consent_requests set token_issued_at = now() where id = ${id}`
    return { status: 'approved', expiresAt, token }
  })
}

function statusOf(row: RequestRow): ConsentStatus {
  return row.status === 'pending' && row.expired ? 'expired' : row.status
}

function viewOf(row: RequestRow): ConsentRequestView {
  return {
    appName: row.appName,
    scopes: row.scopes,
    status: statusOf(row),
    expiresAt: row.expiresAt.toISOString(),
  }
}

/**
 * The request a code names, locked when `tx` is a transaction: the pending one if any, else the latest.
 * Unknown, malformed and expired codes are all 404.
 */
async function requestByCode(tx: Db, typed: string, lock: boolean): Promise<RequestRow> {
  const code = normalUserCode(typed)
  if (!code) throw notFound()
  const [row] = await tx<RequestRow[]>`
    select ${requestColumns(tx)} from consent_requests
     where user_code = ${code}
     order by status = 'pending' desc, created_at desc
     limit 1 ${lock ? tx`for update` : tx``}`
  if (!row || row.expired) throw notFound()
  return row
}

function undecided(row: RequestRow): void {
  if (row.status !== 'pending')
    throw new ApiError(
      'consent_request_decided',
      `This consent request is already ${row.status === 'approved' ? 'approved' : 'declined'}.`,
    )
}

/** What a person sees of the request a code names, before deciding it. */
export async function consentRequestByCode(db: Db, code: string): Promise<ConsentRequestView> {
  return viewOf(await requestByCode(db, code, false))
}

/** The person's enterprises where they may approve: those they own. */
export async function consentEnterprises(db: Db, userId: string): Promise<MyEnterprise[]> {
  return (await enterprisesOf(db, userId)).filter((e) => e.role === 'owner')
}

/** The owners of one of the person's enterprises: whom a member can ask to approve. */
export async function consentOwners(db: Db, userId: string, enterprise: string): Promise<User[]> {
  const found = await enterpriseOf(db, userId, enterprise)
  return db<User[]>`
    select u.id, u.email, u.name
      from enterprise_people p join users u on u.id = p.user_id
     where p.enterprise_id = ${found.id} and p.role = 'owner'
     order by u.email, u.id`
}

/**
 * Approves the request a code names into one of the person's enterprises, which they must own (404
 * enterprise_not_found for one not theirs, 403 owner_only for one they do not own): a connection of
 * that enterprise, whose token the app collects by polling.
 */
export async function approveConsent(
  db: Db,
  userId: string,
  input: { userCode: string; enterpriseId: string },
): Promise<AppConnection> {
  const enterprise = await enterpriseOf(db, userId, input.enterpriseId)
  const id = await transaction(db, async (tx) => {
    // The role read under a share lock: an owner taken out meanwhile cannot approve.
    const [person] = await tx<{ role: string }[]>`
      select role from enterprise_people
       where enterprise_id = ${enterprise.id} and user_id = ${userId} for share`
    if (!person)
      throw new ApiError('enterprise_not_found', 'You belong to that enterprise no more.')
    if (person.role !== 'owner')
      throw new ApiError('owner_only', 'Only an owner of the enterprise may connect an app to it.')
    const request = await requestByCode(tx, input.userCode, true)
    undecided(request)
    const [connection] = await tx<{ id: string }[]>`
      insert into app_connections (enterprise_id, app_name, scopes, approved_by)
      values (${enterprise.id}, ${request.appName}, ${tx.array(request.scopes)}, ${userId})
      returning id`
    await tx`
      update consent_requests
         set status = 'approved', decided_by = ${userId}, decided_at = now(),
             enterprise_id = ${enterprise.id}, connection_id = ${connection!.id}
       where id = ${request.id}`
    return connection!.id
  })
  return getConnection(db, enterprise.id, id)
}

/** Declines the request a code names: any signed-in person holding the code may say no. */
export async function declineConsent(
  db: Db,
  userId: string,
  userCode: string,
): Promise<ConsentRequestView> {
  return transaction(db, async (tx) => {
    const request = await requestByCode(tx, userCode, true)
    undecided(request)
    await tx`
      update consent_requests set status = 'declined', decided_by = ${userId}, decided_at = now()
       where id = ${request.id}`
    return viewOf({ ...request, status: 'declined' })
  })
}

interface ConnectionRow {
  id: string
  appName: string
  scopes: string[]
  approvedBy: string | null
  email: string | null
  approvedAt: Date
  lastUsedAt: Date | null
  revokedAt: Date | null
}

function toConnection(row: ConnectionRow): AppConnection {
  return {
    id: row.id,
    appName: row.appName,
    scopes: row.scopes,
    approvedBy: row.approvedBy && row.email ? { userId: row.approvedBy, email: row.email } : null,
    approvedAt: row.approvedAt.toISOString(),
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
  }
}

// A connection's token revoked on its own (as any token can be) revokes the connection with it.
const connectionSelect = (db: Db) => db`
  select c.id, c.app_name, c.scopes, c.approved_by, u.email, c.approved_at, t.last_used_at,
         coalesce(c.revoked_at, t.revoked_at) as revoked_at
    from app_connections c
    left join users u on u.id = c.approved_by
    left join api_tokens t on t.app_connection_id = c.id`

/** The enterprise's connected apps, newest first; revoked ones only when asked for. */
export async function listConnections(
  db: Db,
  enterpriseId: string,
  includeRevoked = false,
): Promise<AppConnection[]> {
  const rows = await db<ConnectionRow[]>`
    ${connectionSelect(db)}
     where c.enterprise_id = ${enterpriseId}
       ${includeRevoked ? db`` : db`and c.revoked_at is null and t.revoked_at is null`}
     order by c.approved_at desc, c.id`
  return rows.map(toConnection)
}

export async function getConnection(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<AppConnection> {
  const [row] = await db<ConnectionRow[]>`
    ${connectionSelect(db)} where c.enterprise_id = ${enterpriseId} and c.id = ${id}`
  if (!row)
    throw new ApiError('app_connection_not_found', `No connected app ${id} in this enterprise.`)
  return toConnection(row)
}

/**
 * Revokes a connected app and its token at once; again changes nothing. The NOTIFY, delivered when the
 * change commits, tells every osd process to forget the token (server/http/caches.ts), this one at
 * once (announceHere).
 */
export async function revokeConnection(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<AppConnection> {
  await transaction(db, async (tx) => {
    const [found] = await tx`
      update app_connections set revoked_at = coalesce(revoked_at, now())
       where enterprise_id = ${enterpriseId} and id = ${id} returning id`
    if (!found)
      throw new ApiError('app_connection_not_found', `No connected app ${id} in this enterprise.`)
    const rows = await tx<{ id: string }[]>`
      with revoked as (
        update api_tokens set revoked_at = coalesce(revoked_at, now())
         where app_connection_id = ${id} returning id
      )
      select revoked.id, pg_notify(${tokenChangedChannel}, revoked.id::text) from revoked`
    announceHere(
      tx,
      tokenChangedChannel,
      rows.map((r) => r.id),
    )
  })
  return getConnection(db, enterpriseId, id)
}
