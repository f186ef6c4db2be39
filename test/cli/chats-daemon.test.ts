import { randomBytes, randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { Chat, ChatDetail, ChatMessage } from '../../shared/schemas/chats.js'
import { Gate } from '../../shared/schemas/gates.js'
import { startFakeMcpServer, type FakeMcpServer } from '../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// osctl chats end to end: osctl against a real daemon whose member replies through the fake model
// provider (scripted per key) and calls a tool of the fake MCP server. test/cli/chats.test.ts covers
// the verbs with a fake API; this is what a person at a terminal runs, the whole of osctl in process
// (issue 28). The chat screen on a pseudo-terminal is test/cli/tui/chat-pty.test.ts.

let model: FakeModelProvider
let mcp: FakeMcpServer
let env: Record<string, string>
let json: CliDaemon['json']
let memberName: string
const key = `key-${randomUUID()}`
const mcpToken = `mcp-${randomUUID()}`

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  const cli = await startCliDaemon('Chats Cli', {
    OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    OSD_PROVIDER_A_BASE_URL: model.url,
    OSD_PROVIDER_B_BASE_URL: model.url,
  })
  env = cli.env
  json = cli.json
  await json(['api', 'POST', '/llm/bindings', '-d', JSON.stringify({ apiKey: key })])
  memberName = `Grace ${randomUUID().slice(0, 6)}`
  const member = await json([
    'api',
    'POST',
    '/members',
    '-d',
    JSON.stringify({ name: memberName, persona: 'You speak like a ship captain.' }),
  ])
  await json([
    'api',
    'POST',
    '/tools/bindings',
    '-d',
    JSON.stringify({
      name: 'vcs',
      url: mcp.url,
      token: mcpToken,
      layer: 'member',
      layerId: member.id,
    }),
  ])
}, 120_000)

afterAll(async () => {
  await mcp?.close()
  await model?.close()
})

