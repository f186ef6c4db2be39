import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import pino from 'pino'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { allScopes } from '../../../shared/scopes.js'
import { loadConfig } from '../../../server/config.js'
import { handOver } from '../../../server/db/hand-over.js'
import { connectedRole, openDatabase, superuserMessage } from '../../../server/db/index.js'
import { createEnterprise } from '../../../server/domain/enterprises/index.js'
import { createToken } from '../../../server/domain/people/index.js'
import { startDaemon } from '../../../server/serve.js'
import { withDatabase } from '../../global-setup.js'
import { createTestDatabase } from '../../helpers/db.js'

// The role osd's pools connect as (issue 41, defence in depth): on the embedded PostgreSQL a login
// role that owns the osd database and is not a superuser, on a new data dir and on one an older osd
// made (handed over at its first start); with DATABASE_URL, one warning at start when the role is a
// superuser.

let dataDir: string

/** A log that keeps its lines. */
function captured() {
  const lines: Record<string, any>[] = []
  const sink = new Writable({
    write(chunk, _, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  return { lines, log: pino({ level: 'info' }, sink) }
}

/** The superuser's connection to a database of the embedded server, from its embedded.json. */
function superuser(database: string) {
  const { user, password, port } = JSON.parse(
    readFileSync(join(dataDir, 'embedded.json'), 'utf8'),
  ) as { user: string; password: string; port: number }
  return postgres(
    `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`,
    { max: 1, onnotice: () => undefined },
  )
}

/** osd serve (the API) in this process on the data dir's embedded server; what it logged. */
async function serveEmbedded() {
  const { lines, log } = captured()
  const config = loadConfig(
    { port: 0, host: '127.0.0.1', role: 'api', dataDir },
    { DATABASE_URL: '' },
  )
  const running = await startDaemon(config, log)
  return { running, lines }
}

/** Objects of the osd database's schemas not owned by osd_app (an extension's own left out). */
async function notOwned(sql: postgres.Sql): Promise<string[]> {
  const rows = await sql<{ name: string }[]>`
    select c.oid::regclass::text as name from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'S')
       and pg_get_userbyid(c.relowner) <> 'osd_app'
       and not exists (select 1 from pg_depend d where d.objid = c.oid and d.deptype = 'e')
    union all
    select p.oid::regprocedure::text from pg_proc p
      join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'public' and pg_get_userbyid(p.proowner) <> 'osd_app'
       and not exists (select 1 from pg_depend d where d.objid = p.oid and d.deptype = 'e')`
  return rows.map((r) => r.name)
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'osd-role-'))
})

