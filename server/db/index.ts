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
    const sql = await readySql(config.databaseUrl, options)
    return {
      sql,
      location: redact(config.databaseUrl),
      pool: poolOn(config.databaseUrl),
      close: async ({ now } = {}) => void (await endAll(sql, now)),
    }
  }
  const server = await useEmbeddedServer(config.dataDir, log)
  const sql = await readySql(server.url, options)
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
    return u.toString()
  } catch {
    return 'DATABASE_URL'
  }
}
