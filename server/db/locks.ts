import type { Db, Fragment } from './sql.js'

// Every advisory lock osd takes, its key made here and nowhere else (docs/locks.md lists them with what
// each serialises and who takes it). All but the migrations' are transaction locks
// (pg_advisory_xact_lock): held until the transaction that took them ends, never across one. The keys
// are those osd has always used, so that processes of two versions on one database during an upgrade
// still exclude each other (a session's lock and a transaction's of one key exclude each other too).

/** The migrations of every osd process starting at once (db/migrate.ts). */
export const migrationsKey = 0x05d_0001

/**
 * Tries the migrations' lock for the session (pg_try_advisory_lock), held across the migrations'
 * transactions and the statements of those that run outside one, until unlockMigrations. Tried, never
 * waited for: db/migrate.ts says why.
 */
export async function tryLockMigrations(db: Db): Promise<boolean> {
  const [row] = await db<{ got: boolean }[]>`select pg_try_advisory_lock(${migrationsKey}) as got`
  return row!.got
}

/** Gives the migrations' lock up (ending the session does too). */
export function unlockMigrations(db: Db) {
  return db`select pg_advisory_unlock(${migrationsKey})`
}

/** Loading the service's catalogue at start (catalog/files.ts): one process loads it. */
export function lockCatalogLoad(db: Db) {
  return db`select pg_advisory_xact_lock(hashtextextended('osd.catalog.load', 0))`
}

/** An enterprise's catalogue installs (catalog/catalog.ts): two clones at once install once. */
export function lockCatalogInstalls(db: Db, enterpriseId: string) {
  return db`select pg_advisory_xact_lock(hashtextextended(${`osd.catalog.install:${enterpriseId}`}, 0))`
}

/**
 * A lane's key (DESIGN 5: two runs of one lane are never both queued or running), of a SQL text value:
 * taken by starts (runs/start.ts lockLanes, in key order) and tried by admission (runs/admission.ts).
 */
export function laneKey(db: Db, lane: Fragment): Fragment {
  return db`hashtextextended(${lane}, 0)`
}

/** A sign-in's email, by its hash (people/sessions.ts): its failures are counted one at a time. */
export function lockSignIn(db: Db, emailHashHex: string) {
  return db`select pg_advisory_xact_lock(hashtextextended(${emailHashHex}, 7))`
}

/** Connected apps' consent requests (people/consent.ts): their cap holds under parallel requests. */
export function lockConsentRequests(db: Db) {
  return db`select pg_advisory_xact_lock(hashtextextended('osd_consent_requests', 0))`
}

/** Invitations of one email into one enterprise (people/invites.ts): one stays pending. */
export function lockInvites(db: Db, enterpriseId: string, email: string) {
  return db`select pg_advisory_xact_lock(hashtextextended(${`${enterpriseId}:${email.toLowerCase()}`}, 20))`
}

/**
 * One layer's notes (learning/memory/notes.ts writeNote): of an enterprise, a layer and its owner (the
 * task or team; none for the enterprise layer). Two writes of near-duplicates, or of the same
 * idempotency key, at once: the second finds the first.
 */
export function lockMemoryLayer(
  db: Db,
  enterpriseId: string,
  layer: string,
  ownerId: string | null,
) {
  return db`select pg_advisory_xact_lock(hashtextextended(${`osd.memory.layer:${enterpriseId}:${layer}:${ownerId ?? ''}`}, 0))`
}

/**
 * An enterprise's configuration applies (config/apply.ts): taken first in the apply's transaction, so
 * two applies of one enterprise run one after the other, the second reading what the first left (and
 * answering 409 config_changed if it planned against the state before).
 */
export function lockConfig(db: Db, enterpriseId: string) {
  return db`select pg_advisory_xact_lock(hashtextextended(${`osd.config:${enterpriseId}`}, 0))`
}

/**
 * An enterprise's retention pass (domain/retention/pass.ts), tried and never waited for: the process
 * that holds it moves that enterprise's batch and appends to its archive file; another skips the
 * enterprise until its next pass. Taken first in its transaction, before any row lock.
 */
export async function tryLockRetention(db: Db, enterpriseId: string): Promise<boolean> {
  const [row] = await db<{ got: boolean }[]>`
    select pg_try_advisory_xact_lock(hashtextextended(${`osd.retention:${enterpriseId}`}, 0)) as got`
  return row!.got
}
