import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Chat, ChatDetail, ChatMessage } from '../../shared/schemas/chats.js'

// A small daemon of the chat routes for the chat screen's tests: the routes osctl chat uses, with the
// wire shapes of shared/schemas/chats.ts, and GET /v1/chats/{id}/events speaking the events of
// DESIGN 13 (message, message.updated, delta, chat; Last-Event-ID on reconnect; a ": ping" comment).
// The messages it holds are the real daemon's (test/fixtures/chat, recorded from it); what the member
// does after a message, a decision or an answer is the test's script (onSend, onDecision, onAnswer).
// It stands in for the daemon until its /events lands; the real one is checked at integration.

export interface Member {
  id: string
  name: string
  email: string
}

export interface Sent {
  method: string
  path: string
  query: Record<string, string>
  body: unknown
  headers: IncomingMessage['headers']
}

type Held = ChatDetail & { changed: Map<string, number> }

export interface FakeChatDaemon {
  /** The base URL, ending in /v1. */
  url: string
  token: string
  members: Member[]
  /** Every request but the event streams' (those are in `streams`). */
  sent: Sent[]
  /** The Last-Event-ID of each stream opened, in order (undefined: none). */
  streams: (string | undefined)[]
  chat(id: string): ChatDetail
  addChat(detail: ChatDetail): void
  /** Stores a new message and sends it as a `message` event. */
  add(chatId: string, message: ChatMessage): void
  /** Stores a changed message and sends it as `message.updated`. */
  update(chatId: string, message: ChatMessage): void
  delta(chatId: string, messageId: string, text: string): void
  /** Changes the chat's status or replying and sends a `chat` event; a closed chat ends its streams. */
  status(
    chatId: string,
    patch: Partial<Pick<Chat, 'status' | 'replying' | 'outcome' | 'taskId'>>,
  ): void
  /** Ends every open stream, as a daemon that stops does. */
  drop(): void
  /** Answers the next requests to /events with this status (a daemon restarting), until cleared. */
  refuseStreams: number | null
  onSend: (chatId: string, message: ChatMessage) => void | Promise<void>
  onDecision: (chatId: string, message: ChatMessage, decision: string) => void | Promise<void>
  onAnswer: (
    chatId: string,
    message: ChatMessage,
    body: Record<string, unknown>,
  ) => void | Promise<void>
  /**
   * POST /chats/{id}/reply/stop while the member replies (answered 202): how the reply ends. By
   * default as osd ends one stopped before it wrote anything: an empty member message marked stopped,
   * then the chat not replying.
   */
  onStop: (chatId: string) => void | Promise<void>
  close(): Promise<void>
}

let clock = Date.parse('2026-03-02T12:00:00.000Z')
const now = () => new Date((clock += 1000)).toISOString()

