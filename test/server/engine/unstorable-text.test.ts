import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import { unstorable } from '../../../shared/text.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { bindTeamTools, keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Text PostgreSQL cannot store (U+0000, half a surrogate pair) in what a model or a tool server answers:
// the API refuses it in a body (http/body.ts), but a model's text, its tool calls' arguments and a
// tool's result come from outside and are written into the journal, the run's result and a chat's
// messages. Before, each such write
// failed: the run stayed running until its lease lapsed, and the engine that took it over paid for
// the call again and failed again, for good; a chat reply likewise. They are kept with U+FFFD instead.

let t: TestApp
let model: FakeModelProvider
let engine: Engine
let mcp: FakeMcpServer

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  mcp.addTool('nul', 'answers U+0000', () => 'before\u0000after \ud800')
  mcp.addTool('broken', 'fails', () => {
    throw new Error('broken\u0000 \udfff')
  })
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await model?.close()
  await mcp?.close()
})

describe('a model answer holding U+0000 or half a surrogate pair', () => {
  it.each(['provider_a', 'provider_b'] as const)(
    'in a run (%s): kept with U+FFFD; the run ends as the model said, the call paid once',
    async (provider) => {
      const { e, key, as } = await keyedEnterprise(t, 'Bytes', { provider })
      const task = await t.call('POST', '/v1/tasks', {
        ...as,
        body: { name: `Bytes ${randomUUID().slice(0, 8)}`, assigneeRole: 'ceo' },
      })
      expect(task.status, JSON.stringify(task.body)).toBe(201)
      model.script(key, {
        text: 'Done\u0000 \ud800',
        toolCalls: [
          {
            name: 'os.finish',
            arguments: { summary: 'a\u0000b', output: { 'k\u0000': ['v\udc00', 1] } },
          },
        ],
      })
      const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
      expect(run.status).toBe(201)
      const done = await waitForRun(t, run.body.id, ['succeeded', 'failed'], 10_000, e.token)
      expect(done.run.status).toBe('succeeded')
      expect(done.run.result).toEqual({
        outcome: 'succeeded',
        summary: 'a\ufffdb',
        output: { 'k\ufffd': ['v\ufffd', 1] },
      })
      expect(model.callsWith(key)).toHaveLength(1)
      const [step] = await t.sql<{ response: { text: string } }[]>`
        select response from run_journal where run_id = ${run.body.id} and kind = 'model'`
      expect(step!.response.text).toBe('Done\ufffd \ufffd')
    },
  )

  it('in a chat reply, streamed: the message is stored with U+FFFD and the reply ends', async () => {
    const { key, as } = await keyedEnterprise(t, 'Bytes chat')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Bytes' } })
    expect(member.status).toBe(201)
    model.script(key, { text: 'Hello\u0000 there \udbff' })
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      ...as,
      body: { content: 'Hi' },
    })
    expect(sent.status).toBe(201)
    let detail!: ChatDetail
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, as)).body)
      return !detail.replying && detail.messages.at(-1)?.role === 'member'
    }, 10_000)
    expect(detail.messages.at(-1)!.content).toBe('Hello\ufffd there \ufffd')
    expect(model.callsWith(key)).toHaveLength(1)
  })
})

