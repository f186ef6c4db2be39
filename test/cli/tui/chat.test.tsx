import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { render } from 'ink-testing-library'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { apiError } from '../../../cli/client.js'
import { fakeTerminal } from '../../helpers/terminal.js'
import { ChatController, type ChatScreenClient } from '../../../cli/tui/chat-controller.js'
import { ChatApp, renderChat } from '../../../cli/tui/chat.js'
import type { Chat, ChatDetail, ChatMessage } from '../../../shared/schemas/chats.js'
import { hasScript, osctlBin } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'

// The chat screen with a fake client (the methods of ApiClient it uses): the long-poll is a request
// the fake holds until the test adds a message, as the daemon holds GET /v1/chats/{id} with waitSeconds.
// The chat routes are built on another branch at the same time, so the run on a real pseudo-terminal
// (the built osctl under `script`) talks to a small HTTP server of this file speaking the fixed wire
// shapes of shared/schemas/chats.ts, not to a daemon.

process.env.TZ = 'UTC'
const now = Date.parse('2026-03-02T12:00:00.000Z')

const ada = { id: '11111111-1111-4111-8111-111111111111', name: 'Ada', email: 'ada@acme.example' }
const bob = { id: '22222222-2222-4222-8222-222222222222', name: 'Bob', email: 'bob@acme.example' }

function chat(fields: Partial<Chat> = {}): Chat {
  return {
    id: '33333333-3333-4333-8333-333333333333',
    memberId: ada.id,
    purpose: null,
    status: 'open',
    outcome: null,
    taskId: null,
    unread: 0,
    replying: false,
    lastMessageAt: '2026-03-02T11:58:00.000Z',
    createdAt: '2026-03-02T11:00:00.000Z',
    ...fields,
  }
}

let clock = Date.parse('2026-03-02T11:50:00.000Z')
function message(fields: Partial<ChatMessage> = {}): ChatMessage {
  clock += 60_000
  return {
    id: randomUUID(),
    role: 'member',
    content: 'Hello',
    toolCall: null,
    question: null,
    notice: false,
    createdAt: new Date(clock).toISOString(),
    ...fields,
  }
}

/**
 * A fake daemon in memory: chats with their messages; GET /chats/{id} with afterMessageId waits (until
 * a message is added or the request is aborted) while nothing is newer.
 */
function fakeClient(chats: ChatDetail[], members = [ada, bob]) {
  const waiters = new Set<() => void>()
  const wake = () => {
    for (const w of [...waiters]) w()
  }
  const find = (id: string) => chats.find((c) => c.id === id)!
  const fake = {
    chats,
    sendFailure: null as unknown,
    /** Adds a message to a chat as the member's reply would, waking the long-polls. */
    add(id: string, m: ChatMessage, patch: Partial<Chat> = {}) {
      Object.assign(find(id), patch)
      find(id).messages.push(m)
      wake()
    },
    get: vi.fn(async (path: string, query?: Record<string, unknown>): Promise<any> => {
      if (path === '/members') return members
      if (path === '/chats')
        return chats
          .filter((c) => !query?.memberId || c.memberId === query.memberId)
          .map(({ messages: _m, ...c }) => c)
      const id = /^\/chats\/([^/]+)$/.exec(path)![1]!
      return structuredClone(find(id))
    }),
    post: vi.fn(async (path: string, body?: any): Promise<any> => {
      if (path === '/chats') {
        const made: ChatDetail = {
          ...chat({
            id: randomUUID(),
            memberId: body.memberId ?? bob.id,
            purpose: body.purpose ?? null,
          }),
          messages: body.purpose ? [message({ content: 'Which task shall we make?' })] : [],
        }
        chats.push(made)
        return structuredClone(made)
      }
      let m = /^\/chats\/([^/]+)\/messages$/.exec(path)
      if (m) {
        if (fake.sendFailure) throw fake.sendFailure
        const stored = message({ role: 'person', content: body.content })
        fake.add(m[1]!, stored, { replying: true })
        return stored
      }
      m = /^\/chats\/([^/]+)\/tool-calls\/([^/]+)\/decision$/.exec(path)
      if (m) {
        const held = find(m[1]!).messages.find((x) => x.toolCall?.id === m![2])!
        held.toolCall!.status = body.decision === 'deny' ? 'denied' : 'allowed'
        return held
      }
      m = /^\/gates\/chat\/([^/]+)\/decision$/.exec(path)
      if (m) {
        const held = find(m[1]!).messages.find((x) => x.question?.status === 'waiting')!
        held.question!.status = 'answered'
        return { id: held.question!.gateId }
      }
      throw new Error(`unexpected POST ${path}`)
    }),
    request: vi.fn(
      async (
        _method: string,
        path: string,
        options: { query?: Record<string, unknown>; signal?: AbortSignal } = {},
      ): Promise<any> => {
        const id = /^\/chats\/([^/]+)$/.exec(path)![1]!
        const after = options.query?.afterMessageId as string | undefined
        const newer = () => {
          const all = find(id).messages
          const at = all.findIndex((x) => x.id === after)
          return after && at === -1 ? all : all.slice(at + 1)
        }
        while (newer().length === 0) {
          await new Promise<void>((resolve, reject) => {
            const done = () => (waiters.delete(done), resolve())
            waiters.add(done)
            options.signal?.addEventListener('abort', () => {
              waiters.delete(done)
              reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))
            })
          })
        }
        return structuredClone({ ...find(id), messages: newer() })
      },
    ),
  }
  return fake
}

