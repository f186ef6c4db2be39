import type { Chat, ChatDetail, ChatMessage } from '../../shared/schemas/chats.js'
import type { chatDecisions } from '../../shared/values.js'
import { maxWaitSeconds, messagesAfter, waitingOn, type ChatClient } from '../chat.js'
import type { Query } from '../client.js'
import { describeError, type Notice } from './gate-controller.js'

// The data side of `osctl chat` (DESIGN 9, 11): the picker of chats and members, one open chat and its
// messages kept current by a long-poll (GET /v1/chats/{id} with afterMessageId and waitSeconds: one
// request held by the daemon until a message comes, never a busy loop), and what the person sends:
// messages, tool-call decisions, answers to questions, a new create-task chat. No ink here, so it is
// tested on its own and the screen stays pure.

export type ChatDecision = (typeof chatDecisions)[number]

/** What the screen needs of ApiClient: `request` carries the signal that ends a held long-poll. */
export interface ChatScreenClient extends ChatClient {
  request<T = unknown>(
    method: string,
    path: string,
    options?: { query?: Query; body?: unknown; signal?: AbortSignal },
  ): Promise<T>
}

export interface Member {
  id: string
  name: string
  email: string
}

/** A row of the picker: an open chat, or a member to start one with. */
export type PickerEntry = { kind: 'chat'; chat: Chat } | { kind: 'member'; member: Member }

export interface ChatState {
  view: 'picker' | 'chat'
  /** The first read of the current view has answered (data or an error). */
  loaded: boolean
  /** The picker's rows: open chats, most recently active first, then members without one. */
  entries: PickerEntry[]
  members: Member[]
  chat: Chat | null
  /** The chat's messages, oldest first. */
  messages: ChatMessage[]
  /** Why the last read failed; cleared by the next read that works. */
  error: string | null
  /** A message, decision or answer is on its way. */
  sending: boolean
  /** The status line: what came of the last thing sent (409 chat_replying, a decision). */
  notice: Notice | null
}

export interface ChatControllerOptions {
  /** Open (or start) the chat with this member instead of the picker. */
  memberId?: string
  /** Seconds each long-poll asks the daemon to hold (30 unless told). */
  waitSeconds?: number
  /** The least time between two reads that brought nothing (a daemon that does not hold). */
  minGapMs?: number
  /** How long to wait after a failed read before the next (2 s unless told). */
  retryMs?: number
}

const decisionWords: Record<ChatDecision, string> = {
  allow: 'Allowed',
  always: 'Always allowed',
  deny: 'Denied',
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
  })

/** Messages merged by id: a message read again (a decided tool call) replaces the one held. */
export function mergeMessages(held: ChatMessage[], fresh: ChatMessage[]): ChatMessage[] {
  if (fresh.length === 0) return held
  const byId = new Map(fresh.map((m) => [m.id, m]))
  const merged = held.map((m) => byId.get(m.id) ?? m)
  const known = new Set(held.map((m) => m.id))
  return [...merged, ...fresh.filter((m) => !known.has(m.id))]
}

/** The newest message that waits for the person (a tool call or a question), if any. */
export function waitingMessage(messages: ChatMessage[]): ChatMessage | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (waitingOn(messages[i]!)) return messages[i]
  return undefined
}

export class ChatController {
  private state: ChatState = {
    view: 'picker',
    loaded: false,
    entries: [],
    members: [],
    chat: null,
    messages: [],
    error: null,
    sending: false,
    notice: null,
  }
  private readonly listeners = new Set<() => void>()
  /** Ends the long-poll of the chat shown (on stop, and when another chat is opened). */
  private polling: AbortController | undefined
  private stopped = false

  constructor(
    private readonly client: ChatScreenClient,
    private readonly options: ChatControllerOptions = {},
  ) {}

  getState = (): ChatState => this.state

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Opens the member's chat (their newest open one, else a new one), or the picker. */
  async start(): Promise<void> {
    this.stopped = false
    if (this.options.memberId) await this.openMember(this.options.memberId)
    else await this.showPicker()
  }

  stop(): void {
    this.stopped = true
    this.polling?.abort()
    this.polling = undefined
  }

  memberName(id: string | undefined): string {
    const member = this.state.members.find((m) => m.id === id)
    return member?.name ?? 'member'
  }

