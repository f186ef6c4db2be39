import { beforeAll, describe, expect, it } from 'vitest'
import { MemoryNote, NotePage, ReviewPage } from '../../../shared/schemas/memory.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// How impact reads (issue 31): every note answers {recalledRuns, succeeded, failed, successRate,
// baseRate, lift} from the counters runs' ends keep (test/server/engine/memory-impact.test.ts counts
// them through real runs; here they are written as such ends would leave them), and GET /v1/memory
// sorts by lift (nulls last) or by recalls; an unknown sort is the default, as the other lists have it.

let t: TestApp
let task: { id: string }
let other: { id: string }

async function note(text: string) {
  const res = await t.call('POST', `/v1/tasks/${task.id}/memory`, { body: { text } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return MemoryNote.parse(res.body)
}

/**
 * The counters a note would have after runs of `taskId`: `s` and `f` runs that recalled it succeeded
 * and failed, `bs` and `bf` runs of the task over the same period that did not.
 */
async function counted(noteId: string, taskId: string, s: number, f: number, bs = 0, bf = 0) {
  await t.sql`
    insert into memory_note_impact (enterprise_id, note_id, task_id, succeeded, failed,
                                    first_succeeded, first_failed, last_succeeded, last_failed,
                                    first_at, last_at)
    values (${t.acme.id}, ${noteId}, ${taskId}, ${s}, ${f}, 3, 1, ${3 + s + bs}, ${1 + f + bf}, now(), now())`
}

async function list(query: string) {
  const res = await t.call('GET', `/v1/memory${query}`)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return NotePage.parse(res.body)
}

let high: MemoryNote
let flat: MemoryNote
let few: MemoryNote
let never: MemoryNote
let oneSided: MemoryNote

beforeAll(async () => {
  t = await createTestApp()
  task = await llmTask(t, { goal: 'Close the month' })
  other = await llmTask(t, { goal: 'Pay the suppliers' })
  high = await note('Reconcile the bank accounts before the ledger closes')
  flat = await note('Supplier statements arrive by post')
  few = await note('The auditor prefers PDF exports')
  never = await note('Fixed assets are reviewed in December')
  oneSided = await note('Accruals are booked on the last working day')
  // Over two tasks: 8 of 10 recalling runs succeeded, 4 of 10 others did: lift 0.8 - 0.4.
  await counted(high.id, task.id, 5, 1, 2, 3)
  await counted(high.id, other.id, 3, 1, 2, 3)
  await counted(flat.id, task.id, 3, 3, 3, 3)
  await counted(few.id, task.id, 1, 1, 9, 1)
  await counted(oneSided.id, task.id, 5, 0, 3, 1)
  await t.sql`update memory_notes set recalls = 40 where id = ${never.id}`
  await t.sql`update memory_notes set recalls = 12 where id = ${flat.id}`
})

describe('impact', () => {
  it('GET /v1/memory/{id} answers the counts, the rates and the lift', async () => {
    const got = async (id: string) =>
      MemoryNote.parse((await t.call('GET', `/v1/memory/${id}`)).body).impact
    expect(await got(high.id)).toEqual({
      recalledRuns: 10,
      succeeded: 8,
      failed: 2,
      successRate: 0.8,
      baseRate: 0.4,
      lift: 0.4,
    })
    expect(await got(flat.id)).toMatchObject({ recalledRuns: 6, lift: 0 })
    // Fewer than 5 runs on either side: rates, but no lift.
    expect(await got(few.id)).toEqual({
      recalledRuns: 2,
      succeeded: 1,
      failed: 1,
      successRate: 0.5,
      baseRate: 0.9,
      lift: null,
    })
    expect(await got(oneSided.id)).toMatchObject({ successRate: 1, baseRate: 0.75, lift: null })
    expect(await got(never.id)).toEqual({
      recalledRuns: 0,
      succeeded: 0,
      failed: 0,
      successRate: null,
      baseRate: null,
      lift: null,
    })
  })

  it('sort=impact orders by lift, notes without one last, newest first among them', async () => {
    const page = await list('?sort=impact')
    expect(page.notes.map((n) => n.id)).toEqual([high.id, flat.id, oneSided.id, never.id, few.id])
    expect(page.total).toBe(5)
    // Paged, filtered, and with a search: the same order over what matches.
    expect((await list('?sort=impact&limit=1&page=2')).notes.map((n) => n.id)).toEqual([flat.id])
    expect((await list(`?sort=impact&taskId=${task.id}`)).notes[0]!.id).toBe(high.id)
    const searched = await list('?sort=impact&q=supplier%20ledger')
    expect(searched.notes.map((n) => n.id)).toEqual([high.id, flat.id])
  })

  it('sort=recalls orders by recalls; an unknown sort is the default, newest first', async () => {
    expect((await list('?sort=recalls')).notes.map((n) => n.id).slice(0, 2)).toEqual([
      never.id,
      flat.id,
    ])
    const newest = [oneSided.id, never.id, few.id, flat.id, high.id]
    expect((await list('?sort=lift')).notes.map((n) => n.id)).toEqual(newest)
    expect((await list('?sort=')).notes.map((n) => n.id)).toEqual(newest)
    expect((await list('')).notes.map((n) => n.id)).toEqual(newest)
  })

  it('review items carry their note with its impact', async () => {
    const rated = await t.call('POST', `/v1/memory/${flat.id}/rate`, {
      body: { rating: 'down', reason: 'often out of date' },
    })
    expect(rated.status).toBe(200)
    const review = ReviewPage.parse((await t.call('GET', '/v1/memory/review')).body)
    expect(review.items[0]!.note).toMatchObject({ id: flat.id, impact: { recalledRuns: 6 } })
  })
})
