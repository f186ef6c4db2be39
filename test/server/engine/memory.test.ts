import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MemoryNote, NotePage, RecallHealth, ReviewPage } from '../../../shared/schemas/memory.js'
import { Run, RunDetail } from '../../../shared/schemas/runs.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Memory in the engine (DESIGN 10; issue 16): every llm run recalls at its start and has the notes in
// its prompt, recorded once as memory.recalled (or memory.recall_failed); an os-train-memory run is
// given its layer's runs, gate decisions and notes, and writes lessons with os.remember;
// POST /v1/memory/train starts one. Through the real engine and SDKs against the fake provider.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine

beforeAll(async () => {
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
})

const finish = (summary = 'done', outcome = 'succeeded') => ({
  toolCalls: [{ name: 'os.finish', arguments: { outcome, summary } }],
})
const remember = (args: Record<string, unknown>) => ({ name: 'os.remember', arguments: args })

/** An enterprise of its own, with (unless `keyless`) a model key of its own. */
async function tenant({ keyless = false } = {}) {
  const { e, key, as } = await keyedEnterprise(t, 'Memory', { keyless })
  const task = async (body: Record<string, unknown> = {}) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Llm ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        ...body,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string; slug: string }
  }
  const start = async (taskId: string, input: Record<string, unknown> = {}) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const wait = async (runId: string, statuses: string[], ms = 15_000) =>
    RunDetail.parse(await waitForRun(t, runId, statuses, ms, e.token))
  const train = (body: Record<string, unknown>, token = e.token) =>
    t.call('POST', '/v1/memory/train', { token, body })
  return { e, key, as, task, start, wait, train }
}

const types = (detail: RunDetail) => detail.events.map((x) => x.type)
const eventsOf = (detail: RunDetail, type: string) => detail.events.filter((x) => x.type === type)

async function health(e: TestEnterprise) {
  const res = await t.call('GET', '/v1/memory/recall-health', { token: e.token })
  expect(res.status).toBe(200)
  return RecallHealth.parse(res.body)
}

