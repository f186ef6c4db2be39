import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Engine } from '../../../server/engine/index.js'
import { Gate } from '../../../shared/schemas/gates.js'
import { ToolConnection } from '../../../shared/schemas/tools.js'
import { createToken } from '../../../server/domain/people/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { cheapPasswordHashesInFile, cookieHeaders, signIn } from '../../helpers/people.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Gates and tool connections (spec: Gate; Endpoints Gates and Tools; Authentication 9-10; DESIGN 6),
// with a fake model provider and a fake MCP tool server.

// About gates, not what a hash costs (test/server/routes/auth.test.ts holds the default).
cheapPasswordHashesInFile()

let t: TestApp
let model: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine
const mcpToken = `mcp-token-${randomUUID()}`

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await mcp?.close()
  await model?.close()
})

const merge = 'vcs.merge_pull_request'

/** An enterprise with a model key, a vcs connection on its team, and a merging task. */
async function setup(taskExtra: Record<string, unknown> = {}) {
  const { e, key, as } = await keyedEnterprise(t, 'Gates')
  const [team] = (await t.call('GET', '/v1/teams', as)).body
  const connection = await t.call('POST', '/v1/tools/bindings', {
    ...as,
    body: { name: 'vcs', url: mcp.url, token: mcpToken, layer: 'team', layerId: team.id },
  })
  expect(connection.status, JSON.stringify(connection.body)).toBe(201)
  const task = await t.call('POST', '/v1/tasks', {
    ...as,
    body: {
      name: `Merger ${randomUUID().slice(0, 6)}`,
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
      tools: [merge, 'os.set_gate_summary', 'vcs.echo'],
      gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
      ...taskExtra,
    },
  })
  expect(task.status, JSON.stringify(task.body)).toBe(201)
  const secret = (await t.call('POST', '/v1/enterprise/webhook-secret/rotate', as)).body.secret
  const start = async (input: Record<string, unknown> = {}) =>
    (
      await t.call('POST', `/v1/tasks/${task.body.id}/runs`, {
        ...as,
        body: { n: randomUUID(), ...input },
      })
    ).body as { id: string }
  const wait = (runId: string, statuses: string[]) =>
    waitForRun(t, runId, statuses, 15_000, e.token)
  const waitingGate = async (runId: string) => {
    await wait(runId, ['waiting_on_gate'])
    const gates = (await t.call('GET', `/v1/gates?runId=${runId}`, as)).body
    expect(gates).toHaveLength(1)
    return gates[0]
  }
  return {
    e,
    as,
    key,
    team,
    task: task.body,
    connection: connection.body,
    secret,
    start,
    wait,
    waitingGate,
  }
}

/** A run of a merging task of a new enterprise, waiting at its gate on the merge. */
async function mergeAtGate() {
  const s = await setup()
  const repo = `acme/${randomUUID().slice(0, 6)}`
  scriptMerge(s.key, repo)
  const run = await s.start()
  return { s, repo, run, gate: await s.waitingGate(run.id) }
}

/** Decides a gate through the gate webhook (spec: Routes without a token), with the secret. */
const decideByWebhook = (
  s: Awaited<ReturnType<typeof setup>>,
  gateId: string,
  body: Record<string, unknown>,
) =>
  t.call('POST', `/v1/webhooks/${s.e.slug}/gates/${gateId}`, {
    token: null,
    body,
    headers: { 'x-os-webhook-secret': s.secret },
  })

const mergeCalls = (repo: string) =>
  mcp.callsOf('merge_pull_request').filter((c) => c.arguments.repo === repo)

/** The model proposes the merge (after saying what it is), then finishes once the call is answered. */
function scriptMerge(key: string, repo: string) {
  model.script(
    key,
    {
      toolCalls: [
        { name: 'os.set_gate_summary', arguments: { summary: `Merge ${repo}#7: tests pass` } },
      ],
    },
    { toolCalls: [{ name: merge, arguments: { repo, number: 7 } }] },
    { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'merged' } }] },
  )
}

