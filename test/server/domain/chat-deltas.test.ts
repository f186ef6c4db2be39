import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chatDeltaChannel, followDeltas } from '../../../server/domain/chats/index.js'
import { createSql, type Sql } from '../../../server/db/sql.js'
import { createTestDatabase, holdLock, type TestDatabase } from '../../helpers/db.js'
import { eventually } from '../../helpers/wait.js'

// A reply's deltas told by another process (DESIGN 13: by NOTIFY while this one reads the chat), heard
// on the pool's listening connection, which postgres.js opens again by itself when it drops (a restart
// of PostgreSQL, a failover, a proxy's timeout).

let db: TestDatabase
let sql: Sql
beforeAll(async () => {
  db = await createTestDatabase()
  // A pool of the test's own, named, so that its listening connection is the one dropped below.
  sql = createSql(db.url, { max: 2, applicationName: 'osd_test_deltas' })
})
afterAll(async () => {
  await sql?.end({ timeout: 1 })
})

/** A delta another process sent (its origin is not this process's). */
const told = (chatId: string, text: string, n = 0) =>
  db.sql.notify(
    chatDeltaChannel,
    JSON.stringify({ o: 'elsewhere', c: chatId, m: 'message-1', n, t: text }),
  )

/** Sends probes until `heard` has one: the LISTEN is in place. */
async function listening(chatId: string, heard: string[]): Promise<void> {
  for (let n = 0; ; n++) {
    const probe = `probe-${randomUUID()}`
    await told(chatId, probe, n)
    try {
      await eventually(() => heard.includes(probe), 200)
      return
    } catch {
      if (n > 50) throw new Error('the LISTEN of the deltas never came back')
    }
  }
}

describe('deltas of another process', () => {
  it('are told once to a reader that follows after the listening connection came back', async () => {
    const chatId = randomUUID()
    const first: string[] = []
    const stopFirst = followDeltas(sql, chatId, (d) => first.push(d.text))
    await listening(chatId, first)

    // The listening connection drops; postgres.js listens again on a new one.
    const dropped = await db.sql`
      select pg_terminate_backend(pid) from pg_stat_activity
       where application_name = 'osd_test_deltas' and query like 'listen %'`
    expect(dropped).toHaveLength(1)
    await listening(chatId, first)

    // The reader goes (its stream ends), and a new one comes (the client reconnects).
    stopFirst()
    const second: string[] = []
    const stopSecond = followDeltas(sql, chatId, (d) => second.push(d.text))
    try {
      await listening(chatId, second)
      await told(chatId, 'Hello', 1)
      await told(chatId, ' world', 2)
      await told(chatId, 'end', 3)
      await eventually(() => second.includes('end'), 3_000, 'the last delta')
      // Each once: joined, a message's deltas are its content.
      expect(second.filter((t) => !t.startsWith('probe-'))).toEqual(['Hello', ' world', 'end'])
      expect(first.filter((t) => !t.startsWith('probe-'))).toEqual([])
    } finally {
      stopSecond()
    }
  })
})

describe("this process's word that it reads a chat (chat_readers)", () => {
  it('stays said when its reader goes and another comes at once, the first write held up', async () => {
    const chatId = randomUUID()
    const rows = () =>
      db.sql<{ process: string }[]>`select process from chat_readers where chat_id = ${chatId}`
    const stopFirst = followDeltas(sql, chatId, () => undefined)
    await eventually(async () => (await rows()).length === 1, 3_000, 'the first word')

    // The row held as a reference to it holds it (key share): its delete waits, its upsert does not.
    const lock = await holdLock(
      db.sql,
      (tx) => tx`select 1 from chat_readers where chat_id = ${chatId} for key share`,
    )
    let stopSecond: (() => void) | undefined
    try {
      // The reader goes (its stream ends) and another comes (the client reconnects), at once.
      stopFirst()
      await eventually(() => lock.waitedOn(), 3_000, 'the delete waiting')
      stopSecond = followDeltas(sql, chatId, () => undefined)
    } finally {
      await lock.release()
    }
    // Once the delete is through, the second reader's word is what stays.
    await eventually(async () => {
      const [row] = await db.sql<{ deleting: boolean }[]>`
        select exists (select 1 from pg_stat_activity
                        where application_name = 'osd_test_deltas' and state = 'active'
                          and query like 'delete from chat_readers%') as deleting`
      return !row!.deleting
    })
    try {
      await eventually(async () => (await rows()).length === 1, 3_000, 'the second word')
      // And it stays: nothing said before it lands after it.
      await new Promise((r) => setTimeout(r, 100))
      expect(await rows()).toHaveLength(1)
    } finally {
      stopSecond?.()
    }
  })
})
