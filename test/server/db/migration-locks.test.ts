import { beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { failure } from '../../../server/cli.js'
import { migrate, MigrationLockError, splitStatements } from '../../../server/db/migrate.js'
import { createSql } from '../../../server/db/sql.js'
import {
  createTestDatabase,
  holdLock,
  migrationsWith,
  type TestDatabase,
} from '../../helpers/db.js'
import { eventually } from '../../helpers/wait.js'

// Migrations run while the release before still serves (docs/configuration.md, Upgrades). A migration
// that asks for a table's ACCESS EXCLUSIVE lock queues behind any transaction open on it, and every
// statement on the table then queues behind the migration: one long reader stopped the whole service.
// Each migration's statements wait at most lock_timeout; the runner rolls it back and tries again.

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})

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
      new RegExp(
        '^migration 9001_alters_runs waited 100 ms for a lock at "alter table runs add column ' +
          'lock_probe int" and was rolled back; trying again in \\d+ ms \\(try 1 of 50\\)$',
      ),
    )
    expect(lines[0]!.fields).toMatchObject({
      migration: '9001_alters_runs',
      attempt: 1,
      attempts: 50,
      statement: 'alter table runs add column lock_probe int',
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
          'another transaction held (canceling statement due to lock timeout, at "alter table runs ' +
          'add column lock_probe int") and were rolled back, ' +
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

// What PostgreSQL cannot do in a transaction (create index concurrently; a validate constraint that
// should not hold its lock for long) goes in a file whose first line is `-- osd:no-transaction`: its
// statements run one by one, each committing by itself, and it is recorded after its last.
describe('a no-transaction migration', () => {
  const buildsIndex =
    '-- osd:no-transaction\n' +
    '-- A unique index on a table that already has writes: built without stopping them.\n' +
    'drop index concurrently if exists cic_probe_x;\n' +
    'create unique index concurrently cic_probe_x on cic_probe (x);\n'

  async function index() {
    const [row] = await db.sql<{ valid: boolean | null; recorded: boolean }[]>`
      select (select indisvalid from pg_index where indexrelid = to_regclass('cic_probe_x')) as valid,
             exists (select from osd_migrations where id = 9003) as recorded`
    return row!
  }

  it('builds an index concurrently, and one a failed try left INVALID is built again by the next', async () => {
    const dir = await migrationsWith({ '9003_cic_probe.sql': buildsIndex })
    await db.sql`create table cic_probe (x int)`
    onTestFinished(async () => {
      await db.sql`drop table if exists cic_probe`
      await db.sql`delete from osd_migrations where id = 9003`
    })
    await db.sql`insert into cic_probe values (1), (1), (2)`
    // The build fails half way (two rows of 1): the index is left behind INVALID, the file not recorded.
    await expect(migrate(db.sql, dir)).rejects.toMatchObject({ code: '23505' })
    expect(await index()).toEqual({ valid: false, recorded: false })
    // The next start drops it and builds it again.
    await db.sql`delete from cic_probe where ctid = (select min(ctid) from cic_probe where x = 1)`
    expect(await migrate(db.sql, dir)).toEqual(['9003_cic_probe'])
    expect(await index()).toEqual({ valid: true, recorded: true })
    expect(await migrate(db.sql, dir)).toEqual([])
  })

  it('is refused, before any migration is applied, when it builds an index concurrently without dropping it first', async () => {
    onTestFinished(async () => {
      await db.sql`drop table if exists before_probe`
      await db.sql`delete from osd_migrations where id = 9002`
    })
    for (const build of [
      'create index concurrently if not exists cic_probe_x on cic_probe (x)',
      'create index concurrently on cic_probe (x)',
    ]) {
      const dir = await migrationsWith({
        '9002_before.sql': 'create table before_probe (id int);\n',
        '9003_cic_probe.sql': `-- osd:no-transaction\n${build};\n`,
      })
      await expect(migrate(db.sql, dir)).rejects.toThrow(
        'migration 9003_cic_probe builds an index concurrently without dropping it first ' +
          `(${build}): a try that fails half way leaves the index INVALID, and the next must build ` +
          'it again. Name the index and put `drop index concurrently if exists <name>` before it ' +
          '(docs/developing.md, Writing a migration)',
      )
      const [row] = await db.sql`select to_regclass('before_probe') as t`
      expect(row!.t).toBeNull()
    }
  })

  it('stops at the statement that waits too long for a lock, keeping those before it, and runs again from its first', async () => {
    const dir = await migrationsWith({
      '9003_outside_probe.sql':
        '-- osd:no-transaction\n' +
        'create table if not exists outside_probe (id int);\n' +
        'alter table runs add column if not exists outside_probe int;\n',
    })
    onTestFinished(async () => {
      await db.sql`alter table runs drop column if exists outside_probe`
      await db.sql`drop table if exists outside_probe`
      await db.sql`delete from osd_migrations where id = 9003`
    })
    const reader = await holdLock(db.sql, (tx) => tx`lock table runs in access share mode`)
    try {
      await expect(
        migrate(db.sql, dir, { lockTimeoutMs: 100, retryWaitMs: 20, attempts: 2 }),
      ).rejects.toThrow(
        'migration 9003_outside_probe could not take its locks: 2 tries each waited 100 ms for a ' +
          'lock another transaction held (canceling statement due to lock timeout, at "alter table ' +
          'runs add column if not exists outside_probe int") and stopped there; it is not ' +
          'recorded, and the next start runs it again from its first statement.',
      )
      const [row] = await db.sql`
        select to_regclass('outside_probe') is not null as table,
               exists (select from osd_migrations where id = 9003) as recorded`
      expect(row).toEqual({ table: true, recorded: false })
    } finally {
      await reader.release()
    }
    expect(await migrate(db.sql, dir)).toEqual(['9003_outside_probe'])
    // The connection it ran on went back to the pool without its lock_timeout.
    const settings = await Promise.all(
      Array.from({ length: 10 }, () => db.sql`select current_setting('lock_timeout') as t`),
    )
    expect(new Set(settings.map(([s]) => s!.t))).toEqual(new Set(['0']))
  })

  it('is applied once by two processes starting at once, the second waiting without a deadlock', async () => {
    const dir = await migrationsWith({
      '9003_cic_probe.sql': buildsIndex.replace('drop index', 'select pg_sleep(0.3);\ndrop index'),
    })
    await db.sql`create table cic_probe (x int)`
    onTestFinished(async () => {
      await db.sql`drop table if exists cic_probe`
      await db.sql`delete from osd_migrations where id = 9003`
    })
    const both = await Promise.all([migrate(db.sql, dir), migrate(db.sql, dir)])
    expect(both.flat()).toEqual(['9003_cic_probe'])
    expect(await index()).toEqual({ valid: true, recorded: true })
  })
})

describe('splitStatements', () => {
  it('splits at semicolons outside comments, quotes and dollar-quoted bodies', () => {
    const text = [
      "-- a run's holds; counted",
      "insert into t values ('a;b', 'it''s', E'\\'; ', \"semi;colon\");",
      '/* a /* nested; */ comment */ select 1;',
      'create function f() returns int language plpgsql as $$ begin return 1; end $$;',
      'select $tag$ ; $$ ; $tag$::text, $1;',
      '-- the end; nothing after',
      '',
    ].join('\n')
    expect(splitStatements(text)).toEqual([
      "-- a run's holds; counted\ninsert into t values ('a;b', 'it''s', E'\\'; ', \"semi;colon\")",
      '/* a /* nested; */ comment */ select 1',
      'create function f() returns int language plpgsql as $$ begin return 1; end $$',
      'select $tag$ ; $$ ; $tag$::text, $1',
    ])
  })
})
