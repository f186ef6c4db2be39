import { ApiError } from '../../../shared/errors.js'
import type { ApiToken } from '../../../shared/schemas/tokens.js'
import type { Scope } from '../../../shared/scopes.js'
import { newApiToken } from '../../../shared/token-format.js'
import { announceHere } from '../../db/notified-cache.js'
import { transaction, unflushedCommit, type Db } from '../../db/sql.js'
import { idPrefixFilter } from '../../db/paging.js'
import { isUuid } from '../../../shared/ids.js'
import { hashSecret, lastChars } from '../secrets.js'

export type { ApiToken }

/**
 * NOTIFY channel of what changes a token's callers (revocation, a change, a rotation); the payload is
 * the token id. Named as when it carried revocations only, so processes of two versions still hear
 * each other during an upgrade.
 */
export const tokenChangedChannel = 'osd_token_revoked'

interface TokenRow {
  id: string
  name: string
  scopes: string[]
  lastChars: string
  lastUsedAt: Date | null
  createdAt: Date
  createdByUser: string | null
  createdByEmail: string | null
  expiresAt: Date | null
  rotatedAt: Date | null
  graceEndsAt: Date | null
  revokedAt: Date | null
  revokedReason: 'revoked' | 'creator_removed' | null
  appConnectionId: string | null
}

function toToken(row: TokenRow): ApiToken {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    lastChars: row.lastChars,
    lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
    createdBy:
      row.createdByUser && row.createdByEmail
        ? { userId: row.createdByUser, email: row.createdByEmail }
        : null,
    expiresAt: row.expiresAt?.toISOString() ?? null,
    rotatedAt: row.rotatedAt?.toISOString() ?? null,
    graceEndsAt: row.graceEndsAt?.toISOString() ?? null,
    revokedAt: row.revokedAt?.toISOString() ?? null,
    revokedReason: row.revokedAt ? (row.revokedReason ?? 'revoked') : null,
  }
}

// The columns of a token, its creator's email included; `t` is api_tokens. A grace that is over is
// not shown.
const tokenColumns = (db: Db) => db`
  t.id, t.name, t.scopes, t.last_chars, t.last_used_at, t.created_at, t.created_by_user,
  (select u.email from users u where u.id = t.created_by_user) as created_by_email, t.expires_at,
  t.rotated_at, case when t.previous_valid_until > now() then t.previous_valid_until end as grace_ends_at,
  t.revoked_at, t.revoked_reason, t.app_connection_id`

/** A new API token's secret, in the checked format (shared/token-format.ts). */
export function newTokenSecret(): string {
  return newApiToken()
}

/**
 * Creates a token; the secret is in this answer only and stored as its hash (spec: Authentication 6).
 * `createdBy` is the person who made it in the portal; none when made on the server host. `expiresAt`:
 * when it stops working; never when not given.
 */
export async function createToken(
  db: Db,
  enterpriseId: string,
  input: { name: string; scopes: readonly Scope[]; createdBy?: string; expiresAt?: Date | null },
): Promise<ApiToken & { token: string }> {
  const token = newTokenSecret()
  // A person's token is made only while they are in the enterprise: a request let in by their session
  // just before they were removed would otherwise make a token after removeMembership revoked theirs,
  // and nothing would revoke it. Their membership row is locked for the insert (a removal waits, then
  // revokes this token too) or, deleted meanwhile, found no more.
  const [row] = await db<TokenRow[]>`
    insert into api_tokens as t (enterprise_id, name, scopes, token_hash, last_chars, created_by_user,
                                 expires_at)
    select ${enterpriseId}, ${input.name}, ${db.array(input.scopes as string[])}, ${hashSecret(token)},
           ${lastChars(token)}, ${input.createdBy ?? null}, ${input.expiresAt ?? null}
     where ${input.createdBy === undefined}
        or exists (select 1 from enterprise_people
                    where enterprise_id = ${enterpriseId} and user_id = ${input.createdBy ?? null}
                      for share)
    returning ${tokenColumns(db)}`
  if (!row)
    throw new ApiError(
      'enterprise_not_chosen',
      'You are no longer a person of this enterprise: sign in again to act in one of yours.',
    )
  return { ...toToken(row), token }
}

