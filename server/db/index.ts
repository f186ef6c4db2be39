import type { Config } from '../config.js'
import { useEmbeddedServer, type EmbeddedLog } from './embedded.js'
import { readySql, type Sql } from './sql.js'

export interface Database {
  sql: Sql
  /** Where the database is, without its password, for logs. */
  location: string
  close(): Promise<void>
}

/** DATABASE_URL when set, else the embedded PostgreSQL in the data dir (DESIGN 1). */
export async function openDatabase(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  log: EmbeddedLog,
  options: { max?: number; applicationName?: string } = {},
): Promise<Database> {
  if (config.databaseUrl) {
    const sql = await readySql(config.databaseUrl, options)
    return { sql, location: redact(config.databaseUrl), close: () => sql.end({ timeout: 5 }) }
  }
  const server = await useEmbeddedServer(config.dataDir, log)
  const sql = await readySql(server.url, options)
  return {
    sql,
    location: `embedded PostgreSQL in ${config.dataDir}`,
    async close() {
      await sql.end({ timeout: 5 })
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
