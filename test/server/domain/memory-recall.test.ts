import { beforeAll, describe, expect, it } from 'vitest'
import { searchTaskNotes, writeNote } from '../../../server/domain/learning/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// Recall on a large memory (migration 0011, memory_filter): from 20,000 notes on, a word most notes hold
// only ranks what the text's rarer words find; a text of such words alone still recalls, and so does one
// whose rarer words find nothing.

let t: TestApp
let task: { id: string }

beforeAll(async () => {
  t = await createTestApp()
  task = await llmTask(t)
  // 20,000 enterprise notes, every one holding "deploy" and "pipeline", half of them "friday".
  await t.sql`
    insert into memory_notes (enterprise_id, layer, text, source)
    select ${t.acme.id}, 'enterprise',
           'deploy the pipeline ' || case when g % 2 = 0 then 'friday ' else '' end || 'step ' || g,
           'training'
      from generate_series(1, 20000) g`
  await t.sql`analyze memory_notes`
}, 60_000)

const ids = async (text: string) =>
  (await searchTaskNotes(t.sql, t.acme.id, task.id, text, 10)).map((n) => n.id)

describe('recall on a large memory', () => {
  it('finds by the rarer words of a long text, ranking by all of them', async () => {
    const kiwi = await writeNote(t.sql, t.acme.id, {
      layer: 'enterprise',
      text: 'Kiwifruit orders deploy through the pipeline on friday',
      source: 'person',
    })
    const found = await ids('how should we deploy kiwifruit through the pipeline this friday')
    expect(found[0]).toBe(kiwi.id)
    const [filter] = await t.sql<{ filter: string }[]>`
      select memory_filter('deploy kiwifruit pipeline')::text as filter`
    expect(filter!.filter).toBe("'kiwifruit'")
  })

  it('a text of common words only finds the notes holding all of them', async () => {
    const found = await searchTaskNotes(t.sql, t.acme.id, task.id, 'deploy friday', 10)
    expect(found).toHaveLength(10)
    for (const note of found) expect(note.text).toMatch(/friday/)
  })

  it('when the rarer words find nothing, every word does', async () => {
    const found = await searchTaskNotes(t.sql, t.acme.id, task.id, 'deploy zanzibar', 10)
    expect(found).toHaveLength(10)
  })
})