  /** Reads the chats and the members for the picker. */
  async showPicker(): Promise<void> {
    this.polling?.abort()
    this.polling = undefined
    this.set({ view: 'picker', loaded: false, chat: null, messages: [], notice: null })
    try {
      const [chats, members] = await Promise.all([
        this.client.get<Chat[]>('/chats'),
        this.client.get<Member[]>('/members'),
      ])
      if (this.stopped || this.state.view !== 'picker') return
      const open = (Array.isArray(chats) ? chats : []).filter((c) => c.status === 'open')
      const talking = new Set(open.map((c) => c.memberId))
      const entries: PickerEntry[] = [
        ...open.map((chat) => ({ kind: 'chat' as const, chat })),
        ...(Array.isArray(members) ? members : [])
          .filter((m) => !talking.has(m.id))
          .map((member) => ({ kind: 'member' as const, member })),
      ]
      this.set({
        loaded: true,
        error: null,
        entries,
        members: Array.isArray(members) ? members : [],
      })
    } catch (err) {
      if (!this.stopped) this.set({ loaded: true, error: describeError(err) })
    }
  }

  /** The picker row chosen: its chat, or the member's new chat. */
  async pick(entry: PickerEntry): Promise<void> {
    if (entry.kind === 'chat') await this.openChat(entry.chat.id)
    else await this.openMember(entry.member.id)
  }

  /** The member's newest open chat, or a new one. */
  async openMember(memberId: string): Promise<void> {
    this.set({ view: 'chat', loaded: false, chat: null, messages: [], notice: null, error: null })
    try {
      if (this.state.members.length === 0) {
        const members = await this.client.get<Member[]>('/members').catch(() => [])
        this.set({ members: Array.isArray(members) ? members : [] })
      }
      const chats = await this.client.get<Chat[]>('/chats', { memberId })
      const open = (Array.isArray(chats) ? chats : []).find((c) => c.status === 'open')
      if (open) return await this.openChat(open.id)
      const made = await this.client.post<Chat | ChatDetail>('/chats', { memberId })
      await this.openChat(made.id, made)
    } catch (err) {
      if (!this.stopped) this.set({ loaded: true, error: describeError(err) })
    }
  }

  /** A new create-task chat (Ctrl+N): the COO greets and proposes a task. */
  async newCreateTask(): Promise<void> {
    if (this.state.sending) return
    this.set({ sending: true, notice: null })
    try {
      const made = await this.client.post<Chat | ChatDetail>('/chats', { purpose: 'create_task' })
      this.set({ sending: false })
      await this.openChat(made.id, made)
    } catch (err) {
      const text =
        errorCode(err) === 'no_coo'
          ? 'Nobody holds the coo role: grant it to a member to create tasks by chat.'
          : `Could not start a create-task chat: ${describeError(err)}`
      this.set({ sending: false, notice: { tone: 'error', text } })
    }
  }

  /** Shows the chat (reading it whole unless it came with its messages) and follows it. */
  async openChat(id: string, known?: Chat | ChatDetail): Promise<void> {
    this.polling?.abort()
    const polling = (this.polling = new AbortController())
    this.set({ view: 'chat', loaded: false, chat: known ?? null, messages: [], error: null })
    try {
      const detail =
        known && 'messages' in known && Array.isArray(known.messages)
          ? known
          : await this.client.get<ChatDetail>(`/chats/${id}`)
      if (polling.signal.aborted) return
      this.setDetail(detail, detail.messages, { loaded: true, error: null })
    } catch (err) {
      if (polling.signal.aborted) return
      this.set({ loaded: true, error: describeError(err) })
    }
    void this.follow(id, polling.signal)
  }

  /** The long-poll: one held read after another, each from the newest message seen. */
  private async follow(id: string, signal: AbortSignal): Promise<void> {
    const gap = this.options.minGapMs ?? 1000
    while (!signal.aborted && !this.stopped) {
      const after = this.state.messages.at(-1)?.id
      const began = Date.now()
      try {
        const detail = await this.client.request<ChatDetail>('GET', `/chats/${id}`, {
          query: {
            afterMessageId: after,
            waitSeconds: this.options.waitSeconds ?? maxWaitSeconds,
          },
          signal,
        })
        if (signal.aborted) return
        const fresh = messagesAfter(detail, after ?? null)
        this.setDetail(detail, fresh, { error: null, loaded: true })
        // A daemon that answers at once with nothing new is not asked again straight away.
        if (fresh.length === 0 && Date.now() - began < gap) await sleep(gap, signal)
      } catch (err) {
        if (signal.aborted) return
        this.set({ error: describeError(err) })
        await sleep(this.options.retryMs ?? 2000, signal)
      }
    }
  }

