import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { Recommendation, RecommendationDetail } from '../../../shared/schemas/recommendations.js'
import { RunDetail } from '../../../shared/schemas/runs.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The learning loop end to end (issue 17; DESIGN 10), through the real engine and SDKs against the fake
// provider: a task fails twice for a reason its skill could prevent -> an os-improve run starts by
// itself, is given the runs and proposes a skill change citing both -> a person approves -> the new
// version's run succeeds. And a gate sent back with a note -> the improvement run is given the note.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine
const interval = process.env.OSD_IMPROVE_INTERVAL_MINUTES

beforeAll(async () => {
  // Every failure may start an improvement here (one at a time): the interval rule has its own tests.
  process.env.OSD_IMPROVE_INTERVAL_MINUTES = '0'
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  if (interval === undefined) delete process.env.OSD_IMPROVE_INTERVAL_MINUTES
  else process.env.OSD_IMPROVE_INTERVAL_MINUTES = interval
  await engine?.stop()
  await fake?.close()
})

const finish = (summary: string, outcome = 'succeeded') => ({
  toolCalls: [{ name: 'os.finish', arguments: { outcome, summary } }],
})

async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Learn')
  const task = async (body: Record<string, unknown>) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Invoices ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        ...body,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string; slug: string; currentVersionId: string }
  }
  const start = async (taskId: string, input: Record<string, unknown> = {}) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const wait = async (runId: string, statuses: string[], ms = 20_000) =>
    RunDetail.parse(await waitForRun(t, runId, statuses, ms, e.token))
  /** The os-improve run a run's failure or gate decision started (its improvement.started event). */
  const improvementOf = async (runId: string) => {
    for (let i = 0; i < 100; i++) {
      const detail = RunDetail.parse((await t.call('GET', `/v1/runs/${runId}`, as)).body)
      const event = detail.events.find((x) => x.type === 'improvement.started')
      if (event) return event.payload.runId as string
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`run ${runId} started no improvement`)
  }
  return { e, key, as, task, start, wait, improvementOf }
}

const skill = '# Invoices\n\nEmail the monthly invoice to the customer.\n'
const betterSkill =
  '# Invoices\n\nEmail the monthly invoice to the customer.\nPut the customer PO number in the subject line; without one, ask for it first.\n'