describe('a gated call (spec: Gate; States and transitions)', () => {
  it('opens a gate, waits for a decision, and after approval calls the tool exactly once', async () => {
    const { s, repo, run, gate } = await mergeAtGate()
    expect(gate).toMatchObject({
      kind: 'tool',
      status: 'waiting',
      tool: merge,
      arguments: { repo, number: 7 },
      owner: 'ceo',
      approval: 'specific',
      summary: `Merge ${repo}#7: tests pass`,
      runId: run.id,
      taskId: s.task.id,
      taskSlug: s.task.slug,
      decision: null,
    })
    expect(mergeCalls(repo)).toHaveLength(0)
    // A run waiting at a gate is not under way: a new start of its lane begins beside it.
    expect((await t.call('GET', '/v1/executions/counts', s.as)).body.runs.waiting).toBe(1)

    const decided = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', note: 'ship it' },
    })
    expect(decided.status).toBe(201)
    expect(decided.body).toMatchObject({
      status: 'decided',
      decision: 'approve',
      note: 'ship it',
      decidedBy: expect.stringMatching(/^token:/),
      taskSlug: s.task.slug,
    })
    const done = await s.wait(run.id, ['succeeded'])
    expect(mergeCalls(repo)).toHaveLength(1)
    expect(mergeCalls(repo)[0]!.token).toBe(mcpToken)
    const types = done.events.map((e: { type: string }) => e.type)
    expect(types).toEqual(
      expect.arrayContaining([
        'run.waiting_on_gate',
        'gate.decided',
        'run.pending',
        'tool.called',
        'run.succeeded',
      ]),
    )
    expect(done.gates[0]).toMatchObject({ id: gate.id, decision: 'approve' })
    expect((await t.call('GET', `/v1/gates?runId=${run.id}`, s.as)).body).toEqual([]) // decided: off the list
  })

  it('lets one approval land across the API, the webhook and a replay; the tool runs once', async () => {
    const { s, repo, run, gate } = await mergeAtGate()
    const hook = await decideByWebhook(s, gate.id, { decision: 'approve', note: 'by webhook' })
    expect(hook.status).toBe(201)
    expect(hook.body).toMatchObject({
      decision: 'approve',
      decidedBy: 'webhook',
      decidedByName: null,
    })
    const api = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve' },
    })
    expect(api.status).toBe(409)
    expect(api.body.error).toBe('gate_not_waiting')
    const deliveries = (await t.call('GET', '/v1/webhooks?kind=gate', s.as)).body.data
    expect(deliveries[0]).toMatchObject({
      kind: 'gate',
      target: gate.id,
      gateId: gate.id,
      status: 'accepted',
      runId: run.id,
    })
    const replay = await t.call('POST', `/v1/webhooks/${deliveries[0].id}/replay`, {
      ...s.as,
      body: { idempotencyKey: randomUUID().replace(/-/g, '') },
    })
    // Spec, Webhook history: a replay of a decided gate is refused; it is kept, linked to the original.
    expect(replay.status).toBe(409)
    expect(replay.body).toMatchObject({
      error: 'gate_not_waiting',
      decision: 'approve',
      deliveryId: expect.any(String),
    })
    const kept = (await t.call('GET', `/v1/webhooks/${replay.body.deliveryId}`, s.as)).body
    expect(kept).toMatchObject({
      replayOf: deliveries[0].id,
      status: 'refused',
      response: { status: 409, body: { error: 'gate_not_waiting' } },
    })
    await s.wait(run.id, ['succeeded'])
    expect(mergeCalls(repo)).toHaveLength(1)
  })

  // Two runs to their gates: 18 s on one loaded core when it runs first in the file (4 s after others).
  it(
    'names who decided (issue 51): a token by its name, a person by name and never by email, in the event too',
    { timeout: 60_000 },
    async () => {
      // A gates reader holds no scope that reads tokens or people, so the gate itself names them.
      const first = await mergeAtGate()
      const reader = await t.tokenWith(['gates:read'], first.s.e)
      const ci = await createToken(t.sql, first.s.e.id, { name: 'ci-bot', scopes: ['gates:write'] })
      const decided = await t.call('POST', `/v1/gates/${first.gate.id}/decision`, {
        token: ci.token,
        body: { decision: 'approve' },
      })
      expect(decided.status, decided.text).toBe(201)
      expect(Gate.parse(decided.body)).toMatchObject({
        decidedBy: `token:${ci.id}`,
        decidedByName: 'ci-bot',
      })
      const read = await t.call('GET', `/v1/gates/${first.gate.id}`, { token: reader })
      expect(Gate.parse(read.body).decidedByName).toBe('ci-bot')
      const audit = await t.call('GET', '/v1/gates?status=decided', { token: reader })
      expect(audit.body.find((g: Gate) => g.id === first.gate.id).decidedByName).toBe('ci-bot')
      const done = await first.s.wait(first.run.id, ['succeeded'])
      const event = done.events.find((e: { type: string }) => e.type === 'gate.decided')
      expect(event.payload).toEqual({
        gateId: first.gate.id,
        decision: 'approve',
        decidedBy: `token:${ci.id}`,
        decidedByName: 'ci-bot',
      })

      // A person signed in, by name; one who gave none is not named by their email (a token reading
      // gates reads no people). A webhook says who it is itself.
      const second = await mergeAtGate()
      const person = await signIn(t, 'member', second.s.e)
      await t.sql`update users set name = '' where id = ${person.id}`
      const byPerson = await t.call('POST', `/v1/gates/${second.gate.id}/decision`, {
        token: person.session,
        body: { decision: 'reject', note: 'not now' },
      })
      expect(byPerson.status, byPerson.text).toBe(201)
      expect(byPerson.body).toMatchObject({
        decidedBy: `user:${person.id}`,
        decidedByName: null,
      })
      await t.sql`update users set name = 'Ada Lovelace' where id = ${person.id}`
      const named = await t.call('GET', `/v1/gates/${second.gate.id}`, second.s.as)
      expect(named.body.decidedByName).toBe('Ada Lovelace')

      // A token of another enterprise is no one here, whatever a row says (the names are the
      // enterprise's own); nor is a malformed actor.
      const foreign = await createToken(t.sql, t.acme.id, { name: 'acme-secret-name', scopes: [] })
      for (const actor of [`token:${foreign.id}`, 'token:not-a-uuid', 'user:']) {
        await t.sql`update gates set decided_by = ${actor} where id = ${second.gate.id}`
        const read = await t.call('GET', `/v1/gates/${second.gate.id}`, second.s.as)
        expect(read.status).toBe(200)
        expect(read.body.decidedByName).toBeNull()
      }
    },
  )

  it('keeps the secret out of a gate decided by webhook: its note, the delivery and its answer', async () => {
    const { s, repo, run, gate } = await mergeAtGate()
    const hook = await decideByWebhook(s, gate.id, { decision: 'approve', note: `ok, ${s.secret}` })
    expect(hook.status).toBe(201)
    expect(hook.body.note).toBe('ok, [redacted]')
    const [kept] = await t.sql<{ text: string }[]>`
      select request::text || response_body::text as text from webhook_deliveries where gate_id = ${gate.id}`
    expect(kept!.text).not.toContain(s.secret)
    const [decided] = await t.sql<{ note: string }[]>`select note from gates where id = ${gate.id}`
    expect(decided!.note).toBe('ok, [redacted]')
    await s.wait(run.id, ['succeeded'])
  })

  it('writes and calls nothing more for a run whose lease another engine took without its hearing', async () => {
    const s = await setup()
    const [first, second] = [`first-${randomUUID()}`, `second-${randomUUID()}`]
    model.script(s.key, {
      toolCalls: [
        { name: 'vcs.echo', arguments: { text: first } },
        { name: 'vcs.echo', arguments: { text: second } },
      ],
    })
    mcp.delay('echo', 1000)
    try {
      const run = await s.start()
      const echoed = (text: string) => mcp.callsOf('echo').filter((c) => c.arguments.text === text)
      await eventually(() => echoed(first).length === 1, 10_000, 'the first call to be made')
      // As if this engine had stalled past its lease and another had taken the run over: no
      // notification reaches this one, which finds out at its next write.
      await t.sql`
        update runs set lease_owner = 'another-engine', lease_expires_at = now() + interval '1 hour'
         where id = ${run.id}`
      await new Promise((r) => setTimeout(r, 2000)) // the first call has answered by now
      expect(echoed(second)).toEqual([])
      const journal = await t.sql<{ state: string }[]>`
        select state from run_journal where run_id = ${run.id} and kind = 'tool'`
      expect(journal).toEqual([{ state: 'started' }]) // left for the new holder to settle
      const events = (await t.call('GET', `/v1/runs/${run.id}`, s.as)).body.events
      expect(events.map((e: { type: string }) => e.type)).not.toContain('tool.called')
      await t.call('POST', `/v1/runs/${run.id}/cancel`, s.as)
    } finally {
      mcp.delay('echo', 0)
    }
  })

  it('approves by replay when the first webhook was refused for a reason that has passed', async () => {
    const { s, repo, run, gate } = await mergeAtGate()
    // The gate's run is moved off the gate for a moment (as if it were being resumed): the webhook is
    // stored, authenticated and replayable, and its replay then decides the gate.
    await t.sql`update gates set status = 'decided' where id = ${gate.id}`
    const hook = await decideByWebhook(s, gate.id, { decision: 'approve' })
    expect(hook.status).toBe(409)
    await t.sql`update gates set status = 'waiting' where id = ${gate.id}`
    const [delivery] = (await t.call('GET', '/v1/webhooks?kind=gate', s.as)).body.data
    expect(delivery.replayable).toBe(true)
    const replay = await t.call('POST', `/v1/webhooks/${delivery.id}/replay`, {
      ...s.as,
      body: { idempotencyKey: randomUUID().replace(/-/g, '') },
    })
    expect(replay.body).toMatchObject({
      status: 'accepted',
      replayOf: delivery.id,
      gateId: gate.id,
    })
    await s.wait(run.id, ['succeeded'])
    expect(mergeCalls(repo)).toHaveLength(1)
  })

  it('on reject tells the model it was refused, with the note; nothing is merged', async () => {
    const s = await setup()
    const repo = `acme/${randomUUID().slice(0, 6)}`
    model.script(
      s.key,
      { toolCalls: [{ name: merge, arguments: { repo, number: 7 } }] },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'failed', summary: 'refused' } }] },
    )
    const run = await s.start()
    const gate = await s.waitingGate(run.id)
    await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'reject', note: 'not on a Friday' },
    })
    await s.wait(run.id, ['failed'])
    expect(mergeCalls(repo)).toHaveLength(0)
    const last = model.callsWith(s.key).at(-1)!
    expect(JSON.stringify(last.body.messages)).toContain(
      'A person refused this call: not on a Friday',
    )
  })

  it('on request_changes gives the model the note; it proposes again, a new gate, approved, merged once', async () => {
    const s = await setup()
    const repo = `acme/${randomUUID().slice(0, 6)}`
    model.script(
      s.key,
      { toolCalls: [{ name: merge, arguments: { repo, number: 7 } }] },
      { toolCalls: [{ name: merge, arguments: { repo, number: 8 } }] },
      {
        toolCalls: [
          { name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'merged 8' } },
        ],
      },
    )
    const run = await s.start()
    const first = await s.waitingGate(run.id)
    await t.call('POST', `/v1/gates/${first.id}/decision`, {
      ...s.as,
      body: { decision: 'request_changes', note: 'merge #8 instead' },
    })
    await eventually(
      async () => (await t.call('GET', `/v1/gates?runId=${run.id}`, s.as)).body.length === 1,
      10_000,
    )
    const second = (await t.call('GET', `/v1/gates?runId=${run.id}`, s.as)).body[0]
    expect(second.id).not.toBe(first.id)
    expect(second.arguments).toEqual({ repo, number: 8 })
    expect(JSON.stringify(model.callsWith(s.key)[1]!.body.messages)).toContain('merge #8 instead')
    await t.call('POST', `/v1/gates/${second.id}/decision`, {
      ...s.as,
      body: { decision: 'approve' },
    })
    await s.wait(run.id, ['succeeded'])
    expect(mergeCalls(repo).map((c) => c.arguments.number)).toEqual([8])
  })

  it('lets exactly one of 20 concurrent decisions land', async () => {
    const { s, repo, run, gate } = await mergeAtGate()
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.call('POST', `/v1/gates/${gate.id}/decision`, {
          ...s.as,
          body: { decision: i % 2 ? 'approve' : 'reject' },
        }),
      ),
    )
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1)
    expect(
      answers.filter((a) => a.status === 409 && a.body.error === 'gate_not_waiting'),
    ).toHaveLength(19)
    await s.wait(run.id, ['succeeded', 'failed'])
    expect(mergeCalls(repo).length).toBeLessThanOrEqual(1)
  })

  it('gates every tool of a connection under a gate on its namespace', async () => {
    const s = await setup({
      tools: [merge, 'os.set_gate_summary', 'vcs.echo'],
      gates: [{ tool: merge }, { tool: 'vcs.*' }],
    })
    const text = `hello ${randomUUID()}`
    model.script(
      s.key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text } }] },
      {
        toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'echoed' } }],
      },
    )
    const run = await s.start()
    const gate = await s.waitingGate(run.id)
    expect(gate.tool).toBe('vcs.echo')
    await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve' },
    })
    await s.wait(run.id, ['succeeded'])
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === text)).toHaveLength(1)
  })

  it('closes the gate of a run cancelled while it waits', async () => {
    const s = await setup()
    scriptMerge(s.key, `acme/${randomUUID().slice(0, 6)}`)
    const run = await s.start()
    const gate = await s.waitingGate(run.id)
    await t.call('POST', `/v1/runs/${run.id}/cancel`, s.as)
    expect((await t.call('GET', `/v1/gates/${gate.id}`, s.as)).body).toMatchObject({
      status: 'decided',
      decision: null,
      decidedBy: 'run cancelled',
    })
    expect(
      (
        await t.call('POST', `/v1/gates/${gate.id}/decision`, {
          ...s.as,
          body: { decision: 'approve' },
        })
      ).body.error,
    ).toBe('gate_not_waiting')
  })
})

