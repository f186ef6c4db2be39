// The load of bench:chat (scripts/bench-chat.ts), in a worker thread of its own: the fake model
// provider and the chatting clients. In a deployment they are other machines; here they at least keep
// off the event loop that times run dispatch, whose latency would otherwise include the wait behind 50
// clients' responses and the fake's answers. They still share the machine's cores with osd.
import { parentPort } from 'node:worker_threads'
import { Pool } from 'undici'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { chatExchange } from './bench-lib.js'

export type LoadRequest =
  | { id: number; kind: 'delay'; ms: number }
  | { id: number; kind: 'chat'; base: string; token: string; chatIds: string[]; spreadMs: number }
  | { id: number; kind: 'replies' }
  | { id: number; kind: 'stop' }
  | { id: number; kind: 'close' }

const port = parentPort!
const model = await startFakeModelProvider()
/** How long the fake takes to answer: each answer +-25%, so that the chats do not reply in waves. */
let replyMs = 0
model.onRequest(() => ({ text: 'Aye.', delayMs: replyMs * (0.75 + Math.random() / 2) }))

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
