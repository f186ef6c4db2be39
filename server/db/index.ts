import type { Config } from '../config.js'
import { useEmbeddedServer, type EmbeddedLog } from './embedded.js'
import { readySql, type Sql } from './sql.js'

export interface Database {
  sql: Sql
  /** Where the database is, without its password, for logs. */
  location: string
  /** Another pool on the same database, for work kept apart from sql's (ended by close). */
  pool(options: { max: number; applicationName?: string }): Promise<Sql>
  /**
   * Ends the pools (their statements given 5 s; `now`: none) and, for the embedded server, stops it
   * unless others use it (EmbeddedServer.stop).
   */
  close(options?: { now?: boolean }): Promise<void>
}

/** DATABASE_URL when set, else the embedded PostgreSQL in the data dir (DESIGN 1). */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  log: EmbeddedLog,
  options: { max?: number; applicationName?: string } = {},
): Promise<Database> {
  const others: Sql[] = []
  const poolOn =
    (url: string) =>
    async (more: { max: number; applicationName?: string }): Promise<Sql> => {
      const pool = await readySql(url, { ...options, ...more })
      others.push(pool)
      return pool
    }
  // A pool ends once: a second call (close({now}) after close()) waits for the first's end, 5 s at most.
  const endAll = (sql: Sql, now = false) =>
    Promise.all([sql, ...others].map((pool) => pool.end({ timeout: now ? 0 : 5 })))
  if (config.databaseUrl) {
    const sql = await readySql(config.databaseUrl, options).catch((err: unknown) => {
      throw new DatabaseConnectError(redact(config.databaseUrl!), err)
    })
    return {
      sql,
      location: redact(config.databaseUrl),
      pool: poolOn(config.databaseUrl),
      close: async ({ now } = {}) => void (await endAll(sql, now)),
    }
  }
  const server = await useEmbeddedServer(config.dataDir, log)
  const sql = await readySql(server.url, options).catch(async (err: unknown) => {
    await server.stop().catch(() => undefined)
    throw new DatabaseConnectError(`the embedded PostgreSQL in ${config.dataDir}`, err)
  })
  return {
    sql,
    location: `embedded PostgreSQL in ${config.dataDir}`,
    pool: poolOn(server.url),
    async close({ now } = {}) {
      await endAll(sql, now)
      await server.stop({ now })
    },
  }
}

/**
 * osd could not connect to its database at start: what the driver or the server said, and what to
 * look at, in a line (server/cli.ts failure() prints it without a stack).
 */
export class DatabaseConnectError extends Error {
  constructor(location: string, cause: unknown) {
    super(`osd cannot connect to PostgreSQL (${location}): ${whyNot(cause)}`, { cause })
  }
}

/** The SQLSTATEs a first connection meets, and what to look at for each. */
const serverHints: Record<string, string> = {
  '28P01': 'check the user name and password in DATABASE_URL',
  '28000': "check the user, and that the server's pg_hba.conf lets this host connect as it",
  '3D000': 'create it (create database NAME owner ROLE), or name another in DATABASE_URL',
  '42704': 'remove that parameter from DATABASE_URL',
  '22023': 'correct that parameter in DATABASE_URL',
  '53300': 'the server has no connection left (max_connections)',
  '57P03': 'the server is starting or stopping: start osd again in a moment',
}

/** Network faults of a first connection, and what to look at for each. */
const networkHints: Record<string, string> = {
  ECONNREFUSED: 'is PostgreSQL running there, and are the host and port right?',
  ENOENT: 'is PostgreSQL running, with its socket in that directory and on that port?',
  EACCES: 'osd may not open that socket: check its directory and permissions',
  ENOTFOUND: 'the host name is not known: check it',
  EAI_AGAIN: 'the host name could not be looked up: check it and the DNS',
  ETIMEDOUT: 'the host did not answer: check it, the port and the firewalls between',
  EHOSTUNREACH: 'the host cannot be reached from here',
  ENETUNREACH: 'the host cannot be reached from here',
  CONNECT_TIMEOUT:
    'the server did not answer within 10 s: check the host, the port and the firewalls between',
}

function whyNot(err: unknown): string {
  const e = err as { code?: string; message?: string; severity?: string }
  const said = String(e.message ?? err)
  if (e.severity !== undefined && e.code !== undefined) {
    const hint = serverHints[e.code]
    return hint ? `${said}: ${hint}` : said
  }
  if (e.code !== undefined && networkHints[e.code]) return `${said}: ${networkHints[e.code]}`
  // TLS: the server takes none, or its certificate is not one this host trusts.
  if (/before secure TLS connection was established/.test(said))
    return `${said}: the server does not take TLS connections (sslmode=disable or prefer, or turn ssl on at the server)`
  if (e.code !== undefined && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(e.code))
    return `${said} (${e.code}): give the server's CA with sslrootcert=/path/to/ca.pem, or sslmode=require to encrypt without verifying`
  return said
}

/** The role osd's pool connects as, and whether it is a superuser (issue 41). */
export async function connectedRole(sql: Sql): Promise<{ role: string; superuser: boolean }> {
  const [row] = await sql<{ role: string; superuser: boolean }[]>`
    select current_user as role, rolsuper as superuser from pg_roles where rolname = current_user`
  return row!
}

/**
 * What osd logs once at start when its role is a superuser (issue 41: defence in depth): a mistake in
 * a query could then read or write files on the database server, run programs there, or reach every
 * database of it.
 */
export const superuserMessage =
  'osd connects to PostgreSQL as a superuser: a mistake in a query could reach the whole database server (its files, its programs, every database). Give osd a role that owns its database and is not a superuser (create role osd login password ...; create database osd owner osd) and name it in DATABASE_URL'

function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    // libpq's parameters may carry them too (server/db/url.ts).
    for (const secret of ['password', 'sslpassword'])
      if (u.searchParams.has(secret)) u.searchParams.set(secret, '***')
    return u.toString()
  } catch {
    return 'DATABASE_URL'
  }
}
