import { beforeAll, describe, expect, it } from 'vitest'
import {
  listMigrations,
  migrate,
  NewerDatabaseError,
  refuseNewer,
} from '../../../server/db/migrate.js'
import { packageVersion } from '../../../shared/paths.js'
import { createTestDatabase, migrationsWith, type TestDatabase } from '../../helpers/db.js'

// Upgrades (issue 43, item 9): osd refuses to start on a database migrated by a newer osd, one that
// holds a migration this build does not know, and says which versions meet; each migration records the
// osd version that applied it. The processes' side (osd serve and osd migrate exit 1 with the message)
// is in test/server/daemon.test.ts.

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})

const label = (m: { id: number; name: string }) => `${String(m.id).padStart(4, '0')}_${m.name}`

describe('migrations and the osd version (issue 43)', () => {
  it('record the osd version that applied each one', async () => {
    const known = await listMigrations()
    const rows = await db.sql<{ id: number; osdVersion: string | null }[]>`
      select id, osd_version from osd_migrations order by id`
    expect(rows.map((r) => r.id)).toEqual(known.map((m) => m.id))
    expect(new Set(rows.map((r) => r.osdVersion))).toEqual(new Set([packageVersion]))
  })

  it('go on from a database an osd before the versions migrated (no osd_version column)', async () => {
    await db.sql`alter table osd_migrations drop column osd_version`
    expect(await migrate(db.sql)).toEqual([])
    const [row] = await db.sql<{ n: number; versions: number }[]>`
      select count(*)::int as n, count(osd_version)::int as versions from osd_migrations`
    expect(row).toEqual({ n: (await listMigrations()).length, versions: 0 })
  })

  it('refuse a database holding a migration this build does not know, naming both versions, and apply nothing', async () => {
    const known = await listMigrations()
    const dir = await migrationsWith({
      '9000_pending_here.sql': 'create table pending_here (id int)',
    })
    await db.sql`
      insert into osd_migrations (id, name, osd_version) values (9500, 'from_a_newer_osd', '99.1.0')`
    try {
      const refused = await migrate(db.sql, dir).catch((err: unknown) => err)
      expect(refused).toBeInstanceOf(NewerDatabaseError)
      expect((refused as Error).message).toBe(
        'this database was migrated by a newer osd: it holds migration 9500_from_a_newer_osd, applied ' +
          `by osd 99.1.0, which this osd (${packageVersion}, migrations up to 9000_pending_here) ` +
          'does not know. Run the newer osd on it, or restore a backup taken before the upgrade; an ' +
          'older osd does not start on a newer schema',
      )
      // Nothing applied: this build's pending migration is neither recorded nor run.
      const [pending] = await db.sql`select 1 from osd_migrations where id = 9000`
      expect(pending).toBeUndefined()
      const [table] = await db.sql`select to_regclass('pending_here') as t`
      expect(table!.t).toBeNull()
      // With the real migrations, the same, up to this build's last.
      await expect(migrate(db.sql)).rejects.toThrow(
        `this osd (${packageVersion}, migrations up to ${label(known.at(-1)!)})`,
      )
    } finally {
      await db.sql`delete from osd_migrations where id = 9500`
    }
    // Once the newer migration is gone (a restored backup), this build starts again.
    expect(await migrate(db.sql)).toEqual([])
  })

  it('name the newest unknown migration, and say so when its osd did not record a version', () => {
    const known = [{ id: 1, name: 'first', file: '' }]
    expect(() =>
      refuseNewer(
        [
          { id: 1, name: 'first', osdVersion: null },
          { id: 3, name: 'third', osdVersion: null },
          { id: 2, name: 'second', osdVersion: '2.0.0' },
        ],
        known,
        '1.0.0',
      ),
    ).toThrow(
      'it holds migration 0003_third, applied by an osd of unrecorded version, which this osd ' +
        '(1.0.0, migrations up to 0001_first) does not know',
    )
    // A migration this build knows, applied by a newer osd, is no reason to refuse: a newer osd
    // without new migrations runs beside an older one.
    expect(() =>
      refuseNewer([{ id: 1, name: 'first', osdVersion: '2.0.0' }], known, '1.0.0'),
    ).not.toThrow()
  })
})
