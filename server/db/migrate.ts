import { lockMigrations } from './locks.js'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import postgres from 'postgres'
import { packageVersion, projectRoot } from '../../shared/paths.js'
import type { Sql } from './sql.js'

export const migrationsDir = join(projectRoot, 'migrations')

export interface Migration {
  id: number
  name: string
  file: string
}

export async function listMigrations(dir = migrationsDir): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort()
  return files.map((file) => ({
    id: Number(file.slice(0, 4)),
    name: file.slice(5, -4),
    file: join(dir, file),
  }))
}

/**
 * The database was migrated by a newer osd: it holds a migration this build does not know. osd stops
 * rather than run on a schema it was not written for (graphile-worker refuses the same way). Processes
 * already running when the newer osd migrated keep running: the check is made at start.
 */
export class NewerDatabaseError extends Error {
  override name = 'NewerDatabaseError'
}

/** A migration as osd_migrations records it. */
interface Applied {
  id: number
  name: string
  osdVersion: string | null
}

const label = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}_${m.name}`

/**
 * Refuses a database that holds a migration this build does not know, naming the osd version that
 * applied it (recorded since issue 43; unknown before) and this build's version and last migration.
 */
export function refuseNewer(
  applied: Applied[],
  known: Migration[],
  version = packageVersion,
): void {
  const ids = new Set(known.map((m) => m.id))
  const unknown = applied.filter((m) => !ids.has(m.id)).sort((a, b) => b.id - a.id)[0]
  if (!unknown) return
  const last = known.at(-1)
  const theirs = unknown.osdVersion ? `osd ${unknown.osdVersion}` : 'an osd of unrecorded version'
  throw new NewerDatabaseError(
    `this database was migrated by a newer osd: it holds migration ${label(unknown)}, applied by ` +
      `${theirs}, which this osd (${version}, migrations up to ${last ? label(last) : 'none'}) does ` +
      'not know. Run the newer osd on it, or restore a backup taken before the upgrade; an older osd ' +
      'does not start on a newer schema',
  )
}

/**
 * A migration that could not take the locks it needs: each try waited its lock_timeout for a lock
 * another transaction held, and was rolled back. osd exits 1 with the message, which says what to do.
 */
export class MigrationLockError extends Error {
  override name = 'MigrationLockError'
}

/** Where the runner says that a migration waits (osd's logger, or a test's). */
export interface MigrationLog {
  warn(fields: Record<string, unknown>, message: string): void
}

export interface MigrateOptions {
  /** Only the migrations up to this id: the schema of a backup being restored (admin/backup.ts). */
  upTo?: number
  /**
   * How long a statement of a migration waits for a lock (lock_timeout) before its migration is rolled
   * back and tried again. A migration that asks for a table's ACCESS EXCLUSIVE lock queues behind every
   * transaction open on the table, and every statement on the table then queues behind the migration:
   * this bounds how long a long reader (a backup's copy, a slow report) stops the service.
   */
  lockTimeoutMs?: number
  /** How many times a migration is tried before migrate gives up (MigrationLockError). */
  attempts?: number
  /** The wait before the second try; each next one twice the last, up to 30 s, with jitter. */
  retryWaitMs?: number
  log?: MigrationLog
}

/** The defaults: a few seconds' stall at most for each try, about three minutes in all. */
export const migrationLockDefaults = { lockTimeoutMs: 3_000, attempts: 10, retryWaitMs: 1_000 }
const maxRetryWaitMs = 30_000

/** A statement cancelled for its lock_timeout (55P03), or chosen as a deadlock's victim (40P01). */
function lockLost(err: unknown): err is postgres.PostgresError {
  return err instanceof postgres.PostgresError && (err.code === '55P03' || err.code === '40P01')
}

/** What PostgreSQL said of the lock a statement gave up on: its message and, if any, where. */
const lockReason = (err: postgres.PostgresError) =>
  err.where ? `${err.message} (${err.where.split('\n')[0]})` : err.message

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Applies pending migrations, each once, each in its own transaction, under an advisory lock; the record
 * row is written first so a failed migration leaves nothing behind (graphile-worker's migrate.ts). Each
 * record names the osd version that applied it. A database migrated by a newer osd (one migration this
 * build does not know) is refused before anything is applied: NewerDatabaseError.
 *
 * Migrations run while the release before still serves (docs/configuration.md, Upgrades), so each one's
 * statements wait at most lockTimeoutMs for a lock: one that waits longer is rolled back and tried
 * again after a wait, a warn line each time, up to `attempts` tries (then MigrationLockError, nothing
 * of it applied). statement_timeout is off for them: an index built on a big table takes its time.
 * Returns the names applied by this call. With upTo, only the migrations up to that id.
 */
export async function migrate(
  sql: Sql,
  dir = migrationsDir,
  options: MigrateOptions = {},
): Promise<string[]> {
  const { lockTimeoutMs, attempts, retryWaitMs } = { ...migrationLockDefaults, ...options }
  const known = await listMigrations(dir)
  await sql.begin(async (tx) => {
    await lockMigrations(tx)
    await tx`
      create table if not exists osd_migrations (
        id integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`
    // Added here, not by a migration: the check below reads it before any migration is applied.
    await tx`alter table osd_migrations add column if not exists osd_version text`
    refuseNewer(await tx<Applied[]>`select id, name, osd_version from osd_migrations`, known)
  })
  // upTo: the schema of a backup being restored (admin/backup.ts), the later migrations left for the
  // next start.
  const migrations = known.filter((m) => options.upTo === undefined || m.id <= options.upTo)
  const applied: string[] = []
  for (const migration of migrations) {
    const text = await readFile(migration.file, 'utf8')
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await sql.begin(async (tx) => {
          await lockMigrations(tx)
          const [row] = await tx`select 1 from osd_migrations where id = ${migration.id}`
          if (row) return false
          await tx.unsafe(`set local lock_timeout = ${Math.round(lockTimeoutMs)}`)
          await tx.unsafe('set local statement_timeout = 0')
          await tx`
            insert into osd_migrations (id, name, osd_version)
            values (${migration.id}, ${migration.name}, ${packageVersion})`
          await tx.unsafe(text)
          return true
        })
        if (done) applied.push(label(migration))
        break
      } catch (err) {
        if (!lockLost(err)) throw err
        if (attempt >= attempts)
          throw new MigrationLockError(
            `migration ${label(migration)} could not take its locks: ${attempts} tries each waited ` +
              `${lockTimeoutMs} ms for a lock another transaction held (${lockReason(err)}) and were ` +
              'rolled back, so nothing of it is applied. A long transaction holds a lock on a table it ' +
              'changes (a backup, a slow report, a session left idle in transaction): find it in ' +
              'pg_stat_activity (xact_start), let it end or end it, and start osd again; the processes ' +
              'already running go on meanwhile',
          )
        const waitMs = Math.round(
          Math.min(retryWaitMs * 2 ** (attempt - 1), maxRetryWaitMs) * (0.5 + Math.random()),
        )
        options.log?.warn(
          {
            migration: label(migration),
            attempt,
            attempts,
            lockTimeoutMs,
            reason: lockReason(err),
            retryInMs: waitMs,
          },
          `migration ${label(migration)} waited ${lockTimeoutMs} ms for a lock and was rolled back; ` +
            `trying again in ${waitMs} ms (try ${attempt} of ${attempts})`,
        )
        await sleep(waitMs)
      }
    }
  }
  return applied
}
