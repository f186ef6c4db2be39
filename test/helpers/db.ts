import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import postgres from 'postgres'
import { inject, onTestFinished } from 'vitest'
import { listMigrations, migrate } from '../../server/db/migrate.js'
import { createSql, readySql, type Sql, type Tx } from '../../server/db/sql.js'
import { withDatabase } from '../global-setup.js'
import { afterFile } from './after-file.js'

export interface TestDatabase {
  sql: Sql
  url: string
  name: string
}

/**
 * A database of this test file's own, cloned from the migrated template, dropped after the file. Real
 * PostgreSQL, never a mock.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl')
  const name = `osd_test_${randomBytes(6).toString('hex')}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined })
  await admin.unsafe(`create database "${name}" template "${inject('templateDb')}"`)
  const url = withDatabase(adminUrl, name)
  const sql = await readySql(url, { max: 10 })
  afterFile(async () => {
    await sql.end({ timeout: 5 })
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return { sql, url, name }
}

/**
 * A database with nothing in it, not even a schema, as `createdb` makes one (what `osd admin restore`
 * goes into), dropped after the file.
 */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl')
  const name = `osd_empty_${randomBytes(6).toString('hex')}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => undefined })
  await admin.unsafe(`create database "${name}"`)
  const url = withDatabase(adminUrl, name)
  const sql = createSql(url, { max: 1 })
  afterFile(async () => {
    await sql.end({ timeout: 5 })
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return { sql, url, name }
}

/**
 * A database an older osd migrated: the migrations up to `upTo` only, dropped after the file. Rows
 * written in the shape that release wrote them, then `migrate(sql)` (what the new osd does at its
 * start), reproduce an upgrade of a populated database.
 */
export async function createDatabaseMigratedTo(upTo: number): Promise<TestDatabase> {
  const db = await createEmptyDatabase()
  await migrate(db.sql, undefined, { upTo })
  return db
}

/**
 * Whether a backend of `sql`'s database runs a statement whose text is like `pattern` (SQL's LIKE), or
 * with `lockWait`, waits on a lock in one: for a test that acts at a known point of another's work.
 */
export async function statementUnderWay(
  sql: Sql,
  pattern: string,
  { lockWait = false }: { lockWait?: boolean } = {},
): Promise<boolean> {
  const found = await sql`
    select 1 from pg_stat_activity
     where datname = current_database() and query like ${pattern}
       and ${lockWait ? sql`wait_event_type = 'Lock'` : sql`state = 'active'`}`
  return found.length > 0
}

/**
 * A lock `take` takes in a transaction of the test's own, held until `release()`: a request that wants
 * it waits. `waitedOn()` says whether some backend waits on this transaction, and on no other: the
 * files of a run share one cluster, and a lock wait of another file is not this request's.
 */
export async function holdLock(sql: Sql, take: (tx: Tx) => Promise<unknown>) {
  let release!: () => void
  let taken!: () => void
  const held = new Promise<void>((r) => (release = r))
  const took = new Promise<void>((r) => (taken = r))
  let pid = 0
  const locking = sql.begin(async (tx) => {
    const [me] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`
    pid = me!.pid
    await take(tx)
    taken()
    await held
  })
  await Promise.race([took, locking])
  return {
    async waitedOn() {
      const waiting = await sql`
        select 1 from pg_stat_activity where ${pid}::int = any(pg_blocking_pids(pid))`
      return waiting.length > 0
    },
    async release() {
      release()
      await locking
    },
  }
}

/**
 * A migrations dir holding this build's migrations and `extra` ones (file name -> SQL), for `migrate`'s
 * `dir`; removed when the test ends.
 */
export async function migrationsWith(extra: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'osd-migrations-'))
  for (const m of await listMigrations()) await symlink(m.file, join(dir, basename(m.file)))
  for (const [name, text] of Object.entries(extra)) await writeFile(join(dir, name), text)
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}
