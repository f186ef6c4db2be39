import { createParser } from 'eventsource-parser'
import type { ChatDeltaEvent, ChatMessage, ChatStatusEvent } from '../../shared/schemas/chats.js'
import type { RequestOptions } from '../client.js'

// The chat screen follows a chat through GET /v1/chats/{id}/events (DESIGN 13): server-sent events,
// each `event: <name>` with `data: <one JSON line>`, `id:` on a stored message. This file opens the
// stream (with Last-Event-ID, so a reconnect gets what it missed) and reads it into typed events; the
// controller merges them and reconnects when a stream drops.

export type ChatEvent =
  /** A stored message, new. */
  | { type: 'message'; message: ChatMessage }
  /** A stored message again, changed (a call decided, run, done; a question answered). */
  | { type: 'message.updated'; message: ChatMessage }
  /** The next text of the member's reply being made. */
  | { type: 'delta'; delta: ChatDeltaEvent }
  /** The chat closed, or its member started or ended a reply. */
  | { type: 'chat'; chat: ChatStatusEvent }

/**
 * Opens a chat's events: resolves once the daemon has answered (an error status throws: 404
 * chat_not_found, 401), with the events to read as they come. The iteration ends when the daemon
 * ends the stream (the chat closed, the daemon stopped) and throws when the connection fails.
 */
export type OpenChatEvents = (
  chatId: string,
  lastEventId: string | undefined,
  signal: AbortSignal,
) => Promise<AsyncIterable<ChatEvent>>

/** What the events need of ApiClient. */
export interface StreamClient {
  stream(path: string, options?: RequestOptions): Promise<AsyncIterable<Buffer | string>>
}

/** A stream that says nothing for this long (the daemon pings every 15 s) is taken as dropped. */
export const defaultIdleMs = 45_000

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

function isMessage(value: unknown): value is ChatMessage {
  return isObject(value) && typeof value.id === 'string' && typeof value.role === 'string'
}

/** An event of the stream as the screen takes it; null for a name or a shape it does not know. */
export function toChatEvent(name: string | undefined, data: string): ChatEvent | null {
  let value: unknown
  try {
    value = JSON.parse(data)
  } catch {
    return null
  }
  if ((name === 'message' || name === 'message.updated') && isMessage(value))
    return { type: name, message: value }
  if (name === 'delta' && isObject(value))
    return typeof value.messageId === 'string' && typeof value.text === 'string'
      ? { type: 'delta', delta: { messageId: value.messageId, text: value.text } }
      : null
  if (name === 'chat' && isObject(value))
    return (value.status === 'open' || value.status === 'closed') &&
      typeof value.replying === 'boolean'
      ? { type: 'chat', chat: { status: value.status, replying: value.replying } }
      : null
  return null
}

/** The events of a body read as it comes: bytes into text, text into SSE events, those into ChatEvents. */
export async function* readChatEvents(
  body: AsyncIterable<Buffer | string>,
  onActivity: () => void = () => {},
): AsyncGenerator<ChatEvent> {
  const ready: ChatEvent[] = []
  const parser = createParser({
    onEvent: (event) => {
      const parsed = toChatEvent(event.event, event.data)
      if (parsed) ready.push(parsed)
    },
  })
  const decoder = new TextDecoder()
  for await (const chunk of body) {
    onActivity()
    parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }))
    while (ready.length) yield ready.shift()!
  }
}

/**
 * The events of ApiClient's daemon. Each stream has a watch of its own: when nothing (not even the
 * daemon's ping) comes for `idleMs`, the request is ended and the reading throws, so the controller
 * reconnects instead of waiting on a connection that went away without a word.
 */
export function chatEventSource(
  client: StreamClient,
  options: { idleMs?: number } = {},
): OpenChatEvents {
  const idleMs = options.idleMs ?? defaultIdleMs
  return async (chatId, lastEventId, signal) => {
    const ended = new AbortController()
    const abort = () => ended.abort()
    signal.addEventListener('abort', abort, { once: true })
    let timer: ReturnType<typeof setTimeout> | undefined
    let silent = false
    const watch = () => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        silent = true
        ended.abort()
      }, idleMs)
    }
    const stop = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', abort)
    }
    watch()
    let body: AsyncIterable<Buffer | string>
    try {
      body = await client.stream(`/chats/${chatId}/events`, {
        headers: lastEventId ? { 'last-event-id': lastEventId } : {},
        signal: ended.signal,
      })
    } catch (err) {
      stop()
      throw err
    }
    return (async function* () {
      try {
        yield* readChatEvents(body, watch)
      } catch (err) {
        if (silent) throw new Error(`no word from osd for ${Math.round(idleMs / 1000)} s`)
        throw err
      } finally {
        stop()
        ended.abort()
      }
    })()
  }
}