describe('question gates (os.ask_ceo)', () => {
  it('asks, offers choices, refuses a choice it does not offer, and answers the model', async () => {
    const s = await setup({
      tools: ['os.ask_ceo', 'os.write_plan'],
      gates: [{ tool: 'os.ask_ceo' }],
    })
    model.script(
      s.key,
      {
        toolCalls: [
          {
            name: 'os.ask_ceo',
            arguments: {
              questions: ['Which market first?'],
              choices: [
                { key: 'eu', label: 'Europe' },
                { key: 'us', label: 'United States' },
              ],
            },
          },
        ],
      },
      {
        toolCalls: [
          {
            name: 'os.finish',
            arguments: { outcome: 'succeeded', summary: 'going with the answer' },
          },
        ],
      },
    )
    const run = await s.start()
    const gate = await s.waitingGate(run.id)
    expect(gate).toMatchObject({
      kind: 'question',
      questions: ['Which market first?'],
      choices: [
        { key: 'eu', label: 'Europe' },
        { key: 'us', label: 'United States' },
      ],
    })
    expect(
      (await t.call('GET', '/v1/gates?kind=question', s.as)).body.map((g: { id: string }) => g.id),
    ).toEqual([gate.id])
    expect((await t.call('GET', '/v1/gates?kind=tool', s.as)).body).toEqual([])
    const bad = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', choice: 'asia' },
    })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain('eu, us')
    const ok = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', choice: 'eu', answers: ['Europe, because of the pilots'] },
    })
    expect(ok.status).toBe(201)
    await s.wait(run.id, ['succeeded'])
    const last = model.callsWith(s.key).at(-1)!
    expect(JSON.stringify(last.body.messages)).toContain('Europe, because of the pilots')
    expect(JSON.stringify(last.body.messages)).toContain('\\"choice\\":\\"eu\\"')
  })

  it('tells the model a refusal is a refusal, even with answers', async () => {
    const s = await setup({ tools: ['os.ask_ceo'], gates: [{ tool: 'os.ask_ceo' }] })
    model.script(
      s.key,
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Ship on Friday?'] } }] },
      { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'failed', summary: 'refused' } }] },
    )
    const run = await s.start()
    const gate = await s.waitingGate(run.id)
    const no = await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...s.as,
      body: { decision: 'reject', note: 'not this week', answers: ['No'] },
    })
    expect(no.status).toBe(201)
    await s.wait(run.id, ['failed'])
    const messages = model.callsWith(s.key).at(-1)!.body.messages as {
      content: unknown
    }[]
    const results = messages
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b: { type?: string }) => b.type === 'tool_result')
    expect(results).toEqual([
      expect.objectContaining({
        is_error: true,
        content: expect.stringContaining('not this week'),
      }),
    ])
  })
})

