import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { MemoryAsk, MemoryNote, NotePage, TaskMemory } from '../../../shared/schemas/memory.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// Writing notes (issue 31): a near-duplicate of an active note of the same layer and owner is refused
// 409 note_duplicate with duplicateOf, which never names a note the writer's layer does not hold; a
// request repeated with its idempotency key answers the first note; a note may hold until a time, after
// which it is neither recalled nor listed, and a person extends it (PATCH /v1/memory/{id}).

let t: TestApp
let general: string
let task: { id: string }
let sibling: { id: string }

const noteCount = async () =>
  (await t.sql<{ n: number }[]>`select count(*)::int as n from memory_notes`)[0]!.n

async function post(path: string, body: Record<string, unknown>, token?: string) {
  return t.call('POST', path, { body, ...(token ? { token } : {}) })
}
async function written(path: string, body: Record<string, unknown>) {
  const res = await post(path, body)
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return MemoryNote.parse(res.body)
}
async function ask(taskId: string, q: string) {
  const res = await t.call('GET', `/v1/tasks/${taskId}/memory/ask?q=${encodeURIComponent(q)}`)
  expect(res.status).toBe(200)
  return MemoryAsk.parse(res.body).notes.map((n) => n.id)
}
async function list(query: string) {
  const res = await t.call('GET', `/v1/memory${query}`)
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return NotePage.parse(res.body)
}
/** Moves a note's validUntil into the past, as time passing would. */
const expire = (id: string) =>
  t.sql`update memory_notes set valid_until = now() - interval '1 minute' where id = ${id}`

beforeAll(async () => {
  t = await createTestApp()
  general = (await t.call('GET', '/v1/teams')).body[0].id
  task = await llmTask(t, { teamId: general, goal: 'Release the billing service safely' })
  sibling = await llmTask(t, { teamId: general })
})

describe('near-duplicates', () => {
  it('a note nearly the same as an active note of its layer is refused 409 with duplicateOf', async () => {
    const first = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'Deploy the billing service only after the finance team signs off.',
    })
    const before = await noteCount()
    // Case and white space fold; a word more or less is still nearly the same.
    for (const text of [
      'deploy the BILLING service only after the finance team signs off.',
      '  Deploy the billing service\n only after   the finance team signs off  ',
      'Deploy the billing service only after the finance team signs off!',
    ]) {
      const res = await post(`/v1/tasks/${task.id}/memory`, { text })
      expect(res.status, text).toBe(409)
      expect(res.body).toMatchObject({ error: 'note_duplicate', duplicateOf: first.id })
      expect(res.body.message).toContain(first.id)
    }
    expect(await noteCount()).toBe(before)
    // A note that says something else is no duplicate.
    await written(`/v1/tasks/${task.id}/memory`, {
      text: 'Deploy the search service on Tuesdays, after the morning stand-up.',
    })
  })

  it('another layer or owner is not a duplicate, and duplicateOf never names its note', async () => {
    const text = 'Refunds above 500 euros need a second approver from finance.'
    const own = await written(`/v1/tasks/${task.id}/memory`, { text })
    // The same text at the task's team, at the enterprise, at another task: each its own note.
    const team = await written(`/v1/tasks/${task.id}/memory/train`, { text, layer: 'team' })
    const whole = await written(`/v1/tasks/${task.id}/memory/train`, { text, layer: 'enterprise' })
    const theirs = await written(`/v1/tasks/${sibling.id}/memory`, { text })
    expect(new Set([own.id, team.id, whole.id, theirs.id]).size).toBe(4)
    // Each layer's repeat is refused with that layer's own note.
    const again = async (path: string, body: Record<string, unknown>) =>
      (await post(path, body)).body.duplicateOf
    expect(await again(`/v1/tasks/${sibling.id}/memory`, { text })).toBe(theirs.id)
    expect(await again(`/v1/tasks/${task.id}/memory/train`, { text, layer: 'team' })).toBe(team.id)

    // The other enterprise holds the same text: acme's note is written, and acme's repeat names acme's.
    const elsewhere = await t.createEnterprise(`Else ${randomUUID().slice(0, 6)}`)
    const theirTask = await llmTask(t, {}, elsewhere.token)
    const foreignText = 'Zephyrco invoices always carry the purchase order number.'
    const foreign = await post(
      `/v1/tasks/${theirTask.id}/memory`,
      { text: foreignText },
      elsewhere.token,
    )
    expect(foreign.status).toBe(201)
    const mine = await written(`/v1/tasks/${task.id}/memory/train`, {
      text: foreignText,
      layer: 'enterprise',
    })
    const repeat = await post(`/v1/tasks/${task.id}/memory/train`, {
      text: foreignText,
      layer: 'enterprise',
    })
    expect(repeat.body).toMatchObject({ error: 'note_duplicate', duplicateOf: mine.id })
    const theirRepeat = await post(
      `/v1/tasks/${theirTask.id}/memory`,
      { text: foreignText },
      elsewhere.token,
    )
    expect(theirRepeat.body).toMatchObject({
      error: 'note_duplicate',
      duplicateOf: foreign.body.id,
    })
  })

  it('a correction may say nearly what the note it corrects says; a tombstoned or expired note blocks nothing', async () => {
    const note = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'The nightly export runs at 02:00 UTC and takes an hour.',
    })
    const fix = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'The nightly export runs at 03:00 UTC and takes an hour.',
      correctsId: note.id,
    })
    expect(fix).toMatchObject({ kind: 'correction', correctsId: note.id })
    // The correction itself now stands: a repeat of it is a duplicate of the correction.
    const repeat = await post(`/v1/tasks/${task.id}/memory`, {
      text: 'The nightly export runs at 03:00 UTC and takes an hour.',
    })
    expect(repeat.body.duplicateOf).toBe(fix.id)

    const gone = await written(`/v1/tasks/${task.id}/memory`, { text: 'Standups move to 10:15.' })
    expect((await t.call('POST', `/v1/memory/${gone.id}/tombstone`)).status).toBe(204)
    await written(`/v1/tasks/${task.id}/memory`, { text: 'Standups move to 10:15.' })

    const stale = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'Anna is on call for billing.',
      validUntil: new Date(Date.now() + 3_600_000).toISOString(),
    })
    await expire(stale.id)
    await written(`/v1/tasks/${task.id}/memory`, { text: 'Anna is on call for billing.' })
  })
})

