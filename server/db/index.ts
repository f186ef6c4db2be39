import type { Config } from '../config.js'
import { useEmbeddedServer, type EmbeddedLog } from './embedded.js'
import { readySql, type Sql } from './sql.js'

export interface Database {
  sql: Sql
  /** Where the database is, without its password, for logs. */
  location: string
  /** Another pool on the same database, for work kept apart from sql's (ended by close). */
  pool(options: { max: number; applicationName?: string }): Promise<Sql>
  close(): Promise<void>
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
  const endAll = (sql: Sql) => Promise.all([sql, ...others].map((pool) => pool.end({ timeout: 5 })))
  if (config.databaseUrl) {
    const sql = await readySql(config.databaseUrl, options)
    return {
      sql,
      location: redact(config.databaseUrl),
      pool: poolOn(config.databaseUrl),
      close: async () => void (await endAll(sql)),
    }
  }
  const server = await useEmbeddedServer(config.dataDir, log)
  const sql = await readySql(server.url, options)
  return {
    sql,
    location: `embedded PostgreSQL in ${config.dataDir}`,
    pool: poolOn(server.url),
    async close() {
      await endAll(sql)
      await server.stop()
    },
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return 'DATABASE_URL'
  }
}
