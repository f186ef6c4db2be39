import type { Db } from '../../../db/sql.js'

// What the database gives memory (issue 31): pg_trgm, for recall that forgives typos and for near-
// duplicates. Migration 0023 creates it where the database lets it; where it does not (no rights on an
// external server, a server without contrib), recall is full-text only and a duplicate is a note equal
// after folding. The SQL functions ask on every call (memory_search_terms, memory_duplicate), so an extension
// created or dropped later takes effect at once; osd says at start which it is.

export interface MemorySupport {
  /** pg_trgm is installed in the database. */
  trigram: boolean
}

export async function memorySupport(db: Db): Promise<MemorySupport> {
  const [row] = await db<{ trigram: boolean }[]>`
    select exists (select 1 from pg_extension where extname = 'pg_trgm') as trigram`
  return { trigram: row!.trigram }
}

/** What osd logs once at start when pg_trgm is not there. */
export const noTrigramMessage =
  'pg_trgm is not installed in the database (migration 0023 could not create it): memory recall is full-text only (no typo forgiveness) and only notes equal after case and white-space folding are refused as duplicates; create the extension (create extension pg_trgm) as a role with CREATE on the database to have both'
