import type { FeedEvent } from './schemas/events.js'

// What a feed event says to a person, in one place: the line `osctl events follow` prints, the text of
// a Slack message, a mail's lines; and the osctl command that acts on it (a gate's decision, a failed
// run's retry). Plain text: each caller escapes it for where it goes.

const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined

/** The first line of a text, at most `max` characters. */
export function firstLine(text: string, max = 200): string {
  const line = text.split('\n').find((l) => l.trim() !== '') ?? ''
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
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

/** The osctl command that decides a waiting gate or looks into a failed run, if the event has one. */
export function eventCommand(event: FeedEvent): string | undefined {
  const s = event.subject
  const p = event.payload
  if (event.type === 'gate.waiting' && str(s.gateId)) {
    const id = s.gateId as string
    if (p.kind === 'question') {
      const choices = Array.isArray(p.choices) ? (p.choices as { key?: unknown }[]) : []
      return choices.length > 0 && typeof choices[0]!.key === 'string'
        ? `osctl gates answer ${id} --choice ${choices[0]!.key as string}`
        : `osctl gates answer ${id} --answer "..."`
    }
    return `osctl gates approve ${id}   (or: osctl gates reject ${id} --note "why")`
  }
  if (event.type === 'run.failed' && str(s.runId))
    return `osctl runs get ${s.runId as string}   (then: osctl runs retry ${s.runId as string})`
  return undefined
}
