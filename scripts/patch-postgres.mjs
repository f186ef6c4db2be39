// Run by npm after every install (package.json postinstall). Mends seven defects of postgres.js 3.4.9,
// and adds one reading.
//
// 1. It takes osd down whenever the database connection is cut with a transaction open (a server
//    restart, a crash, a failover): postgres.js rolls the transaction back on the connection that is
//    already closed, and the write it schedules for that finds no socket and throws out of a
//    setImmediate, which no caller can catch (porsager/postgres issues 1154, 1208; pull requests 1168,
//    1209, not released). Were the exception caught, the connection would keep the unsent bytes and never
//    open again. The mend: a write with no socket to go to is dropped and fails its queries with
//    CONNECTION_CLOSED, as the close itself does.
// 2. `target_session_attrs=read-write` takes a hot standby for a writable server: it looks only at
//    default_transaction_read_only, which a standby reports off, and not at in_hot_standby (libpq counts
//    either). After a failover osd then reconnected to the standby and every write failed "read-only
//    transaction" until it was promoted (issue 34). The mend: a server in hot standby is not read-write.
// 3. With several hosts, a failed connection attempt is never reported: the next host is tried whenever
//    there is one after the first (the index it looks at never moves), so while no host will do (the
//    primary dead, the standby not yet promoted) every query waits for ever. The mend: each failed
//    attempt moves to the next host, and once every host of a round has failed, the error is the
//    waiting query's (osd answers it 503 database_unavailable), as it is with one host.
// 4. A connection cut while it reads the server's array types (the first thing each new connection
//    does) rejects a promise nobody holds: an unhandled rejection, which ends the process (seen in a
//    test run on one core: ECONNRESET as a test database went). The query waiting for the connection
//    gets the error anyway. The mend: that promise's failure is caught, and left to the connection.
// 5. A connection cut, or ended, while a write of it waited for the next turn of the event loop kept
//    that write's timer (cancelled, never set back to null) and its bytes. Every later connection
//    of the same slot then queued its startup message behind them and never sent it: the server
//    waited for the startup, the client for the server, until connect_timeout (10 s), again and
//    again. Seen after a PostgreSQL failover: osd answered nothing for 10 s to over a minute after
//    the promotion (test/server/processes/failover.test.ts; reported upstream in other projects,
//    e.g. LanternOps/breeze issue 3225). The mend: closing or ending drops the unsent bytes and the
//    timer, and fails the queries that were on the closed connection (none can be answered now).
// 6. With sslmode=verify-full and a host written as an IP address, the server's certificate was
//    checked against the name "localhost", not that address: postgres.js gives TLS the host as the
//    server name only when it is a name (as TLS's SNI must), and Node then checks the certificate
//    against its default. A certificate for localhost from a trusted CA passed for any address, and
//    one for the address itself failed. The mend: TLS is also given the host, which Node checks the
//    certificate against (test/server/db/database-url.test.ts).
// 7. A COPY ... TO STDOUT could not be cancelled: its query counts as done (`active` false) once its
//    stream is handed over, though the copy runs on until the server's CopyDone, so `query.cancel()`
//    only noted a cancel for a start that never comes. A backup stopped in a large table (a signal, a
//    full disk) could only read the rest of it and drop it: as long as the copy itself. The mend: the
//    query stays active while its stream is open, so the cancel is sent at once
//    (test/server/db/backup.test.ts).
// 8. Not a defect: a pool says nothing of its connections. The metrics (issue 33) show how many are in
//    use and how many queries wait for one, so the pool gets `osdPoolStats()`, which reads the lengths
//    of the queues it keeps anyway (server/metrics.ts PoolStats; osd reads nothing else of it).
//
// Safe to run again. When postgres.js changes, this says so and stops the install: see whether the
// release mends it, and drop the mend if it does.
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const mends = [
  {
    marker: 'osd: no socket (scripts/patch-postgres.mjs)',
    before: `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`,
    after: (marker) => `  function nextWrite(fn) {
    if (!socket) { // ${marker}
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      const err = Errors.connection('CONNECTION_CLOSED', options)
      query && queryError(query, err)
      while (sent.length)
        queryError(sent.shift(), err)
      return false
    }
    const x = socket.write(chunk, fn)`,
    what: 'writes after a closed connection',
  },
  {
    marker: 'osd: a hot standby is not read-write (scripts/patch-postgres.mjs)',
    before: `      (x === 'read-write' && xs.default_transaction_read_only === 'on') ||`,
    after: (marker) => `      // ${marker}
      (x === 'read-write' && (xs.default_transaction_read_only === 'on' || xs.in_hot_standby === 'on')) ||`,
    what: 'target_session_attrs=read-write on a hot standby',
  },
  {
    marker: 'osd: a round of hosts failed (scripts/patch-postgres.mjs)',
    before: `  function error(err) {
    if (connection.queue === queues.connecting && options.host[retries + 1])
      return
`,
    after: (marker) => `  function error(err) {
    if (connection.queue === queues.connecting && options.host[retries + 1]) {
      retries++ // ${marker}
      return
    }
    retries = 0
`,
    what: 'connection errors with several hosts',
  },
  {
    marker: 'osd: a cut type read is the connection',
    before: `        return fetchArrayTypes()
`,
    after: (marker) => `        return fetchArrayTypes().catch(() => undefined) // ${marker}
`,
    what: 'a connection cut while it reads the array types',
  },
  {
    marker: 'osd: a closed connection sends none of its bytes again (scripts/patch-postgres.mjs)',
    before: `    clearImmediate(nextWriteTimer)
    socket.removeListener('data', data)
    socket.removeListener('connect', connected)
    idleTimer.cancel()`,
    after: (marker) => `    clearImmediate(nextWriteTimer)
    nextWriteTimer = chunk = null // ${marker}
    if (hadError && (query || sent.length)) {
      const err = Errors.connection('CONNECTION_CLOSED', options, socket)
      query && queryError(query, err)
      query = null
      while (sent.length)
        queryError(sent.shift(), err)
    }
    socket.removeListener('data', data)
    socket.removeListener('connect', connected)
    idleTimer.cancel()`,
    what: 'bytes of a closed connection held for its next one',
  },
  {
    marker: 'osd: an ended connection sends none of its bytes again (scripts/patch-postgres.mjs)',
    before: `    clearImmediate(nextWriteTimer)
    if (socket) {`,
    after: (marker) => `    clearImmediate(nextWriteTimer)
    nextWriteTimer = chunk = null // ${marker}
    if (socket) {`,
    what: 'bytes of an ended connection held for its next one',
  },
  {
    marker: 'osd: a copy out is active until its end (scripts/patch-postgres.mjs)',
    before: `  function CopyOutResponse() {
    stream = new Stream.Readable({
      read() { socket.resume() }
    })
    query.resolve(stream)
  }`,
    after: (marker) => `  function CopyOutResponse() {
    stream = new Stream.Readable({
      read() { socket.resume() }
    })
    query.resolve(stream)
    query.active = true // ${marker}
  }`,
    what: 'a COPY TO STDOUT that cannot be cancelled',
  },
  {
    file: 'index.js',
    marker: 'osd: pool stats for the metrics (scripts/patch-postgres.mjs)',
    before: `    options,
    reserve,
`,
    after: (marker) => `    options,
    // ${marker}
    osdPoolStats: () => ({
      inUse: busy.length + full.length + reserved.length,
      idle: open.length,
      connecting: connecting.length,
      waiting: queries.length
    }),
    reserve,
`,
    what: 'a pool that says nothing of its connections',
  },
  {
    marker: 'osd: TLS checks the certificate against the host (scripts/patch-postgres.mjs)',
    before: `    const options = {
      socket,
      servername: net.isIP(socket.host) ? undefined : socket.host
    }`,
    after: (marker) => `    const options = {
      socket,
      // ${marker}
      host: socket.host,
      servername: net.isIP(socket.host) ? undefined : socket.host
    }`,
    what: 'a certificate checked against "localhost" for a host written as an address',
  },
]

const require = createRequire(import.meta.url)
const root = join(dirname(require.resolve('postgres')), '..', '..') // <root>/cjs/src/index.js
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

for (const name of ['connection.js', 'index.js']) {
  for (const file of [`src/${name}`, `cjs/src/${name}`].map((f) => join(root, f))) {
    let text = readFileSync(file, 'utf8')
    for (const { marker, before, after, what } of mends.filter(
      (m) => (m.file ?? 'connection.js') === name,
    )) {
      if (text.includes(marker)) continue
      if (!text.includes(before)) {
        console.error(
          `patch-postgres: postgres ${version} no longer has the code this script mends (${file}); ` +
            `check whether the release fixes ${what}, and drop that mend if so`,
        )
        process.exit(1)
      }
      text = text.replace(before, after(marker))
      console.log(`patch-postgres: mended ${what} in postgres ${version} (${file})`)
    }
    writeFileSync(file, text)
  }
}