describe('a tool result holding U+0000 or half a surrogate pair', () => {
  it('in a run: kept with U+FFFD, a result and a tool error alike; the model gets it and the run goes on', async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Bytes tools')
    const team = await bindTeamTools(t, as, mcp.url)
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Bytes ${randomUUID().slice(0, 8)}`,
        teamId: team.id,
        assigneeRole: 'ceo',
        tools: ['vcs.nul', 'vcs.broken'],
      },
    })
    expect(task.status, JSON.stringify(task.body)).toBe(201)
    model.script(
      key,
      { toolCalls: [{ name: 'vcs.nul', arguments: {} }] },
      { toolCalls: [{ name: 'vcs.broken', arguments: {} }] },
      { toolCalls: [{ name: 'os.finish', arguments: { summary: 'ok' } }] },
    )
    const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    const done = await waitForRun(t, run.body.id, ['succeeded', 'failed'], 10_000, e.token)
    expect(done.run.status).toBe('succeeded')
    expect(mcp.callsOf('nul')).toHaveLength(1)
    expect(mcp.callsOf('broken')).toHaveLength(1)
    const steps = await t.sql<{ response: { content: string; isError: boolean } }[]>`
      select response from run_journal where run_id = ${run.body.id} and kind = 'tool' order by step`
    expect(steps.map((s) => s.response)).toEqual([
      { content: 'before\ufffdafter \ufffd', isError: false },
      { content: expect.stringContaining('broken\ufffd \ufffd'), isError: true },
      expect.anything(), // os.finish
    ])
    expect(JSON.stringify(model.callsWith(key).at(-1)!.body)).toContain('broken\ufffd \ufffd')
  })

  it('in a chat: the tool call is answered with U+FFFD, and the reply goes on', async () => {
    const { key, as } = await keyedEnterprise(t, 'Bytes chat tools')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Bytes' } })
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: member.body.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    model.script(key, { toolCalls: [{ name: 'vcs.nul', arguments: {} }] }, { text: 'Read it.' })
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    await t.call('POST', `/v1/chats/${chat.body.id}/messages`, { ...as, body: { content: 'Go' } })
    let detail!: ChatDetail
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, as)).body)
      return detail.messages.some((m) => m.toolCall?.status === 'waiting')
    }, 10_000)
    const call = detail.messages.find((m) => m.toolCall)!
    const decided = await t.call(
      'POST',
      `/v1/chats/${chat.body.id}/tool-calls/${call.id}/decision`,
      {
        ...as,
        body: { decision: 'allow' },
      },
    )
    expect(decided.status, JSON.stringify(decided.body)).toBe(201)
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, as)).body)
      return !detail.replying && detail.messages.at(-1)?.role === 'member'
    }, 10_000)
    expect(detail.messages.find((m) => m.id === call.id)!.toolCall!.result).toBe(
      'before\ufffdafter \ufffd',
    )
    expect(detail.messages.at(-1)!.content).toBe('Read it.')
  })
})

describe("a provider's refusal", () => {
  it('cut where an emoji is: the run fails with the reason, cut before the emoji, never inside it', async () => {
    // The reason keeps 300 characters of what the provider said; one of the two cuts would fall
    // between the halves of an emoji, whatever the length of the words before it.
    const runs = await Promise.all(
      ['', 'a'].map(async (pad) => {
        const { e, key, as } = await keyedEnterprise(t, 'Bytes refusal')
        const task = await t.call('POST', '/v1/tasks', {
          ...as,
          body: { name: `Bytes ${randomUUID().slice(0, 8)}`, assigneeRole: 'ceo' },
        })
        model.script(key, { status: 400, message: pad + '\u{1F600}'.repeat(200) })
        const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
        return waitForRun(t, run.body.id, ['succeeded', 'failed'], 10_000, e.token)
      }),
    )
    for (const { run } of runs) {
      expect(run.status).toBe('failed')
      expect(run.result.summary).toMatch(/^the provider refused the request \(400\): /)
      expect(unstorable(run.result.summary)).toBe(false)
      expect(run.result.summary).not.toContain('\ufffd')
      expect(run.result.summary).toMatch(/\u{1F600}…$/u)
    }
  })
})

describe("a model's tool call nested thousands of levels deep", () => {
  // A provider_b server of its own: the fake provider builds its answers with JSON.stringify, which
  // cannot write that deep. Each call answers os.finish with `output` nested `depth` arrays deep.
  let server: Server
  let url: string
  let depth = 0
  let calls = 0
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = ''
      req.on('data', (chunk) => (body += chunk))
      req.on('end', () => {
        calls++
        const args = `{"summary":"deep","output":${'['.repeat(depth)}${']'.repeat(depth)}}`
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            id: 'chatcmpl-deep',
            object: 'chat.completion',
            created: 1,
            model: JSON.parse(body).model,
            choices: [
              {
                index: 0,
                finish_reason: 'tool_calls',
                message: {
                  role: 'assistant',
                  content: null,
                  tool_calls: [
                    {
                      id: 'call_1',
                      type: 'function',
                      function: { name: 'os__finish', arguments: args },
                    },
                  ],
                },
              },
            ],
            usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
          }),
        )
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  it('is kept as a word saying so, as arguments that are not JSON are: the run goes on, the call paid once', async () => {
    const deep = await createTestApp({ providerBaseUrls: { provider_a: url, provider_b: url } })
    const deepEngine = await startTestEngine(deep)
    try {
      for (const [levels, kept] of [
        [99, true], // with the arguments' object, 100 levels: kept whole
        [6000, false],
      ] as const) {
        depth = levels
        calls = 0
        const { e, as } = await keyedEnterprise(deep, 'Deep', { provider: 'provider_b' })
        const task = await deep.call('POST', '/v1/tasks', {
          ...as,
          body: { name: `Deep ${randomUUID().slice(0, 8)}`, assigneeRole: 'ceo' },
        })
        const run = await deep.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
        const done = await waitForRun(deep, run.body.id, ['succeeded', 'failed'], 10_000, e.token)
        expect(done.run.status).toBe('succeeded')
        expect(calls).toBe(1)
        const [step] = await deep.sql<{ request: { arguments: Record<string, unknown> } }[]>`
          select request from run_journal where run_id = ${run.body.id} and kind = 'tool'`
        if (kept) expect(step!.request.arguments.summary).toBe('deep')
        else
          expect(step!.request.arguments).toEqual({
            unparsed: 'arguments nested deeper than 100 levels',
          })
      }
    } finally {
      await deepEngine.stop()
    }
  })
})