describe('osctl chats against a daemon', () => {
  it('opens, sends and waits for the reply, decides a tool call, lists, counts unread, closes', async () => {
    const chat = Chat.parse(await json(['chats', 'new', memberName]))
    expect(chat).toMatchObject({ status: 'open', purpose: null, replying: false })

    // A plain reply: --wait prints what the member answered.
    model.script(key, { text: 'Aye, all hands on deck.' })
    const replies = z
      .array(ChatMessage)
      .parse(await json(['chats', 'send', chat.id, 'hello', '--wait']))
    expect(replies.map((m) => [m.role, m.content])).toEqual([['member', 'Aye, all hands on deck.']])
    expect(model.callsWith(key)).toHaveLength(1)

    // A reply that calls a tool waits for the person; --wait ends with the call waiting.
    model.script(
      key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'ahoy' } }] },
      { text: 'The echo said ahoy.' },
    )
    const waiting = z
      .array(ChatMessage)
      .parse(await json(['chats', 'send', chat.id, 'echo ahoy', '--wait']))
    const call = waiting.find((m) => m.toolCall)!
    expect(call.toolCall).toMatchObject({
      name: 'vcs.echo',
      arguments: { text: 'ahoy' },
      status: 'waiting',
    })
    expect(mcp.callsOf('echo')).toHaveLength(0)
    // The same in words, for a person: the call is named with the verb that decides it.
    const text = await osctl(['chats', 'get', chat.id], env)
    expect(text.exitCode, text.stderr).toBe(0)
    expect(text.stdout).toContain('vcs.echo')
    expect(text.stdout).toContain(call.id)

    const decided = await json(['chats', 'decide', chat.id, call.id, '--allow'])
    expect(JSON.stringify(decided)).toContain('vcs.echo')
    // The reply goes on: the tool runs once and the member answers; it is unread until read.
    await eventually(
      async () => (await json(['chats', 'unread'])).count === 1,
      20_000,
      'the reply after the allowed call',
    )
    expect(mcp.callsOf('echo')).toHaveLength(1)
    const listed = z.array(Chat).parse(await json(['chats', 'list']))
    expect(listed.find((c) => c.id === chat.id)).toMatchObject({
      status: 'open',
      unread: 1,
      replying: false,
    })
    const detail = ChatDetail.parse(await json(['chats', 'get', chat.id]))
    expect(detail.messages.at(-1)).toMatchObject({
      role: 'member',
      content: 'The echo said ahoy.',
    })
    expect(detail.messages.find((m) => m.id === call.id)!.toolCall).toMatchObject({
      status: 'done',
      result: expect.stringContaining('ahoy'),
    })
    expect(await json(['chats', 'unread'])).toEqual({ count: 0 })
    const again = await osctl(['chats', 'decide', chat.id, call.id, '--allow'], env)
    expect(again.exitCode).not.toBe(0)
    expect(again.stderr).toContain('already_decided')

    const closed = Chat.parse(await json(['chats', 'close', chat.id]))
    expect(closed).toMatchObject({ id: chat.id, status: 'closed', outcome: 'closed' })
    const refused = await osctl(['chats', 'send', chat.id, 'still there?'], env)
    expect(refused.exitCode).not.toBe(0)
    expect(refused.stderr).toContain('chat_closed')
    expect(model.callsWith(key)).toHaveLength(3)
  }, 120_000)
  it('opens a chat saying something and waits for the reply, in one command', async () => {
    model.script(key, { text: 'Aye, the report sails on Monday.' })
    const res = await osctl(['chats', 'new', memberName, '--message', 'When?', '--wait'], env)
    expect(res.exitCode, res.stderr).toBe(0)
    const id = /^chat (\S+) with /.exec(res.stderr)?.[1]
    expect(res.stderr).toBe(
      `chat ${id} with ${memberName}: go on in \`osctl chat '${memberName}'\`, or with \`osctl chats send ${id} TEXT --wait\`\n`,
    )
    expect(res.stdout).toMatch(
      new RegExp(
        `^\\[\\d\\d:\\d\\d\\] you: When\\?\\n\\[\\d\\d:\\d\\d\\] ${memberName}: Aye, the report sails on Monday\\.\\n$`,
      ),
    )
    // --json: the chat as the daemon answers it afterwards, the conversation in it.
    model.script(key, { text: 'Monday, captain.' })
    const detail = ChatDetail.parse(
      await json(['chats', 'new', memberName, '--message', 'When again?', '--wait']),
    )
    expect(detail.messages!.map((m) => [m.role, m.content])).toEqual([
      ['person', 'When again?'],
      ['member', 'Monday, captain.'],
    ])
    const lone = await osctl(['chats', 'new', memberName, '--wait'], env)
    expect([lone.exitCode, lone.stderr]).toEqual([
      2,
      'error: --wait and --timeout go with --message\n',
    ])
  }, 60_000)

  it('a question of a chat is listed by osctl gates with its chat, and leaves the list when the chat closes', async () => {
    const chat = Chat.parse(await json(['chats', 'new', memberName]))
    model.script(key, {
      toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Port or starboard?'] } }],
    })
    const asked = z
      .array(ChatMessage)
      .parse(await json(['chats', 'send', chat.id, 'which side?', '--wait']))
    const gateId = asked.find((m) => m.question)!.question!.gateId
    const gates = z.array(Gate).parse(await json(['gates', 'list']))
    expect(gates.find((g) => g.id === gateId)).toMatchObject({
      kind: 'question',
      chatId: chat.id,
      runId: null,
    })
    // In words, a person sees whose question it is.
    const listedText = await osctl(['gates', 'list'], env)
    expect(listedText.stdout).toContain(`chat ${chat.id}`)
    const got = await osctl(['gates', 'get', gateId], env)
    expect(got.exitCode, got.stderr).toBe(0)
    expect(got.stdout).toMatch(new RegExp(`chat\\s+${chat.id}`))
    await json(['chats', 'close', chat.id])
    const after = z.array(Gate).parse(await json(['gates', 'list']))
    expect(after.map((g) => g.id)).not.toContain(gateId)
  }, 60_000)

  it('shows a rejected question as rejected with its note, an answered one with its answer (issue 51)', async () => {
    const chat = Chat.parse(await json(['chats', 'new', memberName]))
    const asking = (question: string) => ({
      toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: [question] } }],
    })
    model.script(key, asking('Port or starboard?'), { text: 'Aye, we hold course.' })
    const first = z
      .array(ChatMessage)
      .parse(await json(['chats', 'send', chat.id, 'which side?', '--wait']))
    const rejectedGate = first.find((m) => m.question)!.question!.gateId
    // Rejected through the gate's own route, as POST /v1/gates/{id}/decision.
    await json(['gates', 'reject', rejectedGate, '--note', 'Stay in port'])
    await eventually(
      async () => ChatDetail.parse(await json(['chats', 'get', chat.id])).replying === false,
      20_000,
      'the reply after the rejection',
    )
    model.script(key, asking('Which flag?'), { text: 'The blue one it is.' })
    const second = z
      .array(ChatMessage)
      .parse(await json(['chats', 'send', chat.id, 'and the flag?', '--wait']))
    const answeredGate = second.find((m) => m.question)!.question!.gateId
    await json(['chats', 'answer', chat.id, '--answer', 'Blue'])
    await eventually(
      async () => ChatDetail.parse(await json(['chats', 'get', chat.id])).replying === false,
      20_000,
      'the reply after the answer',
    )

    const got = await osctl(['chats', 'get', chat.id], env)
    expect(got.exitCode, got.stderr).toBe(0)
    expect(got.stdout).toContain(
      `  question (rejected), gate ${rejectedGate}:\n    1. Port or starboard?\n    → rejected: Stay in port\n`,
    )
    expect(got.stdout).toContain(
      `  question (answered), gate ${answeredGate}:\n    1. Which flag?\n    → answered: Blue\n`,
    )
    const md = await osctl(['chats', 'export', chat.id, '--format', 'md'], env)
    expect(md.exitCode, md.stderr).toBe(0)
    expect(md.stdout).toContain(
      '1. Port or starboard?\n\n**Decision:** rejected\n\n- Note: Stay in port\n',
    )
    expect(md.stdout).toContain('1. Which flag?\n\n**Answer:**\n\n- Answer: Blue\n')
    expect(md.stdout).not.toContain('approved')
  }, 60_000)

  it('shows a question rejected through the chat gate route as rejected', async () => {
    const chat = Chat.parse(await json(['chats', 'new', memberName]))
    model.script(
      key,
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Weigh anchor?'] } }] },
      { text: 'We stay.' },
    )
    await json(['chats', 'send', chat.id, 'go?', '--wait'])
    await json(['gates', 'chat', chat.id, '--decision', 'reject', '--note', 'Storm coming'])
    const got = await osctl(['chats', 'get', chat.id], env)
    expect(got.stdout).toMatch(
      /question \(rejected\), gate .*:\n {4}1\. Weigh anchor\?\n {4}→ rejected: Storm coming\n/,
    )
    const md = await osctl(['chats', 'export', chat.id, '--format', 'md'], env)
    expect(md.stdout).toContain('**Decision:** rejected\n\n- Note: Storm coming')
  }, 60_000)
})
