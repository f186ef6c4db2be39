import { sealedColumns, type SealedColumn, type Sealer } from '../../crypto.js'
import type { Db } from '../../db/sql.js'

// Whether this process's server key opens the secrets stored in the database (issue 46). A database
// restored from a backup (osd admin restore) holds values sealed with the key of the instance the
// backup was made on, which the backup does not hold: started with another key, osd would find out only
// when a run, a chat or a delivery first needs one, as a confusing failure. So it looks at start,
// reading one stored value of every sealed column (crypto.ts sealedColumns: a restored database whose
// only secrets are subscriptions' signing keys counts as much as one with model keys), and refuses to
// start when one does not open. Read only; each table's own module writes it.

/** What the operator is told a value of each column is. */
const named: Record<keyof typeof sealedColumns, string> = {
  llmSecret: 'model key',
  llmVerifier: 'OAuth verifier',
  toolToken: 'tool token',
  webhookBody: 'webhook body',
  subscriptionSecret: 'event subscription secret',
}

/** The most rows of a table the check reads at start looking for a sealed value. */
const scannedAtMost = 10_000

/** undefined: nothing stored to check, or all open; else what to tell the operator. */
export async function secretKeyProblem(db: Db, sealer: Sealer): Promise<string | undefined> {
  for (const [name, at] of Object.entries(sealedColumns) as [
    keyof typeof sealedColumns,
    SealedColumn,
  ][]) {
    // Any one row of the first few thousand (the constant names of crypto.ts): a plain scan stops at
    // the first value it finds, but a table of rows without one (webhook calls that never
    // authenticated, which a stranger can send for days) would be read whole at every start.
    const [row] = await db<{ rowKey: string; sealed: Buffer }[]>`
      select row_key, sealed
        from (select ${db(at.key)}::text as row_key, ${db(at.column)} as sealed
                from ${db(at.table)} limit ${scannedAtMost}) first
       where sealed is not null
       limit 1`
    if (!row) continue
    try {
      sealer.open(row.sealed, at, row.rowKey)
    } catch {
      return (
        // An OAuth state is a sign-in's token, not a name to log.
        `the server key does not open the secrets stored in this database (${named[name]}` +
        `${at.keyType === 'uuid' ? ` ${row.rowKey}` : ''}): it is not the key they were sealed with. A database restored from a backup ` +
        'needs the key of the instance the backup was made on: set OSD_SECRET_KEY to it, or put that ' +
        'instance’s secret.key in the data dir.'
      )
    }
  }
  return undefined
}
