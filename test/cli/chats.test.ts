import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  answerQuestion,
  closeChat,
  decideToolCall,
  getChat,
  listChats,
  listGrants,
  newChat,
  openChatScreen,
  revokeGrant,
  sendMessage,
  stopReply,
  unreadChats,
} from '../../cli/commands/chats.js'
import { ApiRequestError, CliError, exitCodes } from '../../cli/errors.js'
import { Chat, ChatDetail, ChatMessage, ChatToolGrant } from '../../shared/schemas/chats.js'
import { FakeApi, fakeDeps, type Answer, type Sent } from '../helpers/cli.js'

// osctl chats, in process: the actions called with deps of the test's own (a client whose transport
// answers what the test says for each route and records what was sent, and captured output): the
// answers are the wire shapes of shared/schemas/chats.ts, parsed by them. The built osctl against a
// real daemon is test/cli/chats-daemon.test.ts.

process.env.TZ = 'UTC'

async function failure(promise: Promise<unknown>): Promise<CliError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(CliError)
  return err as CliError
}

const ada = { id: randomUUID(), name: 'Ada Lovelace', email: 'ada@acme.example' }
const chatId = randomUUID()

function chat(overrides: Partial<Chat> = {}): Chat {
  return Chat.parse({
    id: chatId,
    memberId: ada.id,
    purpose: null,
    status: 'open',
    outcome: null,
    taskId: null,
    unread: 0,
    replying: false,
    lastMessageAt: '2026-03-02T11:58:00.000Z',
    createdAt: '2026-03-02T11:00:00.000Z',
    ...overrides,
  })
}

function message(overrides: Partial<ChatMessage> = {}): ChatMessage {
  return ChatMessage.parse({
    id: randomUUID(),
    role: 'member',
    content: 'Hello',
    toolCall: null,
    question: null,
    notice: false,
    stopped: false,
    createdAt: '2026-03-02T11:58:00.000Z',
    ...overrides,
  })
}

function detail(messages: ChatMessage[], overrides: Partial<Chat> = {}): ChatDetail {
  return ChatDetail.parse({ ...chat(overrides), messages })
}

const members = (req: Sent): Answer | undefined =>
  req.method === 'GET' && req.path === '/members' ? { body: [ada] } : undefined

