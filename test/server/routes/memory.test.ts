import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  MemoryAsk,
  MemoryNote,
  NotePage,
  RecallHealth,
  ReviewDecision,
  ReviewHistoryPage,
  ReviewPage,
  TaskMemory,
} from '../../../shared/schemas/memory.js'
import { recallNotes, writeNote } from '../../../server/domain/learning/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { deterministicTask, llmTask } from '../../helpers/runs.js'

let t: TestApp
let general: string
/** An llm task on the General team, and one without a team. */
let task: { id: string }
let teamless: { id: string }
let foreignTask: { id: string }
let foreignNote: string

const unique = () => randomUUID().slice(0, 8)

async function addNote(taskId: string, text: string, extra: Record<string, unknown> = {}) {
  const res = await t.call('POST', `/v1/tasks/${taskId}/memory`, { body: { text, ...extra } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return MemoryNote.parse(res.body)
}
async function train(taskId: string, body: Record<string, unknown>) {
  const res = await t.call('POST', `/v1/tasks/${taskId}/memory/train`, { body })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return MemoryNote.parse(res.body)
}
async function ask(taskId: string, q?: string) {
  const res = await t.call(
    'GET',
    `/v1/tasks/${taskId}/memory/ask${q === undefined ? '' : `?q=${encodeURIComponent(q)}`}`,
  )
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return MemoryAsk.parse(res.body)
}
const noteCount = async () =>
  (await t.sql<{ n: number }[]>`select count(*)::int as n from memory_notes`)[0]!.n
const itemCount = async () =>
  (await t.sql<{ n: number }[]>`select count(*)::int as n from memory_review_items`)[0]!.n

beforeAll(async () => {
  t = await createTestApp()
  general = (await t.call('GET', '/v1/teams')).body[0].id
  task = await llmTask(t, { teamId: general, goal: 'Release the billing service safely' })
  teamless = await llmTask(t, { teamId: null })
  foreignTask = await deterministicTask(t, {}, t.other.token)
  const res = await t.call('POST', `/v1/tasks/${foreignTask.id}/memory`, {
    token: t.other.token,
    body: { text: 'Other Corp secret: deploys happen on Tuesdays with the blue pipeline' },
  })
  expect(res.status).toBe(201)
  foreignNote = res.body.id
})

describe('route checks', () => {
  const noteRoutes = [
    ['GET', ''],
    ['POST', '/tombstone'],
    ['POST', '/rate', { rating: 'up' }],
    ['PATCH', '', { validUntil: null }],
  ] as const
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/memory' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/memory/recall-health' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/memory/review' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/memory/review/history' })
  for (const [method, suffix, body] of noteRoutes)
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/memory/${foreignNote}${suffix}`,
      body: () => body,
      foreign: () => ({ path: `/v1/memory/${foreignNote}${suffix}`, body }),
      notFoundCode: 'note_not_found',
    })
  for (const [method, suffix, body] of [
    ['GET', '/memory', undefined],
    ['POST', '/memory', { text: 'a note' }],
    ['POST', '/memory/train', { text: 'a note', layer: 'enterprise' }],
    ['GET', '/memory/ask?q=deploy', undefined],
  ] as const)
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/tasks/${foreignTask.id}${suffix}`,
      body: () => body,
      foreign: () => ({ path: `/v1/tasks/${foreignTask.id}${suffix}`, body }),
      notFoundCode: 'task_not_found',
    })
})

