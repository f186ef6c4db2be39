import { sealedColumns, type Sealer } from '../../crypto.js'
import type { Db } from '../../db/sql.js'

// Whether this process's server key opens the secrets stored in the database (issue 46). A database
// restored from a backup (osd admin restore) holds model keys and tool tokens sealed with the key of the
// instance the backup was made on, which the backup does not hold: started with another key, osd would
// find out only when a run or a chat first needs a key, as a confusing failure. So it looks at start,
// reading one stored secret (a model key first, else a tool token) and refusing to start when it does
// not open. Read only; models/ and tools/ own these tables.

/** undefined: nothing stored to check, or it opens; else what to tell the operator. */
export async function secretKeyProblem(db: Db, sealer: Sealer): Promise<string | undefined> {
  const [row] = await db<{ what: 'model key' | 'tool token'; id: string; sealed: Buffer }[]>`
    (select 'model key' as what, id, secret_ciphertext as sealed from llm_connections
      order by created_at limit 1)
    union all
    (select 'tool token', id, token_ciphertext from tool_connections
      where token_ciphertext is not null order by created_at limit 1)
    limit 1`
  if (!row) return undefined
  try {
    const at = row.what === 'model key' ? sealedColumns.llmSecret : sealedColumns.toolToken
    sealer.open(row.sealed, at, row.id)
    return undefined
  } catch {
    return (
      `the server key does not open the secrets stored in this database (${row.what} ${row.id}): ` +
      'it is not the key they were sealed with. A database restored from a backup needs the key of the ' +
      'instance the backup was made on: set OSD_SECRET_KEY to it, or put that instance’s secret.key ' +
      'in the data dir.'
    )
  }
}