export async function startFakeChatDaemon(
  options: { members?: Member[]; chats?: ChatDetail[] } = {},
): Promise<FakeChatDaemon> {
  const token = `token-${randomUUID()}`
  const chats = new Map<string, Held>()
  const streams = new Map<string, Set<ServerResponse>>()
  let seq = 0

  const held = (id: string) => {
    const found = chats.get(id)
    if (!found) throw Object.assign(new Error('chat_not_found'), { status: 404 })
    return found
  }
  const send = (chatId: string, name: string, data: unknown, id?: string) => {
    for (const res of streams.get(chatId) ?? [])
      res.write(`event: ${name}\n${id ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`)
  }
  const summary = (c: Held): Chat => {
    const { messages, changed: _c, ...chat } = c
    return { ...chat, lastMessageAt: messages.at(-1)?.createdAt ?? null }
  }

  const daemon: FakeChatDaemon = {
    url: '',
    token,
    members: options.members ?? [],
    sent: [],
    streams: [],
    refuseStreams: null,
    chat: (id) => structuredClone(summaryDetail(held(id))),
    addChat(detail) {
      const changed = new Map(detail.messages.map((m) => [m.id, ++seq]))
      chats.set(detail.id, { ...structuredClone(detail), changed })
    },
    add(chatId, message) {
      const c = held(chatId)
      c.messages.push(structuredClone(message))
      c.changed.set(message.id, ++seq)
      if (message.role === 'member') c.unread++
      send(chatId, 'message', message, message.id)
    },
    update(chatId, message) {
      const c = held(chatId)
      c.messages = c.messages.map((m) => (m.id === message.id ? structuredClone(message) : m))
      c.changed.set(message.id, ++seq)
      send(chatId, 'message.updated', message)
    },
    delta: (chatId, messageId, text) => send(chatId, 'delta', { messageId, text }),
    status(chatId, patch) {
      const c = held(chatId)
      Object.assign(c, patch)
      send(chatId, 'chat', { status: c.status, replying: c.replying })
      if (c.status === 'closed') for (const res of streams.get(chatId) ?? []) res.end()
    },
    drop() {
      for (const set of streams.values()) for (const res of set) res.end()
    },
    onSend: () => {},
    onDecision: () => {},
    onAnswer: () => {},
    onStop(chatId) {
      daemon.add(chatId, {
        id: randomUUID(),
        role: 'member',
        content: '',
        toolCall: null,
        question: null,
        notice: false,
        stopped: true,
        createdAt: now(),
      })
      daemon.status(chatId, { replying: false })
    },
    close: async () => {
      daemon.drop()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  function summaryDetail(c: Held): ChatDetail {
    return { ...summary(c), messages: c.messages }
  }
  for (const detail of options.chats ?? []) daemon.addChat(detail)

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const fail = (res: ServerResponse, status: number, error: string, message = error) =>
    json(res, status, { error, message })

  function events(req: IncomingMessage, res: ServerResponse, chatId: string) {
    const after = req.headers['last-event-id'] as string | undefined
    daemon.streams.push(after)
    if (daemon.refuseStreams) return fail(res, daemon.refuseStreams, 'unavailable', 'restarting')
    const c = held(chatId)
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
    res.write(': hello\n\n')
    if (after) {
      const at = c.messages.findIndex((m) => m.id === after)
      const since = c.changed.get(after) ?? 0
      for (const m of c.messages.slice(0, at + 1))
        if ((c.changed.get(m.id) ?? 0) > since)
          res.write(`event: message.updated\ndata: ${JSON.stringify(m)}\n\n`)
      for (const m of c.messages.slice(at + 1))
        res.write(`event: message\nid: ${m.id}\ndata: ${JSON.stringify(m)}\n\n`)
    }
    if (c.status === 'closed') {
      res.end()
      return
    }
    const set = streams.get(chatId) ?? new Set()
    streams.set(chatId, set.add(res))
    const ping = setInterval(() => res.write(': ping\n\n'), 15_000)
    res.on('close', () => {
      clearInterval(ping)
      set.delete(res)
    })
  }

  async function route(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const url = new URL(req.url!, 'http://fake')
    const path = url.pathname.replace(/^\/v1/, '')
    if (req.headers.authorization !== `Bearer ${token}`)
      return fail(res, 401, 'unauthorized', 'no token')
    let m = /^\/chats\/([^/]+)\/events$/.exec(path)
    if (m && req.method === 'GET') return events(req, res, m[1]!)
    daemon.sent.push({
      method: req.method!,
      path,
      query: Object.fromEntries(url.searchParams),
      body,
      headers: req.headers,
    })
    if (path === '/members') return json(res, 200, daemon.members)
    if (path === '/chats' && req.method === 'GET') {
      const member = url.searchParams.get('memberId')
      const listed = [...chats.values()]
        .filter((c) => c.messages.length > 0 && (!member || c.memberId === member))
        .map(summary)
      return json(res, 200, listed)
    }
    if (path === '/chats' && req.method === 'POST') {
      const input = body as { memberId?: string; purpose?: string }
      const made: ChatDetail = {
        id: randomUUID(),
        memberId: input.memberId ?? daemon.members[0]!.id,
        purpose: input.purpose === 'create_task' ? 'create_task' : null,
        status: 'open',
        outcome: null,
        taskId: null,
        unread: 0,
        replying: false,
        lastMessageAt: null,
        createdAt: now(),
        messages: [],
      }
      daemon.addChat(made)
      return json(res, 201, made)
    }
    m = /^\/chats\/([^/]+)$/.exec(path)
    if (m && req.method === 'GET') {
      const c = held(m[1]!)
      const limit = Number(url.searchParams.get('limit')) || undefined
      const detail = summaryDetail(c)
      c.unread = 0
      return json(res, 200, {
        ...detail,
        unread: 0,
        messages: limit ? detail.messages.slice(-limit) : detail.messages,
      })
    }
    m = /^\/chats\/([^/]+)\/messages$/.exec(path)
    if (m && req.method === 'POST') {
      const c = held(m[1]!)
      if (c.status === 'closed') return fail(res, 409, 'chat_closed')
      if (c.replying) return fail(res, 409, 'chat_replying', 'the member is still replying')
      const message: ChatMessage = {
        id: randomUUID(),
        role: 'person',
        content: (body as { content: string }).content,
        toolCall: null,
        question: null,
        notice: false,
        stopped: false,
        createdAt: now(),
      }
      daemon.add(c.id, message)
      daemon.status(c.id, { replying: true })
      json(res, 201, message)
      setTimeout(() => void daemon.onSend(c.id, message), 10)
      return
    }
    m = /^\/chats\/([^/]+)\/tool-calls\/([^/]+)\/decision$/.exec(path)
    if (m && req.method === 'POST') {
      const c = held(m[1]!)
      const message = c.messages.find((x) => x.id === m![2] && x.toolCall)
      if (!message) return fail(res, 404, 'tool_call_not_found')
      const decision = (body as { decision: string }).decision
      if (message.toolCall!.status !== 'waiting') return fail(res, 409, 'already_decided')
      if (decision === 'always' && message.toolCall!.mustGate)
        return json(res, 400, {
          error: 'gate_required_for_tool',
          message: 'must gate',
          tool: message.toolCall!.name,
        })
      const decided = {
        ...message,
        toolCall: { ...message.toolCall!, status: decision === 'deny' ? 'denied' : 'allowed' },
      } as ChatMessage
      daemon.update(c.id, decided)
      json(res, 201, decided)
      setTimeout(() => void daemon.onDecision(c.id, decided, decision), 10)
      return
    }
    m = /^\/gates\/chat\/([^/]+)\/decision$/.exec(path)
    if (m && req.method === 'POST') {
      const c = held(m[1]!)
      const input = body as Record<string, unknown>
      const message = c.messages.find(
        (x) =>
          x.question?.status === 'waiting' && (!input.gateId || x.question.gateId === input.gateId),
      )
      if (!message) return fail(res, 409, 'gate_not_waiting')
      const answered: ChatMessage = {
        ...message,
        question: {
          ...message.question!,
          status: 'answered',
          answer: {
            decision: 'approve',
            choice: (input.choice as string) ?? null,
            answers: input.answers ?? null,
            note: (input.note as string) ?? null,
          },
        },
      }
      daemon.update(c.id, answered)
      json(res, 201, { id: message.question!.gateId, status: 'decided' })
      setTimeout(() => void daemon.onAnswer(c.id, answered, input), 10)
      return
    }
    m = /^\/chats\/([^/]+)\/reply\/stop$/.exec(path)
    if (m && req.method === 'POST') {
      const c = held(m[1]!)
      if (c.status === 'closed') return fail(res, 409, 'chat_closed')
      if (!c.replying) return json(res, 200, { stopping: false })
      json(res, 202, { stopping: true })
      setTimeout(() => void daemon.onStop(c.id), 10)
      return
    }
    m = /^\/chats\/([^/]+)\/close$/.exec(path)
    if (m && req.method === 'POST') {
      daemon.status(m[1]!, { status: 'closed', outcome: 'closed', replying: false })
      return json(res, 200, summary(held(m[1]!)))
    }
    fail(res, 404, 'not_found', path)
  }

  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (chunk) => (text += chunk))
    req.on('end', () => {
      const body = text ? JSON.parse(text) : undefined
      route(req, res, body).catch((err: { status?: number; message: string }) =>
        fail(res, err.status ?? 500, err.message),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  daemon.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  return daemon
}
