import { once } from 'node:events'
import { connect, createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'

// A connection cut while one of its writes waits for the next turn of the event loop
// (scripts/patch-postgres.mjs, mend 5). Unmended, postgres.js kept that write's cancelled timer and its
// bytes, so the slot's next connection queued its startup message behind them and never sent it: the
// server waited for the startup and the query for the server, until connect_timeout, at every later
// connection of the slot. After a PostgreSQL failover osd answered nothing for 10 s to a minute. The
// server here says just enough of PostgreSQL's protocol: it lets a client in and refuses every query
// with an error (the connection stays usable), and records each connection's startup.

let server: ReturnType<typeof createServer>
let port = 0
const accepted: { socket: Socket; started: boolean }[] = []

const authenticationOk = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0])
const readyForQuery = Buffer.from([0x5a, 0, 0, 0, 5, 0x49])
function refusal(): Buffer {
  const fields = Buffer.from('SERROR\0C42000\0Mrefused by the fake server\0\0')
  const head = Buffer.from([0x45, 0, 0, 0, 0])
  head.writeInt32BE(fields.length + 4, 1)
  return Buffer.concat([head, fields, readyForQuery])
}

beforeAll(async () => {
  server = createServer((socket) => {
    const connection = { socket, started: false }
    accepted.push(connection)
    socket.on('error', () => undefined)
    socket.on('data', (bytes) => {
      if (!connection.started) {
        connection.started = true
        return void socket.write(Buffer.concat([authenticationOk, readyForQuery]))
      }
      // A query ends with Sync ('S'): each is refused, the connection stays ready.
      if (bytes.includes(0x53)) socket.write(refusal())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})
afterAll(async () => {
  for (const { socket } of accepted) socket.destroy()
  await new Promise((resolve) => server.close(resolve))
})

it('sends the next connection its startup: the query made as the cut came fails, the next is answered', async () => {
  let client: Socket | undefined
  // `socket` is postgres.js's own option (a connected socket of the caller's), missing from its types.
  const options = {
    max: 1,
    fetch_types: false,
    connect_timeout: 2,
    backoff: () => 0.01,
    onnotice: () => undefined,
    // The connection's socket, so the test knows when the client learns of the cut.
    socket: async () => {
      const socket = connect(port, '127.0.0.1')
      await once(socket, 'connect')
      return (client = socket)
    },
  }
  const sql = postgres(`postgres://osd:osd@127.0.0.1:${port}/osd`, options as postgres.Options<{}>)
  const code = (err: unknown) => (err as { code?: string }).code
  try {
    expect(await sql`select 1`.catch(code)).toBe('42000')
    // The server cuts the connection. As the client learns it, a query is made at the next turn of
    // the event loop: its write waits for the turn after, while the connection closes meanwhile.
    let made: Promise<unknown> | undefined
    client!.once('error', () => setImmediate(() => (made = sql`select 2`.catch(code))))
    accepted[0]!.socket.resetAndDestroy()
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(made).toBeDefined()
    // Its bytes were for a connection that is gone: it fails, and is never sent on the next one.
    const waited = new Promise((resolve) => setTimeout(() => resolve('still waiting'), 5_000))
    expect(await Promise.race([made, waited])).toBe('CONNECTION_CLOSED')
    // The next query opens a connection that starts, and is answered (unmended: CONNECT_TIMEOUT).
    expect(await sql`select 3`.catch(code)).toBe('42000')
    expect(accepted.map((c) => c.started)).toEqual([true, true])
  } finally {
    await sql.end({ timeout: 0 }).catch(() => undefined)
  }
})
