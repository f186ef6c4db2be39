import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { failure } from '../../../server/cli.js'
import { listMigrations, migrate, MigrationLockError } from '../../../server/db/migrate.js'
import { createSql } from '../../../server/db/sql.js'
import { createTestDatabase, holdLock, type TestDatabase } from '../../helpers/db.js'
import { eventually } from '../../helpers/wait.js'

// Migrations run while the release before still serves (docs/configuration.md, Upgrades). A migration
// that asks for a table's ACCESS EXCLUSIVE lock queues behind any transaction open on it, and every
// statement on the table then queues behind the migration: one long reader stopped the whole service.
// Each migration's statements wait at most lock_timeout; the runner rolls it back and tries again.

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})

const label = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}_${m.name}`

/** A migrations dir holding this build's migrations and `extra` ones (file name -> SQL). */
async function migrationsWith(extra: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'osd-migrations-'))
  for (const m of await listMigrations()) await symlink(m.file, join(dir, `${label(m)}.sql`))
  for (const [name, text] of Object.entries(extra)) await writeFile(join(dir, name), text)
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A warn line the runner wrote, kept for the test to read. */
function warnings() {
  const lines: { fields: Record<string, unknown>; message: string }[] = []
  return {
    lines,
    log: {
      warn: (fields: Record<string, unknown>, message: string) =>
        void lines.push({ fields, message }),
    },
  }
}

// First a table of its own, then a change of runs: nothing of it may stay when the second waits.
const altersRuns =
  'create table lock_probe (id int);\n' + 'alter table runs add column lock_probe int;\n'

async function probeLeft() {
  const [row] = await db.sql<{ column: boolean; table: boolean; recorded: boolean }[]>`
    select exists (select from information_schema.columns
                    where table_name = 'runs' and column_name = 'lock_probe') as column,
           to_regclass('lock_probe') is not null as table,
           exists (select from osd_migrations where id = 9001) as recorded`
  return row!
}

describe('a migration whose table another transaction holds', () => {
  it('gives up its lock wait, says so, tries again, and applies once the holder commits', async () => {
    const dir = await migrationsWith({ '9001_alters_runs.sql': altersRuns })
    onTestFinished(async () => {
      await db.sql`alter table runs drop column if exists lock_probe`
      await db.sql`drop table if exists lock_probe`
      await db.sql`delete from osd_migrations where id = 9001`
    })
    // A reader's transaction: a backup's copy, a long-poll, a slow report.
    const reader = await holdLock(db.sql, (tx) => tx`lock table runs in access share mode`)
    const { lines, log } = warnings()
    let migrating: Promise<string[]>
    try {
      migrating = migrate(db.sql, dir, { lockTimeoutMs: 100, retryWaitMs: 50, attempts: 50, log })
      migrating.catch(() => undefined)
      // Tried and rolled back at least twice while the reader is there; its writes meanwhile wait
      // no longer than a lock_timeout at a time.
      await eventually(() => lines.length >= 2, 10_000, 'two retries')
      expect(await probeLeft()).toEqual({ column: false, table: false, recorded: false })
    } finally {
      await reader.release()
    }
    expect(await migrating).toEqual(['9001_alters_runs'])
    expect(await probeLeft()).toEqual({ column: true, table: true, recorded: true })
    expect(lines[0]!.message).toMatch(
      /^migration 9001_alters_runs waited 100 ms for a lock and was rolled back; trying again in \d+ ms \(try 1 of 50\)$/,
    )
    expect(lines[0]!.fields).toMatchObject({
      migration: '9001_alters_runs',
      attempt: 1,
      attempts: 50,
      reason: 'canceling statement due to lock timeout',
    })
  })

  it('fails with one line that says what to do, nothing of it applied, when the holder never lets go', async () => {
    const dir = await migrationsWith({ '9001_alters_runs.sql': altersRuns })
    const reader = await holdLock(db.sql, (tx) => tx`lock table runs in access share mode`)
    const { lines, log } = warnings()
    try {
      const failed = await migrate(db.sql, dir, {
        lockTimeoutMs: 100,
        retryWaitMs: 20,
        attempts: 3,
        log,
      }).catch((err: unknown) => err)
      expect(failed).toBeInstanceOf(MigrationLockError)
      expect((failed as Error).message).toBe(
        'migration 9001_alters_runs could not take its locks: 3 tries each waited 100 ms for a lock ' +
          'another transaction held (canceling statement due to lock timeout) and were rolled back, ' +
          'so nothing of it is applied. A long transaction holds a lock on a table it changes (a ' +
          'backup, a slow report, a session left idle in transaction): find it in pg_stat_activity ' +
          '(xact_start), let it end or end it, and start osd again; the processes already running ' +
          'go on meanwhile',
      )
      // osd serve and osd migrate exit 1 with it, in one line.
      let stderr = ''
      expect(failure(failed, { write: (text) => (stderr += text) })).toBe(1)
      expect(stderr).toBe(`error: ${(failed as Error).message}\n`)
      expect(lines.map((l) => l.fields.attempt)).toEqual([1, 2])
      expect(await probeLeft()).toEqual({ column: false, table: false, recorded: false })
    } finally {
      await reader.release()
    }
    // The next start applies it.
    onTestFinished(async () => {
      await db.sql`alter table runs drop column if exists lock_probe`
      await db.sql`drop table if exists lock_probe`
      await db.sql`delete from osd_migrations where id = 9001`
    })
    expect(await migrate(db.sql, dir)).toEqual(['9001_alters_runs'])
  })

  it('waits with statement_timeout off, whatever the connection set', async () => {
    const dir = await migrationsWith({
      '9002_slow.sql': 'create table slow_probe as select 1 as one from pg_sleep(0.3);\n',
    })
    onTestFinished(async () => {
      await db.sql`drop table if exists slow_probe`
      await db.sql`delete from osd_migrations where id = 9002`
    })
    // A DATABASE_URL's ?statement_timeout=, or the role's own setting.
    await db.sql.unsafe(`alter database "${db.name}" set statement_timeout = 100`)
    onTestFinished(async () => {
      await db.sql.unsafe(`alter database "${db.name}" reset statement_timeout`)
    })
    const timed = createSql(db.url, { max: 1 })
    onTestFinished(() => timed.end())
    expect(await migrate(timed, dir)).toEqual(['9002_slow'])
  })
})