describe('notes from a task', () => {
  it('a task note is written, listed with the task and its training grants', async () => {
    const note = await addNote(task.id, 'Always run the billing migrations before the deploy')
    expect(note).toMatchObject({
      layer: 'task',
      taskId: task.id,
      teamId: null,
      kind: 'note',
      status: 'active',
      source: 'person',
      evidence: [],
      recalls: 0,
    })
    expect(note.createdBy).toMatch(/^token:/)
    const res = await t.call('GET', `/v1/tasks/${task.id}/memory`)
    const memory = TaskMemory.parse(res.body)
    expect(memory.notes.map((n) => n.id)).toContain(note.id)
    expect(memory.grants).toEqual({
      read: ['task', 'team', 'enterprise'],
      write: ['task', 'team', 'enterprise'],
    })
    const lonely = TaskMemory.parse((await t.call('GET', `/v1/tasks/${teamless.id}/memory`)).body)
    expect(lonely).toMatchObject({ teamId: null, grants: { write: ['task', 'enterprise'] } })
  })

  it('trains the team layer (the task team) and the enterprise layer', async () => {
    const team = await train(task.id, {
      text: 'The General team reviews invoices on Mondays',
      layer: 'team',
    })
    expect(team).toMatchObject({ layer: 'team', teamId: general, taskId: null })
    const whole = await train(task.id, {
      text: 'Customers are addressed by first name',
      layer: 'enterprise',
    })
    expect(whole).toMatchObject({ layer: 'enterprise', teamId: null, taskId: null })
  })

  it('refuses bad input with 400 or 404 and writes nothing', async () => {
    const before = await noteCount()
    const cases: [string, string, unknown, number, string][] = [
      ['POST', `/v1/tasks/${task.id}/memory`, { text: '' }, 400, 'invalid_request'],
      ['POST', `/v1/tasks/${task.id}/memory`, { text: '   ' }, 400, 'invalid_request'],
      ['POST', `/v1/tasks/${task.id}/memory`, { text: 'x'.repeat(4001) }, 400, 'invalid_request'],
      ['POST', `/v1/tasks/${task.id}/memory`, {}, 400, 'invalid_request'],
      ['POST', `/v1/tasks/${task.id}/memory`, { text: 42 }, 400, 'invalid_request'],
      ['POST', `/v1/tasks/${randomUUID()}/memory`, { text: 'x' }, 404, 'task_not_found'],
      ['POST', `/v1/tasks/not-an-id/memory`, { text: 'x' }, 404, 'task_not_found'],
      [
        'POST',
        `/v1/tasks/${task.id}/memory/train`,
        { text: 'x', layer: 'galaxy' },
        400,
        'invalid_request',
      ],
      [
        'POST',
        `/v1/tasks/${task.id}/memory/train`,
        { text: 'x', layer: 'task' },
        400,
        'invalid_request',
      ],
      ['POST', `/v1/tasks/${task.id}/memory/train`, { text: 'x' }, 400, 'invalid_request'],
      [
        'POST',
        `/v1/tasks/${task.id}/memory/train`,
        { text: '', layer: 'team' },
        400,
        'invalid_request',
      ],
      [
        'POST',
        `/v1/tasks/${teamless.id}/memory/train`,
        { text: 'x', layer: 'team' },
        400,
        'invalid_request',
      ],
      // A correction of another enterprise's note, and of a note that does not exist.
      [
        'POST',
        `/v1/tasks/${task.id}/memory`,
        { text: 'x', correctsId: foreignNote },
        404,
        'note_not_found',
      ],
      [
        'POST',
        `/v1/tasks/${task.id}/memory`,
        { text: 'x', correctsId: randomUUID() },
        404,
        'note_not_found',
      ],
      [
        'POST',
        `/v1/tasks/${task.id}/memory`,
        { text: 'x', correctsId: 'nope' },
        400,
        'invalid_request',
      ],
    ]
    for (const [method, path, body, status, code] of cases) {
      const res = await t.call(method, path, { body })
      expect([path, body, res.status, res.body.error]).toEqual([path, body, status, code])
    }
    // 4,000 characters is the most a note holds.
    const longest = await addNote(task.id, 'y'.repeat(4000))
    expect(longest.text).toHaveLength(4000)
    expect(await noteCount()).toBe(before + 1)
  })

  it('a correction of another task’s note is refused 400, of a tombstoned note 404; nothing is written', async () => {
    const other = await llmTask(t, { teamId: general })
    const theirs = await addNote(other.id, 'Other task: archive logs weekly')
    const gone = await addNote(task.id, 'A note soon tombstoned')
    await t.call('POST', `/v1/memory/${gone.id}/tombstone`)
    const team = await train(task.id, { text: 'Team rule to keep', layer: 'team' })
    const before = await noteCount()
    const refused = [
      [
        `/v1/tasks/${task.id}/memory`,
        { text: 'fix', correctsId: theirs.id },
        400,
        'invalid_request',
      ],
      // A task-layer correction of a team note, and a team correction of the enterprise's, are at another layer.
      [`/v1/tasks/${task.id}/memory`, { text: 'fix', correctsId: team.id }, 400, 'invalid_request'],
      [
        `/v1/tasks/${task.id}/memory/train`,
        { text: 'fix', layer: 'enterprise', correctsId: team.id },
        400,
        'invalid_request',
      ],
      [`/v1/tasks/${task.id}/memory`, { text: 'fix', correctsId: gone.id }, 404, 'note_not_found'],
    ] as const
    for (const [path, body, status, code] of refused) {
      const res = await t.call('POST', path, { body })
      expect([res.status, res.body.error]).toEqual([status, code])
    }
    expect(await noteCount()).toBe(before)
    expect((await t.call('GET', `/v1/memory/${theirs.id}`)).body.status).toBe('active')
  })
})

