import { randomInt } from 'node:crypto'
import { crc32 } from 'node:zlib'

// The API token's format (issue 45), GitHub's: a prefix that names what it is, a random part, and a
// CRC32 of the random part, so a mistyped or cut token is refused without a database look-up and a
// secret scanner can recognise an osd token without asking osd:
//
//   osd_ + 43 characters of [0-9A-Za-z] (256 bits) + 6 characters of [0-9A-Za-z] (the CRC32, base62)
//
// Tokens made before it (osd_ + 43 characters of base64url, no checksum) are still in databases: they
// keep working, through the database look-up as before.

export const apiTokenPrefix = 'osd_'
const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const randomLength = 43
const checksumLength = 6
const checked = new RegExp(`^${apiTokenPrefix}[0-9A-Za-z]{${randomLength + checksumLength}}$`)
const legacy = new RegExp(`^${apiTokenPrefix}[A-Za-z0-9_-]{43}$`)

/** The checksum of a random part: its CRC32 in base62, six characters (62^6 > 2^32), zero-padded. */
function checksum(random: string): string {
  let value = crc32(random)
  let text = ''
  for (let i = 0; i < checksumLength; i++) {
    text = alphabet[value % 62]! + text
    value = Math.floor(value / 62)
  }
  return text
}

/** A new API token in the checked format. */
export function newApiToken(): string {
  let random = ''
  // randomInt draws without modulo bias.
  for (let i = 0; i < randomLength; i++) random += alphabet[randomInt(62)]
  return apiTokenPrefix + random + checksum(random)
}

/**
 * What a presented token looks like: `checked` (this format, its checksum right), `legacy` (the format
 * before checksums, looked up as before), or `malformed` (anything else, a mistyped checked token
 * included): refused without a look-up.
 */
export function apiTokenShape(token: string): 'checked' | 'legacy' | 'malformed' {
  if (checked.test(token)) {
    const start = apiTokenPrefix.length
    const random = token.slice(start, start + randomLength)
    return token.slice(start + randomLength) === checksum(random) ? 'checked' : 'malformed'
  }
  return legacy.test(token) ? 'legacy' : 'malformed'
}
