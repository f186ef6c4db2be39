import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { packageVersion, projectRoot } from '../../shared/paths.js'
import { shorten } from '../../shared/text.js'
import { tryLockMigrations, unlockMigrations } from './locks.js'
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

/** A migration's first line that makes it run outside a transaction (docs/developing.md). */
export const noTransactionMarker = '-- osd:no-transaction'

/**
 * A migration file's statements, in order, as PostgreSQL would read them: split at semicolons outside
 * comments, quoted strings and identifiers, and dollar-quoted bodies. Those of nothing but comments
 * are left out.
 */
export function splitStatements(text: string): string[] {
  const statements: string[] = []
  let start = 0
  let significant = false
  const end = (at: number) => {
    if (significant) statements.push(text.slice(start, at).trim())
    start = at + 1
    significant = false
  }
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    const next = text[i + 1]
    if (c === '-' && next === '-') {
      const eol = text.indexOf('\n', i)
      i = eol < 0 ? text.length : eol + 1
      continue
    }
    if (c === '/' && next === '*') {
      let depth = 1
      i += 2
      while (i < text.length && depth > 0) {
        if (text.startsWith('/*', i)) (depth++, (i += 2))
        else if (text.startsWith('*/', i)) (depth--, (i += 2))
        else i++
      }
      continue
    }
    significant ||= !/\s/.test(c) && c !== ';'
    if (c === "'" || c === '"') {
      // E'...' strings take backslash escapes; the others double their quote.
      const escapes = c === "'" && /[eE]/.test(text[i - 1] ?? '') && !/\w/.test(text[i - 2] ?? '')
      i++
      while (i < text.length) {
        if (escapes && text[i] === '\\') i += 2
        else if (text[i] === c && text[i + 1] === c) i += 2
        else if (text[i] === c) break
        else i++
      }
      i++
      continue
    }
    if (c === '$' && !/[\w$]/.test(text[i - 1] ?? '')) {
      const tag = /^\$(?:[A-Za-z_][\w]*)?\$/.exec(text.slice(i, i + 64))
      if (tag) {
        const close = text.indexOf(tag[0], i + tag[0].length)
        i = close < 0 ? text.length : close + tag[0].length
        continue
      }
    }
    if (c === ';') end(i)
    i++
  }
  end(text.length)
  return statements
}

/** A statement as a warning names it: its first line of SQL, comments left out, cut at 100. */
function statementLabel(statement: string): string {
  const line =
    statement
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l && !l.startsWith('--')) ?? ''
  return shorten(line, 100)
}

/** Where a no-transaction migration may stop half way: each index it builds concurrently, by name. */
const concurrentIndex =
  /^create\s+(?:unique\s+)?index\s+concurrently\s+(?:if\s+not\s+exists\s+)?(?:(?!on\s)("?[\w.]+"?))?/i
const droppedIndex = /^drop\s+index\s+concurrently\s+if\s+exists\s+("?[\w.]+"?)/i

/**
 * A no-transaction migration that fails half way keeps the statements before (each committed) and is
 * not recorded, so the next try runs it again from its first statement: each of its statements must be
 * safe to run again. An index built concurrently by a failed try is left INVALID, and `if not exists`
 * would keep it so: the rule is that it is dropped first (`drop index concurrently if exists` of the
 * same name, earlier in the file). Checked here before any migration is applied.
 */
export function checkNoTransaction(migration: Migration, statements: string[]): void {
  const dropped = new Set<string>()
  for (const statement of statements) {
    const sqlText = statement.replace(/^(\s*--[^\n]*\n)+/, '').trim()
    const drop = droppedIndex.exec(sqlText)
    if (drop) dropped.add(drop[1]!.toLowerCase())
    const build = concurrentIndex.exec(sqlText)
    if (build && !(build[1] && dropped.has(build[1].toLowerCase())))
      throw new Error(
        `migration ${label(migration)} builds an index concurrently without dropping it first ` +
          `(${statementLabel(statement)}): a try that fails half way leaves the index INVALID, ` +
          'and the next must build it again. Name the index and put `drop index concurrently if ' +
          'exists <name>` before it (docs/developing.md, Writing a migration)',
      )
  }
}