/** The enterprise's tokens, newest first; revoked ones only when asked for. Never their secrets. */
export async function listTokens(
  db: Db,
  enterpriseId: string,
  options: { includeRevoked?: boolean; idPrefix?: string } = {},
): Promise<ApiToken[]> {
  const rows = await db<TokenRow[]>`
    select ${tokenColumns(db)}
      from api_tokens t
     where t.enterprise_id = ${enterpriseId} ${idPrefixFilter(db, 't.id', options.idPrefix)}
       ${options.includeRevoked ? db`` : db`and t.revoked_at is null`}
     order by t.created_at desc, t.id desc`
  return rows.map(toToken)
}

async function tokenRow(db: Db, enterpriseId: string, id: string, lock = false) {
  const [row] = await db<TokenRow[]>`
    select ${tokenColumns(db)}
      from api_tokens t
     where t.enterprise_id = ${enterpriseId} and t.id = ${id}
     ${lock ? db`for update` : db``}`
  if (!row) throw new ApiError('token_not_found', `No token ${id} in this enterprise.`)
  return row
}

export async function getToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  return toToken(await tokenRow(db, enterpriseId, id))
}

/**
 * The token, locked, as one a person may change or rotate: live (409 token_revoked), not a connected
 * app's (409 token_of_connected_app: the app holds its secret, and its scopes are those its owner
 * approved; revoke it under /v1/enterprise/connections), and for a rotation not expired (409
 * token_expired: give it a new expiresAt first).
 */
async function changeableRow(
  db: Db,
  enterpriseId: string,
  id: string,
  rotating: boolean,
): Promise<TokenRow> {
  const row = await tokenRow(db, enterpriseId, id, true)
  if (row.revokedAt) throw new ApiError('token_revoked', `Token ${id} is revoked.`)
  if (row.appConnectionId)
    throw new ApiError(
      'token_of_connected_app',
      `Token ${id} belongs to a connected app: it is managed under /v1/enterprise/connections.`,
    )
  if (rotating && row.expiresAt && row.expiresAt.getTime() <= Date.now())
    throw new ApiError(
      'token_expired',
      `Token ${id} has expired: give it a new expiresAt before rotating it.`,
    )
  return row
}

/**
 * Changes a token's name, scopes or expiry (null: never); what is not given stays. Every osd process
 * acts on the change from its next request (the NOTIFY, delivered when the change commits, drops the
 * token's callers from every cache: server/http/caches.ts).
 */
export async function updateToken(
  db: Db,
  enterpriseId: string,
  id: string,
  change: { name?: string; scopes?: readonly Scope[]; expiresAt?: Date | null },
): Promise<ApiToken> {
  return transaction(db, async (tx) => {
    const row = await changeableRow(tx, enterpriseId, id, false)
    const scopes = change.scopes ?? row.scopes
    const expiresAt = change.expiresAt === undefined ? row.expiresAt : change.expiresAt
    const [changed] = await tx<TokenRow[]>`
      with changed as (
        update api_tokens t
           set name = ${change.name ?? row.name}, scopes = ${tx.array(scopes as string[])},
               expires_at = ${expiresAt}
         where enterprise_id = ${enterpriseId} and id = ${id}
         returning ${tokenColumns(tx)}
      )
      select changed.*, pg_notify(${tokenChangedChannel}, changed.id::text) from changed`
    announceHere(tx, tokenChangedChannel, [changed!.id])
    return toToken(changed!)
  })
}

/**
 * A new secret for the token, in this answer only. The secret it replaces keeps working for
 * `graceSeconds` (0: it stops at once), then answers 401 as an unknown one; a rotation during another's
 * grace ends that grace (only the secret it replaces gets one). Name, scopes, expiry and last use stay.
 */
export async function rotateToken(
  db: Db,
  enterpriseId: string,
  id: string,
  graceSeconds: number,
): Promise<ApiToken & { token: string }> {
  const token = newTokenSecret()
  return transaction(db, async (tx) => {
    await changeableRow(tx, enterpriseId, id, true)
    const [row] = await tx<TokenRow[]>`
      with rotated as (
        update api_tokens t
           set previous_token_hash = case when ${graceSeconds}::int > 0 then token_hash end,
               previous_valid_until = case when ${graceSeconds}::int > 0
                                           then now() + make_interval(secs => ${graceSeconds}::int) end,
               token_hash = ${hashSecret(token)}, last_chars = ${lastChars(token)}, rotated_at = now()
         where enterprise_id = ${enterpriseId} and id = ${id}
         returning ${tokenColumns(tx)}
      )
      select rotated.*, pg_notify(${tokenChangedChannel}, rotated.id::text) from rotated`
    announceHere(tx, tokenChangedChannel, [row!.id])
    return { ...toToken(row!), token }
  })
}

