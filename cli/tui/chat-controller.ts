import type { Chat, ChatDetail, ChatMessage } from '../../shared/schemas/chats.js'
import type { ChatClient } from '../chat.js'
import type { ChatEvent, OpenChatEvents } from './chat-events.js'
import {
  historyLimit,
  mergeMessages,
  settled,
  waitingMessage,
  type ChatDecision,
  type ChatState,
  type Member,
  type PickerEntry,
} from './chat-state.js'
import { isPassing } from '../follow.js'
import { describeError, type Notice } from './gate-controller.js'

// The data side of `osctl chat` (DESIGN 9, 11, 13): the picker of chats and members, one open chat
// followed through its events (GET /v1/chats/{id}/events: messages, changes, the reply as it is
// written; reconnecting with Last-Event-ID when the stream drops), and what the person sends:
// messages, tool-call decisions, answers to questions, a new create-task chat. It also keeps the log
// the screen prints once into the terminal's scrollback: the chat's messages from the first on, each
// once it has settled. A message typed while the member replies waits in a queue and is sent when the
// reply ends (issue 51): the daemon takes one message per reply (409 chat_replying otherwise). No ink
// here, so it is tested on its own and the screen stays pure.

export type { ChatState, PickerEntry } from './chat-state.js'

export interface ChatControllerOptions {
  /** Open (or start) the chat with this member instead of the picker. */
  memberId?: string
  /** Opens a chat's events (chat-events.ts; tests hand in their own). */
  events: OpenChatEvents
  /** The first wait before opening a dropped stream again; it doubles up to 15 s (1 s unless told). */
  retryMs?: number
  /** How often the picker reads the chats again, for their unread counts (5 s unless told). */
  pickerMs?: number
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

export class ChatController {
  private state: ChatState = {
    view: 'picker',
    loaded: false,
    entries: [],
    members: [],
    chat: null,
    messages: [],
    drafts: [],
    log: [],
    logged: 0,
    link: 'connecting',
    error: null,
    sending: false,
    stopping: false,
    notice: null,
    queued: [],
    queueStopped: null,
  }
  private readonly listeners = new Set<() => void>()
  /** Ends what follows the view shown: the chat's stream, or the picker's reads. */
  private following: AbortController | undefined
  /** Messages already in the log (a chat opened again prints only what it has not). */
  private readonly printed = new Set<string>()
  /** Member messages came by the stream since the chat was read: leaving marks them read. */
  private unreadSeen = false
  private stopped = false