  /** Reads the whole chat again now (after a decision, whose change brings no new message). */
  async reread(): Promise<void> {
    const chat = this.state.chat
    if (!chat) return
    try {
      const detail = await this.client.get<ChatDetail>(`/chats/${chat.id}`)
      if (this.state.chat?.id !== chat.id) return
      this.setDetail(detail, detail.messages, { error: null })
    } catch (err) {
      this.set({ error: describeError(err) })
    }
  }

  /**
   * Sends a message; true when it was stored. 409 chat_replying (the member still replies) and a
   * closed chat are told on the status line and the text is kept.
   */
  async send(text: string): Promise<boolean> {
    const chat = this.state.chat
    const content = text.trim()
    if (!chat || !content || this.state.sending) return false
    if (chat.status === 'closed') {
      this.set({
        notice: {
          tone: 'error',
          text: 'This chat is closed: Ctrl+N starts a create-task chat, Esc picks another.',
        },
      })
      return false
    }
    this.set({ sending: true, notice: null })
    try {
      const message = await this.client.post<ChatMessage>(`/chats/${chat.id}/messages`, {
        content: text,
      })
      const now = this.state.chat?.id === chat.id ? this.state.chat : chat
      this.set({
        sending: false,
        chat: { ...now, replying: true },
        messages: mergeMessages(this.state.messages, [message]),
      })
      return true
    } catch (err) {
      const code = errorCode(err)
      const notice: Notice =
        code === 'chat_replying'
          ? {
              tone: 'error',
              text: 'The member is still replying: send again once the reply is in (your text is kept).',
            }
          : { tone: 'error', text: `Not sent: ${describeError(err)}` }
      this.set({ sending: false, notice })
      if (code === 'chat_replying' || (err as { status?: number }).status === 409)
        void this.reread()
      return false
    }
  }

  /** Decides a waiting tool call (a, A, d), then reads the chat again. */
  async decide(message: ChatMessage, decision: ChatDecision): Promise<void> {
    const chat = this.state.chat
    const call = message.toolCall
    if (!chat || !call || this.state.sending) return
    this.set({ sending: true, notice: null })
    try {
      await this.client.post(`/chats/${chat.id}/tool-calls/${call.id}/decision`, { decision })
      const decided = {
        ...message,
        toolCall: {
          ...call,
          status: decision === 'deny' ? ('denied' as const) : ('allowed' as const),
        },
      }
      this.set({
        sending: false,
        messages: mergeMessages(this.state.messages, [decided]),
        notice: { tone: 'success', text: `${decisionWords[decision]} ${call.name}` },
      })
    } catch (err) {
      this.set({
        sending: false,
        notice: { tone: 'error', text: `Could not decide ${call.name}: ${describeError(err)}` },
      })
    }
    await this.reread()
  }

  /** Answers a waiting question (os.ask_ceo) through POST /gates/chat/{chatId}/decision. */
  async answer(
    message: ChatMessage,
    body: { answers?: string[]; choice?: string },
  ): Promise<boolean> {
    const chat = this.state.chat
    const question = message.question
    if (!chat || !question || this.state.sending) return false
    this.set({ sending: true, notice: null })
    let ok = false
    try {
      await this.client.post(`/gates/chat/${chat.id}/decision`, {
        decision: 'approve',
        gateId: question.gateId,
        ...body,
      })
      ok = true
      const answered = { ...message, question: { ...question, status: 'answered' as const } }
      this.set({
        sending: false,
        messages: mergeMessages(this.state.messages, [answered]),
        notice: { tone: 'success', text: 'Answered; the reply goes on' },
      })
    } catch (err) {
      this.set({
        sending: false,
        notice: { tone: 'error', text: `Could not answer: ${describeError(err)}` },
      })
    }
    await this.reread()
    return ok
  }

  private setDetail(detail: ChatDetail, fresh: ChatMessage[], rest: Partial<ChatState>): void {
    const { messages: _m, ...chat } = detail
    this.set({ ...rest, chat, messages: mergeMessages(this.state.messages, fresh ?? []) })
  }

  private set(patch: Partial<ChatState>): void {
    this.state = { ...this.state, ...patch }
    for (const listener of this.listeners) listener()
  }
}
