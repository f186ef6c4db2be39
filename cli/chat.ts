import type { Chat, ChatDetail, ChatMessage } from '../shared/schemas/chats.js'
import type { Query } from './client.js'
import { decisionLine, decisionWord } from './decisions.js'
import { safeText } from './safe-text.js'
import { shorten } from '../shared/text.js'

// What `osctl chats` and the chat screen (cli/tui) share about a conversation: which messages are new,
// whether the member's reply is over or waits on the person, and how a message reads on one line. No
// ink and no zod here: command modules load this as osctl starts.

/** What both need of ApiClient; tests hand in an object with these. */
export interface ChatClient {
  get<T = unknown>(path: string, query?: Query): Promise<T>
  post<T = unknown>(path: string, body?: unknown): Promise<T>
}

/** The longest a GET /v1/chats/{id} may wait for a message (spec beyond: waitSeconds <= 30). */
export const maxWaitSeconds = 30

/**
 * The messages of `detail` after the one with id `afterId` (all of them when it is not among them: the
 * answer then holds only newer ones, or `afterId` is null).
 */
export function messagesAfter(detail: ChatDetail, afterId: string | null): ChatMessage[] {
  const messages = detail.messages ?? []
  if (afterId === null) return messages
  const at = messages.findIndex((m) => m.id === afterId)
  return at === -1 ? messages : messages.slice(at + 1)
}

/** A tool call or question of the message that waits for the person, if any. */
export function waitingOn(message: ChatMessage): 'tool call' | 'question' | null {
  if (message.toolCall?.status === 'waiting') return 'tool call'
  if (message.question?.status === 'waiting') return 'question'
  return null
}

/**
 * Whether the member's turn is over after the person's message: the chat is closed, or a member
 * message followed and the member no longer replies, or the reply waits on the person.
 */
export function turnOver(chat: Chat, replies: ChatMessage[]): boolean {
  if (chat.status === 'closed') return true
  if (replies.some((m) => waitingOn(m) !== null)) return true
  return !chat.replying && replies.some((m) => m.role === 'member')
}

/** HH:MM of an ISO time, in local time (the clock a person reads). */
export function clockTime(iso: string): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  return `${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`
}

/** Arguments as one line of JSON, cut to `width` characters. */
export function argumentsLine(args: unknown, width = 200): string {
  const text = JSON.stringify(args ?? {})
  return shorten(text, width)
}

/** Who said it, as a transcript names them. */
export function speaker(message: ChatMessage, memberName = 'member'): string {
  return message.role === 'person' ? 'you' : message.role === 'tool' ? 'tool' : memberName
}

/** A message as transcript lines (no colour): the text, then its tool call or question. */
export function transcriptLines(
  message: ChatMessage,
  chatId: string,
  memberName = 'member',
): string[] {
  const lines: string[] = []
  const head = `[${safeText(clockTime(message.createdAt))}] ${safeText(speaker(message, memberName))}:`
  const text = safeText(message.content.trimEnd(), { multiline: true })
  if (text) {
    const [first, ...rest] = text.split('\n')
    lines.push(`${head} ${first}`, ...rest.map((l) => `  ${l}`))
  } else lines.push(head)
  // The person stopped the reply while it was written (issue 51): the text is what it had by then.
  if (message.stopped) lines.push('  (stopped)')
  const call = message.toolCall
  if (call) {
    lines.push(
      `  tool call ${safeText(call.name)} ${safeText(argumentsLine(call.arguments))}: ${call.status}`,
    )
    if (call.status === 'waiting')
      lines.push(`    decide: osctl chats decide ${chatId} ${call.id} --allow|--always|--deny`)
    if (call.result) lines.push(`    result: ${safeText(call.result.split('\n')[0]!)}`)
  }
  const question = message.question
  if (question) {
    // What was decided, not the wire's "answered" (any decision): a rejected question says rejected.
    const answer = question.status === 'waiting' ? null : question.answer
    const decided = answer ? decisionWord(answer) : question.status
    lines.push(`  question (${decided}), gate ${question.gateId}:`)
    question.questions.forEach((q, i) => lines.push(`    ${i + 1}. ${safeText(q)}`))
    if (question.choices.length)
      lines.push(
        `    choices: ${safeText(question.choices.map((c) => `${c.key} (${c.label})`).join(', '))}`,
      )
    if (question.status === 'waiting')
      lines.push(`    answer: osctl chats answer ${chatId} --answer TEXT | --choice KEY`)
    else if (answer) lines.push(`    → ${decisionLine(answer, question.choices)}`)
  }
  return lines
}