describe('idempotency keys', () => {
  it('the same request with the same key answers the first note; another request with it is 409', async () => {
    const body = { text: 'Quarterly reports are due on the 5th.', idempotencyKey: 'q-reports-1' }
    const first = await written(`/v1/tasks/${task.id}/memory`, body)
    const before = await noteCount()
    const again = await written(`/v1/tasks/${task.id}/memory`, body)
    expect(again).toEqual(first)
    expect(await noteCount()).toBe(before)
    // Without the key, the same text is a duplicate.
    const { idempotencyKey: _, ...keyless } = body
    expect((await post(`/v1/tasks/${task.id}/memory`, keyless)).body.error).toBe('note_duplicate')
    // The key names one request: other text, or another layer, is refused.
    for (const [path, other] of [
      [`/v1/tasks/${task.id}/memory`, { ...body, text: 'Monthly reports are due on the 3rd.' }],
      [`/v1/tasks/${task.id}/memory/train`, { ...body, layer: 'team' }],
    ] as const) {
      const res = await post(path, other)
      expect(res.status).toBe(409)
      expect(res.body.error).toBe('note_idempotency_key_reused')
    }
    // Another caller's key is its own.
    const token = await t.tokenWith(['tasks:write', 'tasks:read'])
    const theirs = await post(
      `/v1/tasks/${task.id}/memory`,
      { text: 'Weekly reports are due on Fridays.', idempotencyKey: 'q-reports-1' },
      token,
    )
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(201)
    expect(await noteCount()).toBe(before + 1)
  })

  it('a repeat whose first note was tombstoned is 409 note_not_active; a bad key is 400', async () => {
    const body = { text: 'Vendor invoices are paid net 30.', idempotencyKey: 'vendor-net-30' }
    const first = await written(`/v1/tasks/${task.id}/memory`, body)
    await t.call('POST', `/v1/memory/${first.id}/tombstone`)
    const res = await post(`/v1/tasks/${task.id}/memory`, body)
    expect([res.status, res.body.error]).toEqual([409, 'note_not_active'])
    for (const idempotencyKey of ['', 'k'.repeat(81), 7]) {
      const bad = await post(`/v1/tasks/${task.id}/memory`, { text: 'x y z', idempotencyKey })
      expect([bad.status, bad.body.error]).toEqual([400, 'invalid_request'])
    }
  })
})

