import { ApiError } from '../../shared/errors.js'
import type { Scope } from '../../shared/scopes.js'
import type { Db } from '../db/sql.js'
import { hashSecret, lastChars, newSecret } from './secrets.js'

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
  if (!row) throw new ApiError('not_found', `No token ${id} in this enterprise.`)
  return toToken(row)
}

/** Revokes a token at once; revoking it again changes nothing. */
export async function revokeToken(db: Db, enterpriseId: string, id: string): Promise<ApiToken> {
  const [row] = await db<TokenRow[]>`
    update api_tokens
       set revoked_at = coalesce(revoked_at, now())
     where enterprise_id = ${enterpriseId} and id = ${id}
     returning id, name, scopes, last_chars, created_at, revoked_at`
  if (!row) throw new ApiError('not_found', `No token ${id} in this enterprise.`)
  return toToken(row)
}

/**
 * The caller a bearer token stands for, or undefined. Looked up by the token's SHA-256, which is what
 * the unique index holds; a token's own bytes never reach the database.
 */
export async function authenticateToken(
  db: Db,
  token: string,
): Promise<{ tokenId: string; enterpriseId: string; scopes: ReadonlySet<string> } | undefined> {
  if (token.length > 200) return undefined
  const [row] = await db<{ id: string; enterpriseId: string; scopes: string[] }[]>`
    select id, enterprise_id, scopes
      from api_tokens
     where token_hash = ${hashSecret(token)} and revoked_at is null`
  return row && { tokenId: row.id, enterpriseId: row.enterpriseId, scopes: new Set(row.scopes) }
}
