import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'

// Secrets the service only checks (API tokens, the webhook secret) are stored as SHA-256 hashes and
// compared in constant time (DESIGN 3).

/**
 * A new secret: a prefix naming its kind, then 32 random bytes in base64url. API tokens have a format
 * of their own, with a checksum (domain/people/tokens.ts newTokenSecret).
 */
export function newSecret(prefix: 'osds' | 'osdp' | 'osdi' | 'whsec'): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`
}

export function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest()
}

export function lastChars(secret: string): string {
  return secret.slice(-4)
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function matchesHash(secret: string, hash: Buffer | Uint8Array): boolean {
  const presented = hashSecret(secret)
  return presented.length === hash.length && timingSafeEqual(presented, hash)
}