type Fake = ReturnType<typeof fakeClient>

const screens: { stop(): void; unmount(): void }[] = []
afterEach(() => {
  for (const s of screens.splice(0)) {
    s.stop()
    s.unmount()
  }
})

async function open(client: Fake, memberId?: string) {
  const controller = new ChatController(client as unknown as ChatScreenClient, {
    memberId,
    minGapMs: 50,
    retryMs: 50,
  })
  const ui = render(<ChatApp controller={controller} now={() => now} />)
  screens.push({ stop: () => controller.stop(), unmount: ui.unmount })
  void controller.start()
  const frame = () => ui.lastFrame() ?? ''
  await vi.waitFor(() => expect(frame()).not.toMatch(/Reading the chat/))
  const press = async (...keys: string[]) => {
    for (const key of keys) {
      ui.stdin.write(key)
      await new Promise((r) => setTimeout(r, 15))
    }
  }
  return { controller, ui, frame, press }
}

const enter = '\r'
const escape = '\x1b'
const down = '\x1b[B'
const ctrlN = '\x0e'
const ctrlD = '\x04'

function adaChat(messages: ChatMessage[], fields: Partial<Chat> = {}): ChatDetail {
  return { ...chat(fields), messages }
}

describe('the chat screen', () => {
  it("opens the member's chat: the conversation with times, a prompt and the keys", async () => {
    const hi = message({ role: 'person', content: 'How did the nightly report go?' })
    const reply = message({ content: 'It went out at 06:10, all figures in.' })
    const { frame } = await open(fakeClient([adaChat([hi, reply])]), ada.id)
    expect(frame()).toMatchInlineSnapshot(`
      "osctl chat · Ada  open

      11:51 you
        How did the nightly report go?
      11:52 Ada
        It went out at 06:10, all figures in.

      ›

      Enter send · PgUp/PgDn scroll · Esc chats · Ctrl+N new task chat · Ctrl+D quit"
    `)
  })

  it('sends what is typed, shows the member replying, and the reply as it comes (long-poll)', async () => {
    const client = fakeClient([adaChat([])])
    const { frame, press } = await open(client, ada.id)
    expect(frame()).toContain('No messages yet: say something to Ada.')
    await press('Status?', enter)
    await vi.waitFor(() => expect(frame()).toMatch(/^\d\d:\d\d you\n {2}Status\?$/m))
    expect(frame()).toContain('Ada is replying…')
    expect(frame()).toMatch(/^›\s*$/m) // the prompt emptied
    expect(client.post).toHaveBeenCalledWith(`/chats/${chat().id}/messages`, { content: 'Status?' })
    // Idle: the long-poll is held, not repeated.
    await new Promise((r) => setTimeout(r, 200))
    const polls = client.request.mock.calls.length
    expect(polls).toBeLessThanOrEqual(2)
    client.add(chat().id, message({ content: 'All green.' }), { replying: false })
    await vi.waitFor(() => expect(frame()).toMatch(/^\d\d:\d\d Ada\n {2}All green\.$/m))
    expect(frame()).not.toContain('replying')
    const last = client.request.mock.calls.at(-1)![2]!.query!
    expect(last.waitSeconds).toBe(30)
  })

  it('tells 409 chat_replying on the status line and keeps the text', async () => {
    const client = fakeClient([adaChat([message()], { replying: true })])
    client.sendFailure = apiError(409, {
      error: 'chat_replying',
      message: 'the member is still replying',
    })
    const { frame, press } = await open(client, ada.id)
    await press('Also this', enter)
    await vi.waitFor(() =>
      expect(frame()).toContain(
        '✗ The member is still replying: send again once the reply is in (your text is kept).',
      ),
    )
    expect(frame()).toMatch(/^› Also this\s*$/m)
  })

  it('shows a tool call with its arguments and decides it in place with A', async () => {
    const call = message({
      content: 'I will merge the fix.',
      toolCall: {
        id: randomUUID(),
        name: 'vcs.merge_pull_request',
        arguments: { repo: 'acme/web', number: 7 },
        status: 'waiting',
        result: null,
          mustGate: false,
      },
    })
    const client = fakeClient([adaChat([call])])
    const { frame, press } = await open(client, ada.id)
    expect(frame()).toContain(
      '  ⚙ vcs.merge_pull_request (waits for you)\n    {"repo":"acme/web","number":7}',
    )
    expect(frame()).toContain('Ada wants to call vcs.merge_pull_request')
    expect(frame().trimEnd().split('\n').at(-1)).toBe(
      'a allow · A always · d deny · Esc chats · Ctrl+D quit',
    )
    await press('x')
    expect(frame()).toContain('The member waits on this tool call')
    expect(client.post).not.toHaveBeenCalled()
    await press('A')
    await vi.waitFor(() => expect(frame()).toContain('✓ Always allowed vcs.merge_pull_request'))
    expect(client.post).toHaveBeenCalledWith(
      `/chats/${chat().id}/tool-calls/${call.toolCall!.id}/decision`,
      { decision: 'always' },
    )
    expect(frame()).toContain('⚙ vcs.merge_pull_request (allowed)')
    expect(frame()).toMatch(/^›\s*$/m) // the prompt is back
  })

  it('answers a question in place: a choice picked and an answer typed', async () => {
    const gateId = randomUUID()
    const asks = message({
      content: 'Before I start:',
      question: {
        gateId,
        questions: ['Which day?'],
        choices: [
          { key: 'fri', label: 'Friday' },
          { key: 'mon', label: 'Monday' },
        ],
        status: 'waiting',
        answer: null,
      },
    })
    const client = fakeClient([adaChat([asks])])
    const { frame, press } = await open(client, ada.id)
    expect(frame()).toContain('? asks you\n    1. Which day?')
    await press(enter)
    expect(frame()).toContain('Type an answer or pick a choice with ↑↓.')
    await press(down, 'after lunch', enter)
    await vi.waitFor(() => expect(frame()).toContain('✓ Answered; the reply goes on'))
    expect(client.post).toHaveBeenCalledWith(`/gates/chat/${chat().id}/decision`, {
      decision: 'approve',
      gateId,
      answers: ['after lunch'],
      choice: 'fri',
    })
    expect(frame()).toContain('? answered')
  })

  it('Ctrl+N starts a create-task chat with its greeting', async () => {
    const client = fakeClient([adaChat([message()])])
    const { frame, press } = await open(client, ada.id)
    await press(ctrlN)
    await vi.waitFor(() => expect(frame()).toContain('Which task shall we make?'))
    expect(client.post).toHaveBeenCalledWith('/chats', { purpose: 'create_task' })
    expect(frame()).toMatch(/^osctl chat · Bob · create a task {2}open$/m)
  })

  it('says a chat is closed when it closes while shown, and sends nothing there', async () => {
    const client = fakeClient([adaChat([message()])])
    const { frame, press } = await open(client, ada.id)
    const taskId = randomUUID()
    client.add(chat().id, message({ content: 'Task created.' }), {
      status: 'closed',
      outcome: 'applied',
      taskId,
    })
    await vi.waitFor(() => expect(frame()).toMatch(/^osctl chat · Ada {2}closed \(applied\)$/m))
    expect(frame()).toContain(`This chat is closed (task ${taskId}).`)
    await press('more', enter)
    expect(client.post).not.toHaveBeenCalled()
  })

  it('without a member: a picker of open chats, then members; Enter opens; Esc goes back', async () => {
    const client = fakeClient([adaChat([message()], { unread: 2 })])
    const { frame, press } = await open(client)
    expect(frame()).toMatchInlineSnapshot(`
      "osctl chat  pick a chat

      › Ada  2 unread · 2m ago
        Bob <bob@acme.example>  new chat

      ↑↓ select · Enter open · Ctrl+N new task chat · q quit"
    `)
    await press(down, enter)
    await vi.waitFor(() => expect(frame()).toContain('No messages yet: say something to Bob.'))
    expect(client.post).toHaveBeenCalledWith('/chats', { memberId: bob.id })
    await press(escape)
    await vi.waitFor(() => expect(frame()).toContain('pick a chat'))
  })

  it('says when there is nobody to chat with', async () => {
    const { frame } = await open(fakeClient([], []))
    expect(frame()).toContain('No chats yet, and no members to chat with.')
  })

  it('lays out again when the terminal is resized, the newest lines kept', async () => {
    const long = Array.from({ length: 30 }, (_, i) =>
      message({ content: `line ${i} ${'word '.repeat(20)}` }),
    )
    const { ui, frame } = await open(fakeClient([adaChat(long)]), ada.id)
    Object.defineProperty(ui.stdout, 'columns', { value: 50, configurable: true })
    Object.defineProperty(ui.stdout, 'rows', { value: 20, configurable: true })
    ui.stdout.emit('resize')
    await vi.waitFor(() =>
      expect(
        Math.max(
          ...frame()
            .split('\n')
            .map((l) => l.length),
        ),
      ).toBeLessThanOrEqual(50),
    )
    expect(frame().split('\n').length).toBeLessThanOrEqual(20)
    expect(frame()).toContain('line 29')
    expect(frame()).toMatch(/↑ \d+ more lines \(PgUp\)/)
  })
})

