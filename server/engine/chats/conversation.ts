import { isNotice, type MessageRow } from '../../domain/chats/index.js'
import type { Message } from '../models/index.js'

// The model's view of a chat (DESIGN 11): its stored messages as the conversation a model call is sent,
// and the turn's recalled memory said with the person's newest message.

/**
 * The turn's memory said after the person's newest message (the turn's own), and how many messages
 * before it the next turn sends again unchanged: that one is sent without its memory then.
 */
export function withMemory(
  messages: Message[],
  memory: readonly string[],
): { messages: Message[]; stableMessages?: number } {
  const newest = messages.findLastIndex((m) => m.role === 'user')
  const person = messages[newest]
  if (memory.length === 0 || person?.role !== 'user') return { messages }
  const told = [...messages]
  told[newest] = { role: 'user', text: [person.text, ...memory].join('\n') }
  return { messages: told, stableMessages: newest }
}

/** The model's view of the chat: the person's messages, the member's replies and their tool calls. */
export function conversationOf(rows: readonly MessageRow[]): Message[] {
  const messages: Message[] = []
  const groups = new Map<
    string,
    { assistant: Extract<Message, { role: 'assistant' }>; tool: Extract<Message, { role: 'tool' }> }
  >()
  for (const row of rows) {
    if (row.role === 'person') {
      messages.push({ role: 'user', text: row.content })
      continue
    }
    // A reply stopped before it wrote anything said nothing (a provider refuses an empty message).
    if (row.stopped && !row.content) continue
    if (!row.replyGroup) {
      if (row.role === 'member' && !isNotice(row))
        messages.push({ role: 'assistant', text: row.content, toolCalls: [] })
      continue
    }
    let group = groups.get(row.replyGroup)
    if (!group) {
      group = {
        assistant: { role: 'assistant', text: null, toolCalls: [] },
        tool: { role: 'tool', results: [] },
      }
      groups.set(row.replyGroup, group)
      messages.push(group.assistant, group.tool)
    }
    if (row.role === 'member') group.assistant.text = row.content || null
    const call = row.toolCall
    if (call) {
      group.assistant.toolCalls.push({
        id: call.callId,
        name: call.name,
        arguments: call.arguments,
      })
      group.tool.results.push({
        callId: call.callId,
        content: call.result ?? (call.status === 'waiting' ? 'Waiting for the person.' : ''),
        isError: call.status === 'failed' || call.status === 'denied',
      })
    }
  }
  return messages.filter((m) => m.role !== 'tool' || m.results.length > 0)
}
