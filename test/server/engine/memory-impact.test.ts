import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MemoryNote, ReviewPage } from '../../../shared/schemas/memory.js'
import { Run, RunDetail } from '../../../shared/schemas/runs.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Memory that proves itself, through real runs (issue 31): the real engine runs llm runs against the
// fake provider, each recalling at its start (or not, as its input shares a word with the note or not)
// and ending as the model says; a note's impact is counted from those ends, its low_impact review item
// opens from them; and a training run's os.remember of a near-duplicate is refused with the note to
// correct instead.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine
const improveInterval = process.env.OSD_IMPROVE_INTERVAL_MINUTES

beforeAll(async () => {
  // Failed runs here are the point; an os-improve run starting from them would only add runs.
  process.env.OSD_IMPROVE_INTERVAL_MINUTES = 'off'
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
  if (improveInterval === undefined) delete process.env.OSD_IMPROVE_INTERVAL_MINUTES
  else process.env.OSD_IMPROVE_INTERVAL_MINUTES = improveInterval
})

/** An enterprise of its own with a model key whose calls the handler below answers. */
async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Impact')
  const task = async (goal: string) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Llm ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        // A lane per run (input n), so a test's runs run at once.
        serializeOn: ['n'],
        goal,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  let n = 0
  const start = async (taskId: string, input: Record<string, unknown>) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, {
      ...as,
      body: { ...input, n: ++n },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return (res.body as { id: string }).id
  }
  const wait = async (runId: string, statuses: string[]) =>
    RunDetail.parse(await waitForRun(t, runId, statuses, 30_000, e.token))
  /** Runs of the task with these inputs, all at once, each to its end; their detail. */
  const runAll = async (taskId: string, inputs: Record<string, unknown>[]) => {
    const ids = await Promise.all(inputs.map((input) => start(taskId, input)))
    return Promise.all(ids.map((id) => wait(id, ['succeeded', 'failed', 'cancelled'])))
  }
  const note = async (id: string) => {
    const res = await t.call('GET', `/v1/memory/${id}`, as)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return MemoryNote.parse(res.body)
  }
  const review = async () => ReviewPage.parse((await t.call('GET', '/v1/memory/review', as)).body)
  /** A training run of the enterprise layer (its replies scripted), to its end: it succeeds. */
  const train = async () => {
    const res = await t.call('POST', '/v1/memory/train', { ...as, body: { layer: 'enterprise' } })
    expect(res.status, JSON.stringify(res.body)).toBe(202)
    const done = await wait(Run.parse(res.body).id, ['succeeded', 'failed'])
    expect(done.run.status, JSON.stringify(done.run)).toBe('succeeded')
    return done
  }
  return { e, key, as, task, start, wait, runAll, note, review, train }
}

const recalled = (detail: RunDetail) =>
  detail.events
    .filter((x) => x.type === 'memory.recalled')
    .flatMap((x) => (x.payload as { noteIds: string[] }).noteIds)

// Every run of these tests ends as its input says: `verdict` succeeded, failed, or slow (a model that takes
// long to answer, for a run cancelled meanwhile). The input rides in the prompt the fake receives.
beforeAll(() => {
  fake.onRequest((request) => {
    const body = JSON.stringify(request.body)
    // A training run is given runs' inputs as its material: its replies are scripted.
    if (body.includes('os__remember')) return undefined
    const verdict = /verdict\W+(succeeded|failed|slow)/.exec(body)?.[1]
    if (!verdict) return undefined
    const outcome = verdict === 'failed' ? 'failed' : 'succeeded'
    return {
      toolCalls: [{ name: 'os.finish', arguments: { outcome, summary: `it ${outcome}` } }],
      ...(verdict === 'slow' ? { delayMs: 10_000 } : {}),
    }
  })
})