describe('POST /v1/gates/chat/{chatId}/decision', () => {
  // Chats are not built yet: their question gates are written here as a chat would open them.
  const chatGate = async (chatId: string) =>
    (
      await t.sql<{ id: string }[]>`
        insert into gates (enterprise_id, chat_id, kind, questions)
        values (${t.acme.id}, ${chatId}, 'question', ${t.sql.json(['Go?'])})
        returning id`
    )[0]!.id

  it("answers the chat's newest waiting question, or the one gateId names", async () => {
    const chatId = randomUUID()
    const older = await chatGate(chatId)
    const newer = await chatGate(chatId)
    const first = await t.call('POST', `/v1/gates/chat/${chatId}/decision`, {
      body: { decision: 'approve', answers: { q: 'yes' } },
    })
    expect(first.status).toBe(201)
    expect(first.body).toMatchObject({ id: newer, status: 'decided', decision: 'approve' })
    const named = await t.call('POST', `/v1/gates/chat/${chatId}/decision`, {
      body: { decision: 'reject', gateId: older, note: 'not now' },
    })
    expect(named.body).toMatchObject({ id: older, decision: 'reject' })
    const none = await t.call('POST', `/v1/gates/chat/${chatId}/decision`, {
      body: { decision: 'approve' },
    })
    expect(none.status).toBe(404)
    expect(none.body.error).toBe('gate_not_found')
    const again = await t.call('POST', `/v1/gates/chat/${chatId}/decision`, {
      body: { decision: 'approve', gateId: older },
    })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('gate_not_waiting')
    const foreign = await t.call('POST', `/v1/gates/chat/${chatId}/decision`, {
      token: t.other.token,
      body: { decision: 'approve', gateId: newer },
    })
    expect(foreign.status).toBe(404)
  })
})