describe('the learning loop', () => {
  it('fails twice -> os-improve proposes a skill change citing both runs -> approve -> the new version succeeds', async () => {
    const s = await tenant()
    const task = await s.task({ goal: 'Send the monthly invoice', skillMd: skill })

    // The improvement runs' calls are told apart by what they are given; the task's take the script.
    // The first improvement (one failure: no pattern) proposes nothing; the second proposes a skill
    // change citing both runs.
    let run2Id: string | undefined
    let proposed = false
    fake.onRequest((request) => {
      const body = JSON.stringify(request.body)
      if (request.key !== s.key || !body.includes('# Improvement material')) return undefined
      if (!run2Id || !body.includes(run2Id))
        return finish('One failure is not a pattern yet; nothing proposed.')
      if (proposed) return finish('Proposed putting the PO number in the subject line.')
      proposed = true
      return {
        toolCalls: [
          {
            name: 'os.propose_change',
            arguments: {
              changes: { skillMd: betterSkill },
              rationale:
                'Both runs failed because the subject line had no PO number; the skill never says to put it there.',
              evidence: [
                { runId: run1, why: 'refused: no PO number in the subject' },
                { runId: run2Id, why: 'refused again for the same reason' },
              ],
            },
          },
        ],
      }
    })
    onTestFinished(() => fake.onRequest(() => undefined))

    fake.script(
      s.key,
      finish('Zephyrco refused the invoice: the subject had no PO number', 'failed'),
    )
    const run1 = (await s.start(task.id, { customer: 'Zephyrco', month: 'May' })).id
    const failed1 = await s.wait(run1, ['failed'])
    expect(failed1.run.reason).toMatch(/no PO number/)
    const improve1 = await s.improvementOf(run1)
    const first = await s.wait(improve1, ['succeeded'])
    expect(first.run).toMatchObject({ origin: 'learning', input: { taskId: task.id } })
    expect(first.run.taskSlug).toBe('os-improve')
    expect(first.events.map((x) => x.type)).not.toContain('recommendation.proposed')

    // Second failure, same reason: the next improvement proposes.
    fake.script(
      s.key,
      finish('Zephyrco refused the invoice again: no PO number in the subject', 'failed'),
    )
    run2Id = (await s.start(task.id, { customer: 'Zephyrco', month: 'June' })).id
    await s.wait(run2Id, ['failed'])
    const improve2 = await s.improvementOf(run2Id)
    const second = await s.wait(improve2, ['succeeded'])
    expect(second.events.map((x) => x.type)).toContain('recommendation.proposed')

    // What the improvement's model was given: the task's skill, both runs, their failure reasons.
    const given = fake
      .callsWith(s.key)
      .map((r) => JSON.stringify(r.body.messages?.[0] ?? ''))
      .filter((m) => m.includes('# Improvement material'))
      .at(-1)!
    for (const expected of [
      run1,
      run2Id,
      'no PO number in the subject',
      'Email the monthly invoice',
    ])
      expect(given).toContain(expected)
    // The tool was offered to the improvement run.
    const offered = fake
      .callsWith(s.key)
      .at(-1)!
      .body.tools.map((x: { name: string }) => x.name)
    expect(offered.some((n: string) => /propose_change/.test(n))).toBe(true)

    const listed = await t.call('GET', `/v1/tasks/${task.id}/recommendations`, s.as)
    expect(listed.status).toBe(200)
    const [rec] = (listed.body as unknown[]).map((r) => Recommendation.parse(r))
    expect(rec).toMatchObject({
      status: 'waiting',
      proposedByRunId: improve2,
      baseVersionId: task.currentVersionId,
      changes: { skillMd: betterSkill },
    })
    expect(rec!.evidence.map((x) => x.runId)).toEqual([run1, run2Id])
    const detail = RecommendationDetail.parse(
      (await t.call('GET', `/v1/recommendations/${rec!.id}`, s.as)).body,
    )
    expect(detail.skillDiff?.filter((l) => l.kind === 'added').map((l) => l.text)).toEqual([
      'Put the customer PO number in the subject line; without one, ask for it first.',
    ])

    // Approve: the new version's run (input of the newest evidence run) succeeds.
    fake.script(s.key, finish('Sent the June invoice with PO 4471 in the subject'))
    const approved = await t.call('POST', `/v1/recommendations/${rec!.id}/decision`, {
      ...s.as,
      body: { decision: 'approve' },
    })
    expect(approved.status, JSON.stringify(approved.body)).toBe(201)
    const decided = Recommendation.parse(approved.body)
    const run3 = await s.wait(decided.runId!, ['succeeded'])
    expect(run3.run).toMatchObject({
      origin: 'recommendation',
      taskVersionId: decided.versionId,
      input: { customer: 'Zephyrco', month: 'June' },
    })
    expect(run3.version?.number).toBe(2)
    const system = fake.callsWith(s.key).at(-1)!.system
    expect(JSON.stringify(system)).toContain('Put the customer PO number in the subject line')
    // A success starts no improvement.
    expect(run3.events.map((x) => x.type)).not.toContain('improvement.started')
  }, 90_000)

  it('a gate sent back with a note -> the improvement run is given the note and proposes citing it', async () => {
    const s = await tenant()
    const task = await s.task({
      goal: 'Send the monthly invoice',
      skillMd: skill,
      tools: ['os.mail_send'],
      gates: [{ tool: 'os.mail_send' }],
    })
    const note = 'Always put the PO number in the subject line, e.g. "Invoice May (PO 4471)"'
    let gatedRun = ''
    let improveCalls = 0
    // The improvement's calls are told apart by what they are given; the task's take the script.
    fake.onRequest((request) => {
      if (request.key !== s.key || !JSON.stringify(request.body).includes('# Improvement material'))
        return undefined
      improveCalls++
      if (improveCalls > 1) return finish('Proposed the PO number rule.')
      return {
        toolCalls: [
          {
            name: 'os.propose_change',
            arguments: {
              changes: { guardrails: ['Put the PO number in the subject line.'] },
              rationale: `The reviewer sent the email back: "${note}".`,
              evidence: [{ runId: gatedRun, why: 'sent back: PO number missing from the subject' }],
            },
          },
        ],
      }
    })
    try {
      fake.script(
        s.key,
        {
          toolCalls: [
            {
              name: 'os.mail_send',
              arguments: { to: 'ap@zephyrco.example', subject: 'Invoice May', body: 'Attached.' },
            },
          ],
        },
        finish('Will resend with the PO number'),
      )
      gatedRun = (await s.start(task.id, { customer: 'Zephyrco' })).id
      await s.wait(gatedRun, ['waiting_on_gate'])
      const [gate] = (await t.call('GET', `/v1/gates?runId=${gatedRun}`, s.as)).body
      const sent = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
        ...s.as,
        body: { decision: 'request_changes', note },
      })
      expect(sent.status, JSON.stringify(sent.body)).toBe(201)
      const improve = await s.improvementOf(gatedRun)
      const done = await s.wait(improve, ['succeeded'])
      expect(done.events.map((x) => x.type)).toContain('recommendation.proposed')
      const improvementRequests = fake
        .callsWith(s.key)
        .filter((r) => JSON.stringify(r.body).includes('# Improvement material'))
      expect(improvementRequests.length).toBeGreaterThanOrEqual(1)
      const given = JSON.stringify(improvementRequests[0]!.body.messages[0])
      expect(given).toContain(gatedRun)
      expect(given).toContain('request_changes')
      expect(given).toContain('PO 4471')
      const [rec] = (await t.call('GET', `/v1/recommendations?taskId=${task.id}`, s.as)).body
      expect(Recommendation.parse(rec).rationale).toContain('Always put the PO number')
    } finally {
      fake.onRequest(() => undefined)
    }
  }, 60_000)

  it('a proposal that fails the definition checks is answered to the model as an error with the issues, and never stored', async () => {
    const s = await tenant()
    const task = await s.task({ goal: 'Merge the dependency bumps', skillMd: skill })
    fake.script(s.key, finish('Could not merge', 'failed'))
    const failed = (await s.start(task.id)).id
    await s.wait(failed, ['failed'])
    fake.script(
      s.key,
      {
        toolCalls: [
          {
            name: 'os.propose_change',
            arguments: {
              changes: { tools: ['vcs.merge_pull_request'] },
              rationale: 'It needs the merge tool.',
              evidence: [{ runId: failed, why: 'could not merge' }],
            },
          },
        ],
      },
      finish('The proposal was refused; nothing proposed.'),
    )
    const improve = await s.improvementOf(failed)
    await s.wait(improve, ['succeeded'])
    const answered = JSON.stringify(fake.callsWith(s.key).at(-1)!.body.messages)
    expect(answered).toContain('gate_required_for_tool')
    expect(answered).toContain('os.propose_change refused')
    expect((await t.call('GET', `/v1/tasks/${task.id}/recommendations`, s.as)).body).toEqual([])
  }, 60_000)

  it("keeps a proposal whose evidence is cut inside an emoji, the cut half replaced: it was refused with the database's words", async () => {
    const s = await tenant()
    const task = await s.task({ goal: 'Answer the customers', skillMd: skill })
    fake.script(s.key, finish('Could not answer', 'failed'))
    const failed = (await s.start(task.id)).id
    await s.wait(failed, ['failed'])
    // 1 + 1,200 characters: the cut at 1,000 falls between the halves of an emoji.
    const why = `x${'\u{1F600}'.repeat(600)}`
    fake.script(
      s.key,
      {
        toolCalls: [
          {
            name: 'os.propose_change',
            arguments: {
              changes: { skillMd: betterSkill },
              rationale: 'Smile more.',
              evidence: [{ runId: failed, why }],
            },
          },
        ],
      },
      finish('Proposed.'),
    )
    const improve = await s.improvementOf(failed)
    await s.wait(improve, ['succeeded'])
    const [rec] = (await t.call('GET', `/v1/tasks/${task.id}/recommendations`, s.as)).body
    expect(Recommendation.parse(rec).evidence).toEqual([
      { runId: failed, why: `${why.slice(0, 999)}\ufffd` },
    ])
    expect(JSON.stringify(fake.callsWith(s.key).at(-1)!.body.messages)).not.toContain('refused')
  }, 60_000)
})