describe("a note's impact, counted as runs end", () => {
  let s: Awaited<ReturnType<typeof tenant>>
  let task: { id: string }
  let other: { id: string }
  let kiwi: MemoryNote
  // Runs whose input names kiwifruit recall the note; those naming zephyrco recall nothing.
  const recalling = (verdict: string) => ({ customer: 'kiwifruit', verdict })
  const not = (verdict: string) => ({ customer: 'zephyrco', verdict })

  beforeAll(async () => {
    s = await tenant()
    task = await s.task('Handle the customer request')
    other = await s.task('Answer the supplier')
    const res = await t.call('POST', `/v1/tasks/${task.id}/memory/train`, {
      ...s.as,
      body: { layer: 'enterprise', text: 'Kiwifruit wants the PO number in the subject' },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    kiwi = MemoryNote.parse(res.body)
  })

  it('counts the runs that recalled it against those of the same tasks, over the same period, that did not', async () => {
    // Before any run recalled it: runs of the task that fail count for nothing (not in the period).
    const early = await s.runAll(task.id, [not('failed'), not('failed')])
    expect(early.map((d) => d.run.status)).toEqual(['failed', 'failed'])
    expect(early.flatMap(recalled)).toEqual([])
    expect((await s.note(kiwi.id)).impact).toEqual({
      recalledRuns: 0,
      succeeded: 0,
      failed: 0,
      successRate: null,
      baseRate: null,
      lift: null,
    })

    // The period opens with the first run that recalled it...
    const [first] = await s.runAll(task.id, [recalling('succeeded')])
    expect(recalled(first!)).toEqual([kiwi.id])
    // ...then runs that recall it and runs that do not, at once; and runs of a task that never
    // recalls it, which are no part of its base.
    const mixed = await s.runAll(task.id, [
      recalling('succeeded'),
      recalling('failed'),
      recalling('failed'),
      recalling('failed'),
      not('succeeded'),
      not('succeeded'),
      not('succeeded'),
      not('succeeded'),
      not('failed'),
    ])
    expect(mixed.map((d) => recalled(d).length)).toEqual([1, 1, 1, 1, 0, 0, 0, 0, 0])
    const elsewhere = await s.runAll(other.id, [not('succeeded'), recalling('failed')])
    expect(elsewhere.map((d) => d.run.status)).toEqual(['succeeded', 'failed'])
    expect(recalled(elsewhere[1]!)).toEqual([kiwi.id]) // the other task recalled it once: its base is empty

    // A run cancelled after it recalled the note has no outcome: it counts on neither side.
    const slow = await s.start(task.id, recalling('slow'))
    const recalledSlow = await waitForEvent(slow, 'memory.recalled', s.e.token)
    expect(recalledSlow).toEqual([kiwi.id])
    const cancelled = await t.call('POST', `/v1/runs/${slow}/cancel`, s.as)
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200)

    // The latest run that recalled it closes the period so far: every run of the task before it counts.
    const [last] = await s.runAll(task.id, [recalling('failed')])
    expect(last!.run.status).toBe('failed')

    // Recalled by 7 finished runs: 2 succeeded, 5 failed (the task's 6, the other task's 1); not
    // recalled by 5 runs of those tasks over the period: 4 succeeded, 1 failed.
    const impact = (await s.note(kiwi.id)).impact
    expect(impact).toEqual({
      recalledRuns: 7,
      succeeded: 2,
      failed: 5,
      successRate: 0.2857,
      baseRate: 0.8,
      lift: -0.5143,
    })
    // What osd counted is what the runs and their events say, recounted from scratch.
    const [truth] = await t.sql<{ succeeded: number; failed: number }[]>`
      select count(*) filter (where r.status = 'succeeded')::int as succeeded,
             count(*) filter (where r.status = 'failed')::int as failed
        from runs r join run_events e on e.run_id = r.id and e.type = 'memory.recalled'
       where r.enterprise_id = ${s.e.id} and e.payload -> 'noteIds' ? ${kiwi.id}`
    expect(truth).toEqual({ succeeded: 2, failed: 5 })

    // Not yet 20 runs: no review item, whatever the lift.
    expect((await s.review()).items.filter((i) => i.kind === 'low_impact')).toEqual([])

    // GET /v1/memory answers the same impact, and sorts by it.
    const listed = await t.call('GET', '/v1/memory?sort=impact', s.as)
    expect(listed.status).toBe(200)
    expect(listed.body.notes[0]).toMatchObject({ id: kiwi.id, impact })
  }, 120_000)

  it('20 finished runs with a lift of -0.2 or lower open one low_impact review item, once until decided', async () => {
    // 13 more runs that recall it and fail: 20 in all.
    const more = await s.runAll(
      task.id,
      Array.from({ length: 13 }, () => recalling('failed')),
    )
    expect(more.every((d) => d.run.status === 'failed' && recalled(d)[0] === kiwi.id)).toBe(true)
    const impact = (await s.note(kiwi.id)).impact
    expect(impact).toMatchObject({ recalledRuns: 20, succeeded: 2, failed: 18, baseRate: 0.8 })
    expect(impact.lift).toBeLessThanOrEqual(-0.2)

    const items = (await s.review()).items.filter((i) => i.kind === 'low_impact')
    expect(items).toHaveLength(1)
    expect(items[0]).toMatchObject({
      kind: 'low_impact',
      status: 'open',
      note: { id: kiwi.id, impact },
      correction: null,
    })
    expect(items[0]!.reason).toContain('Recalled by 20 finished runs')
    expect(items[0]!.reason).toContain('80%')

    // Another such run: still the one item.
    await s.runAll(task.id, [recalling('failed')])
    expect((await s.review()).items.filter((i) => i.kind === 'low_impact')).toHaveLength(1)

    // Dismissed, it does not open again at the next run...
    const dismissed = await t.call('POST', `/v1/memory/review/${items[0]!.id}/dismiss`, {
      ...s.as,
      body: { reason: 'kept: the PO number rule is new' },
    })
    expect(dismissed.status, JSON.stringify(dismissed.body)).toBe(200)
    await s.runAll(task.id, [recalling('failed')])
    expect((await s.review()).items.filter((i) => i.kind === 'low_impact')).toEqual([])
    // ...and a tombstoned note is out of the question: the person can also end it.
    const gone = await t.call('POST', `/v1/memory/${kiwi.id}/tombstone`, s.as)
    expect(gone.status).toBe(204)
  }, 120_000)
})

/** Waits for a run's first event of `type`; its noteIds. */
async function waitForEvent(runId: string, type: string, token: string): Promise<string[]> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const res = await t.call('GET', `/v1/runs/${runId}`, { token })
    const event = (res.body as RunDetail).events.find((x) => x.type === type)
    if (event) return (event.payload as { noteIds: string[] }).noteIds
    if (Date.now() > deadline) throw new Error(`run ${runId} has no ${type} event`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('os.remember of a near-duplicate', () => {
  it('is refused with the note to correct, and the correction is written', async () => {
    const s = await tenant()
    const task = await s.task('Handle the customer request')
    const written = await t.call('POST', `/v1/tasks/${task.id}/memory/train`, {
      ...s.as,
      body: { layer: 'enterprise', text: 'Invoices for Zephyrco go out on the first Monday.' },
    })
    expect(written.status).toBe(201)
    const existing = MemoryNote.parse(written.body)
    // A finished run to name as evidence.
    const [evidence] = await s.runAll(task.id, [{ customer: 'zephyrco', verdict: 'succeeded' }])

    const remember = (args: Record<string, unknown>) => ({ name: 'os.remember', arguments: args })
    fake.script(
      s.key,
      {
        toolCalls: [
          remember({
            text: 'invoices for Zephyrco go out on the  first monday',
            evidence: [evidence!.run.id],
          }),
        ],
      },
      {
        toolCalls: [
          remember({
            text: 'Invoices for Zephyrco go out on the first business day.',
            evidence: [evidence!.run.id],
            correctsId: existing.id,
          }),
        ],
      },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }] },
    )
    await s.train()

    // What the model was told of its first lesson: refused, which note, and to correct it.
    const calls = fake.callsWith(s.key)
    const told = calls.at(-2)!.body.messages.at(-1).content as {
      content: unknown
      is_error?: boolean
    }[]
    expect(told[0]!.is_error).toBe(true)
    const said = JSON.stringify(told[0]!.content)
    expect(said).toContain(`Note ${existing.id}`)
    expect(said).toContain(`correctsId \\"${existing.id}\\"`)
    const second = calls.at(-1)!.body.messages.at(-1).content as { is_error?: boolean }[]
    expect(second[0]!.is_error ?? false).toBe(false)

    // One note of the enterprise layer stands: the correction; the first lesson was never written
    // (a training run's correction of a person's note waits for review).
    const rows = await t.sql<{ text: string; status: string; correctsId: string | null }[]>`
      select text, status, corrects_id from memory_notes
       where enterprise_id = ${s.e.id} order by created_at`
    expect(rows).toEqual([
      {
        text: 'Invoices for Zephyrco go out on the first Monday.',
        status: 'active',
        correctsId: null,
      },
      {
        text: 'Invoices for Zephyrco go out on the first business day.',
        status: 'proposed',
        correctsId: existing.id,
      },
    ])
  }, 60_000)

  it("is refused with the note's excerpt whole when its cut falls inside an emoji: the run went on, each call paid once", async () => {
    const s = await tenant()
    const task = await s.task('Handle the customer request')
    // 198 characters, then an emoji: the excerpt of 200 characters (199 and an ellipsis) cut it in
    // two, and the refusal, told to the model, could not be journaled (jsonb refuses half a pair): the
    // run stood until its lease lapsed, and each engine that took it over paid for the call again.
    const head = 'Invoices for Zephyrco go out on the first Monday, after finance signs off'
    const text =
      `${head}${' and the ledger closes'.repeat(10)}`.slice(0, 198) + '\u{1F680} on time.'
    const written = await t.call('POST', `/v1/tasks/${task.id}/memory/train`, {
      ...s.as,
      body: { layer: 'enterprise', text },
    })
    expect(written.status).toBe(201)
    const [evidence] = await s.runAll(task.id, [{ customer: 'zephyrco', verdict: 'succeeded' }])
    const before = fake.callsWith(s.key).length
    fake.script(
      s.key,
      { toolCalls: [{ name: 'os.remember', arguments: { text, evidence: [evidence!.run.id] } }] },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }] },
    )
    await s.train()
    const calls = fake.callsWith(s.key)
    expect(calls).toHaveLength(before + 2)
    const told = calls.at(-1)!.body.messages.at(-1).content as {
      content: unknown
      is_error?: boolean
    }[]
    expect(told[0]!.is_error).toBe(true)
    // As JSON: half a pair is written as its escape (\ud83d), a whole one as itself.
    const said = JSON.stringify(told[0]!.content)
    expect(said).toContain(`${text.slice(0, 198)}…`)
    expect(said).not.toMatch(/\\ud[89ab]/i)
  }, 60_000)
})