describe('corrections', () => {
  it("a person's correction supersedes the note at once: never asked or listed again", async () => {
    const word = `zebra${unique()}`
    const old = await train(task.id, { text: `Deploy ${word} on Fridays`, layer: 'team' })
    const fix = await train(task.id, {
      text: `Never deploy ${word} on Fridays`,
      layer: 'team',
      correctsId: old.id,
    })
    expect(fix).toMatchObject({ kind: 'correction', correctsId: old.id, status: 'active' })
    const superseded = MemoryNote.parse((await t.call('GET', `/v1/memory/${old.id}`)).body)
    expect(superseded).toMatchObject({ status: 'superseded', supersededById: fix.id })
    expect((await ask(task.id, word)).notes.map((n) => n.id)).toEqual([fix.id])
    const listed = NotePage.parse((await t.call('GET', `/v1/memory?q=${word}`)).body)
    expect(listed.notes.map((n) => n.id)).toEqual([fix.id])
    // A superseded note is not corrected again: its correction is.
    const again = await t.call('POST', `/v1/tasks/${task.id}/memory/train`, {
      body: { text: 'x', layer: 'team', correctsId: old.id },
    })
    expect([again.status, again.body.error]).toEqual([409, 'note_not_active'])
  })

  it("a training run's correction of a person's note opens a conflict; resolve applies it", async () => {
    const word = `okapi${unique()}`
    const person = await addNote(task.id, `Invoices for ${word} go out on the 1st`)
    const items = await itemCount()
    const proposed = await writeNote(t.sql, t.acme.id, {
      layer: 'task',
      taskId: task.id,
      text: `Invoices for ${word} go out on the 5th`,
      source: 'training',
      correctsId: person.id,
      createdBy: 'run:test',
    })
    expect(proposed.status).toBe('proposed')
    expect(await itemCount()).toBe(items + 1)
    // Not applied: the person's note is still what a run recalls.
    expect((await ask(task.id, word)).notes.map((n) => n.id)).toEqual([person.id])
    const queue = ReviewPage.parse((await t.call('GET', '/v1/memory/review?limit=200')).body)
    const item = queue.items.find((i) => i.note.id === person.id)!
    expect(item).toMatchObject({
      kind: 'conflict',
      status: 'open',
      correction: { id: proposed.id },
    })

    const res = await t.call('POST', `/v1/memory/review/${item.id}/resolve`, {
      body: { correctionId: proposed.id, reason: 'the 5th is right since March' },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect(ReviewDecision.parse(res.body)).toMatchObject({
      itemId: item.id,
      kind: 'conflict',
      decision: 'resolved',
      correctionId: proposed.id,
      reason: 'the 5th is right since March',
    })
    expect((await ask(task.id, word)).notes.map((n) => n.id)).toEqual([proposed.id])
    expect((await t.call('GET', `/v1/memory/${person.id}`)).body.status).toBe('superseded')
    // Decided: 409 both ways.
    for (const [verb, body] of [
      ['resolve', { correctionId: proposed.id, reason: 'again' }],
      ['dismiss', { reason: 'again' }],
    ] as const) {
      const twice = await t.call('POST', `/v1/memory/review/${item.id}/${verb}`, { body })
      expect([twice.status, twice.body.error]).toEqual([409, 'review_item_decided'])
    }
    const history = ReviewHistoryPage.parse((await t.call('GET', '/v1/memory/review/history')).body)
    expect(history.decisions.find((d) => d.itemId === item.id)).toMatchObject({
      decision: 'resolved',
      decidedBy: expect.stringMatching(/^token:/),
    })
  })

  it("a training run's correction of a training note applies at once; dismissing a conflict drops the proposal", async () => {
    const word = `tapir${unique()}`
    const learned = await writeNote(t.sql, t.acme.id, {
      layer: 'enterprise',
      text: `Quotes for ${word} expire after 30 days`,
      source: 'training',
    })
    const fix = await writeNote(t.sql, t.acme.id, {
      layer: 'enterprise',
      text: `Quotes for ${word} expire after 14 days`,
      source: 'training',
      correctsId: learned.id,
    })
    expect(fix.status).toBe('active')
    expect((await ask(task.id, word)).notes.map((n) => n.id)).toEqual([fix.id])

    const person = await train(task.id, {
      text: `Refunds for ${word} need two approvals`,
      layer: 'enterprise',
    })
    const proposed = await writeNote(t.sql, t.acme.id, {
      layer: 'enterprise',
      text: `Refunds for ${word} need one approval`,
      source: 'training',
      correctsId: person.id,
    })
    const queue = ReviewPage.parse((await t.call('GET', '/v1/memory/review?limit=200')).body)
    const item = queue.items.find((i) => i.correction?.id === proposed.id)!
    const res = await t.call('POST', `/v1/memory/review/${item.id}/dismiss`, {
      body: { reason: 'two approvals stay' },
    })
    expect(res.status).toBe(200)
    expect(ReviewDecision.parse(res.body).decision).toBe('dismissed')
    expect((await t.call('GET', `/v1/memory/${proposed.id}`)).status).toBe(404)
    expect((await t.call('GET', `/v1/memory/${person.id}`)).body.status).toBe('active')
  })
})

describe('ask and recall', () => {
  it("answers the task's own, its team's and the enterprise's notes ranked, never another task's", async () => {
    const word = `quokka${unique()}`
    const other = await llmTask(t, { teamId: general })
    const own = await addNote(
      task.id,
      `${word} backups run nightly and ${word} restores are tested`,
    )
    const team = await train(task.id, { text: `${word} team note`, layer: 'team' })
    const whole = await train(task.id, { text: `${word} enterprise note`, layer: 'enterprise' })
    const theirs = await addNote(other.id, `${word} belongs to another task`)
    const answer = await ask(task.id, word)
    expect(answer.question).toBe(word)
    expect(new Set(answer.notes.map((n) => n.id))).toEqual(new Set([own.id, team.id, whole.id]))
    expect(answer.notes[0]!.id).toBe(own.id) // two mentions rank above one
    expect(answer.notes.find((n) => n.id === team.id)).toMatchObject({ layer: 'team' })
    for (const n of answer.notes) expect(n.score).toBeGreaterThan(0)
    // The teamless task reads only its own and the enterprise's.
    expect((await ask(teamless.id, word)).notes.map((n) => n.id)).toEqual([whole.id])
    expect((await ask(other.id, word)).notes.map((n) => n.id)).not.toContain(own.id)
    expect((await ask(other.id, word)).notes.map((n) => n.id)).toContain(theirs.id)
  })

  it('recalls a note sharing any word of a longer text, stemmed', async () => {
    const word = `narwhal${unique()}`
    const note = await addNote(task.id, `Deploys of ${word} need a changelog entry`)
    const answer = await ask(task.id, `how do I deploy ${word} and what about the weather`)
    expect(answer.notes.map((n) => n.id)).toContain(note.id)
  })

  it("without q asks with the task's goal", async () => {
    const note = await train(task.id, {
      text: 'Billing releases wait for the finance sign-off',
      layer: 'team',
    })
    const answer = await ask(task.id)
    expect(answer.question).toBe('Release the billing service safely')
    expect(answer.notes.map((n) => n.id)).toContain(note.id)
  })

  it('never answers a tombstoned note, and tombstoning twice changes nothing', async () => {
    const word = `axolotl${unique()}`
    const note = await addNote(task.id, `${word} is deprecated`)
    expect((await ask(task.id, word)).notes).toHaveLength(1)
    for (let i = 0; i < 2; i++)
      expect((await t.call('POST', `/v1/memory/${note.id}/tombstone`)).status).toBe(204)
    expect((await ask(task.id, word)).notes).toEqual([])
    expect((await t.call('GET', `/v1/memory/${note.id}`)).body.error).toBe('note_not_found')
    expect(NotePage.parse((await t.call('GET', `/v1/memory?q=${word}`)).body).total).toBe(0)
    const rate = await t.call('POST', `/v1/memory/${note.id}/rate`, { body: { rating: 'up' } })
    expect(rate.status).toBe(404)
  })

  it("never shows another enterprise's notes, and hostile text answers nothing rather than failing", async () => {
    const answer = await ask(task.id, 'Other Corp secret deploys Tuesdays blue pipeline')
    expect(answer.notes.map((n) => n.id)).not.toContain(foreignNote)
    const listed = NotePage.parse((await t.call('GET', '/v1/memory?q=Tuesdays&limit=200')).body)
    expect(listed.notes.map((n) => n.id)).not.toContain(foreignNote)
    for (const q of [
      '',
      '"',
      '-',
      '!!! & | ()',
      "'); drop table memory_notes; --",
      'or or or',
      'the a an',
    ])
      expect((await ask(task.id, q)).notes).toBeInstanceOf(Array)
  })

  it('recallNotes answers what ask answers and counts the recall; ask counts nothing', async () => {
    const word = `ibex${unique()}`
    const note = await addNote(task.id, `${word} orders ship from Leeds`)
    await ask(task.id, word)
    expect((await t.call('GET', `/v1/memory/${note.id}`)).body.recalls).toBe(0)
    const recalled = await recallNotes(t.sql, t.acme.id, task.id, word, 10)
    expect(recalled).toEqual((await ask(task.id, word)).notes)
    expect((await t.call('GET', `/v1/memory/${note.id}`)).body.recalls).toBe(1)
    expect(await recallNotes(t.sql, t.other.id, task.id, word, 10)).toEqual([])
  })
})

describe('lists', () => {
  it('filter by layer, taskId, teamId, kind and page as {notes, page, limit, total}', async () => {
    const mine = await llmTask(t, { teamId: general })
    const a = await addNote(mine.id, 'first of mine')
    const b = await addNote(mine.id, 'second of mine', { correctsId: a.id })
    const c = await addNote(mine.id, 'third of mine')
    const page1 = NotePage.parse((await t.call('GET', `/v1/memory?taskId=${mine.id}&limit=1`)).body)
    expect(page1).toMatchObject({ page: 1, limit: 1, total: 2 })
    expect(page1.notes.map((n) => n.id)).toEqual([c.id])
    const page2 = NotePage.parse(
      (await t.call('GET', `/v1/memory?taskId=${mine.id}&limit=1&page=2`)).body,
    )
    expect(page2.notes.map((n) => n.id)).toEqual([b.id])
    const corrections = NotePage.parse(
      (await t.call('GET', `/v1/memory?taskId=${mine.id}&kind=correction`)).body,
    )
    expect(corrections.notes.map((n) => n.id)).toEqual([b.id])
    // Lists show active notes only: a superseded note is not listed, even when asked for.
    const superseded = NotePage.parse(
      (await t.call('GET', `/v1/memory?taskId=${mine.id}&status=superseded`)).body,
    )
    expect(superseded.total).toBe(0)
    const teams = NotePage.parse(
      (await t.call('GET', `/v1/memory?layer=team&teamId=${general}&limit=200`)).body,
    )
    expect(teams.notes.every((n) => n.layer === 'team' && n.teamId === general)).toBe(true)
    expect(NotePage.parse((await t.call('GET', '/v1/memory?taskId=nonsense')).body).total).toBe(0)
    for (const bad of ['layer=galaxy', 'status=lost', 'kind=rumour']) {
      const res = await t.call('GET', `/v1/memory?${bad}`)
      expect([res.status, res.body.error]).toEqual([400, 'invalid_request'])
    }
  })

  it("lists none of another enterprise's notes", async () => {
    const all = NotePage.parse((await t.call('GET', '/v1/memory?limit=200')).body)
    expect(all.notes.map((n) => n.id)).not.toContain(foreignNote)
    const theirs = NotePage.parse((await t.call('GET', `/v1/memory?taskId=${foreignTask.id}`)).body)
    expect(theirs.total).toBe(0)
  })
})

describe('ratings and review', () => {
  it('rates up and down; down opens one review item per note; bad ratings are refused', async () => {
    const note = await addNote(task.id, 'Rated note about the staging database')
    const up = await t.call('POST', `/v1/memory/${note.id}/rate`, { body: { rating: 'up' } })
    expect(MemoryNote.parse(up.body)).toMatchObject({ ratingUp: 1, ratingDown: 0 })
    const items = await itemCount()
    for (const reason of ['wrong since the migration', undefined]) {
      const down = await t.call('POST', `/v1/memory/${note.id}/rate`, {
        body: { rating: 'down', ...(reason ? { reason } : {}) },
      })
      expect(down.status).toBe(200)
    }
    expect(await itemCount()).toBe(items + 1)
    expect((await t.call('GET', `/v1/memory/${note.id}`)).body).toMatchObject({ ratingDown: 2 })
    const queue = ReviewPage.parse((await t.call('GET', '/v1/memory/review?limit=200')).body)
    const item = queue.items.find((i) => i.note.id === note.id)!
    expect(item).toMatchObject({
      kind: 'rated_down',
      correction: null,
      reason: 'wrong since the migration',
    })

    const ratings = async () =>
      (await t.sql<{ n: number }[]>`select count(*)::int as n from memory_ratings`)[0]!.n
    const before = await ratings()
    for (const body of [{ rating: 'sideways' }, { rating: 1 }, {}, { rating: 'UP' }]) {
      const res = await t.call('POST', `/v1/memory/${note.id}/rate`, { body })
      expect([res.status, res.body.error]).toEqual([400, 'invalid_request'])
    }
    expect(await ratings()).toBe(before)

    // Resolve needs a note that corrects the reviewed one.
    const unrelated = await addNote(task.id, 'Unrelated note')
    const wrong = await t.call('POST', `/v1/memory/review/${item.id}/resolve`, {
      body: { correctionId: unrelated.id, reason: 'r' },
    })
    expect([wrong.status, wrong.body.error]).toEqual([400, 'invalid_request'])
    const foreign = await t.call('POST', `/v1/memory/review/${item.id}/resolve`, {
      body: { correctionId: foreignNote, reason: 'r' },
    })
    expect([foreign.status, foreign.body.error]).toEqual([404, 'note_not_found'])
    const noReason = await t.call('POST', `/v1/memory/review/${item.id}/dismiss`, { body: {} })
    expect(noReason.status).toBe(400)
    // A person corrects the note (superseding it at once) and resolves the item with the correction.
    const fix = await addNote(task.id, 'Staging database moved to the new cluster', {
      correctsId: note.id,
    })
    const resolved = await t.call('POST', `/v1/memory/review/${item.id}/resolve`, {
      body: { correctionId: fix.id, reason: 'corrected' },
    })
    expect(resolved.status).toBe(200)
    const after = ReviewPage.parse((await t.call('GET', '/v1/memory/review?limit=200')).body)
    expect(after.items.map((i) => i.id)).not.toContain(item.id)
  })

  it('a rated_down item of a tombstoned note is dismissed with it; review items of other enterprises are not found', async () => {
    const note = await addNote(task.id, 'Soon rated down then tombstoned')
    await t.call('POST', `/v1/memory/${note.id}/rate`, { body: { rating: 'down' } })
    await t.call('POST', `/v1/memory/${note.id}/tombstone`)
    const history = ReviewHistoryPage.parse(
      (await t.call('GET', '/v1/memory/review/history?limit=200')).body,
    )
    expect(history.decisions.find((d) => d.noteId === note.id)).toMatchObject({
      decision: 'dismissed',
    })

    // Another enterprise's review item is simply not found.
    const theirs = await t.call('POST', `/v1/memory/${foreignNote}/rate`, {
      token: t.other.token,
      body: { rating: 'down' },
    })
    expect(theirs.status).toBe(200)
    const [row] = await t.sql<{ id: string }[]>`
      select id from memory_review_items where note_id = ${foreignNote}`
    for (const [verb, body] of [
      ['dismiss', { reason: 'x' }],
      ['resolve', { correctionId: foreignNote, reason: 'x' }],
    ] as const) {
      const res = await t.call('POST', `/v1/memory/review/${row!.id}/${verb}`, { body })
      expect([res.status, res.body.error]).toEqual([404, 'review_item_not_found'])
      const bad = await t.call('POST', `/v1/memory/review/nope/${verb}`, { body })
      expect([bad.status, bad.body.error]).toEqual([404, 'review_item_not_found'])
    }
    const queue = ReviewPage.parse((await t.call('GET', '/v1/memory/review?limit=200')).body)
    expect(queue.items.map((i) => i.id)).not.toContain(row!.id)
  })
})

describe('recall health', () => {
  it('counts the last 24 hours of recall events of runs; chats 0', async () => {
    const run = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: {} })
    expect(run.status).toBe(201)
    const theirRun = await t.call('POST', `/v1/tasks/${foreignTask.id}/runs`, {
      token: t.other.token,
      body: {},
    })
    const event = (enterprise: string, runId: string, type: string, age = '0 seconds') =>
      t.sql`insert into run_events (enterprise_id, run_id, type, payload, created_at)
            values (${enterprise}, ${runId}, ${type}, '{}', now() - ${age}::interval)`
    await event(t.acme.id, run.body.id, 'memory.recalled')
    await event(t.acme.id, run.body.id, 'memory.recalled')
    await event(t.acme.id, run.body.id, 'memory.recall_failed')
    await event(t.acme.id, run.body.id, 'memory.recalled', '25 hours')
    await event(t.other.id, theirRun.body.id, 'memory.recalled')
    const res = await t.call('GET', '/v1/memory/recall-health')
    expect(RecallHealth.parse(res.body)).toMatchObject({
      runs: { attempted: 3, succeeded: 2, failed: 1 },
      chats: { attempted: 0, succeeded: 0, failed: 0 },
    })
  })
})
