import type { Chat, ChatMessage } from '../../shared/schemas/chats.js'
import type { chatDecisions } from '../../shared/values.js'
import type { Notice } from './gate-controller.js'

// What the chat screen holds (the controller keeps it, the keys and the view read it), and the pure
// rules over it: how messages merge by id, when a message is settled (and so printed once into the
// scrollback), which one waits for the person, what the prompt's history is.

export type ChatDecision = (typeof chatDecisions)[number]

export interface Member {
  id: string
  name: string
  email: string
}

/** A row of the picker: a chat, or a member to start one with. */
export type PickerEntry = { kind: 'chat'; chat: Chat } | { kind: 'member'; member: Member }

/** What the screen prints once, in order, into the terminal's scrollback (ink's <Static>). */
export type LogItem =
  | { key: string; kind: 'chat'; chat: Chat; memberName: string }
  | { key: string; kind: 'message'; message: ChatMessage; memberName: string }
  /** A queued message never sent (its chat left, closed or refusing it): kept for the person to copy. */
  | { key: string; kind: 'unsent'; text: string }

/** The member's reply as it is being written: the deltas of a message not stored yet, joined. */
export interface Draft {
  messageId: string
  text: string
}

export interface ChatState {
  view: 'picker' | 'chat'
  /** The first read of the current view has answered (data or an error). */
  loaded: boolean
  /** The picker's rows: open chats, most recently active first, then members without one. */
  entries: PickerEntry[]
  members: Member[]
  chat: Chat | null
  /** The open chat's messages, oldest first, each as its newest event or read had it. */
  messages: ChatMessage[]
  /** Replies being written, in the order they began. */
  drafts: Draft[]
  /** Printed once each, in order (a message once it settled: no decision or run left to come). */
  log: LogItem[]
  /** How many of `messages`, from the first, are settled and so in the log. */
  logged: number
  /** The event stream: opening, following, or lost (and being opened again). */
  link: 'connecting' | 'live' | 'lost'
  /** Why the last read or the stream failed; cleared by the next that works. */
  error: string | null
  /** A message, decision or answer is on its way. */
  sending: boolean
  /** A stop of the member's reply is on its way (Esc while it was written). */
  stopping: boolean
  /**
   * Messages typed while the member replied (issue 51), oldest first: each is sent once the reply
   * before it ends, in order.
   */
  queued: string[]
  /** Why the queue stopped (osd refused its first message for good): it is sent no more. */
  queueStopped: string | null
  /** The status line: what came of the last thing sent. */
  notice: Notice | null
}

/** The most messages read when a chat opens (the API's largest limit); older ones stay unread here. */
export const historyLimit = 200

/** Messages merged by id: a message read again (a decided tool call) replaces the one held. */
export function mergeMessages(held: ChatMessage[], fresh: ChatMessage[]): ChatMessage[] {
  if (fresh.length === 0) return held
  const byId = new Map(fresh.map((m) => [m.id, m]))
  const merged = held.map((m) => byId.get(m.id) ?? m)
  const known = new Set(held.map((m) => m.id))
  return [...merged, ...fresh.filter((m) => !known.has(m.id))]
}

/**
 * Whether a message is done changing: a tool call decided and run (or refused), a question answered.
 * In a closed chat everything is settled.
 */
export function settled(message: ChatMessage, chat: Pick<Chat, 'status'> | null): boolean {
  if (chat?.status === 'closed') return true
  const call = message.toolCall?.status
  if (call === 'waiting' || call === 'allowed') return false
  return message.question?.status !== 'waiting'
}

/** The oldest message that waits for the person (a tool call or a question), if any. */
export function waitingMessage(
  state: Pick<ChatState, 'messages' | 'chat'>,
): ChatMessage | undefined {
  if (state.chat?.status === 'closed') return undefined
  return state.messages.find(
    (m) => m.toolCall?.status === 'waiting' || m.question?.status === 'waiting',
  )
}

/** What the person sent in this chat, oldest first: the prompt's Up walks back through it. */
export function sentHistory(messages: readonly ChatMessage[]): string[] {
  return messages.filter((m) => m.role === 'person').map((m) => m.content)
}

/** Esc stops the reply (issue 51): the member is writing one, and osd is in reach to be told. */
export function replyStoppable(state: ChatState): boolean {
  return state.link !== 'lost' && state.chat?.status === 'open' && state.chat.replying
}