type Connection = postgres.ReservedSql<Record<string, unknown>>

/**
 * Takes the migrations' lock for this session: one process applies them, the others wait and find them
 * applied. Tried, never waited for in a statement: a statement waiting on it holds a snapshot, and a
 * `create index concurrently` of the process that holds it waits for every older snapshot to go, which
 * PostgreSQL ends as a deadlock (docs/locks.md).
 */
async function takeMigrationsLock(conn: Connection): Promise<void> {
  for (let waitMs = 20; !(await tryLockMigrations(conn)); waitMs = Math.min(waitMs * 2, 500))
    await sleep(waitMs * (0.5 + Math.random()))
}

/**
 * Applies pending migrations, each once, under an advisory lock held by this session for them all.
 * Each runs in its own transaction, its record row written first, so a failed migration leaves nothing
 * behind (graphile-worker's migrate.ts); one whose first line is `-- osd:no-transaction` runs statement
 * by statement outside a transaction (what PostgreSQL cannot do in one: `create index concurrently`,
 * a `validate constraint` that should not hold its lock for long), and is recorded after its last.
 * Each record names the osd version that applied it. A database migrated by a newer osd (one migration
 * this build does not know) is refused before anything is applied: NewerDatabaseError.
 *
 * Migrations run while the release before still serves (docs/configuration.md, Upgrades), so each
 * statement waits at most lockTimeoutMs for a lock: a migration that waits longer is rolled back (a
 * no-transaction one stops at that statement, the ones before it kept) and tried again from its first
 * statement after a wait, a warn line each time, up to `attempts` tries (then MigrationLockError).
 * statement_timeout is off for them: an index built on a big table takes its time.
 * Returns the names applied by this call. With upTo, only the migrations up to that id.
 */