describe('renderChat', () => {
  it('refuses without a terminal and names the verbs that do the same job', async () => {
    const client = fakeClient([])
    const stream = (isTTY: boolean) =>
      ({ isTTY }) as unknown as NodeJS.ReadStream & NodeJS.WriteStream
    const refused = renderChat(client as unknown as ChatScreenClient, {
      stdin: stream(true),
      stdout: stream(false),
    })
    await expect(refused).rejects.toThrow(
      /^chat is interactive and needs a terminal, but stdout is not a terminal\./,
    )
    await expect(refused).rejects.toMatchObject({ exitCode: 2 })
    expect(client.get).not.toHaveBeenCalled()
  })

  it('runs on a terminal until Ctrl+D, and ends its long-poll', async () => {
    const client = fakeClient([adaChat([message({ content: 'Morning.' })])])
    const terminal = fakeTerminal()
    const done = renderChat(client as unknown as ChatScreenClient, {
      memberId: ada.id,
      stdin: terminal.stdin,
      stdout: terminal.stdout,
    })
    await vi.waitFor(() => expect(terminal.output()).toContain('Morning.'))
    await vi.waitFor(() => expect(client.request).toHaveBeenCalled())
    const held = client.request.mock.calls[0]![2]!.signal!
    terminal.press(ctrlD)
    await done
    expect(terminal.output()).toContain(`osctl chats get ${chat().id}`)
    expect(held.aborted).toBe(true)
  })
})

