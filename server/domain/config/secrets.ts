import type { Db } from '../../db/sql.js'

// Where an apply took a secret from (`tokenFrom: env:NAME`), by connection: the one writer of
// config_secret_sources. Only the variable's name is kept here; the secret is the connection's, sealed.

export interface SecretSources {
  tools: Map<string, string>
  keys: Map<string, string>
}

export async function secretSources(db: Db, enterpriseId: string): Promise<SecretSources> {
  const rows = await db<
    { toolConnectionId: string | null; llmConnectionId: string | null; source: string }[]
  >`
    select tool_connection_id, llm_connection_id, source from config_secret_sources
     where enterprise_id = ${enterpriseId}`
  const sources: SecretSources = { tools: new Map(), keys: new Map() }
  for (const row of rows) {
    if (row.toolConnectionId) sources.tools.set(row.toolConnectionId, row.source)
    if (row.llmConnectionId) sources.keys.set(row.llmConnectionId, row.source)
  }
  return sources
}

/** Records (or with null forgets) where a connection's secret came from. */
export async function setSecretSource(
  db: Db,
  enterpriseId: string,
  of: { toolConnectionId: string } | { llmConnectionId: string },
  source: string | null,
): Promise<void> {
  const tool = 'toolConnectionId' in of ? of.toolConnectionId : null
  const llm = 'llmConnectionId' in of ? of.llmConnectionId : null
  await db`
    delete from config_secret_sources
     where enterprise_id = ${enterpriseId}
       and (tool_connection_id = ${tool}::uuid or llm_connection_id = ${llm}::uuid)`
  if (source === null) return
  await db`
    insert into config_secret_sources (enterprise_id, tool_connection_id, llm_connection_id, source)
    values (${enterpriseId}, ${tool}, ${llm}, ${source})`
}
