import { ApiError } from '../../shared/errors.js'
import type { Scope } from '../../shared/scopes.js'
import type { Db } from '../db/sql.js'
import { hashSecret, lastChars, newSecret } from './secrets.js'

/** NOTIFY channel of revocations; its payload is the token id. */
export const tokenRevokedChannel = 'osd_token_revoked'

export interface ApiToken {
  id: string
  name: string
  scopes: string[]
  lastChars: string
  createdAt: string
  revokedAt: string | null
}

interface TokenRow {
  id: string
  name: string
  scopes: string[]
  lastChars: string
  createdAt: Date
  revokedAt: Date | null
}

function toToken(row: TokenRow): ApiToken {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes,
    lastChars: row.lastChars,
    createdAt: row.createdAt.toISOString(),
    revokedAt: row.revokedAt?.toISOString() ?? null,
  }
}

/** Creates a token; the secret is in this answer only and stored as its hash (spec: Authentication 6). */
export async function createToken(
  db: Db,
  enterpriseId: string,
  input: { name: string; scopes: readonly Scope[] },
): Promise<ApiToken & { token: string }> {
  const token = newSecret('osd')
  const [row] = await db<TokenRow[]>`
    insert into api_tokens (enterprise_id, name, scopes, token_hash, last_chars)
    values (${enterpriseId}, ${input.name}, ${db.array(input.scopes as string[])}, ${hashSecret(token)}, ${lastChars(token)})
    returning id, name, scopes, last_chars, created_at, revoked_at`
  return { ...toToken(row!), token }
}

export async function listTokens(db: Db, enterpriseId: string): Promise<ApiToken[]> {
  const rows = await db<TokenRow[]>`
    select id, name, scopes, last_chars, created_at, revoked_at
      from api_tokens
     where enterprise_id = ${enterpriseId}
     order by created_at, id`
  return rows.map(toToken)
}

export async function getToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  const [row] = await db<TokenRow[]>`
    select id, name, scopes, last_chars, created_at, revoked_at
      from api_tokens
     where enterprise_id = ${enterpriseId} and id = ${id}`
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
      update api_tokens
         set revoked_at = coalesce(revoked_at, now())
       where enterprise_id = ${enterpriseId} and id = ${id}
       returning id, name, scopes, last_chars, created_at, revoked_at
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
