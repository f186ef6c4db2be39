import { createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createSql } from '../../../server/db/sql.js'

// A connection cut while it reads the server's array types, the first thing postgres.js does on each
// new connection (scripts/patch-postgres.mjs, mend 4): the query that waited for the connection fails,
// and nothing else. Unmended, the type read's own failure was an unhandled rejection, which ends a
// process (seen as ECONNRESET in a test run on one core). The server here says just enough of
// PostgreSQL's protocol to let the client in, then resets the connection at its first query.

let server: ReturnType<typeof createServer>
let port = 0
const sockets = new Set<Socket>()

beforeAll(async () => {
  server = createServer((socket) => {
    sockets.add(socket)
    let started = false
    socket.on('error', () => undefined)
    socket.on('data', () => {
      if (started) return void socket.resetAndDestroy()
      started = true
      // AuthenticationOk, then ReadyForQuery (idle).
      const ok = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0])
      const ready = Buffer.from([0x5a, 0, 0, 0, 5, 0x49])
      socket.write(Buffer.concat([ok, ready]))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})
afterAll(async () => {
  for (const socket of sockets) socket.destroy()
  await new Promise((resolve) => server.close(resolve))
})

it('fails the waiting query, and leaves no unhandled rejection behind', async () => {
  const unhandled: unknown[] = []
  const seen = (reason: unknown) => void unhandled.push(reason)
  process.on('unhandledRejection', seen)
  const sql = createSql(`postgres://osd:osd@127.0.0.1:${port}/osd`, { max: 1 })
  try {
    const failed = await sql`select 1`.then(
      () => undefined,
      (err: unknown) => err as { code?: string },
    )
    expect(failed?.code).toMatch(/ECONNRESET|CONNECTION_CLOSED|CONNECTION_ENDED/)
    // A rejection is reported as unhandled once the microtasks after it have run.
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(unhandled).toEqual([])
  } finally {
    process.off('unhandledRejection', seen)
    await sql.end({ timeout: 0 }).catch(() => undefined)
  }
})
