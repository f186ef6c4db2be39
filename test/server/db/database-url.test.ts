import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer, connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TLSSocket } from 'node:tls'
import { describe, expect, inject, it } from 'vitest'
import { freePort } from '../../../server/db/embedded.js'
import { readySql } from '../../../server/db/sql.js'
import { connectionOf, DatabaseUrlError } from '../../../server/db/url.js'
import { projectRoot } from '../../../shared/paths.js'
import { osd } from '../../helpers/osd.js'
import { testTls } from '../../helpers/tls.js'

// DATABASE_URL as libpq reads it (server/db/url.ts; docs/configuration.md): a Unix socket, TLS files,
// and at start a line that says why osd cannot connect, never a stack.

/** Listens on `listen` (a socket path or a port) and hands each connection to `serve`. */
async function serverOn(listen: string | number, serve: (socket: Socket) => void) {
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    sockets.add(socket.on('close', () => sockets.delete(socket)))
    serve(socket)
  })
  await new Promise<void>((resolve) =>
    typeof listen === 'number'
      ? server.listen(listen, '127.0.0.1', resolve)
      : server.listen(listen, resolve),
  )
  return {
    /** Stops listening and cuts what is still connected. */
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      }),
  }
}

describe('DATABASE_URL as libpq reads it', () => {
  it('names a Unix socket directory in the host parameter or percent-encoded as the host', async () => {
    // The suite's PostgreSQL listens on TCP only: a socket in a directory of the test's own leads
    // there, named as PostgreSQL names its sockets.
    const admin = new URL(inject('adminUrl'))
    const dir = await mkdtemp(join(tmpdir(), 'osd-socket-'))
    const proxy = await serverOn(join(dir, '.s.PGSQL.6543'), (client) => {
      const server = connect(Number(admin.port), admin.hostname)
      client.pipe(server).pipe(client)
      client.on('error', () => server.destroy())
      server.on('error', () => client.destroy())
    })
    const user = `${admin.username}${admin.password ? `:${admin.password}` : ''}`
    const database = admin.pathname.slice(1)
    try {
      for (const url of [
        `postgresql://${user}@/${database}?host=${dir}&port=6543`,
        `postgresql://${user}@${encodeURIComponent(dir)}:6543/${database}`,
        `postgres:///${database}?host=${encodeURIComponent(dir)}&port=6543&user=${admin.username}&password=${admin.password}`,
      ]) {
        const sql = await readySql(url, { max: 1 })
        try {
          const [row] = await sql<{ db: string }[]>`select current_database() as db`
          expect(row!.db, url).toBe(database)
        } finally {
          await sql.end({ timeout: 1 })
        }
      }
    } finally {
      await proxy.close()
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('keeps several hosts and the settings PostgreSQL takes; refuses what osd cannot honour, by name', () => {
    const several = connectionOf(
      'postgres://osd:pw@db1:5432,db2:5433/osd?target_session_attrs=read-write&search_path=osd',
    )
    expect(several).toEqual({
      url: 'postgres://osd:pw@db1:5432,db2:5433/osd?target_session_attrs=read-write&search_path=osd',
      options: {},
    })
    const refusal = (url: string) => {
      try {
        connectionOf(url)
      } catch (err) {
        expect(err).toBeInstanceOf(DatabaseUrlError)
        return (err as Error).message
      }
      return 'accepted'
    }
    expect(refusal('mysql://osd@db/osd')).toMatch(/must be a postgres:\/\/ or postgresql:\/\/ URL/)
    expect(refusal('postgres://osd@db/osd?keepalives=1')).toBe(
      "DATABASE_URL's parameter keepalives is one of libpq's that osd does not support: remove it",
    )
    expect(refusal('postgres://osd@db/osd?sslmode=verify')).toMatch(
      /sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full; got "verify"/,
    )
    expect(refusal('postgres://osd@db/osd?port=five')).toMatch(/port must be a number; got "five"/)
    expect(refusal('postgres://osd@db/osd?sslrootcert=/nowhere/ca.pem')).toBe(
      "DATABASE_URL's sslrootcert /nowhere/ca.pem cannot be read (ENOENT)",
    )
    expect(
      refusal(`postgres://osd@db/osd?sslmode=disable&sslrootcert=${projectRoot}/package.json`),
    ).toMatch(/TLS files with sslmode=disable/)
    // A password is never in what is said.
    expect(refusal('postgres://osd:s3cret@db:x/osd')).not.toContain('s3cret')
  })

  it("verifies the server's certificate against sslrootcert: the chain for verify-ca, the host name too for verify-full", async () => {
    // A server that takes TLS as PostgreSQL does (an SSLRequest answered S), then refuses the start
    // (a FATAL ErrorResponse, or the driver would try again until its timeout): what is asserted is
    // whether the handshake got through, and what the driver said if not.
    // A CA and a certificate for localhost it signed, made for the test (test/helpers/tls.ts).
    const { ca: caPem, cert, key } = await testTls()
    const dir = await mkdtemp(join(tmpdir(), 'osd-tls-'))
    await writeFile(join(dir, 'ca.pem'), caPem)
    const fields = Buffer.from('SFATAL\0C28000\0Mthe test server takes no one\0\0')
    const refusal = Buffer.concat([Buffer.from('E'), Buffer.alloc(4), fields])
    refusal.writeUInt32BE(4 + fields.length, 1)
    const handshakes: string[] = []
    const port = await freePort()
    const server = await serverOn(port, (socket) => {
      socket.once('data', () => {
        socket.write('S')
        const secure = new TLSSocket(socket, { isServer: true, key, cert })
        secure.on('secure', () => {
          handshakes.push('done')
          secure.end(refusal)
        })
        secure.on('error', () => socket.destroy())
      })
    })
    /** What a first connection with these parameters fails with (the handshake, or what follows). */
    const attempt = async (host: string, query: string) => {
      const before = handshakes.length
      const err = await readySql(`postgres://osd@${host}:${port}/osd?${query}`, { max: 1 }).then(
        async (sql) => (await sql.end(), undefined),
        (e: unknown) => e as { code?: string },
      )
      return { handshake: handshakes.length > before, code: err?.code }
    }
    try {
      const ca = `sslrootcert=${join(dir, 'ca.pem')}`
      // The certificate names localhost: through 127.0.0.1 only the chain holds.
      expect(await attempt('localhost', `sslmode=verify-full&${ca}`)).toMatchObject({
        handshake: true,
      })
      expect(await attempt('127.0.0.1', `sslmode=verify-full&${ca}`)).toEqual({
        handshake: false,
        code: 'ERR_TLS_CERT_ALTNAME_INVALID',
      })
      expect(await attempt('127.0.0.1', `sslmode=verify-ca&${ca}`)).toMatchObject({
        handshake: true,
      })
      // libpq: require with a root certificate verifies the chain.
      expect(await attempt('127.0.0.1', `sslmode=require&${ca}`)).toMatchObject({ handshake: true })
      // Without the CA, verification fails; require alone encrypts without verifying.
      expect(await attempt('localhost', 'sslmode=verify-full')).toEqual({
        handshake: false,
        code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      })
      expect(await attempt('localhost', 'sslmode=require')).toMatchObject({ handshake: true })
    } finally {
      await server.close()
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('osd at start, when it cannot connect', () => {
  it('says why in one line and what to look at, exit 1; a DATABASE_URL it cannot read: exit 2', async () => {
    const port = await freePort()
    const refused = await osd(['migrate'], {
      DATABASE_URL: `postgres://osd:s3cret@127.0.0.1:${port}/osd`,
    })
    expect(refused.exitCode).toBe(1)
    expect(refused.stderr).toBe(
      `error: osd cannot connect to PostgreSQL (postgres://osd:***@127.0.0.1:${port}/osd): ` +
        `connect ECONNREFUSED 127.0.0.1:${port}: is PostgreSQL running there, and are the host and port right?`,
    )
    const admin = new URL(inject('adminUrl'))
    admin.pathname = '/osd_no_such_database'
    const missing = await osd(['migrate'], { DATABASE_URL: admin.toString() })
    expect([missing.exitCode, missing.stderr.split('\n').length]).toEqual([1, 1])
    expect(missing.stderr).toMatch(
      /database "osd_no_such_database" does not exist: create it \(create database NAME owner ROLE\)/,
    )
    // A password given as a parameter is not said either.
    const asParameter = await osd(['migrate'], {
      DATABASE_URL: `postgres://127.0.0.1:${port}/osd?user=osd&password=s3cret`,
    })
    expect(asParameter.stderr).toContain(
      `(postgres://127.0.0.1:${port}/osd?user=osd&password=***): connect ECONNREFUSED`,
    )
    const unreadable = await osd(['migrate'], { DATABASE_URL: 'postgres://osd@db/osd?service=x' })
    expect(unreadable).toMatchObject({
      exitCode: 2,
      stderr:
        "error: DATABASE_URL's parameter service is one of libpq's that osd does not support: remove it",
    })
  })
})