describe('training a layer, then recalling what it learned', () => {
  let s: Awaited<ReturnType<typeof tenant>>
  let invoiceRun: string
  let personNote: MemoryNote
  let lesson: MemoryNote
  let proposed: MemoryNote

  beforeAll(async () => {
    s = await tenant()
    // A run of a custom task that asked the chief executive and was told no, with a note.
    const invoicer = await s.task({
      goal: 'Send the monthly invoices to Zephyrco',
      tools: ['os.ask_ceo'],
      gates: [{ tool: 'os.ask_ceo' }],
    })
    fake.script(
      s.key,
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Email Zephyrco now?'] } }] },
      finish('Held the Zephyrco invoices: they need the PO number in the subject'),
    )
    invoiceRun = (await s.start(invoicer.id, { customer: 'Zephyrco', month: 'May' })).id
    await s.wait(invoiceRun, ['waiting_on_gate'])
    const [gate] = (await t.call('GET', `/v1/gates?runId=${invoiceRun}`, s.as)).body
    const decided = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'reject', note: 'Zephyrco wants the PO number in the subject line' },
    })
    expect(decided.status, JSON.stringify(decided.body)).toBe(201)
    await s.wait(invoiceRun, ['succeeded'])

    // A person's note at the enterprise layer, which the training will propose to correct.
    const written = await t.call('POST', `/v1/tasks/${invoicer.id}/memory/train`, {
      ...s.as,
      body: { layer: 'enterprise', text: 'Zephyrco invoices go out on the first Monday' },
    })
    expect(written.status, JSON.stringify(written.body)).toBe(201)
    personNote = MemoryNote.parse(written.body)
  }, 60_000)

  it('POST /v1/memory/train: 202 with an os-train-memory run, which writes lessons with os.remember', async () => {
    fake.script(
      s.key,
      {
        toolCalls: [
          remember({
            text: 'Zephyrco invoice emails need the PO number in the subject line.',
            evidence: [invoiceRun],
          }),
          remember({
            text: 'Zephyrco invoices go out on the first business day of the month.',
            evidence: [invoiceRun],
            correctsId: personNote.id,
          }),
          // Refusals the model is told of, and can correct: no text, a foreign run, an unknown note.
          remember({ text: '  ', evidence: [invoiceRun] }),
          remember({ text: 'A lesson from elsewhere', evidence: [randomUUID()] }),
          remember({
            text: 'A correction of nothing',
            evidence: [invoiceRun],
            correctsId: randomUUID(),
          }),
        ],
      },
      finish('Wrote 1 lesson and proposed 1 correction'),
    )
    const res = await s.train({ layer: 'enterprise' })
    expect(res.status, JSON.stringify(res.body)).toBe(202)
    const run = Run.parse(res.body)
    expect(run).toMatchObject({
      taskSlug: 'os-train-memory',
      origin: 'api',
      input: { layer: 'enterprise' },
    })
    const done = await s.wait(run.id, ['succeeded', 'failed'])
    expect(done.run.status, JSON.stringify(done.run)).toBe('succeeded')

    // What the model was given: the run, its input and result, the gate decision with its note, and
    // the layer's notes with their ids.
    const [first, second] = fake.callsWith(s.key).slice(-2)
    const given = JSON.stringify(first!.body.messages[0])
    expect(given).toContain('# Training material')
    expect(given).toContain(invoiceRun)
    expect(given).toContain('Zephyrco')
    expect(given).toContain('they need the PO number in the subject')
    expect(given).toContain('reject')
    expect(given).toContain('Zephyrco wants the PO number in the subject line')
    expect(given).toContain(personNote.id)
    expect(first!.body.tools.map((x: { name: string }) => x.name).sort()).toEqual([
      'os__finish',
      'os__remember',
    ])
    expect(types(done)).toContain('memory.training_material')
    expect(eventsOf(done, 'memory.training_material')[0]!.payload).toMatchObject({
      runIds: [invoiceRun],
      noteIds: [personNote.id],
      since: null,
    })

    // The answers: two written, three refused, each as a tool error the model reads.
    const results = second!.body.messages.at(-1).content as {
      content: string
      is_error?: boolean
    }[]
    const answers = results.map((r) => [Boolean(r.is_error), JSON.stringify(r.content)])
    expect(answers.map(([isError]) => isError)).toEqual([false, false, true, true, true])
    expect(answers[0]![1]).toContain('Remembered note')
    expect(answers[1]![1]).toContain('Proposed note')
    expect(answers[2]![1]).toContain('text')
    expect(answers[3]![1]).toContain('no run')
    expect(answers[4]![1]).toContain('No memory note')

    // In the database: one active training lesson with its evidence, one proposed correction.
    const rows = await t.sql<{ text: string; status: string; kind: string; createdBy: string }[]>`
      select text, status, kind, created_by from memory_notes
       where enterprise_id = ${s.e.id} and source = 'training' order by created_at`
    expect(rows).toEqual([
      expect.objectContaining({ status: 'active', kind: 'note', createdBy: `run:${run.id}` }),
      expect.objectContaining({
        status: 'proposed',
        kind: 'correction',
        createdBy: `run:${run.id}`,
      }),
    ])

    // Through the API: the lesson listed, with its evidence and excerpt; the person's note stands.
    const list = NotePage.parse((await t.call('GET', '/v1/memory?layer=enterprise', s.as)).body)
    expect(list.notes.map((n) => n.id)).toContain(personNote.id)
    lesson = list.notes.find((n) => n.source === 'training')!
    expect(lesson).toMatchObject({
      layer: 'enterprise',
      kind: 'note',
      status: 'active',
      text: 'Zephyrco invoice emails need the PO number in the subject line.',
      evidence: [
        {
          runId: invoiceRun,
          excerpt: 'Held the Zephyrco invoices: they need the PO number in the subject',
        },
      ],
    })
    expect(list.total).toBe(2)

    // The correction of a person's note waits for a person: a conflict in the review queue.
    const review = ReviewPage.parse((await t.call('GET', '/v1/memory/review', s.as)).body)
    expect(review.items).toHaveLength(1)
    expect(review.items[0]).toMatchObject({
      kind: 'conflict',
      status: 'open',
      note: { id: personNote.id, status: 'active' },
      correction: {
        status: 'proposed',
        correctsId: personNote.id,
        source: 'training',
        text: 'Zephyrco invoices go out on the first business day of the month.',
      },
    })
    proposed = review.items[0]!.correction!
    expect(proposed.evidence).toEqual([expect.objectContaining({ runId: invoiceRun })])
  }, 30_000)

  it('a later llm run of a custom task recalls the lesson: in its prompt, as memory.recalled, counted', async () => {
    const before = await health(s.e)
    const mailer = await s.task({ goal: 'Email the Zephyrco invoice for June' })
    fake.script(s.key, finish('sent'))
    const run = (await s.start(mailer.id, { subject: 'June invoice' })).id
    const done = await s.wait(run, ['succeeded'])
    const request = fake.callsWith(s.key).at(-1)!
    expect(request.system).toContain('# What the company has learned')
    expect(request.system).toContain(
      '- [enterprise] Zephyrco invoice emails need the PO number in the subject line.',
    )
    // The proposed correction is not recalled: only active notes are.
    expect(request.system).not.toContain('first business day')
    expect(types(done)).toEqual([
      'run.queued',
      'run.running',
      'memory.recalled',
      'model.called',
      'tool.called',
      'run.succeeded',
    ])
    const noteIds = eventsOf(done, 'memory.recalled')[0]!.payload.noteIds as string[]
    expect(noteIds).toContain(lesson.id)
    expect(noteIds).toContain(personNote.id)
    expect(noteIds).not.toContain(proposed.id)

    const after = await health(s.e)
    expect(after.runs.succeeded).toBe(before.runs.succeeded + 1)
    expect(after.runs.failed).toBe(before.runs.failed)
    const note = MemoryNote.parse((await t.call('GET', `/v1/memory/${lesson.id}`, s.as)).body)
    expect(note.recalls).toBe(1)
  })

  it('a run resumed after a gate has the same notes in its prompt and recalls once', async () => {
    const asker = await s.task({
      goal: 'Check the Zephyrco invoice subject line',
      tools: ['os.ask_ceo'],
      gates: [{ tool: 'os.ask_ceo' }],
    })
    fake.script(
      s.key,
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Which PO number?'] } }] },
      finish('asked'),
    )
    const before = await health(s.e)
    const run = (await s.start(asker.id)).id
    await s.wait(run, ['waiting_on_gate'])
    const [gate] = (await t.call('GET', `/v1/gates?runId=${run}`, s.as)).body
    await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', answers: ['PO-7781'] },
    })
    const done = await s.wait(run, ['succeeded'])
    const [first, second] = fake.callsWith(s.key).slice(-2)
    expect(first!.system).toContain('Zephyrco invoice emails need the PO number')
    expect(second!.system).toBe(first!.system)
    expect(eventsOf(done, 'memory.recalled')).toHaveLength(1)
    expect((await health(s.e)).runs.succeeded).toBe(before.runs.succeeded + 1)
  })

  it('a second training of the layer is given only what finished since the first', async () => {
    const other = await s.task({ goal: 'Reconcile the ledger' })
    fake.script(s.key, finish('reconciled'))
    const later = (await s.start(other.id)).id
    await s.wait(later, ['succeeded'])
    fake.script(s.key, finish('nothing new'))
    const res = await s.train({ layer: 'enterprise' })
    expect(res.status).toBe(202)
    const done = await s.wait(res.body.id, ['succeeded'])
    const material = eventsOf(done, 'memory.training_material')[0]!.payload
    expect(material.runIds).toContain(later)
    expect(material.runIds).not.toContain(invoiceRun)
    expect(material.since).toMatchObject({ runId: expect.any(String) })
    // The lesson written by the first training is among the layer's notes now; the proposed one not.
    expect(material.noteIds).toContain(lesson.id)
    expect(material.noteIds).not.toContain(proposed.id)
  })
})