describe('the merge rule at run time (spec: Definition checks)', () => {
  it('ends a run at a must-gate call that no gate names, and nothing is done', async () => {
    const s = await setup()
    mcp.addTool(`release_${s.e.slug.replace(/-/g, '_')}`, 'Release to production', () => 'released')
    const release = `release_${s.e.slug.replace(/-/g, '_')}`
    const task = await t.call('POST', '/v1/tasks', {
      ...s.as,
      body: {
        name: 'Releaser',
        teamId: s.team.id,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        tools: ['vcs.*', 'os.set_gate_summary'],
        gates: [{ tool: merge }],
      },
    })
    expect(task.status).toBe(201)
    // The chief executive (an owner, signed in) adds the release tool to the connection's mustGate after
    // the task was saved.
    const ceo = await signIn(t, 'owner', s.e)
    const gated = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      token: ceo.session,
      body: { mustGate: [merge, `vcs.${release}`] },
    })
    expect(gated.status, gated.text).toBe(200)
    // A copy is checked as a new task is: under the grown list, it is refused.
    const copy = await t.call('POST', `/v1/tasks/${task.body.id}/copy`, {
      ...s.as,
      body: { teamId: s.team.id, name: 'Releaser copy' },
    })
    expect(copy.status).toBe(400)
    expect(copy.body.error).toBe('gate_required_for_tool')
    model.script(s.key, { toolCalls: [{ name: `vcs.${release}`, arguments: {} }] })
    const run = (await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...s.as, body: {} })).body
    const failed = await s.wait(run.id, ['failed'])
    expect(failed.run.reason).toMatch(/^gate_required_for_tool: vcs\./)
    expect(mcp.callsOf(release)).toHaveLength(0)
  })
})