export async function migrate(
  sql: Sql,
  dir = migrationsDir,
  options: MigrateOptions = {},
): Promise<string[]> {
  const { lockTimeoutMs, attempts, retryWaitMs } = { ...migrationLockDefaults, ...options }
  const known = await listMigrations(dir)
  // One connection for it all: the lock is this session's, and a no-transaction migration's
  // statements are sent on it one after the other.
  const conn = await sql.reserve()
  try {
    await takeMigrationsLock(conn)
    try {
      await inTransaction(conn, async () => {
        await conn`
          create table if not exists osd_migrations (
            id integer primary key,
            name text not null,
            applied_at timestamptz not null default now()
          )`
        // Added here, not by a migration: the check below reads it before any is applied.
        await conn`alter table osd_migrations add column if not exists osd_version text`
        refuseNewer(await conn<Applied[]>`select id, name, osd_version from osd_migrations`, known)
      })
      const done = new Set(
        (await conn<{ id: number }[]>`select id from osd_migrations`).map((r) => r.id),
      )
      // upTo: the schema of a backup being restored (admin/backup.ts), the later migrations left for
      // the next start.
      const pending: { migration: Migration; statements: string[]; outside: boolean }[] = []
      for (const migration of known) {
        if (done.has(migration.id)) continue
        if (options.upTo !== undefined && migration.id > options.upTo) continue
        const text = await readFile(migration.file, 'utf8')
        const statements = splitStatements(text)
        const outside = text.split('\n', 1)[0]!.trim() === noTransactionMarker
        if (outside) checkNoTransaction(migration, statements)
        pending.push({ migration, statements, outside })
      }
      const applied: string[] = []
      for (const { migration, statements, outside } of pending) {
        for (let attempt = 1; ; attempt++) {
          const at = { statement: '' }
          try {
            await (outside ? applyOutside : applyInTransaction)(
              conn,
              migration,
              statements,
              lockTimeoutMs,
              at,
            )
            applied.push(label(migration))
            break
          } catch (err) {
            if (!lockLost(err)) throw err
            const where = `"${statementLabel(at.statement)}"`
            if (attempt >= attempts)
              throw new MigrationLockError(
                `migration ${label(migration)} could not take its locks: ${attempts} tries each ` +
                  `waited ${lockTimeoutMs} ms for a lock another transaction held (${lockReason(err)}, ` +
                  `at ${where}) and ` +
                  (outside
                    ? 'stopped there; it is not recorded, and the next start runs it again from its ' +
                      'first statement. '
                    : 'were rolled back, so nothing of it is applied. ') +
                  'A long transaction holds a lock on a table it changes (a backup, a slow report, a ' +
                  'session left idle in transaction): find it in pg_stat_activity (xact_start), let ' +
                  'it end or end it, and start osd again; the processes already running go on meanwhile',
              )
            const waitMs = Math.round(
              Math.min(retryWaitMs * 2 ** (attempt - 1), maxRetryWaitMs) * (0.5 + Math.random()),
            )
            options.log?.warn(
              {
                migration: label(migration),
                statement: statementLabel(at.statement),
                attempt,
                attempts,
                lockTimeoutMs,
                reason: lockReason(err),
                retryInMs: waitMs,
              },
              `migration ${label(migration)} waited ${lockTimeoutMs} ms for a lock at ${where} and ` +
                `${outside ? 'stopped there' : 'was rolled back'}; trying again in ${waitMs} ms ` +
                `(try ${attempt} of ${attempts})`,
            )
            await sleep(waitMs)
          }
        }
      }
      return applied
    } finally {
      // A connection that broke meanwhile took the lock with it.
      await unlockMigrations(conn).catch(() => undefined)
    }
  } finally {
    conn.release()
  }
}

async function inTransaction<T>(conn: Connection, fn: () => Promise<T>): Promise<T> {
  await conn.unsafe('begin')
  try {
    const result = await fn()
    await conn.unsafe('commit')
    return result
  } catch (err) {
    await conn.unsafe('rollback').catch(() => undefined)
    throw err
  }
}

const record = (conn: Connection, migration: Migration) => conn`
  insert into osd_migrations (id, name, osd_version)
  values (${migration.id}, ${migration.name}, ${packageVersion})`

/** A migration in one transaction, its record row first: it is applied whole or not at all. */
async function applyInTransaction(
  conn: Connection,
  migration: Migration,
  statements: string[],
  lockTimeoutMs: number,
  at: { statement: string },
) {
  await inTransaction(conn, async () => {
    await conn.unsafe(`set local lock_timeout = ${Math.round(lockTimeoutMs)}`)
    await conn.unsafe('set local statement_timeout = 0')
    await record(conn, migration)
    for (const statement of statements) {
      at.statement = statement
      await conn.unsafe(statement)
    }
  })
}

/**
 * A no-transaction migration: each statement commits by itself, the record row only after the last.
 * One that fails half way keeps what its statements before did, and is run again from its first by
 * the next try (checkNoTransaction says why that is safe).
 */
async function applyOutside(
  conn: Connection,
  migration: Migration,
  statements: string[],
  lockTimeoutMs: number,
  at: { statement: string },
) {
  await conn.unsafe(`set lock_timeout = ${Math.round(lockTimeoutMs)}`)
  await conn.unsafe('set statement_timeout = 0')
  try {
    for (const statement of statements) {
      at.statement = statement
      await conn.unsafe(statement)
    }
  } finally {
    // The connection goes back to the pool: its settings too. One that broke is not reused.
    await conn.unsafe('reset lock_timeout').catch(() => undefined)
    await conn.unsafe('reset statement_timeout').catch(() => undefined)
  }
  await record(conn, migration)
}