afterAll(async () => {
  // A server a failed test left running goes with its data dir.
  const pid = Number(
    (await readFile(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').catch(() => '0')).split('\n')[0],
  )
  if (pid > 0) process.kill(pid, 'SIGINT')
  await new Promise((r) => setTimeout(r, 500))
  await rm(dataDir, { recursive: true, force: true })
})

// Real PostgreSQL starts (initdb, migrations, a hand-over): up to 25 s a test on one busy core.
describe('the embedded PostgreSQL', { timeout: 90_000 }, () => {
  let token: string

  it("a new data dir: osd's pool is osd_app, no superuser, owner of the database and all in it", async () => {
    const { running } = await serveEmbedded()
    // The daemon's own connections, as the server sees them: none is a superuser's.
    const admin = superuser('postgres')
    const users = await admin<{ usename: string }[]>`
      select distinct usename from pg_stat_activity
       where datname = 'osd' and backend_type = 'client backend'`
    expect(users.map((u) => u.usename)).toEqual(['osd_app'])

    // What the pool osd opens on it says of itself.
    const db = await openDatabase({ databaseUrl: undefined, dataDir }, { info() {}, warn() {} })
    try {
      expect(await connectedRole(db.sql)).toEqual({ role: 'osd_app', superuser: false })
      const [attributes] = await db.sql`
        select rolcreaterole, rolcreatedb, rolreplication, rolbypassrls,
               pg_get_userbyid(d.datdba) as owner
          from pg_roles, pg_database d
         where rolname = current_user and d.datname = current_database()`
      expect(attributes).toEqual({
        rolcreaterole: false,
        rolcreatedb: false,
        rolreplication: false,
        rolbypassrls: false,
        owner: 'osd_app',
      })
      expect(await notOwned(db.sql)).toEqual([])
      // The migrations made pg_trgm as the database's owner (a trusted extension).
      const [trgm] = await db.sql`select 1 as found from pg_extension where extname = 'pg_trgm'`
      expect(trgm).toEqual({ found: 1 })
      // What only a superuser may do is refused.
      for (const statement of [
        `copy (select 1) to program 'true'`,
        `select pg_read_file('postmaster.pid')`,
        'create role osd_intruder',
        "alter system set log_statement = 'all'",
      ])
        await expect(db.sql.unsafe(statement), statement).rejects.toMatchObject({ code: '42501' })
      const made = await createEnterprise(
        db.sql,
        { name: 'Role Corp' },
        { mailDomain: 'osd.local' },
      )
      token = (await createToken(db.sql, made.id, { name: 'all', scopes: allScopes })).token
    } finally {
      await db.close()
    }

    // Its password is kept beside the superuser's, readable by the data dir's owner only.
    const file = join(dataDir, 'embedded.json')
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    expect(JSON.parse(await readFile(file, 'utf8')).app).toMatchObject({ user: 'osd_app' })
    await admin.end()
    await running.stop()
  })

  it('a data dir of an older osd (all the superuser’s, no osd_app) is handed over at its start, once', async () => {
    // As an older osd left it: it connected as the superuser, which owns the database and everything
    // osd made in it; no osd_app, and no password for one in embedded.json.
    const { running: first } = await serveEmbedded()
    const osd = superuser('osd')
    const admin = superuser('postgres')
    // Connected before the daemon stops, so that the server stays up for what follows.
    await Promise.all([osd`select 1`, admin`select 1`])
    await first.stop()
    await osd`reassign owned by osd_app to osd`
    await osd`drop owned by osd_app`
    await admin`alter database osd owner to osd`
    await admin`drop role osd_app`
    const file = join(dataDir, 'embedded.json')
    const { app: _, ...older } = JSON.parse(await readFile(file, 'utf8'))
    await writeFile(file, JSON.stringify(older, null, 2) + '\n', { mode: 0o644 })
    expect((await notOwned(osd)).length).toBeGreaterThan(30)
    await osd.end()
    await admin.end()

    const { running, lines } = await serveEmbedded()
    expect(lines.filter((l) => String(l.msg).includes('handed over'))).toHaveLength(1)
    const check = superuser('osd')
    expect(await notOwned(check)).toEqual([])
    const [owner] = await check`
      select pg_get_userbyid(datdba) as owner from pg_database where datname = 'osd'`
    expect(owner).toEqual({ owner: 'osd_app' })
    await check.end()
    expect((await stat(file)).mode & 0o777).toBe(0o600)

    // Its data reads and writes as before, through the API.
    const call = (method: string, path: string, body?: unknown) =>
      fetch(`${running.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    const made = await call('POST', '/tasks', { name: 'After the upgrade', kind: 'deterministic' })
    expect(made.status).toBe(201)
    expect((await call('GET', '/tasks')).status).toBe(200)
    await running.stop()

    // Done once: the next start finds nothing to hand over.
    const again = await serveEmbedded()
    expect(again.lines.filter((l) => String(l.msg).includes('handed over'))).toEqual([])
    await again.running.stop()
  })
})

// Each start took 1-6 s on one core beside three other heavy files; 60 s leaves room for a slower CI.
describe('DATABASE_URL', () => {
  /** Starts osd (the API alone) on the database and stops it; the lines it logged at warn. */
  async function startWarnings(databaseUrl: string) {
    const { lines, log } = captured()
    const dir = await mkdtemp(join(tmpdir(), 'osd-warn-'))
    try {
      const config = loadConfig(
        { port: 0, host: '127.0.0.1', role: 'api', dataDir: dir },
        { DATABASE_URL: databaseUrl },
      )
      await (await startDaemon(config, log)).stop()
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
    return lines.filter((l) => l.level === 40)
  }

  it('as a superuser (the test suite’s own): osd warns once at start', async () => {
    const db = await createTestDatabase()
    const warnings = await startWarnings(db.url)
    expect(warnings.filter((w) => w.msg === superuserMessage)).toHaveLength(1)
    expect(warnings.find((w) => w.msg === superuserMessage)).toMatchObject({ level: 40 })
  }, 60_000)

  // The database and role go after the file, not in the test: DROP DATABASE makes the shared server
  // take an immediate checkpoint, which on a loaded CI waited long enough to time the test out.
  const made: string[] = []
  const admin = postgres(inject('adminUrl'), { max: 1, onnotice: () => undefined })
  afterAll(async () => {
    for (const role of made) {
      await admin.unsafe(`drop database if exists ${role} with (force)`)
      await admin.unsafe(`drop role if exists ${role}`)
    }
    await admin.end()
  })

  it('as a role that owns its database and is no superuser: no warning', async () => {
    const suffix = randomBytes(4).toString('hex')
    const role = `osd_owner_${suffix}`
    made.push(role)
    const password = randomBytes(12).toString('hex')
    await admin.unsafe(`create role ${role} login password '${password}'`)
    // From the migrated template, its objects then given to the role as the embedded server's first
    // start does: migrating a new database from nothing took over 60 s on a loaded CI.
    await admin.unsafe(`create database ${role} owner ${role} template "${inject('templateDb')}"`)
    await handOver(withDatabase(inject('adminUrl'), role), role, pino({ level: 'silent' }))
    const url = new URL(withDatabase(inject('adminUrl'), role))
    url.username = role
    url.password = password
    const warnings = await startWarnings(url.toString())
    expect(warnings.filter((w) => w.msg === superuserMessage)).toEqual([])
  }, 60_000)
})