describe('tool connections (spec: Endpoints Tools; Authentication 10)', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/tools/bindings' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/tools/oauth/redirect-uri' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/gates' })

  it('connects on a team with an encrypted token, never answered; vcs starts with its merge tool on mustGate', async () => {
    const s = await setup()
    expect(s.connection).toMatchObject({
      name: 'vcs',
      kind: 'mcp',
      url: mcp.url,
      hasToken: true,
      layer: 'team',
      layerId: s.team.id,
      mustGate: [merge],
    })
    expect(JSON.stringify(s.connection)).not.toContain(mcpToken)
    const listed = await t.call('GET', '/v1/tools/bindings', s.as)
    expect(listed.text).not.toContain(mcpToken)
    const [row] =
      await t.sql`select token_ciphertext from tool_connections where id = ${s.connection.id}`
    expect(Buffer.from(row!.tokenCiphertext).toString('latin1')).not.toContain(mcpToken)
    const other = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'docs', url: mcp.url, layer: 'task', layerId: s.task.id },
    })
    expect(other.body.mustGate).toEqual([])
    expect(
      (await t.call('GET', `/v1/tools/bindings?layer=task&layerId=${s.task.id}`, s.as)).body.map(
        (c: { id: string }) => c.id,
      ),
    ).toEqual([other.body.id])
  })

  it('refuses a token the enterprise layer, a mustGate, and changes to an enterprise-level connection: ceo_bind_only', async () => {
    const s = await setup()
    const onEnterprise = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'crm', url: mcp.url, layer: 'enterprise' },
    })
    expect(onEnterprise.status).toBe(403)
    expect(onEnterprise.body.error).toBe('ceo_bind_only')
    const withMustGate = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: {
        name: 'crm',
        url: mcp.url,
        layer: 'team',
        layerId: s.team.id,
        mustGate: ['crm.delete'],
      },
    })
    expect(withMustGate.body.error).toBe('ceo_bind_only')
    const patched = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...s.as,
      body: { mustGate: [] },
    })
    expect(patched.body.error).toBe('ceo_bind_only')
    const moved = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...s.as,
      body: { layer: 'enterprise' },
    })
    expect(moved.body.error).toBe('ceo_bind_only')
    // One the chief executive made on the enterprise (in the portal) cannot be changed or removed by token.
    const [ceoMade] = await t.sql<{ id: string }[]>`
      insert into tool_connections (enterprise_id, name, kind, url, layer, must_gate)
      values (${s.e.id}, 'billing', 'mcp', ${mcp.url}, 'enterprise', '["billing.refund"]') returning id`
    expect(
      (
        await t.call('PATCH', `/v1/tools/bindings/${ceoMade!.id}`, {
          ...s.as,
          body: { description: 'x' },
        })
      ).body.error,
    ).toBe('ceo_bind_only')
    expect((await t.call('DELETE', `/v1/tools/bindings/${ceoMade!.id}`, s.as)).body.error).toBe(
      'ceo_bind_only',
    )
  })

  it("lets the chief executive's session connect on the enterprise, set and change mustGate, move and remove", async () => {
    const s = await setup()
    const ceo = await signIn(t, 'owner', s.e)
    const as = { token: ceo.session }
    const made = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'billing', url: mcp.url, layer: 'enterprise', mustGate: ['billing.refund'] },
    })
    expect(made.status, made.text).toBe(201)
    expect(ToolConnection.parse(made.body)).toMatchObject({
      layer: 'enterprise',
      layerId: null,
      mustGate: ['billing.refund'],
    })
    // By the enterprise's own id too; a vcs connection without a list starts with its merge tool.
    const vcs = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'vcs', url: mcp.url, layer: 'enterprise', layerId: s.e.id },
    })
    expect(vcs.status).toBe(201)
    expect(vcs.body.mustGate).toEqual([merge])
    const foreignId = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'crm', url: mcp.url, layer: 'enterprise', layerId: t.acme.id },
    })
    expect(foreignId.status).toBe(404)
    expect(foreignId.body.error).toBe('enterprise_not_found')
    const listed = await t.call('GET', `/v1/tools/bindings?layer=enterprise&layerId=${s.e.id}`, as)
    expect(listed.body.map((c: { id: string }) => c.id)).toEqual([made.body.id, vcs.body.id])

    // mustGate of one on the enterprise and of one on a team, by bearer and by cookie with CSRF.
    const changed = await t.call('PATCH', `/v1/tools/bindings/${made.body.id}`, {
      ...as,
      body: {
        mustGate: ['billing.refund', 'billing.void', 'billing.refund'],
        description: 'money',
      },
    })
    expect(changed.status, changed.text).toBe(200)
    expect(changed.body).toMatchObject({
      mustGate: ['billing.refund', 'billing.void'],
      description: 'money',
    })
    const ungated = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      token: null,
      headers: cookieHeaders(ceo),
      body: { mustGate: [] },
    })
    expect(ungated.status, ungated.text).toBe(200)
    expect(ungated.body.mustGate).toEqual([])
    const [row] = await t.sql`select must_gate from tool_connections where id = ${s.connection.id}`
    expect(row!.mustGate).toEqual([])

    // Moved onto the enterprise (stored without a layer id) and off again, then removed.
    const up = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...as,
      body: { layer: 'enterprise' },
    })
    expect(up.body).toMatchObject({ layer: 'enterprise', layerId: null })
    const down = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...as,
      body: { layer: 'team', layerId: s.team.id },
    })
    expect(down.body).toMatchObject({ layer: 'team', layerId: s.team.id })
    expect((await t.call('DELETE', `/v1/tools/bindings/${made.body.id}`, as)).status).toBe(204)
    expect(await t.sql`select 1 from tool_connections where id = ${made.body.id}`).toHaveLength(0)

    // An owner of another enterprise reaches none of these.
    const outsider = await signIn(t, 'owner', t.other)
    const foreign = await t.call('PATCH', `/v1/tools/bindings/${vcs.body.id}`, {
      token: outsider.session,
      body: { mustGate: [] },
    })
    expect(foreign.status).toBe(404)
    expect(foreign.body.error).toBe('tool_connection_not_found')
  })

  it("refuses a member's session exactly as a token: ceo_bind_only, and nothing is stored or changed", async () => {
    const s = await setup()
    const member = await signIn(t, 'member', s.e)
    const [ceoMade] = await t.sql<{ id: string }[]>`
      insert into tool_connections (enterprise_id, name, kind, url, layer, must_gate)
      values (${s.e.id}, 'billing', 'mcp', ${mcp.url}, 'enterprise', '["billing.refund"]') returning id`
    const before =
      await t.sql`select * from tool_connections where enterprise_id = ${s.e.id} order by id`
    for (const as of [{ token: member.session }, s.as]) {
      const refusals = [
        await t.call('POST', '/v1/tools/bindings', {
          ...as,
          body: { name: 'crm', url: mcp.url, layer: 'enterprise' },
        }),
        await t.call('POST', '/v1/tools/bindings', {
          ...as,
          body: { name: 'crm', url: mcp.url, layer: 'team', layerId: s.team.id, mustGate: [] },
        }),
        await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
          ...as,
          body: { mustGate: [] },
        }),
        await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
          ...as,
          body: { layer: 'enterprise' },
        }),
        await t.call('PATCH', `/v1/tools/bindings/${ceoMade!.id}`, {
          ...as,
          body: { description: 'x' },
        }),
        await t.call('DELETE', `/v1/tools/bindings/${ceoMade!.id}`, as),
      ]
      for (const res of refusals) {
        expect(res.status, res.text).toBe(403)
        expect(res.body.error).toBe('ceo_bind_only')
      }
    }
    expect(
      await t.sql`select * from tool_connections where enterprise_id = ${s.e.id} order by id`,
    ).toEqual(before)
    // What a token may do, a member's session may too.
    const onTeam = await t.call('POST', '/v1/tools/bindings', {
      token: member.session,
      body: { name: 'docs', url: mcp.url, layer: 'team', layerId: s.team.id },
    })
    expect(onTeam.status).toBe(201)
  })

  it('changes and moves a connection, and removes it', async () => {
    const s = await setup()
    const member = (await t.call('GET', '/v1/members', s.as)).body[0]
    const moved = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...s.as,
      body: { layer: 'member', layerId: member.id, description: 'mine now', token: 'new-token' },
    })
    expect(moved.body).toMatchObject({
      layer: 'member',
      layerId: member.id,
      description: 'mine now',
      hasToken: true,
      mustGate: [merge],
    })
    // null clears: the token goes, and the server turns into a browser system.
    const cleared = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...s.as,
      body: { token: null, url: null, sites: ['https://crm.example'], startPage: null },
    })
    expect(cleared.body).toMatchObject({
      kind: 'browser',
      url: null,
      hasToken: false,
      sites: ['https://crm.example'],
      startPage: null,
    })
    const neither = await t.call('PATCH', `/v1/tools/bindings/${s.connection.id}`, {
      ...s.as,
      body: { sites: null },
    })
    expect(neither.status).toBe(400)
    expect(neither.body.message).toMatch(/^url or sites/)
    expect((await t.call('DELETE', `/v1/tools/bindings/${s.connection.id}`, s.as)).status).toBe(204)
    expect((await t.call('DELETE', `/v1/tools/bindings/${s.connection.id}`, s.as)).body.error).toBe(
      'tool_connection_not_found',
    )
  })

  it('keeps browser connections, their sign-ins, and forgets one member on one site or all', async () => {
    const s = await setup()
    const browser = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: {
        name: 'erp',
        sites: ['erp.example.com', 'sso.example.com'],
        startPage: 'https://erp.example.com',
        layer: 'team',
        layerId: s.team.id,
      },
    })
    expect(browser.body).toMatchObject({
      kind: 'browser',
      sites: ['erp.example.com', 'sso.example.com'],
      url: null,
      hasToken: false,
    })
    const [member] = (await t.call('GET', '/v1/members', s.as)).body
    await t.sql`
      insert into browser_sign_ins (connection_id, enterprise_id, member_id, site)
      values (${browser.body.id}, ${s.e.id}, ${member.id}, 'erp.example.com'), (${browser.body.id}, ${s.e.id}, ${member.id}, 'sso.example.com')`
    expect(
      (await t.call('GET', `/v1/tools/bindings/${browser.body.id}/sign-ins`, s.as)).body,
    ).toHaveLength(2)
    await t.call(
      'DELETE',
      `/v1/tools/bindings/${browser.body.id}/sign-ins/${member.id}?site=sso.example.com`,
      s.as,
    )
    expect(
      (await t.call('GET', `/v1/tools/bindings/${browser.body.id}/sign-ins`, s.as)).body.map(
        (x: { site: string }) => x.site,
      ),
    ).toEqual(['erp.example.com'])
    await t.call('DELETE', `/v1/tools/bindings/${browser.body.id}/sign-ins/${member.id}`, s.as)
    expect(
      (await t.call('GET', `/v1/tools/bindings/${browser.body.id}/sign-ins`, s.as)).body,
    ).toEqual([])
    const neither = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'nothing', layer: 'team', layerId: s.team.id },
    })
    expect(neither.status).toBe(400)
  })

  it('answers the OAuth redirect address and starts an OAuth for a connection', async () => {
    const s = await setup()
    const redirect = (await t.call('GET', '/v1/tools/oauth/redirect-uri', s.as)).body.redirectUri
    expect(redirect).toMatch(/\/v1\/tools\/oauth\/callback$/)
    const started = await t.call('POST', '/v1/tools/oauth/start', {
      ...s.as,
      body: {
        connectionId: s.connection.id,
        authorizeUrl: 'https://git.example/oauth/authorize',
        clientId: 'osd',
      },
    })
    const url = new URL(started.body.url)
    expect(url.searchParams.get('redirect_uri')).toBe(redirect)
    expect(url.searchParams.get('state')).toBe(started.body.state)
  })
})