describe('osctl chats, in process', () => {
  it('list names the member by email and prints a table; --json the API array', async () => {
    const chats = [
      chat({ unread: 2 }),
      chat({ id: randomUUID(), status: 'closed', replying: false }),
    ]
    const api = new FakeApi((req) => members(req) ?? { body: chats })
    const { deps, stdout } = fakeDeps(api)
    await listChats(deps, { member: 'ada@acme.example' })
    expect(api.sent.find((s) => s.path === '/chats')).toMatchObject({
      method: 'GET',
      path: '/chats',
      query: { memberId: ada.id },
    })
    expect(stdout().split('\n')[0]).toMatch(/^ID\s+MEMBER\s+STATUS\s+UNREAD\s+LAST MESSAGE$/)
    expect(stdout()).toMatch(new RegExp(`^${chatId}\\s+Ada Lovelace\\s+open\\s+2\\s+`, 'm'))

    const json = fakeDeps(new FakeApi(() => ({ body: chats })), { json: true })
    await listChats(json.deps, {})
    expect(Chat.array().parse(JSON.parse(json.stdout()))).toEqual(chats)
  })

  it('get prints the fields and the transcript with times, tool calls and questions', async () => {
    const call = randomUUID()
    const gateId = randomUUID()
    const messages = [
      message({ role: 'person', content: 'Merge the fix?', createdAt: '2026-03-02T11:57:00.000Z' }),
      message({
        content: 'I will merge it.',
        toolCall: {
          id: call,
          name: 'vcs.merge',
          arguments: { number: 7 },
          status: 'waiting',
          result: null,
          mustGate: false,
        },
      }),
      message({
        content: '',
        question: {
          gateId,
          questions: ['Ship today?'],
          choices: [{ key: 'yes', label: 'Yes' }],
          status: 'waiting',
          answer: null,
        },
      }),
      // A reply the person stopped (issue 51): what it had written, marked.
      message({ content: 'The release notes say', stopped: true }),
    ]
    const api = new FakeApi((req) => members(req) ?? { body: detail(messages) })
    const { deps, stdout } = fakeDeps(api)
    await getChat(deps, chatId, { limit: '20' })
    expect(stdout()).toContain('Ada Lovelace: The release notes say\n  (stopped)\n')
    expect(api.sent[0]).toMatchObject({ path: `/chats/${chatId}`, query: { limit: '20' } })
    expect(stdout()).toMatch(new RegExp(`^member +Ada Lovelace \\(${ada.id}\\)$`, 'm'))
    expect(stdout()).toContain(
      '[11:57] you: Merge the fix?\n[11:58] Ada Lovelace: I will merge it.\n',
    )
    expect(stdout()).toContain('  tool call vcs.merge {"number":7}: waiting\n')
    expect(stdout()).toContain(
      `    decide: osctl chats decide ${chatId} ${call} --allow|--always|--deny`,
    )
    expect(stdout()).toContain(
      `  question (waiting), gate ${gateId}:\n    1. Ship today?\n    choices: yes (Yes)\n`,
    )
    expect(stdout()).toMatch(/^replying +no$/m)
  })

  it('get refuses a limit outside 1 to 200 and a chat that is not an id, sending nothing', async () => {
    const api = new FakeApi(() => ({ body: detail([]) }))
    const { deps } = fakeDeps(api)
    expect((await failure(getChat(deps, chatId, { limit: '0' }))).exitCode).toBe(exitCodes.usage)
    expect((await failure(getChat(deps, chatId, { limit: '201' }))).exitCode).toBe(exitCodes.usage)
    expect((await failure(getChat(deps, 'ada', {}))).message).toBe(
      'a chat is named by its id or its first 8 or more characters; "ada" has 3',
    )
    expect(api.sent).toEqual([])
  })

  it('new opens a chat with a member, or a create-task chat with a greeting inside', async () => {
    const api = new FakeApi((req) => members(req) ?? { status: 201, body: chat() })
    const { deps, stdout } = fakeDeps(api)
    await newChat(deps, 'Ada Lovelace', {})
    expect(api.sent.find((s) => s.method === 'POST')).toMatchObject({
      method: 'POST',
      path: '/chats',
      body: { memberId: ada.id },
    })
    expect(stdout()).toMatch(new RegExp(`^id +${chatId}$`, 'm'))

    const greeting = message({ content: 'What task shall we make?' })
    const task = new FakeApi(() => ({
      status: 201,
      body: detail([greeting], { purpose: 'create_task' }),
    }))
    const made = fakeDeps(task)
    await newChat(made.deps, undefined, { createTask: true })
    expect(task.sent[0]!.body).toEqual({ purpose: 'create_task' })
    expect(made.stdout()).toMatch(/^purpose +create_task$/m)
    expect(made.stdout()).toContain('member: What task shall we make?')

    expect((await failure(newChat(deps, undefined, {}))).exitCode).toBe(exitCodes.usage)
  })

  it('new passes no_coo on as the API error', async () => {
    const api = new FakeApi(() => ({
      status: 409,
      body: { error: 'no_coo', message: 'nobody holds the coo role' },
    }))
    const err = await failure(newChat(fakeDeps(api).deps, undefined, { createTask: true }))
    expect(err).toBeInstanceOf(ApiRequestError)
    expect(err).toMatchObject({ code: 'no_coo', status: 409, exitCode: exitCodes.failed })
  })

  it('send posts the content (stdin with "-") and prints the stored message', async () => {
    const stored = message({ role: 'person', content: 'From a file' })
    const api = new FakeApi(() => ({ status: 201, body: stored }))
    const { deps, stdout } = fakeDeps(api, { stdin: 'From a file\n' })
    await sendMessage(deps, chatId, '-', {})
    expect(api.sent).toEqual([
      {
        method: 'POST',
        path: `/chats/${chatId}/messages`,
        query: {},
        body: { content: 'From a file' },
      },
    ])
    expect(stdout()).toBe('[11:58] you: From a file\n')
    const empty = await failure(sendMessage(fakeDeps(api, { stdin: ' \n' }).deps, chatId, '-', {}))
    expect([empty.exitCode, empty.message]).toEqual([exitCodes.usage, 'the message is empty'])
    expect(api.sent).toHaveLength(1)
  })

  it('send answers 409 chat_replying as the API error, exit 1', async () => {
    const api = new FakeApi(() => ({
      status: 409,
      body: { error: 'chat_replying', message: 'the member is still replying' },
    }))
    const err = await failure(sendMessage(fakeDeps(api).deps, chatId, 'again', {}))
    expect(err).toMatchObject({ code: 'chat_replying', exitCode: exitCodes.failed })
  })

  it('send --wait long-polls from the sent message and prints the reply as it comes', async () => {
    const stored = message({ role: 'person', content: 'Status?' })
    const part = message({ content: 'Looking…', createdAt: '2026-03-02T11:59:00.000Z' })
    const reply = message({ content: 'All green.', createdAt: '2026-03-02T12:00:00.000Z' })
    const polls = [
      detail([stored], { replying: true }), // the wait ran out: nothing yet
      detail([stored, part], { replying: true }),
      detail([stored, part, reply], { replying: false }),
    ]
    const api = new FakeApi(
      (req) =>
        members(req) ??
        (req.method === 'POST' ? { status: 201, body: stored } : { body: polls.shift() }),
    )
    const { deps, stdout } = fakeDeps(api)
    await sendMessage(deps, chatId, 'Status?', { wait: true })
    const gets = api.sent.filter((s) => s.path === `/chats/${chatId}`)
    expect(gets.map((g) => g.query)).toEqual([
      { afterMessageId: stored.id, waitSeconds: '30' },
      { afterMessageId: stored.id, waitSeconds: '30' },
      { afterMessageId: part.id, waitSeconds: '2' },
    ])
    expect(stdout()).toBe('[11:59] Ada Lovelace: Looking…\n[12:00] Ada Lovelace: All green.\n')
  })

  it('send --wait stops at a tool call waiting for the person and names the verb; --json the replies', async () => {
    const stored = message({ role: 'person', content: 'Merge it' })
    const asks = message({
      content: 'Merging.',
      toolCall: {
        id: randomUUID(),
        name: 'vcs.merge',
        arguments: {},
        status: 'waiting',
        result: null,
        mustGate: false,
      },
    })
    const api = new FakeApi(
      (req) =>
        req.method === 'POST'
          ? { status: 201, body: stored }
          : { body: detail([asks], { replying: true }) }, // only the messages after, as the daemon may answer
    )
    const { deps, stdout } = fakeDeps(api, { json: true })
    await sendMessage(deps, chatId, 'Merge it', { wait: true })
    expect(ChatMessage.array().parse(JSON.parse(stdout()))).toEqual([asks])
    const human = fakeDeps(api)
    await sendMessage(human.deps, chatId, 'Merge it', { wait: true })
    expect(human.stdout()).toContain(`decide: osctl chats decide ${chatId} ${asks.toolCall!.id}`)
    expect(human.stderr()).toBe('the member waits for your decision on a tool call\n')
  })

  it('send --wait asks again after a second, not at once, when a held read answers at once with nothing new', async () => {
    // osd answers at once, as waitSeconds=0, past a token's share of held long-polls.
    const stored = message({ role: 'person', content: 'Hi' })
    const api = new FakeApi((req) =>
      req.method === 'POST'
        ? { status: 201, body: stored }
        : { body: detail([stored], { replying: true }) },
    )
    const began = Date.now()
    const err = await failure(
      sendMessage(fakeDeps(api).deps, chatId, 'Hi', { wait: true, timeout: '2' }),
    )
    expect(err.exitCode).toBe(exitCodes.pending)
    // About one read a second for the 2 s (asked again at once: thousands).
    const reads = api.sent.filter((s) => s.method === 'GET')
    expect(reads.length).toBeGreaterThanOrEqual(2)
    expect(reads.length).toBeLessThanOrEqual(4)
    expect(Date.now() - began).toBeGreaterThanOrEqual(1900)
  })

  it('send --wait --timeout gives up with exit 8 and says where to read the reply', async () => {
    const stored = message({ role: 'person', content: 'Hi' })
    const api = new FakeApi((req) =>
      req.method === 'POST'
        ? { status: 201, body: stored }
        : { body: detail([stored], { replying: true }) },
    )
    const err = await failure(
      sendMessage(fakeDeps(api).deps, chatId, 'Hi', { wait: true, timeout: '0' }),
    )
    expect(err.exitCode).toBe(exitCodes.pending)
    expect(err.message).toBe(`no reply yet after 0s; read it later with osctl chats get ${chatId}`)
    expect(api.sent.filter((s) => s.method === 'GET')[0]!.query.waitSeconds).toBe('0')
    const usage = await failure(sendMessage(fakeDeps(api).deps, chatId, 'Hi', { timeout: '5' }))
    expect(usage.exitCode).toBe(exitCodes.usage)
  })

  it('decide sends one decision and reads the answer as a message or a call', async () => {
    const call = randomUUID()
    const toolCall = {
      id: call,
      name: 'vcs.merge',
      arguments: {},
      status: 'allowed' as const,
      result: null,
      mustGate: false,
    }
    const api = new FakeApi(() => ({ body: message({ toolCall }) }))
    const { deps, stdout } = fakeDeps(api)
    await decideToolCall(deps, chatId, call, { always: true })
    expect(api.sent[0]).toMatchObject({
      method: 'POST',
      path: `/chats/${chatId}/tool-calls/${call}/decision`,
      body: { decision: 'always' },
    })
    expect(stdout()).toBe('allowed (always) vcs.merge (allowed)\n')

    const bare = new FakeApi(() => ({ body: { ...toolCall, status: 'denied' } }))
    const denied = fakeDeps(bare)
    await decideToolCall(denied.deps, chatId, call, { deny: true })
    expect(denied.stdout()).toBe('denied vcs.merge (denied)\n')

    for (const opts of [{}, { allow: true, deny: true }]) {
      expect((await failure(decideToolCall(deps, chatId, call, opts))).exitCode).toBe(
        exitCodes.usage,
      )
    }
    const decided = new FakeApi(() => ({
      status: 409,
      body: { error: 'tool_call_decided', message: 'already decided' },
    }))
    expect(
      await failure(decideToolCall(fakeDeps(decided).deps, chatId, call, { allow: true })),
    ).toMatchObject({
      status: 409,
    })
  })

  it('answer approves the chat question gate with the answers and the choice', async () => {
    const gateId = randomUUID()
    const api = new FakeApi(() => ({ status: 201, body: { id: gateId } }))
    const { deps, stdout } = fakeDeps(api)
    await answerQuestion(deps, chatId, { gate: gateId, answer: ['Friday', 'Ada'], choice: 'yes' })
    expect(api.sent[0]).toEqual({
      method: 'POST',
      path: `/gates/chat/${chatId}/decision`,
      query: {},
      body: { decision: 'approve', gateId, answers: ['Friday', 'Ada'], choice: 'yes' },
    })
    expect(stdout()).toBe(`answered question ${gateId}; the reply goes on\n`)
    await answerQuestion(deps, chatId, { choice: 'no' })
    expect(api.sent[1]!.body).toEqual({ decision: 'approve', choice: 'no' })
    expect((await failure(answerQuestion(deps, chatId, {}))).exitCode).toBe(exitCodes.usage)
    expect(api.sent).toHaveLength(2)
  })

  it('stop, close, unread, grants and revoke', async () => {
    const grant = ChatToolGrant.parse({
      id: randomUUID(),
      memberId: ada.id,
      tool: 'vcs.merge',
      createdAt: '2026-03-02T11:00:00.000Z',
    })
    const api = new FakeApi(
      (req) =>
        members(req) ??
        {
          [`POST /chats/${chatId}/close`]: { body: chat({ status: 'closed', outcome: 'closed' }) },
          [`POST /chats/${chatId}/reply/stop`]: { status: 202, body: { stopping: true } },
          'GET /chats/unread': { body: { count: 3 } },
          'GET /chats/tool-grants': { body: [grant] },
          [`DELETE /chats/tool-grants/${grant.id}`]: { status: 204 },
        }[`${req.method} ${req.path}`] ?? {
          status: 404,
          body: { error: 'not_found', message: req.path },
        },
    )
    const { deps, stdout } = fakeDeps(api, { confirm: true })
    await stopReply(deps, chatId)
    await closeChat(deps, chatId)
    await unreadChats(deps)
    await listGrants(deps, { member: 'ada@acme.example' })
    await revokeGrant(deps, grant.id, {})
    expect(stdout()).toContain(
      `stopping the reply in chat ${chatId}: what it wrote is kept, marked stopped\nclosed chat ${chatId}\n3\n`,
    )
    expect(stdout()).toMatch(new RegExp(`^${grant.id}\\s+${ada.id}\\s+vcs\\.merge\\s+`, 'm'))
    expect(stdout()).toContain(`withdrew tool grant ${grant.id}\n`)
    expect(api.sent.find((s) => s.path === '/chats/tool-grants')!.query).toEqual({
      memberId: ada.id,
    })

    const refused = new FakeApi(() => ({ status: 204 }))
    const err = await failure(revokeGrant(fakeDeps(refused).deps, grant.id, {}))
    expect(err.message).toMatch(/refusing without --yes when not on a terminal$/)
    expect(refused.sent).toEqual([])
  })

  it('chat refuses without a terminal, names the verbs, and reads nothing', async () => {
    const api = new FakeApi(() => ({ body: [] }))
    const err = await failure(openChatScreen(fakeDeps(api).deps, undefined))
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(err.message).toMatch(/^chat is interactive and needs a terminal/)
    expect(err.message).toContain('osctl chats send CHAT TEXT [--wait]')
    expect(err.message).toContain('osctl chats decide CHAT CALL --allow|--always|--deny')
    expect(api.sent).toEqual([])
  })
})

beforeAll(() => {
  // vitest runs without a terminal: the screen's refusal above depends on it.
  expect(process.stdin.isTTY && process.stdout.isTTY).toBeFalsy()
})
