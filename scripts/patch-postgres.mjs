// Run by npm after every install (package.json postinstall). Mends a defect of postgres.js 3.4.9 that
// takes osd down whenever the database connection is cut with a transaction open (a server restart, a
// crash, a failover): postgres.js rolls the transaction back on the connection that is already closed,
// and the write it schedules for that finds no socket and throws out of a setImmediate, which no caller
// can catch (porsager/postgres issues 1154, 1208; pull requests 1168, 1209, not released). Were the
// exception caught, the connection would keep the unsent bytes and never open again.
//
// The mend: a write with no socket to go to is dropped and fails its queries with CONNECTION_CLOSED,
// as the close itself does. Safe to run again. When postgres.js changes, this says so and stops the
// install: see whether the release mends it, and drop this script if it does.
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const marker = 'osd: no socket (scripts/patch-postgres.mjs)'
const before = `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`
const after = `  function nextWrite(fn) {
    if (!socket) { // ${marker}
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      const err = Errors.connection('CONNECTION_CLOSED', options)
      query && queryError(query, err)
      while (sent.length)
        queryError(sent.shift(), err)
      return false
    }
    const x = socket.write(chunk, fn)`

const require = createRequire(import.meta.url)
const root = join(dirname(require.resolve('postgres')), '..', '..') // <root>/cjs/src/index.js
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

for (const file of ['src/connection.js', 'cjs/src/connection.js'].map((f) => join(root, f))) {
  const text = readFileSync(file, 'utf8')
  if (text.includes(marker)) continue
  if (!text.includes(before)) {
    console.error(
      `patch-postgres: postgres ${version} no longer has the code this script mends (${file}); ` +
        'check whether the release fixes writes after a closed connection, and drop the script if so',
    )
    process.exit(1)
  }
  writeFileSync(file, text.replace(before, after))
  console.log(`patch-postgres: mended nextWrite of postgres ${version} in ${file}`)
}
