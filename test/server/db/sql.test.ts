import { beforeAll, describe, expect, it } from 'vitest'
import { createSql, isDatabaseUnavailable, transaction } from '../../../server/db/sql.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'

// The pool (server/db/sql.ts) against a real PostgreSQL whose connections are cut under it.

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})

/** Cuts the connection of the backend `pid` from another one, as a server restart does. */
async function terminate(pid: number): Promise<void> {
  await db.sql`select pg_terminate_backend(${pid})`
}

/**
 * Cuts the backend `pid` once it is running a statement: a cut while it waits idle in its transaction
 * is another case (the next write goes to a closed socket), and racing the two made this test flaky.
 */
async function terminateWhenBusy(pid: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const [backend] = await db.sql<{ state: string }[]>`
      select state from pg_stat_activity where pid = ${pid}`
    if (backend?.state === 'active') break
    await new Promise((r) => setTimeout(r, 10))
  }
  await terminate(pid)
}

/** What a query fails with, or undefined when it does not. */
async function failure(query: Promise<unknown>): Promise<unknown> {
  return query.then(
    () => undefined,
    (err: unknown) => err,
  )
}

describe('a transaction whose connection is cut', () => {
  it('fails with an error that says the database is away, and the pool goes on', async () => {
    const sql = createSql(db.url, { max: 1 })
    try {
      for (let i = 0; i < 3; i++) {
        const err = await failure(
          transaction(sql, async (tx) => {
            const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`
            await Promise.all([tx`select pg_sleep(5)`, terminateWhenBusy(row!.pid)])
          }),
        )
        expect(isDatabaseUnavailable(err), String(err)).toBe(true)
        // The one connection of the pool opens again and answers: none is left writing to nothing.
        // (The first query on it may still hear the server's parting 57P01: postgres.js keeps it.)
        const parting = await failure(sql`select 1`)
        if (parting) expect(isDatabaseUnavailable(parting), String(parting)).toBe(true)
        const [row] = await sql<{ n: number }[]>`select 1 as n`
        expect(row!.n).toBe(1)
      }
    } finally {
      await sql.end({ timeout: 1 })
    }
  })
})

describe('isDatabaseUnavailable', () => {
  it('is true of a server that refuses connections, a cut connection and an ended pool', async () => {
    const nobody = createSql('postgres://osd:x@127.0.0.1:1/none', { max: 1 })
    expect(isDatabaseUnavailable(await failure(nobody`select 1`))).toBe(true)
    await nobody.end({ timeout: 0 })

    const sql = createSql(db.url, { max: 1 })
    const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`
    const cut = await failure(Promise.all([sql`select pg_sleep(5)`, terminate(row!.pid)]))
    expect(isDatabaseUnavailable(cut)).toBe(true)
    await sql.end({ timeout: 1 })
    expect(isDatabaseUnavailable(await failure(sql`select 1`))).toBe(true)
  })

  it('is false of a statement that fails on a database that answers', async () => {
    expect(isDatabaseUnavailable(await failure(db.sql`select nonsense from nowhere`))).toBe(false)
    expect(isDatabaseUnavailable(await failure(db.sql`select 1/0`))).toBe(false)
    expect(isDatabaseUnavailable(new Error('anything'))).toBe(false)
    expect(isDatabaseUnavailable(undefined)).toBe(false)
  })
})