  constructor(
    private readonly client: ChatClient,
    private readonly options: ChatControllerOptions,
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

  /** Ends the stream and the picker's reads; what came by the stream is marked read on the way. */
  async stop(): Promise<void> {
    this.stopped = true
    this.following?.abort()
    this.following = undefined
    await this.markRead()
  }

  memberName(id: string | undefined): string {
    return this.state.members.find((m) => m.id === id)?.name ?? 'member'
  }

  /** Reads the chats and the members for the picker, and again every few seconds while it shows. */
  async showPicker(): Promise<void> {
    await this.leave()
    const following = (this.following = new AbortController())
    this.set({ view: 'picker', loaded: false, chat: null, messages: [], drafts: [], notice: null })
    await this.readPicker(following.signal)
    void (async () => {
      while (!following.signal.aborted && !this.stopped) {
        await sleep(this.options.pickerMs ?? 5000, following.signal)
        if (!following.signal.aborted) await this.readPicker(following.signal)
      }
    })()
  }

  private async readPicker(signal: AbortSignal): Promise<void> {
    try {
      const [chats, members] = await Promise.all([
        this.client.get<Chat[]>('/chats'),
        this.client.get<Member[]>('/members'),
      ])
      if (signal.aborted || this.stopped) return
      const open = (Array.isArray(chats) ? chats : []).filter((c) => c.status === 'open')
      const talking = new Set(open.map((c) => c.memberId))
      const list = Array.isArray(members) ? members : []
      const entries: PickerEntry[] = [
        ...open.map((chat) => ({ kind: 'chat' as const, chat })),
        ...list
          .filter((m) => !talking.has(m.id))
          .map((member) => ({ kind: 'member' as const, member })),
      ]
      this.set({ loaded: true, error: null, entries, members: list })
    } catch (err) {
      if (!signal.aborted && !this.stopped) this.set({ loaded: true, error: describeError(err) })
    }
  }

  /** The picker row chosen: its chat, or the member's new chat. */
  async pick(entry: PickerEntry): Promise<void> {
    if (entry.kind === 'chat') await this.openChat(entry.chat.id)
    else await this.openMember(entry.member.id)
  }

  /** The member's newest open chat, or a new one. */
  async openMember(memberId: string): Promise<void> {
    await this.leave()
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

  /** Shows the chat: its newest messages read whole (unless they came along), then its events. */
  async openChat(id: string, known?: Chat | ChatDetail): Promise<void> {
    await this.leave()
    const following = (this.following = new AbortController())
    this.set({
      view: 'chat',
      loaded: false,
      chat: known ?? null,
      messages: [],
      drafts: [],
      logged: 0,
      link: 'connecting',
      error: null,
    })
    try {
      const detail =
        known && 'messages' in known && Array.isArray(known.messages)
          ? known
          : await this.client.get<ChatDetail>(`/chats/${id}`, { limit: historyLimit })
      if (following.signal.aborted) return
      const { messages, ...chat } = detail
      const name = this.memberName(chat.memberId)
      this.set({
        log: [
          ...this.state.log,
          { key: `chat-${id}-${Date.now()}`, kind: 'chat', chat, memberName: name },
        ],
      })
      this.setMessages(messages, { chat, loaded: true, error: null })
    } catch (err) {
      if (following.signal.aborted) return
      this.set({ loaded: true, error: describeError(err) })
      return
    }
    void this.follow(id, following.signal)
  }

  /**
   * Follows the chat's events until it closes or the view changes. A stream that fails or ends
   * while the chat is open is opened again after a wait that doubles (1 s to 15 s, with jitter), from
   * the newest message held (Last-Event-ID), and the chat's status is read again then.
   */
  private async follow(id: string, signal: AbortSignal): Promise<void> {
    let wait = this.options.retryMs ?? 1000
    let again = false
    while (!signal.aborted && !this.stopped) {
      try {
        const events = await this.options.events(id, this.state.messages.at(-1)?.id, signal)
        if (signal.aborted) return
        this.set({ link: 'live', error: null })
        // What was sent while the stream was opening goes now that its reply can be followed.
        this.flushQueue()
        if (again) void this.refreshChat(id, signal)
        for await (const event of events) {
          if (signal.aborted) return
          this.apply(event)
          wait = this.options.retryMs ?? 1000
        }
        if (this.state.chat?.status === 'closed') return
        this.set({ link: 'lost', error: 'osd ended the stream' })
      } catch (err) {
        if (signal.aborted) return
        if (errorCode(err) === 'chat_not_found' || (err as { status?: number }).status === 401) {
          this.set({ link: 'lost', error: describeError(err) })
          return
        }
        this.set({ link: 'lost', error: describeError(err) })
      }
      again = true
      await sleep(wait * (0.8 + Math.random() * 0.4), signal)
      wait = Math.min(wait * 2, 15_000)
    }
  }

  /** One event merged into the state (by message id: a message replaces the one held). */
  apply(event: ChatEvent): void {
    this.merge(event)
    // A reply that ended (or a call decided) lets the next queued message go.
    if (event.type !== 'delta') this.flushQueue()
  }

  private merge(event: ChatEvent): void {
    const chat = this.state.chat
    if (!chat) return
    if (event.type === 'delta') {
      const { messageId, text } = event.delta
      if (this.state.messages.some((m) => m.id === messageId)) return
      const drafts = this.state.drafts.some((d) => d.messageId === messageId)
        ? this.state.drafts.map((d) =>
            d.messageId === messageId ? { ...d, text: d.text + text } : d,
          )
        : [...this.state.drafts, { messageId, text }]
      return this.set({ drafts })
    }
    if (event.type === 'chat') {
      const closed = event.chat.status === 'closed'
      this.setMessages(this.state.messages, {
        chat: { ...chat, ...event.chat },
        drafts: closed ? [] : this.state.drafts,
      })
      if (closed) void this.refreshChat(chat.id)
      return
    }
    const message = event.message
    const held = this.state.messages.some((m) => m.id === message.id)
    // A change to a message older than those read is not this screen's to show.
    if (event.type === 'message.updated' && !held) return
    if (event.type === 'message' && message.role === 'member') this.unreadSeen = true
    this.setMessages(mergeMessages(this.state.messages, [message]), {
      drafts: this.state.drafts.filter((d) => d.messageId !== message.id),
    })
  }

  /**
   * Reads the chat again from its first unsettled message on (its own fields with it: status,
   * outcome, task): after a reconnect, since the events sent then tell the changes of messages older
   * than the newest held, not a change to that one; and when it closes, for its outcome.
   */
  private async refreshChat(id: string, signal?: AbortSignal): Promise<void> {
    try {
      const lastSettled = this.state.messages[this.state.logged - 1]?.id
      const detail = await this.client.get<ChatDetail>(
        `/chats/${id}`,
        lastSettled ? { afterMessageId: lastSettled } : { limit: historyLimit },
      )
      if (signal?.aborted || this.state.chat?.id !== id) return
      const { messages, ...chat } = detail
      this.setMessages(mergeMessages(this.state.messages, messages), { chat })
    } catch {
      // The stream tells what matters; this read only adds detail.
    }
  }

  /**
   * Leaving a chat: its stream ends and what came by it is marked read (a read of its newest). What
   * was queued and not sent goes into the log, marked so, for the person to copy: never lost unseen.
   */
  private async leave(): Promise<void> {
    this.following?.abort()
    this.following = undefined
    this.keepUnsent()
    await this.markRead()
  }

  /** The queue, printed into the log as not sent, and emptied. */
  private keepUnsent(): void {
    const { queued } = this.state
    if (queued.length === 0) return
    const unsent = queued.map((text, i) => ({
      key: `unsent-${Date.now()}-${i}`,
      kind: 'unsent' as const,
      text,
    }))
    this.set({ log: [...this.state.log, ...unsent], queued: [], queueStopped: null })
  }

  private async markRead(): Promise<void> {
    const chat = this.state.chat
    if (!chat || !this.unreadSeen) return
    this.unreadSeen = false
    await this.client.get(`/chats/${chat.id}`, { limit: 1 }).catch(() => undefined)
  }

  /**
   * Sends a message, or queues it while the member replies or the stream opens (or messages queued
   * before it wait): true when it was stored or queued, so the prompt empties. A closed chat, or a
   * refusal, is told on the status line and the text is kept in the prompt.
   */
  async send(text: string): Promise<boolean> {
    const chat = this.state.chat
    if (!chat || !text.trim()) return false
    if (chat.status === 'closed') {
      this.set({
        notice: {
          tone: 'error',
          text: 'This chat is closed: Ctrl+N starts a create-task chat, Esc picks another.',
        },
      })
      return false
    }
    // While the chat's stream is still opening, the message waits for it: deltas are not kept, so a
    // reply begun before the stream was there would show from its middle on.
    const opening = this.state.link === 'connecting'
    if (chat.replying || opening || this.state.sending || this.state.queued.length > 0) {
      this.set({ queued: [...this.state.queued, text.trimEnd()], notice: null })
      this.flushQueue()
      return true
    }
    return this.post(chat, text.trimEnd(), false)
  }

  /**
   * Posts one message. A queued one that osd refuses for now (the member replies again, osd out of
   * reach) goes back to the head of the queue and is tried again; refused for good (the chat closed,
   * the text refused), the queue stops and says why, its messages kept.
   */
  private async post(chat: Chat, content: string, queued: boolean): Promise<boolean> {
    this.set({ sending: true, notice: null })
    try {
      const message = await this.client.post<ChatMessage>(`/chats/${chat.id}/messages`, {
        content,
      })
      const now = this.state.chat?.id === chat.id ? this.state.chat : chat
      this.setMessages(mergeMessages(this.state.messages, [message]), {
        sending: false,
        chat: { ...now, replying: true },
      })
      return true
    } catch (err) {
      if (this.state.chat?.id !== chat.id) {
        // Left meanwhile: a queued text goes where the queue went, into the log as not sent.
        if (queued) this.set({ queued: [content, ...this.state.queued] })
        this.set({ sending: false })
        this.keepUnsent()
        return false
      }
      const replying = errorCode(err) === 'chat_replying'
      // The member began replying before the screen heard of it: the message waits its turn.
      if (replying || (queued && isPassing(err))) {
        this.set({
          sending: false,
          queued: [content, ...this.state.queued],
          chat: { ...(this.state.chat ?? chat), ...(replying ? { replying: true } : {}) },
        })
        void this.retryQueue(chat.id)
        return true
      }
      if (queued) {
        const why = describeError(err)
        this.set({
          sending: false,
          queued: [content, ...this.state.queued],
          queueStopped: why,
          notice: { tone: 'error', text: `Queued messages not sent: ${why}` },
        })
        return false
      }
      const notice: Notice = {
        tone: 'error',
        text: `Not sent (your text is kept): ${describeError(err)}`,
      }
      this.set({ sending: false, notice })
      return false
    }
  }

  /**
   * Sends the first queued message when nothing stands before it: the chat open, the member not
   * replying, nothing on its way, no call or question waiting for the person (decided first).
   */
  private flushQueue(): void {
    const chat = this.state.chat
    const next = this.state.queued[0]
    if (next === undefined || !chat || this.stopped || this.state.queueStopped) return
    if (chat.status === 'closed') {
      this.set({ queueStopped: 'the chat is closed' })
      return
    }
    if (chat.replying || this.state.link === 'connecting') return
    if (this.state.sending || waitingMessage(this.state)) return
    this.set({ queued: this.state.queued.slice(1) })
    void this.post(chat, next, true).then(() => this.flushQueue())
  }

  /**
   * Reads the chat again after a wait and sends the queue if its reply has ended: the stream tells
   * a change of `replying`, but not a reply that began and ended between two of its reads.
   */
  private async retryQueue(id: string): Promise<void> {
    const following = this.following
    if (!following) return
    await sleep(this.options.retryMs ?? 1000, following.signal)
    if (following.signal.aborted || this.state.chat?.id !== id) return
    await this.refreshChat(id, following.signal)
    if (!this.state.chat?.replying) this.flushQueue()
    else if (this.state.queued.length > 0 && !this.state.queueStopped) void this.retryQueue(id)
  }

  /**
   * Stops the member's reply being written (Esc; POST /v1/chats/{id}/reply/stop, issue 51). The reply
   * ends by the stream as any reply does: what it wrote comes as a message marked stopped, then the
   * chat not replying, which sends the queue.
   */
  async stopReply(): Promise<void> {
    const chat = this.state.chat
    if (!chat || this.state.stopping) return
    this.set({ stopping: true, notice: null })
    try {
      const answer = await this.client.post<{ stopping?: boolean }>(`/chats/${chat.id}/reply/stop`)
      const text = answer?.stopping === false ? 'The reply had already ended' : 'Reply stopped'
      this.set({ stopping: false, notice: { tone: 'success', text } })
      // A reply that ended before the stop came: the stream may have told it before this screen read.
      if (answer?.stopping === false) void this.refreshChat(chat.id).then(() => this.flushQueue())
    } catch (err) {
      const text =
        errorCode(err) === 'chat_closed'
          ? 'This chat is closed: it has no reply to stop.'
          : `Could not stop the reply: ${describeError(err)}`
      this.set({ stopping: false, notice: { tone: 'error', text } })
    }
  }

  /** Decides a waiting tool call (a, A, d); the daemon's answer is the message as it now is. */
  async decide(message: ChatMessage, decision: ChatDecision): Promise<void> {
    const chat = this.state.chat
    const call = message.toolCall
    if (!chat || !call || this.state.sending) return
    this.set({ sending: true, notice: null })
    try {
      const decided = await this.client.post<ChatMessage>(
        `/chats/${chat.id}/tool-calls/${message.id}/decision`,
        { decision },
      )
      const fresh = decided && typeof decided === 'object' && 'toolCall' in decided ? [decided] : []
      this.setMessages(mergeMessages(this.state.messages, fresh), {
        sending: false,
        notice: { tone: 'success', text: `${decisionWords[decision]} ${call.name}` },
      })
    } catch (err) {
      const code = errorCode(err)
      const text =
        code === 'gate_required_for_tool'
          ? `${call.name} is on the must-gate list of its connection: decided each time, allow or deny.`
          : code === 'already_decided'
            ? `${call.name} was already decided elsewhere.`
            : `Could not decide ${call.name}: ${describeError(err)}`
      this.set({ sending: false, notice: { tone: 'error', text } })
    }
  }

  /**
   * Answers a waiting question (os.ask_ceo) through POST /gates/chat/{chatId}/decision: a choice
   * and/or an answer per question, as `osctl gates review` sends them.
   */
  async answer(
    message: ChatMessage,
    body: { answers?: string[]; choice?: string },
  ): Promise<boolean> {
    const chat = this.state.chat
    const question = message.question
    if (!chat || !question || this.state.sending) return false
    this.set({ sending: true, notice: null })
    try {
      await this.client.post(`/gates/chat/${chat.id}/decision`, {
        decision: 'approve',
        gateId: question.gateId,
        ...body,
      })
      const answer = {
        decision: 'approve' as const,
        choice: body.choice ?? null,
        answers: body.answers ?? null,
        note: null,
      }
      const answered = {
        ...message,
        question: { ...question, status: 'answered' as const, answer },
      }
      const current = this.state.messages.find((m) => m.id === message.id)
      this.setMessages(
        current?.question?.status === 'waiting'
          ? mergeMessages(this.state.messages, [answered])
          : this.state.messages,
        { sending: false, notice: { tone: 'success', text: 'Answered; the reply goes on' } },
      )
      return true
    } catch (err) {
      const text =
        (err as { status?: number }).status === 409
          ? 'This question was already answered (or its chat closed).'
          : `Could not answer: ${describeError(err)}`
      this.set({ sending: false, notice: { tone: 'error', text } })
      return false
    }
  }

  /** New messages (and chat fields): the settled ones from the first on go to the log. */
  private setMessages(messages: ChatMessage[], rest: Partial<ChatState>): void {
    const chat = rest.chat !== undefined ? rest.chat : this.state.chat
    let logged = this.state.logged
    const log = [...this.state.log]
    const name = this.memberName(chat?.memberId)
    while (logged < messages.length && settled(messages[logged]!, chat)) {
      const message = messages[logged++]!
      if (this.printed.has(message.id)) continue
      this.printed.add(message.id)
      log.push({ key: message.id, kind: 'message', message, memberName: name })
    }
    this.set({
      ...rest,
      messages,
      logged,
      log: log.length === this.state.log.length ? this.state.log : log,
    })
  }

  private set(patch: Partial<ChatState>): void {
    this.state = { ...this.state, ...patch }
    for (const listener of this.listeners) listener()
  }
}