describe('expiry', () => {
  it('validUntil in the past or not a time is refused 400, and nothing is written', async () => {
    const before = await noteCount()
    for (const validUntil of [
      new Date(Date.now() - 60_000).toISOString(),
      'tomorrow',
      '2030-13-01T00:00:00Z',
      '2030-01-01T00:00:00', // no zone
      42,
    ]) {
      const res = await post(`/v1/tasks/${task.id}/memory`, { text: 'A fact', validUntil })
      expect([String(validUntil), res.status, res.body.error]).toEqual([
        String(validUntil),
        400,
        'invalid_request',
      ])
    }
    expect(await noteCount()).toBe(before)
  })

  it('a note past its validUntil is neither recalled, asked nor listed; GET shows expired; PATCH extends it', async () => {
    const until = new Date(Date.now() + 86_400_000)
    const note = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'The kumquat release ships on the 14th.',
      validUntil: until.toISOString().replace('Z', '+00:00'),
    })
    expect(note).toMatchObject({ validUntil: until.toISOString(), expired: false })
    expect(await ask(task.id, 'when does kumquat ship')).toEqual([note.id])

    await expire(note.id)
    expect(await ask(task.id, 'when does kumquat ship')).toEqual([])
    expect((await list('?q=kumquat')).notes).toEqual([])
    const own = TaskMemory.parse((await t.call('GET', `/v1/tasks/${task.id}/memory`)).body)
    expect(own.notes.map((n) => n.id)).not.toContain(note.id)
    const got = MemoryNote.parse((await t.call('GET', `/v1/memory/${note.id}`)).body)
    expect(got).toMatchObject({ id: note.id, status: 'active', expired: true })
    // expired=true lists it, for a person to extend.
    const expiredList = await list('?expired=true')
    expect(expiredList.notes.map((n) => n.id)).toContain(note.id)
    expect(expiredList.notes.every((n) => n.expired)).toBe(true)

    const later = new Date(Date.now() + 7 * 86_400_000).toISOString()
    const extended = await t.call('PATCH', `/v1/memory/${note.id}`, { body: { validUntil: later } })
    expect(extended.status, JSON.stringify(extended.body)).toBe(200)
    expect(MemoryNote.parse(extended.body)).toMatchObject({ validUntil: later, expired: false })
    expect(await ask(task.id, 'when does kumquat ship')).toEqual([note.id])

    // null: it holds with no end.
    const forever = await t.call('PATCH', `/v1/memory/${note.id}`, { body: { validUntil: null } })
    expect(forever.body).toMatchObject({ validUntil: null, expired: false })
  })

  it('PATCH refuses a past time or not a time (400), a note not active (409), and none (404)', async () => {
    const note = await written(`/v1/tasks/${task.id}/memory`, { text: 'Lunch orders close at 11.' })
    for (const body of [
      { validUntil: new Date(Date.now() - 1000).toISOString() },
      { validUntil: 'soon' },
      {},
    ]) {
      const res = await t.call('PATCH', `/v1/memory/${note.id}`, { body })
      expect([JSON.stringify(body), res.status, res.body.error]).toEqual([
        JSON.stringify(body),
        400,
        'invalid_request',
      ])
    }
    expect((await t.call('GET', `/v1/memory/${note.id}`)).body.validUntil).toBeNull()
    const fix = await written(`/v1/tasks/${task.id}/memory`, {
      text: 'Lunch orders close at 11:30.',
      correctsId: note.id,
    })
    expect(fix.correctsId).toBe(note.id)
    const future = new Date(Date.now() + 3_600_000).toISOString()
    const superseded = await t.call('PATCH', `/v1/memory/${note.id}`, {
      body: { validUntil: future },
    })
    expect([superseded.status, superseded.body.error]).toEqual([409, 'note_not_active'])
    const none = await t.call('PATCH', `/v1/memory/${randomUUID()}`, {
      body: { validUntil: future },
    })
    expect([none.status, none.body.error]).toEqual([404, 'note_not_found'])
  })
})