/** A small HTTP server speaking the chat routes' wire shapes, for the built osctl on a terminal. */
async function chatServer(): Promise<{ url: string; server: Server; sent: unknown[] }> {
  const id = chat().id
  const messages: ChatMessage[] = [message({ content: 'Hi, what can I do?' })]
  const sent: unknown[] = []
  const held: (() => void)[] = []
  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (c) => (text += c))
    req.on('end', () => {
      const url = new URL(req.url!, 'http://x')
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      const detail = (list: ChatMessage[]) => ({ ...chat({ replying: false }), messages: list })
      if (url.pathname === '/v1/members') return json(200, [ada])
      if (url.pathname === '/v1/chats') return json(200, [chat()])
      if (url.pathname === `/v1/chats/${id}/messages` && req.method === 'POST') {
        const content = JSON.parse(text).content as string
        sent.push(content)
        const stored = message({ role: 'person', content })
        messages.push(stored)
        json(201, stored)
        setTimeout(() => {
          messages.push(message({ content: `You said: ${content}` }))
          for (const wake of held.splice(0)) wake()
        }, 100)
        return
      }
      if (url.pathname === `/v1/chats/${id}`) {
        const after = url.searchParams.get('afterMessageId')
        const newer = () => messages.slice(messages.findIndex((m) => m.id === after) + 1)
        if (!after) return json(200, detail(messages))
        if (newer().length) return json(200, detail(newer()))
        const timer = setTimeout(() => json(200, detail([])), 5000)
        held.push(() => (clearTimeout(timer), json(200, detail(newer()))))
        return
      }
      json(404, { error: 'not_found', message: url.pathname })
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port
  return { url: `http://127.0.0.1:${port}/v1`, server, sent }
}

describe('osctl chat on a real pseudo-terminal', () => {
  it.skipIf(!hasScript)(
    'sends a message and shows the reply as it comes',
    async () => {
      const { url, server, sent } = await chatServer()
      try {
        const env = {
          ...process.env,
          OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')),
          OSCTL_URL: url,
          OSCTL_TOKEN: 'pty-token',
          TERM: 'xterm-256color',
          CI: 'true',
        }
        const child = execa(
          'script',
          ['-qfec', `stty cols 100 rows 30; exec node ${osctlBin} chat ${ada.id}`, '/dev/null'],
          { env, reject: false, stdin: 'pipe' },
        )
        let drawn = ''
        child.stdout!.on('data', (chunk: Buffer) => (drawn += chunk.toString()))
        const text = () => drawn.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '')
        await eventually(() => text().includes('Hi, what can I do?'), 15_000, 'the chat')
        child.stdin!.write('ping')
        await eventually(() => text().includes('ping'), 15_000, 'the typed text')
        child.stdin!.write('\r')
        await eventually(() => text().includes('You said: ping'), 15_000, 'the reply')
        child.stdin!.write(ctrlD)
        await eventually(() => text().includes(`osctl chats get ${chat().id}`), 15_000, 'the end')
        expect((await child).exitCode).toBe(0)
        expect(sent).toEqual(['ping'])
      } finally {
        server.close()
        server.closeAllConnections()
      }
    },
    30_000,
  )
})