describe('a recall that fails', () => {
  it('records memory.recall_failed with the reason, and the run goes on without notes', async () => {
    const s = await tenant()
    const task = await s.task({ goal: 'Pay the Quillfeather supplier' })
    await t.call('POST', `/v1/tasks/${task.id}/memory`, {
      ...s.as,
      body: { text: 'Quillfeather is paid by bank transfer only' },
    })
    const before = await health(s.e)
    fake.script(s.key, finish('paid'))
    // The recall's search function gone, as a broken migration or a restore would leave it.
    await t.sql`alter function memory_search_terms(uuid, text) rename to memory_search_gone`
    let done: RunDetail
    try {
      done = await s.wait((await s.start(task.id)).id, ['succeeded', 'failed'])
    } finally {
      await t.sql`alter function memory_search_gone(uuid, text) rename to memory_search_terms`
    }
    expect(done.run.status).toBe('succeeded')
    const failed = eventsOf(done, 'memory.recall_failed')
    expect(failed).toHaveLength(1)
    expect(failed[0]!.payload.reason).toContain('memory_search_terms')
    expect(types(done)).not.toContain('memory.recalled')
    const system = fake.callsWith(s.key).at(-1)!.system
    expect(system).not.toContain('bank transfer')
    expect(system).not.toContain('# What the company has learned')
    const after = await health(s.e)
    expect(after.runs.failed).toBe(before.runs.failed + 1)
    expect(after.runs.attempted).toBe(before.runs.attempted + 1)
  })
})

