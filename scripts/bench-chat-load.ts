// The load of bench:chat (scripts/bench-chat.ts), in a worker thread of its own: the fake model
// provider and the chatting clients. In a deployment they are other machines; here they at least keep
// off the event loop that times run dispatch, whose latency would otherwise include the wait behind 50
// clients' responses and the fake's answers. They still share the machine's cores with osd.
import { parentPort } from 'node:worker_threads'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'

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

/** One message sent and its reply read by the long-poll (the bench's exchange, over plain fetch). */
async function exchange(base: string, token: string, chatId: string, n: number): Promise<void> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const sent = await fetch(`${base}/chats/${chatId}/messages`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ content: `message ${n}` }),
  })
  const message = (await sent.json()) as { id: string }
  if (!sent.ok) throw new Error(`POST message: ${sent.status} ${JSON.stringify(message)}`)
  for (;;) {
    const res = await fetch(`${base}/chats/${chatId}?afterMessageId=${message.id}&waitSeconds=10`, {
      headers,
    })
    const detail = (await res.json()) as { messages: { role: string }[] }
    if (!res.ok) throw new Error(`GET chat: ${res.status} ${JSON.stringify(detail)}`)
    if (detail.messages.some((m) => m.role === 'member')) return
  }
}

port.on('message', async (request: LoadRequest) => {
  let answer: unknown
  switch (request.kind) {
    case 'delay':
      replyMs = request.ms
      break
    case 'chat':
      going = true
      replies = 0
      loops = request.chatIds.map(async (chatId, i) => {
        // Started spread over spreadMs, so that replies come steadily from the first.
        await new Promise((r) => setTimeout(r, (i * request.spreadMs) / request.chatIds.length))
        let n = 0
        while (going) {
          await exchange(request.base, request.token, chatId, n++)
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