/**
 * Revokes a token at once; revoking it again changes nothing. The NOTIFY, delivered when the change
 * commits, tells every osd process to forget the token (server/http/caches.ts).
 */
export async function revokeToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  // What is no UUID names no token (osd admin token revoke takes the id as typed): PostgreSQL would
  // refuse it as uuid input, a stack.
  const [row] = !isUuid(id)
    ? []
    : await db<TokenRow[]>`
    with revoked as (
      update api_tokens t
         set revoked_at = coalesce(revoked_at, now()),
             revoked_reason = coalesce(revoked_reason, 'revoked')
       where enterprise_id = ${enterpriseId} and id = ${id}
       returning ${tokenColumns(db)}
    )
    select revoked.*, pg_notify(${tokenChangedChannel}, revoked.id::text) from revoked`
  if (!row) throw new ApiError('token_not_found', `No token ${id} in this enterprise.`)
  announceHere(db, tokenChangedChannel, [row.id])
  return toToken(row)
}

/**
 * Revokes the live tokens a person made in the enterprise (revokedReason creator_removed), when they
 * leave it: a token must not outlive its maker's right to act there (issue 45). Tokens made on the
 * server host have no maker and stay; so do connected apps' tokens, which belong to the enterprise's
 * connection (revoked under /v1/enterprise/connections), not to the owner who approved it. Answers the
 * ids revoked; every osd process forgets them when the change commits.
 */
export async function revokeTokensOfMaker(
  db: Db,
  enterpriseId: string,
  userId: string,
): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    with revoked as (
      update api_tokens
         set revoked_at = now(), revoked_reason = 'creator_removed'
       where created_by_user = ${userId} and enterprise_id = ${enterpriseId}
         and revoked_at is null and app_connection_id is null
       returning id
    )
    select revoked.id, pg_notify(${tokenChangedChannel}, revoked.id::text) from revoked`
  announceHere(
    db,
    tokenChangedChannel,
    rows.map((r) => r.id),
  )
  return rows.map((r) => r.id)
}

export interface TokenCaller {
  kind: 'token'
  tokenId: string
  enterpriseId: string
  scopes: ReadonlySet<string>
  actor: string
  /** When the token expires, for the answer's header (osctl warns before it happens); null: never. */
  expiresAt: string | null
  /** Until when this secret signs in (its expiry, or the end of its grace), in ms; null: no end. */
  validUntil: number | null
}

/**
 * The caller a token stands for, or undefined, found by the token's SHA-256 (what the unique indexes
 * hold: a token's own bytes never reach the database): the token's current secret, or the secret its
 * last rotation replaced while its grace lasts. A revoked or expired token is not found, exactly as an
 * unknown one. Writes nothing: its use is noted off the request's path (noteTokenUses).
 */
export async function findCallerByHash(db: Db, hash: Buffer): Promise<TokenCaller | undefined> {
  const [row] = await db<
    {
      id: string
      enterpriseId: string
      scopes: string[]
      expiresAt: Date | null
      graceUntil: Date | null
    }[]
  >`
    select id, enterprise_id, scopes, expires_at, null::timestamptz as grace_until
      from api_tokens
     where token_hash = ${hash} and revoked_at is null and (expires_at is null or expires_at > now())
    union all
    select id, enterprise_id, scopes, expires_at, previous_valid_until
      from api_tokens
     where previous_token_hash = ${hash} and previous_valid_until > now() and revoked_at is null
       and (expires_at is null or expires_at > now())
     limit 1`
  if (!row) return undefined
  const ends = [row.expiresAt, row.graceUntil].filter((d): d is Date => d !== null)
  return {
    kind: 'token',
    tokenId: row.id,
    enterpriseId: row.enterpriseId,
    scopes: new Set(row.scopes),
    actor: `token:${row.id}`,
    expiresAt: row.expiresAt?.toISOString() ?? null,
    validUntil: ends.length ? Math.min(...ends.map((d) => d.getTime())) : null,
  }
}

/**
 * Notes that the tokens were used now, each at most once a minute (lastUsedAt is to the minute). Its
 * commit does not wait for the WAL flush: a use lost to a database crash is noted again by the next.
 */
export async function noteTokenUses(db: Db, tokenIds: readonly string[]): Promise<void> {
  if (tokenIds.length === 0) return
  await db`
    with used as (
      update api_tokens set last_used_at = now()
       where id = any(${db.array(tokenIds as string[])}::uuid[])
         and (last_used_at is null or last_used_at < now() - interval '1 minute')
       returning 1
    )
    select ${unflushedCommit(db)}, (select count(*) from used) as noted`
}
