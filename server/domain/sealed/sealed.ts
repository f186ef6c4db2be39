import {
  sealedColumns,
  sealedHeader,
  sealedMagic,
  type SealedColumn,
  type Sealer,
} from '../../crypto.js'
import type { Db, Sql } from '../../db/sql.js'

// What is stored sealed (server/crypto.ts: model keys, OAuth verifiers, tool tokens, replayable webhook
// bodies), seen whole: which key each value names, and sealing every one again under the current key
// (`osd admin secrets rotate-key`, issue 45). The one writer outside each table's own module, as a
// migration is: it changes nothing but the sealed bytes, and only where they are still those it read.

/** NOTIFY channel telling every osd process to read its keys again (a key was added or removed). */
export const secretKeysChangedChannel = 'osd_secret_keys_changed'

const columns: readonly SealedColumn[] = Object.values(sealedColumns)

/** How many stored values each key seals, by key id; `legacy`: values of the form before key ids. */
export async function sealedKeyUse(
  db: Db,
): Promise<{ byKey: Record<string, number>; legacy: number }> {
  const byKey: Record<string, number> = {}
  let legacy = 0
  for (const at of columns) {
    // The constant names of crypto.ts's sealedColumns, never a request's words.
    const rows = await db<{ keyId: string | null; count: number }[]>`
      select case when substring(${db(at.column)} from 1 for 4) = ${sealedMagic}
                  then encode(substring(${db(at.column)} from 5 for 8), 'hex') end as key_id,
             count(*)::int as count
        from ${db(at.table)}
       where ${db(at.column)} is not null
       group by 1`
    for (const row of rows) {
      if (row.keyId === null) legacy += row.count
      else byKey[row.keyId] = (byKey[row.keyId] ?? 0) + row.count
    }
  }
  return { byKey, legacy }
}

/** A stored value that opens under no key of the ring in its row (sealed for another, or altered). */
export interface Unopenable {
  table: string
  column: string
  /** The row's key (its id). */
  row: string
}

/**
 * Seals again, under the current key and bound to its row, every stored value sealed under another key
 * or in the form before key ids: in batches of `batch` rows, each written only if it still holds what
 * was read (a value changed meanwhile was sealed by its writer, and is left to the next pass). Online:
 * it takes no lock that a request waits on for longer than one batch's statement. A value that opens
 * under no key of the ring is left as it is and named: nothing can use it, and it must not stop the
 * others from being sealed again. Answers how many values it sealed again, and those.
 */
export async function resealAll(
  sql: Sql,
  sealer: Sealer,
  options: { batch?: number; onBatch?: (done: number) => void } = {},
): Promise<{ resealed: number; unopenable: Unopenable[] }> {
  const batch = options.batch ?? 100
  const current = sealedHeader(sealer.keyring.current.id)
  const unopenable: Unopenable[] = []
  let done = 0
  for (const at of columns) {
    let after: string | undefined
    for (;;) {
      const rows = await sql<{ rowKey: string; sealed: Buffer }[]>`
        select ${sql(at.key)}::text as row_key, ${sql(at.column)} as sealed
          from ${sql(at.table)}
         where ${sql(at.column)} is not null
           and substring(${sql(at.column)} from 1 for 12) <> ${current}
           ${after === undefined ? sql`` : sql`and ${sql(at.key)} > ${after}::${sql.unsafe(at.keyType)}`}
         order by ${sql(at.key)}
         limit ${batch}`
      if (rows.length === 0) break
      after = rows.at(-1)!.rowKey
      const resealed = rows.flatMap((row) => {
        let plain: string
        try {
          plain = sealer.open(row.sealed, at, row.rowKey)
        } catch {
          unopenable.push({ table: at.table, column: at.column, row: row.rowKey })
          return []
        }
        return [{ ...row, fresh: sealer.seal(plain, at, row.rowKey) }]
      })
      const written = await sql`
        update ${sql(at.table)} as t
           set ${sql(at.column)} = v.fresh
          from unnest(${sql.array(resealed.map((r) => r.rowKey))}::text[],
                      ${sql.array(resealed.map((r) => r.sealed))}::bytea[],
                      ${sql.array(resealed.map((r) => r.fresh))}::bytea[]) as v(row_key, old, fresh)
         where t.${sql(at.key)} = v.row_key::${sql.unsafe(at.keyType)} and t.${sql(at.column)} = v.old
         returning 1`
      done += written.length
      options.onBatch?.(done)
      if (rows.length < batch) break
    }
  }
  return { resealed: done, unopenable }
}
