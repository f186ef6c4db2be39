import { ApiError } from '../../../shared/errors.js'
import type { Scope } from '../../../shared/scopes.js'
import type { Db } from '../../db/sql.js'
import { hashSecret, lastChars, newSecret } from '../secrets.js'

/** NOTIFY channel of revocations; its payload is the token id. */
export const tokenRevokedChannel = 'osd_token_revoked'

export interface ApiToken {
  id: string
  name: string
  scopes: string[]
  lastChars: string
  /** To the minute: a token's use moves it at most once a minute. */
  lastUsedAt: string | null
  createdAt: string
  /** The person who made it; null for a token made on the server host (osd admin), or of a person gone. */
  createdBy: { userId: string; email: string } | null
  revokedAt: string | null
}

interface TokenRow {
  id: string
  name: string
  scopes: string[]
  lastChars: string
  lastUsedAt: Date | null
  createdAt: Date
  createdByUser: string | null
  createdByEmail: string | null
  revokedAt: Date | null
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
    revokedAt: row.revokedAt?.toISOString() ?? null,
  }
}

// The columns of a token, its creator's email included; `t` is api_tokens.
const tokenColumns = (db: Db) => db`
  t.id, t.name, t.scopes, t.last_chars, t.last_used_at, t.created_at, t.created_by_user,
  (select u.email from users u where u.id = t.created_by_user) as created_by_email, t.revoked_at`

/**
 * Creates a token; the secret is in this answer only and stored as its hash (spec: Authentication 6).
 * `createdBy` is the person who made it in the portal; none when made on the server host.
 */
export async function createToken(
  db: Db,
  enterpriseId: string,
  input: { name: string; scopes: readonly Scope[]; createdBy?: string },
): Promise<ApiToken & { token: string }> {
  const token = newSecret('osd')
  const [row] = await db<TokenRow[]>`
    insert into api_tokens as t (enterprise_id, name, scopes, token_hash, last_chars, created_by_user)
    values (${enterpriseId}, ${input.name}, ${db.array(input.scopes as string[])}, ${hashSecret(token)},
            ${lastChars(token)}, ${input.createdBy ?? null})
    returning ${tokenColumns(db)}`
  return { ...toToken(row!), token }
}

/** The enterprise's tokens, newest first; revoked ones only when asked for. Never their secrets. */
export async function listTokens(
  db: Db,
  enterpriseId: string,
  options: { includeRevoked?: boolean } = {},
): Promise<ApiToken[]> {
  const rows = await db<TokenRow[]>`
    select ${tokenColumns(db)}
      from api_tokens t
     where t.enterprise_id = ${enterpriseId}
       ${options.includeRevoked ? db`` : db`and t.revoked_at is null`}
     order by t.created_at desc, t.id desc`
  return rows.map(toToken)
}

export async function getToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  const [row] = await db<TokenRow[]>`
    select ${tokenColumns(db)}
      from api_tokens t
     where t.enterprise_id = ${enterpriseId} and t.id = ${id}`
  if (!row) throw new ApiError('token_not_found', `No token ${id} in this enterprise.`)
  return toToken(row)
}

/**
 * Revokes a token at once; revoking it again changes nothing. The NOTIFY, delivered when the change
 * commits, tells every osd process to forget the token (server/http/caches.ts).
 */
export async function revokeToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  const [row] = await db<TokenRow[]>`
    with revoked as (
      update api_tokens t
         set revoked_at = coalesce(revoked_at, now())
       where enterprise_id = ${enterpriseId} and id = ${id}
       returning ${tokenColumns(db)}
    )
    select revoked.*, pg_notify(${tokenRevokedChannel}, revoked.id::text) from revoked`
  if (!row) throw new ApiError('token_not_found', `No token ${id} in this enterprise.`)
  return toToken(row)
}

export interface TokenCaller {
  kind: 'token'
  tokenId: string
  enterpriseId: string
  scopes: ReadonlySet<string>
  actor: string
}

/**
 * The caller a token stands for, or undefined, found by the token's SHA-256 (what the unique index
 * holds: a token's own bytes never reach the database). Notes when it was last used, to the minute.
 */
export async function findCallerByHash(db: Db, hash: Buffer): Promise<TokenCaller | undefined> {
  const [row] = await db<{ id: string; enterpriseId: string; scopes: string[] }[]>`
    with found as (
      select id, enterprise_id, scopes, last_used_at
        from api_tokens
       where token_hash = ${hash} and revoked_at is null
    ), used as (
      update api_tokens set last_used_at = now()
        from found
       where api_tokens.id = found.id
         and (found.last_used_at is null or found.last_used_at < now() - interval '1 minute')
    )
    select id, enterprise_id, scopes from found`
  return (
    row && {
      kind: 'token',
      tokenId: row.id,
      enterpriseId: row.enterpriseId,
      scopes: new Set(row.scopes),
      actor: `token:${row.id}`,
    }
  )
}
