import { beforeAll, describe, expect, it } from 'vitest'
import { transaction } from '../../../server/db/sql.js'
import { recallNotes } from '../../../server/domain/learning/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// Every llm run's recall counts a recall on each note it recalls (migration 0013): those updates stay on
// their page (HOT), so they add nothing to the search index's pending list, which every search would
// read through until a vacuum (npm run bench:memory: a few thousand recalls doubled a recall's time).

let t: TestApp
let task: { id: string }

beforeAll(async () => {
  t = await createTestApp()
  task = await llmTask(t)
  // Enough notes for many full pages, each holding the word the recall looks for.
  await t.sql`
    insert into memory_notes (enterprise_id, layer, text, source)
    select ${t.acme.id}, 'enterprise',
           'ledger close ' || g || ' ' || repeat('reconcile the accounts before the month ends ', 3),
           'training'
      from generate_series(1, 3000) g`
}, 60_000)

describe('counting recalls', () => {
  it('updates the recalled notes in place: no new index entries', async () => {
    const counts = await transaction(t.sql, async (tx) => {
      const notes = await recallNotes(tx, t.acme.id, task.id, 'ledger close 1500', 10)
      expect(notes).toHaveLength(10)
      const [row] = await tx<{ updated: number; hot: number }[]>`
        select n_tup_upd::int as updated, n_tup_hot_upd::int as hot
          from pg_stat_xact_user_tables where relname = 'memory_notes'`
      return row!
    })
    expect(counts.updated).toBe(10)
    expect(counts.hot).toBe(10)
  })
})
