// Ids are UUIDs (spec: Common conventions); PostgreSQL refuses anything else as a uuid.

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(value: string): boolean {
  return uuid.test(value)
}

/** The fewest hex characters of an id that name it (issue 51 item 8), as git's short ids. */
export const minIdPrefix = 8

/**
 * The ids a prefix names, as the range of uuids that start with it: what a lookup matches with the
 * primary key's btree (`id between low and high`), never `id::text like`. The prefix is hex as an id
 * prints, at least minIdPrefix characters, its dashes only where they fall in an id (8, 12, 16 and 20
 * characters in) and optional there. Undefined when it is not one.
 */
export function idPrefixRange(prefix: string): { low: string; high: string } | undefined {
  if (prefix.includes('--')) return undefined
  let hex = ''
  for (const char of prefix.toLowerCase()) {
    if (char === '-') {
      if (![8, 12, 16, 20].includes(hex.length)) return undefined
    } else if (/^[0-9a-f]$/.test(char)) hex += char
    else return undefined
  }
  if (hex.length < minIdPrefix || hex.length > 32) return undefined
  const form = (digits: string) =>
    [0, 8, 12, 16, 20].map((at, i, ats) => digits.slice(at, ats[i + 1])).join('-')
  return { low: form(hex.padEnd(32, '0')), high: form(hex.padEnd(32, 'f')) }
}