describe("a lesson's evidence", () => {
  it("keeps an excerpt of a summary whose cut falls inside an emoji, whole: the lesson was refused with the database's words", async () => {
    const s = await tenant()
    const task = await s.task()
    // 1 + 400 characters: the cut at 300 falls between the halves of an emoji.
    const summary = `x${'\u{1F680}'.repeat(200)}`
    fake.script(s.key, finish(summary))
    const source = await s.start(task.id)
    await s.wait(source.id, ['succeeded'])
    fake.script(
      s.key,
      { toolCalls: [remember({ text: 'Launch with a rocket.', evidence: [source.id] })] },
      finish('Wrote 1 lesson'),
    )
    const run = Run.parse((await s.train({ layer: 'enterprise' })).body)
    await s.wait(run.id, ['succeeded'])
    const list = NotePage.parse((await t.call('GET', '/v1/memory?layer=enterprise', s.as)).body)
    expect(list.notes).toHaveLength(1)
    expect(list.notes[0]!.evidence).toEqual([
      { runId: source.id, excerpt: `${summary.slice(0, 299)}… (102 more characters)` },
    ])
  })
})

describe('POST /v1/memory/train', () => {
  it('without a key the run is blocked; a second train of the layer answers the run under way', async () => {
    const s = await tenant({ keyless: true })
    const first = await s.train({ layer: 'enterprise' })
    expect(first.status, JSON.stringify(first.body)).toBe(202)
    const run = Run.parse(first.body)
    expect(run.status).toBe('queued')
    const blocked = await s.wait(run.id, ['blocked'], 10_000)
    expect(blocked.run.blockedReason).toContain('No model key')

    const again = await s.train({ layer: 'enterprise' })
    expect(again.status).toBe(202)
    expect(Run.parse(again.body).id).toBe(run.id)
    const [{ n }] = await t.sql<[{ n: number }]>`
      select count(*)::int as n from runs where enterprise_id = ${s.e.id} and task_slug = 'os-train-memory'`
    expect(n).toBe(1)

    // A team's layer is another lane: its own run.
    const [team] = (await t.call('GET', '/v1/teams', s.as)).body
    const teamRun = await s.train({ layer: 'team', teamId: team.id })
    expect(teamRun.status).toBe(202)
    expect(teamRun.body.id).not.toBe(run.id)
    expect(teamRun.body.input).toEqual({ layer: 'team', teamId: team.id })
    const teamAgain = await s.train({ layer: 'team', teamId: team.id })
    expect(teamAgain.body.id).toBe(teamRun.body.id)

    for (const id of [run.id, teamRun.body.id])
      expect((await t.call('POST', `/v1/runs/${id}/cancel`, s.as)).status).toBe(200)
    // Once the training is over, training again starts a new run.
    const next = await s.train({ layer: 'enterprise' })
    expect(next.status).toBe(202)
    expect(next.body.id).not.toBe(run.id)
    await t.call('POST', `/v1/runs/${next.body.id}/cancel`, s.as)
  })

  it('refuses a team of another enterprise (404), a team layer without a team and bad layers (400)', async () => {
    const s = await tenant({ keyless: true })
    const [foreign] = (await t.call('GET', '/v1/teams', { token: t.other.token })).body
    const cases: [Record<string, unknown>, number, string][] = [
      [{ layer: 'team', teamId: foreign.id }, 404, 'team_not_found'],
      [{ layer: 'team', teamId: randomUUID() }, 404, 'team_not_found'],
      [{ layer: 'team' }, 400, 'invalid_request'],
      [{ layer: 'task' }, 400, 'invalid_request'],
      [{ layer: 'enterprise', teamId: foreign.id }, 400, 'invalid_request'],
      [{}, 400, 'invalid_request'],
    ]
    for (const [body, status, code] of cases) {
      const res = await s.train(body)
      expect(res.status, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(status)
      expect(res.body.error).toBe(code)
    }
    const [{ n }] = await t.sql<[{ n: number }]>`
      select count(*)::int as n from runs where enterprise_id = ${s.e.id}`
    expect(n).toBe(0)
  })

  it('needs memory:write', async () => {
    const s = await tenant({ keyless: true })
    const token = await t.tokenWith(['memory:read'], s.e)
    const res = await s.train({ layer: 'enterprise' }, token)
    expect(res.status).toBe(403)
    expect(res.body.error).toBe('api_token_scope')
  })
})
