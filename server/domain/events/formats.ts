import { eventCommand, eventSummary, gateQuestion } from '../../../shared/event-text.js'
import { shorten } from '../../../shared/text.js'
import type { FeedEvent } from '../../../shared/schemas/events.js'

// What a subscription is sent for an event (issue 47): `standard`, the Standard Webhooks payload
// {type, timestamp, data}; `slack`, {text, blocks} as a Slack incoming webhook takes them (a gate's
// question and the osctl command that decides it). Both are signed the same way (deliveries.ts).

export interface MessageContext {
  /** OSD_PUBLIC_URL, for the osctl command's --url when the receiver is elsewhere. */
  publicUrl: string | undefined
  enterpriseSlug: string
}

export function formatMessage(
  format: 'standard' | 'slack',
  event: FeedEvent,
  context: MessageContext,
): string {
  if (format === 'slack') return JSON.stringify(slackMessage(event, context))
  return JSON.stringify({
    type: event.type,
    timestamp: event.createdAt,
    data: { position: event.position, subject: event.subject, payload: event.payload },
  })
}

/** Slack's mrkdwn takes &, < and > as its own: each is written as its entity (Slack's rule). */
function escapeSlack(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** A section's text is at most 3,000 characters (Slack's limit). */
const sectionMax = 2900

function clip(text: string, max = sectionMax): string {
  return shorten(text, max)
}

/**
 * A command in a code span. Slack reads &, < and > inside one as everywhere else (a `<!channel>` in a
 * choice's key would notify the whole channel). A backtick would end the span early: it is written as
 * ˋ (U+02CB), never as `'`, which would end the command's shell quoting and let the rest run.
 */
function code(text: string): string {
  return '`' + escapeSlack(text.replace(/`/g, '\u02cb')) + '`'
}

export function slackMessage(
  event: FeedEvent,
  context: MessageContext,
): { text: string; blocks: unknown[] } {
  const summary = eventSummary(event)
  const command = eventCommand(event)
  const where = `${context.enterpriseSlug}${context.publicUrl ? ` (${context.publicUrl})` : ''}`
  const text = clip(
    `[${context.enterpriseSlug}] ${event.type}: ${summary}${command ? ` — ${command}` : ''}`,
    3000,
  )
  const blocks: unknown[] = []
  if (event.type === 'gate.waiting') {
    const question = gateQuestion(event.payload)
    const task = typeof event.subject.taskSlug === 'string' ? event.subject.taskSlug : undefined
    blocks.push({
      type: 'section',
      text: {
        type: 'mrkdwn',
        text: clip(
          `*A gate waits for a decision*${task ? ` in task *${escapeSlack(task)}*` : ''}\n${escapeSlack(question)}`,
        ),
      },
    })
  } else {
    blocks.push({
      type: 'section',
      text: { type: 'mrkdwn', text: clip(`*${escapeSlack(event.type)}*: ${escapeSlack(summary)}`) },
    })
  }
  if (command)
    blocks.push({
      type: 'section',
      text: {
        type: 'mrkdwn',
        text: clip(`${event.type === 'gate.waiting' ? 'Decide with' : 'See'} ${code(command)}`),
      },
    })
  blocks.push({
    type: 'context',
    elements: [
      {
        type: 'mrkdwn',
        text: clip(`osd ${escapeSlack(where)} · event ${event.position} · ${event.createdAt}`),
      },
    ],
  })
  return { text: escapeSlack(text), blocks }
}
