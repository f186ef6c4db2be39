import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { ApiClient } from '../../../cli/client.js'
import { ApiRequestError } from '../../../cli/errors.js'
import {
  chatEventSource,
  readChatEvents,
  toChatEvent,
  type ChatEvent,
} from '../../../cli/tui/chat-events.js'

// The chat screen's reader of GET /v1/chats/{id}/events, against a small HTTP server of this file
// that writes the stream by hand: pieces cut anywhere, comments, Last-Event-ID, errors, silence.

const message = {
  id: '11111111-1111-4111-8111-111111111111',
  role: 'member',
  content: 'Hi',
  toolCall: null,
  question: null,
  notice: false,
  createdAt: '2026-03-02T12:00:00.000Z',
}

let close: (() => void) | undefined
afterEach(() => close?.())

async function serve(handler: (res: ServerResponse, headers: Record<string, unknown>) => void) {
  const seen: Record<string, unknown>[] = []
  const server = createServer((req, res) => {
    seen.push({ ...req.headers, url: req.url })
    handler(res, req.headers)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  close = () => {
    server.closeAllConnections()
    server.close()
  }
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  return { client: new ApiClient(url, 'sse-token'), seen }
}

async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const all: ChatEvent[] = []
  for await (const event of events) all.push(event)
  return all
}

describe('toChatEvent', () => {
  it('takes the four events of the contract and nothing else', () => {
    expect(toChatEvent('message', JSON.stringify(message))).toEqual({ type: 'message', message })
    expect(toChatEvent('delta', '{"messageId":"m","text":"He"}')).toEqual({
      type: 'delta',
      delta: { messageId: 'm', text: 'He' },
    })
    expect(toChatEvent('chat', '{"status":"open","replying":true}')).toEqual({
      type: 'chat',
      chat: { status: 'open', replying: true },
    })
    expect(toChatEvent('chat', '{"status":"gone","replying":true}')).toBeNull()
    expect(toChatEvent('other', '{}')).toBeNull()
    expect(toChatEvent('message', 'not json')).toBeNull()
  })
})

describe('readChatEvents', () => {
  it('reads events cut anywhere across pieces, skips comments, keeps multi-byte text whole', async () => {
    const stream = [
      ': ping\n\n',
      `event: message\nid: ${message.id}\nda`,
      `ta: ${JSON.stringify(message)}\n`,
      '\nevent: delta\ndata: {"messageId":"m","text":"caf',
    ]
    const bytes = Buffer.from('é ✓"}\n\n')
    const pieces = [
      ...stream.map((s) => Buffer.from(s)),
      bytes.subarray(0, 4), // cuts ✓ (bytes 3 to 5) in two
      bytes.subarray(4),
    ]
    async function* body() {
      yield* pieces
    }
    const events = await collect(readChatEvents(body()))
    expect(events).toEqual([
      { type: 'message', message },
      { type: 'delta', delta: { messageId: 'm', text: 'café ✓' } },
    ])
  })
})

describe('chatEventSource', () => {
  it('sends the token and Last-Event-ID, and reads the stream until the daemon ends it', async () => {
    const { client, seen } = await serve((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`event: chat\ndata: {"status":"open","replying":true}\n\n`)
      setTimeout(() => {
        res.write(`event: delta\ndata: {"messageId":"${message.id}","text":"Hi"}\n\n`)
        res.end(`event: message\nid: ${message.id}\ndata: ${JSON.stringify(message)}\n\n`)
      }, 30)
    })
    const open = chatEventSource(client)
    const events = await collect(await open('c1', 'last-id', new AbortController().signal))
    expect(events.map((e) => e.type)).toEqual(['chat', 'delta', 'message'])
    expect(seen[0]).toMatchObject({
      url: '/v1/chats/c1/events',
      authorization: 'Bearer sse-token',
      accept: 'text/event-stream',
      'last-event-id': 'last-id',
    })
    await collect(await open('c1', undefined, new AbortController().signal))
    expect(seen[1]!['last-event-id']).toBeUndefined()
  })

  it('throws the API error of a refused stream (404 chat_not_found)', async () => {
    const { client } = await serve((res) => {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: 'chat_not_found', message: 'No chat c1.' }))
    })
    const opened = chatEventSource(client)('c1', undefined, new AbortController().signal)
    await expect(opened).rejects.toBeInstanceOf(ApiRequestError)
    await expect(opened).rejects.toMatchObject({ status: 404, code: 'chat_not_found' })
  })

  it('gives up on a stream that says nothing for too long, and ends when told', async () => {
    const { client } = await serve((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(': hello\n\n')
    })
    const events = await chatEventSource(client, { idleMs: 150 })(
      'c1',
      undefined,
      new AbortController().signal,
    )
    await expect(collect(events)).rejects.toThrow('no word from osd for 0 s')

    const stop = new AbortController()
    const held = await chatEventSource(client)('c1', undefined, stop.signal)
    const reading = collect(held).catch((err: Error) => err.name)
    setTimeout(() => stop.abort(), 50)
    expect(await reading).toMatch(/Abort/)
  })
})
