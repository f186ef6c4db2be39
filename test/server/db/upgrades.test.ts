import { createHash } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { migrate } from '../../../server/db/migrate.js'
import { createDatabaseMigratedTo, type TestDatabase } from '../../helpers/db.js'

// An upgrade of a populated database as docs/configuration.md (Upgrades) says to make it: the new
// version's processes start (and migrate), then the old ones are stopped. Until then the old release's
// processes go on beside the new one, on the migrated schema: what they read and write must still be
// there. The suite cannot run an old release, so each test makes the database that release left
// (migrations up to its last), writes what it wrote, migrates to this build and runs its statements.

describe('a release before 0038 (issue 44), still running while the new one migrates', () => {
  let db: TestDatabase
  const emailHash = createHash('sha256').update('ada@example.com').digest()
  beforeAll(async () => {
    db = await createDatabaseMigratedTo(37)
    // That release locked an email after ten failed sign-ins (domain/people/sessions.ts lockEmail).
    await db.sql`
      insert into login_locks (email_hash, until) values (${emailHash}, now() + interval '15 minutes')`
    await migrate(db.sql)
  })

  it('still signs people in: the login_locks its every sign-in reads and writes is kept', async () => {
    // Its checkCredentials, lockEmail and openSession, statement for statement.
    const [lock] = await db.sql<{ seconds: number }[]>`
      select ceil(extract(epoch from until - now()))::int as seconds
        from login_locks where email_hash = ${emailHash} and until > now()`
    expect(lock!.seconds).toBeGreaterThan(0)
    const other = createHash('sha256').update('grace@example.com').digest()
    await db.sql`
      insert into login_locks (email_hash, until)
      values (${other}, now() + make_interval(mins => 15))
      on conflict (email_hash) do update set until = excluded.until`
    await db.sql`delete from login_locks where until < now()`
    const [counted] = await db.sql<{ failures: number }[]>`
      with attempt as (insert into login_failures (email_hash) values (${other}) returning 1)
      select count(*)::int + 1 as failures from login_failures
       where email_hash = ${other} and at > now() - make_interval(mins => 15)`
    expect(counted!.failures).toBe(1)
  })
})
