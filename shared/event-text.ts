import type { FeedEvent } from './schemas/events.js'
import { shorten } from './text.js'

// What a feed event says to a person, in one place: the line `osctl events follow` prints, the text of
// a Slack message, a mail's lines; and the osctl command that acts on it (a gate's decision, a failed
// run's retry). Plain text: each caller escapes it for where it goes.

const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined

/** The first line of a text, at most `max` characters. */
export function firstLine(text: string, max = 200): string {
  const line = text.split('\n').find((l) => l.trim() !== '') ?? ''
  return shorten(line, max)
}

/** What the event is about: the task's run, a chat, an execution, ... */
function about(event: FeedEvent): string {
  const s = event.subject
  const task = str(s.taskSlug)
  if (str(s.runId)) return `run ${s.runId as string}${task ? ` of ${task}` : ''}`
  if (str(s.chatId)) return `chat ${s.chatId as string}`
  if (str(s.executionId)) return `execution ${s.executionId as string}`
  if (str(s.recommendationId))
    return `recommendation ${s.recommendationId as string}${task ? ` for ${task}` : ''}`
  if (str(s.itemId)) return `review item ${s.itemId as string}`
  return ''
}

/** The gate's question (its questions, else its summary), or the tool it waits to call. */
export function gateQuestion(payload: Record<string, unknown>): string {
  const questions = Array.isArray(payload.questions)
    ? payload.questions.filter((q): q is string => typeof q === 'string')
    : []
  if (questions.length > 0) return questions.join(' / ')
  return str(payload.summary) ?? (str(payload.tool) ? `may it call ${payload.tool as string}?` : '')
}

/** One line saying what happened, without the type (callers print it beside). */
export function eventSummary(event: FeedEvent): string {
  const p = event.payload
  const s = event.subject
  const subject = about(event)
  switch (event.type) {
    case 'feed.reset':
      return str(p.reason) ?? 'the feed reads on from here'
    case 'gate.waiting':
      return `gate ${s.gateId as string} waits (${subject || 'no run'}): ${firstLine(gateQuestion(p))}`
    case 'gate.decided':
      return `gate ${s.gateId as string} ${str(p.decision) ?? 'decided'}${str(p.decidedBy) ? ` by ${p.decidedBy as string}` : ''}`
    case 'gate.closed':
      return `gate ${s.gateId as string} closed undecided (${str(p.decidedBy) ?? subject})`
    case 'run.failed':
      return `${subject} failed${str(p.reason) ? `: ${firstLine(p.reason as string)}` : ''}`
    case 'run.blocked':
      return `${subject} blocked${str(p.blockedReason) ? `: ${firstLine(p.blockedReason as string)}` : ''}`
    case 'chat.message':
    case 'chat.message_updated':
      return `${subject}: ${str(p.role) ?? 'message'}${str(p.content) ? `: ${firstLine(p.content as string, 120)}` : ''}`
    case 'recommendation.decided':
      return `${subject} ${str(p.status) ?? 'decided'}`
    default:
      if (event.type.startsWith('run.')) return `${subject} ${event.type.slice(4)}`
      return subject
  }
}

/** A word a shell takes as it is: letters, digits and a few marks that no shell acts on. */
const plainWord = /^[A-Za-z0-9_@%+=:,./-]+$/

/** A character a terminal or a mail's line acts on: C0, DEL, C1, the bidi embeddings and isolates. */
const controlCharacter = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/**
 * `value` as one word of a command a person pastes into a shell: as it is when plain, else in single
 * quotes (a `'` in it written as `'\''`), inside which sh takes every character as itself. A choice's
 * key comes from the model's os.ask_ceo call (a prompt injection may write it), so a key of
 * `yes; touch /tmp/x` must be one argument of osctl, never a second command.
 */
export function shellWord(value: string): string {
  return plainWord.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`
}

/** The osctl command that decides a waiting gate or looks into a failed run, if the event has one. */
export function eventCommand(event: FeedEvent): string | undefined {
  const s = event.subject
  const p = event.payload
  if (event.type === 'gate.waiting' && str(s.gateId)) {
    const id = shellWord(s.gateId as string)
    if (p.kind === 'question') {
      const choices = Array.isArray(p.choices) ? (p.choices as { key?: unknown }[]) : []
      const key = choices[0]?.key
      // A key with a line break or a control character is not offered: quoted it is still one word,
      // but it would break the mail's line or act on the terminal it is pasted into.
      return typeof key === 'string' && key !== '' && !controlCharacter.test(key)
        ? `osctl gates answer ${id} --choice ${shellWord(key)}`
        : `osctl gates answer ${id} --answer "..."`
    }
    return `osctl gates approve ${id}   (or: osctl gates reject ${id} --note "why")`
  }
  if (event.type === 'run.failed' && str(s.runId)) {
    const id = shellWord(s.runId as string)
    return `osctl runs get ${id}   (then: osctl runs retry ${id})`
  }
  return undefined
}
