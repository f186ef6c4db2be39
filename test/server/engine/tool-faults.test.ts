import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { bindTeamTools, keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// A tool server that stalls, drops the connection or answers what is not JSON-RPC (issue 34; DESIGN
// 13): the call comes back to the model as a tool error in words, the run or the chat reply goes on,
// and osd never makes the call a second time on its own. The tool timeout is 1 s here
// (OSD_TOOL_TIMEOUT_SECONDS).

let t: TestApp
let model: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  t = await createTestApp({
    providerBaseUrls: { provider_a: model.url, provider_b: model.url },
    toolTimeoutSeconds: 1,
  })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await model?.close()
  await mcp?.close()
})

async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Tools')
  const team = await bindTeamTools(t, as, mcp.url)
  return { e, as, key, team }
}

const echo = (text: string) => ({ toolCalls: [{ name: 'vcs.echo', arguments: { text } }] })
const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }],
}

/** What the model was told of its tool call, from the request that followed it. */
function toldOf(key: string): string {
  const after = model.callsWith(key).at(-1)!
  return JSON.stringify(after.body.messages.at(-1))
}

describe.each([
  [
    'stalls past the tool timeout',
    (text: string) => mcp.delay('echo', 3_000) ?? text,
    /did not answer within 1 s/,
  ],
  [
    'drops the connection mid-call',
    (text: string) => mcp.breakNext('echo', 'reset') ?? text,
    /could not be reached or dropped the call/,
  ],
  [
    'answers what is not JSON-RPC',
    (text: string) => mcp.breakNext('echo', 'malformed') ?? text,
    /answered something that is not a tool result/,
  ],
] as const)('a tool server that %s', (_, breakIt, words) => {
  it('is a tool error the run goes on from; the call is made once', async () => {
    const s = await tenant()
    const text = `run-${randomUUID()}`
    breakIt(text)
    model.script(s.key, echo(text), finish)
    const task = await t.call('POST', '/v1/tasks', {
      ...s.as,
      body: {
        name: `Echo ${text.slice(4, 12)}`,
        teamId: s.team.id,
        assigneeRole: 'ceo',
        tools: ['vcs.echo'],
      },
    })
    expect(task.status, JSON.stringify(task.body)).toBe(201)
    const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...s.as, body: {} })
    const done = await waitForRun(t, run.body.id, ['succeeded', 'failed'], 20_000, s.e.token)
    mcp.delay('echo', 0)
    expect(done.run.status).toBe('succeeded')
    expect(toldOf(s.key)).toMatch(words)
    expect(toldOf(s.key)).toMatch(/"is_error":true/)
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === text)).toHaveLength(1)
  })
})

describe('in a chat', () => {
  it('a stalled call is answered in the chat as not answered, and the reply goes on', async () => {
    const s = await tenant()
    const member = await t.call('POST', '/v1/members', { ...s.as, body: { name: 'Tool Chat' } })
    await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: member.body.id },
    })
    const text = `chat-${randomUUID()}`
    mcp.delay('echo', 3_000)
    model.script(s.key, echo(text), { text: 'The tool did not answer; I will not try again.' })
    const chat = await t.call('POST', '/v1/chats', { ...s.as, body: { memberId: member.body.id } })
    await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      ...s.as,
      body: { content: 'Echo' },
    })
    let detail!: ChatDetail
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, s.as)).body)
      return detail.messages.some((m) => m.toolCall?.status === 'waiting')
    }, 10_000)
    const call = detail.messages.find((m) => m.toolCall)!
    await t.call('POST', `/v1/chats/${chat.body.id}/tool-calls/${call.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, s.as)).body)
      return !detail.replying && detail.messages.at(-1)?.role === 'member'
    }, 15_000)
    mcp.delay('echo', 0)
    expect(detail.messages.find((m) => m.id === call.id)!.toolCall).toMatchObject({
      status: 'failed',
      result: expect.stringMatching(/did not answer within 1 s/),
    })
    expect(detail.messages.at(-1)!.content).toBe('The tool did not answer; I will not try again.')
    expect(mcp.callsOf('echo').filter((c) => c.arguments.text === text)).toHaveLength(1)
  })
})
