import { beforeAll, describe, expect, it } from 'vitest'
import {
  createSql,
  isDatabaseUnavailable,
  notifyAfterCommit,
  onCommit,
  pipelinedTransaction,
  unflushedCommit,
  transaction,
} from '../../../server/db/sql.js'
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

describe('pipelinedTransaction', () => {
  /** A table of this test's own, and what it holds. */
  async function table(): Promise<{ name: string; rows: () => Promise<number[]> }> {
    const name = `pipelined_${Math.random().toString(36).slice(2, 8)}`
    await db.sql.unsafe(`create table ${name} (n int primary key)`)
    return {
      name,
      rows: async () =>
        (await db.sql.unsafe<{ n: number }[]>(`select n from ${name} order by n`)).map((r) => r.n),
    }
  }

  it('commits what fn sent with its commit, then runs its onCommit hooks', async () => {
    const t = await table()
    const hooks: string[] = []
    const result = await pipelinedTransaction(db.sql, async (tx, commit) => {
      onCommit(tx, () => hooks.push('committed'))
      await tx.unsafe(`insert into ${t.name} values (1)`)
      // The last statements and the commit, in one round trip: the commit goes last in any order.
      await Promise.all([commit(), tx.unsafe(`insert into ${t.name} values (2)`)])
      expect(hooks).toEqual([])
      return 'done'
    })
    expect(result).toBe('done')
    expect(hooks).toEqual(['committed'])
    expect(await t.rows()).toEqual([1, 2])
  })

  it('rolls everything back when a statement sent with the commit fails; no hook runs', async () => {
    const t = await table()
    const hooks: string[] = []
    // One connection: what runs after on the pool runs on the connection the transaction had.
    const one = createSql(db.url, { max: 1 })
    try {
      const err = await failure(
        pipelinedTransaction(one, async (tx, commit) => {
          onCommit(tx, () => hooks.push('committed'))
          await tx.unsafe(`insert into ${t.name} values (1)`)
          await Promise.all([
            tx.unsafe(`insert into ${t.name} values (2)`),
            tx.unsafe(`insert into ${t.name} values (1)`), // unique violation
            commit(),
          ])
        }),
      )
      expect((err as { code?: string }).code).toBe('23505')
      expect(hooks).toEqual([])
      expect(await t.rows()).toEqual([])
      // The connection went back out of any transaction (an aborted one would refuse this: 25P02).
      const [row] = await one<{ n: number }[]>`select count(*)::int as n from pg_stat_activity
                                               where pid = pg_backend_pid() and state = 'active'`
      expect(row!.n).toBe(1)
      expect((await one.unsafe(`select count(*)::int as n from ${t.name}`))[0]!.n).toBe(0)
    } finally {
      await one.end()
    }
  })

  it('commits once fn returns when fn did not, and rolls back when fn throws', async () => {
    const t = await table()
    await pipelinedTransaction(db.sql, async (tx) => {
      await tx.unsafe(`insert into ${t.name} values (3)`)
    })
    const err = await failure(
      pipelinedTransaction(db.sql, async (tx) => {
        await tx.unsafe(`insert into ${t.name} values (4)`)
        throw new Error('changed my mind')
      }),
    )
    expect((err as Error).message).toBe('changed my mind')
    expect(await t.rows()).toEqual([3])
  })
})

describe('unflushedCommit', () => {
  it("turns synchronous_commit off for its statement's transaction only, not the connection", async () => {
    const pool = createSql(db.url, { max: 1 })
    try {
      const [during] = await pool<{ setting: string }[]>`
        select ${unflushedCommit(pool)}, current_setting('synchronous_commit') as setting`
      expect(during!.setting).toBe('off')
      // The pool's one connection, next statement: every other commit still waits for its flush.
      const [after] = await pool<{ setting: string }[]>`
        select current_setting('synchronous_commit') as setting`
      expect(after!.setting).toBe('on')
    } finally {
      await pool.end()
    }
  })

  it('still commits what its statement wrote, and sends its notifications', async () => {
    const pool = createSql(db.url, { max: 2 })
    const heard: string[] = []
    try {
      const listener = await pool.listen('osd_unflushed_test', (payload) => heard.push(payload))
      const t = { name: `unflushed_${Date.now()}` }
      await pool.unsafe(`create table ${t.name} (n int)`)
      await pool`
        with w as (insert into ${pool(t.name)} values (1) returning n)
        select ${unflushedCommit(pool)}, pg_notify('osd_unflushed_test', n::text) from w`
      const [row] = await db.sql.unsafe<{ count: number }[]>(
        `select count(*)::int as count from ${t.name}`,
      )
      expect(row!.count).toBe(1)
      for (let i = 0; i < 100 && heard.length === 0; i++)
        await new Promise((r) => setTimeout(r, 10))
      expect(heard).toEqual(['1'])
      await listener.unlisten()
    } finally {
      await pool.end()
    }
  })
})

describe('a savepoint of a transaction', () => {
  it('runs its onCommit hooks once at the commit, none when it or its transaction rolls back', async () => {
    const hooks: string[] = []
    await transaction(db.sql, async (tx) => {
      await tx.savepoint(async (sp) => {
        onCommit(sp, () => hooks.push('kept'))
        // A savepoint inside it, handed on as a transaction is (transaction() takes either).
        await transaction(sp, async (inner) => {
          await inner.savepoint('named', async (deeper) => {
            onCommit(deeper, () => hooks.push('deeper'))
          })
        })
      })
      await failure(
        tx.savepoint(async (sp) => {
          onCommit(sp, () => hooks.push('rolled back'))
          await sp`select 1/0`
        }),
      )
      expect(hooks).toEqual([])
    })
    expect(hooks).toEqual(['kept', 'deeper'])

    const err = await failure(
      transaction(db.sql, async (tx) => {
        await tx.savepoint(async (sp) => onCommit(sp, () => hooks.push('outer rolled back')))
        throw new Error('changed my mind')
      }),
    )
    expect((err as Error).message).toBe('changed my mind')
    expect(hooks).toEqual(['kept', 'deeper'])
  })

  it('sends its NOTIFY after the commit, leaving the transaction to wait for its flush', async () => {
    const heard: string[] = []
    const listener = await db.sql.listen('osd_savepoint_test', (payload) => heard.push(payload))
    try {
      const setting = await transaction(db.sql, async (tx) => {
        await tx.savepoint(async (sp) => notifyAfterCommit(sp, 'osd_savepoint_test', ['1']))
        // The batched NOTIFY is sent a tick after it was asked for: whatever it sends has gone.
        await new Promise((r) => setImmediate(r))
        const [row] = await tx<{ setting: string }[]>`
          select current_setting('synchronous_commit') as setting`
        return row!.setting
      })
      expect(setting).toBe('on')
      for (let i = 0; i < 100 && heard.length === 0; i++)
        await new Promise((r) => setTimeout(r, 10))
      expect(heard).toEqual(['1'])
    } finally {
      await listener.unlisten()
    }
  })
})
