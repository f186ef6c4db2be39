// The load of bench:chat (scripts/bench-chat.ts), in a worker thread of its own: the fake model
// provider and the chatting clients. In a deployment they are other machines; here they at least keep
// off the event loop that times run dispatch, whose latency would otherwise include the wait behind 50
// clients' responses and the fake's answers. They still share the machine's cores with osd.
import { parentPort } from 'node:worker_threads'
import { Pool } from 'undici'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { randomUUID } from 'node:crypto'
import { chatExchange, followChatEvents } from './bench-lib.js'

export type LoadRequest =
  | { id: number; kind: 'delay'; ms: number }
  | {
      id: number
      kind: 'stream'
      base: string
      token: string
      chatIds: string[]
      /** Replies each chat asks for, one after another. */
      replies: number
      /** Tokens of each reply, one each `tokenMs`. */
      tokens: number
      tokenMs: number
      /** The daemon streams (else the fake answers whole, after as long as the stream would take). */
      streamed: boolean
    }
  | { id: number; kind: 'chat'; base: string; token: string; chatIds: string[]; spreadMs: number }
  | { id: number; kind: 'replies' }
  | { id: number; kind: 'stop' }
  | { id: number; kind: 'close' }

const port = parentPort!
const model = await startFakeModelProvider()
/** How long the fake takes to answer: each answer +-25%, so that the chats do not reply in waves. */
let replyMs = 0
/** While the stream part runs: each reply's tokens, and the time between two of them. */
let streaming: { tokens: string[]; tokenMs: number } | undefined
model.onRequest((request) => {
  if (!streaming) return { text: 'Aye.', delayMs: replyMs * (0.75 + Math.random() / 2) }
  const { tokens, tokenMs } = streaming
  return request.body.stream
    ? { text: tokens.join(''), tokens, tokenMs }
    : { text: tokens.join(''), delayMs: tokens.length * tokenMs }
})

/**
 * The stream part: each chat, followed through its event stream, asks for `replies` replies one after
 * another; answers each reply's time from the fake's first token to the first delta the reader got, and
 * the replies made.
 */
async function streamReplies(
  request: Extract<LoadRequest, { kind: 'stream' }>,
): Promise<{ firstDeltaMs: number[]; replies: number }> {
  streaming = {
    tokens: Array.from({ length: request.tokens }, (_, i) => `word${i} `),
    tokenMs: request.tokenMs,
  }
  const client = new Pool(new URL(request.base).origin, { connections: 2 * request.chatIds.length })
  const daemon = { url: request.base, token: request.token }
  const firstDeltaMs: number[] = []
  let replies = 0
  await Promise.all(
    request.chatIds.map(async (chatId) => {
      let firstDelta: number | undefined
      let stored: (() => void) | undefined
      const stop = await followChatEvents(client, daemon, chatId, (event, data) => {
        if (event === 'delta') firstDelta ??= performance.now()
        if (event === 'message' && data.role === 'member') stored?.()
      })
      for (let n = 0; n < request.replies; n++) {
        firstDelta = undefined
        const marker = `sample ${randomUUID()}`
        const replied = new Promise<void>((resolve) => (stored = resolve))
        const prefix = new URL(request.base).pathname
        const sent = await client.request({
          method: 'POST',
          path: `${prefix}/chats/${chatId}/messages`,
          headers: { authorization: `Bearer ${request.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ content: marker }),
        })
        await sent.body.dump()
        await replied
        replies++
        const call = model.requests.find((r) => JSON.stringify(r.body.messages).includes(marker))
        const firstToken = call?.tokenTimes?.[0]
        if (request.streamed && firstToken !== undefined && firstDelta !== undefined)
          firstDeltaMs.push(firstDelta - firstToken)
      }
      stop()
    }),
  )
  await client.close()
  streaming = undefined
  model.requests.length = 0
  return { firstDeltaMs, replies }
}

let going = false
let replies = 0
let loops: Promise<void>[] = []
const clients: Pool[] = []

port.on('message', async (request: LoadRequest) => {
  let answer: unknown
  switch (request.kind) {
    case 'delay':
      replyMs = request.ms
      break
    case 'chat':
      going = true
      replies = 0
      // A connection for each chat's long-poll and one for its message, as 50 clients have.
      const client = new Pool(new URL(request.base).origin, {
        connections: 2 * request.chatIds.length,
      })
      clients.push(client)
      loops = request.chatIds.map(async (chatId, i) => {
        // Started spread over spreadMs, so that replies come steadily from the first.
        await new Promise((r) => setTimeout(r, (i * request.spreadMs) / request.chatIds.length))
        let n = 0
        while (going) {
          await chatExchange(client, { url: request.base, token: request.token }, chatId, n++)
          replies++
        }
      })
      break
    case 'replies':
      answer = replies
      break
    case 'stream':
      answer = await streamReplies(request)
      break
    case 'stop':
      going = false
      await Promise.all(loops)
      await Promise.all(clients.splice(0).map((c) => c.close()))
      answer = replies
      break
    case 'close':
      await model.close()
      break
  }
  port.postMessage({ id: request.id, answer })
  if (request.kind === 'close') port.close()
})
port.postMessage({ id: 0, answer: model.url })