describe('the controller', () => {
  it('does not ask a daemon that answers at once with nothing new again straight away', async () => {
    const detail = adaChat([message()])
    const client = {
      get: vi.fn(async () => structuredClone(detail)),
      post: vi.fn(),
      request: vi.fn(async () => ({ ...structuredClone(detail), messages: [] })),
    }
    const controller = new ChatController(client as unknown as ChatScreenClient, { minGapMs: 100 })
    await controller.openChat(detail.id)
    await new Promise((r) => setTimeout(r, 350))
    controller.stop()
    expect(client.request.mock.calls.length).toBeGreaterThanOrEqual(2)
    expect(client.request.mock.calls.length).toBeLessThanOrEqual(5)
  })

  it('shows a failed read, waits, and recovers with the messages it missed', async () => {
    const first = message({ content: 'First' })
    const missed = message({ content: 'Missed' })
    let fail = true
    const client = {
      get: vi.fn(async () => adaChat([first])),
      post: vi.fn(),
      request: vi.fn(async () => {
        if (fail) throw apiError(503, { error: 'unavailable', message: 'restarting' })
        return adaChat([missed])
      }),
    }
    const controller = new ChatController(client as unknown as ChatScreenClient, { retryMs: 50 })
    await controller.openChat(chat().id)
    await vi.waitFor(() => expect(controller.getState().error).toBe('unavailable: restarting'))
    fail = false
    await vi.waitFor(() => expect(controller.getState().error).toBeNull())
    controller.stop()
    expect(controller.getState().messages.map((m) => m.content)).toEqual(['First', 'Missed'])
    // Every read asked from the newest message held: the failed ones from the first, then the missed one.
    const afters = client.request.mock.calls.map((c) => (c as unknown[])[2] as { query: any })
    expect(afters[0]!.query.afterMessageId).toBe(first.id)
    expect(afters.at(-1)!.query.afterMessageId).toBe(missed.id)
  })

  it('tells no_coo plainly when a create-task chat cannot start', async () => {
    const client = {
      get: vi.fn(),
      post: vi.fn(async () => {
        throw apiError(409, { error: 'no_coo', message: 'nobody holds coo' })
      }),
      request: vi.fn(),
    }
    const controller = new ChatController(client as unknown as ChatScreenClient)
    await controller.newCreateTask()
    expect(controller.getState().notice).toEqual({
      tone: 'error',
      text: 'Nobody holds the coo role: grant it to a member to create tasks by chat.',
    })
  })
})
