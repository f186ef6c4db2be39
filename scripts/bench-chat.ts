// npm run bench:chat: chat replies (issue 18, Speed). In process: the API, the engine and a fake model
// provider answering at once, on a throwaway embedded PostgreSQL (or DATABASE_URL).
//   reply:    from a message POST to the member's reply answered by the long-poll
//             (GET /v1/chats/{id}?afterMessageId=<the message>&waitSeconds=10), one message at a time,
//             BENCH_MESSAGES of them: p50 and p99 (targets: p50 <= 30 ms, p99 <= 100 ms);
//   dispatch: BENCH_RUNS deterministic runs started BENCH_CONCURRENCY at a time, from each start to its
//             run dispatched (running), alone and then while 50 chats keep replying (each sends its next message as
//             soon as its reply is there; the fake answers those after BENCH_REPLY_MS, default 500, so 50
//             replies are in progress at any time): the median latency of both, and their ratio (target:
//             <= 1.10). BENCH_REPLY_MS=0 is the worst case: 50 chats in a closed loop, as fast as they go.
// Medians of BENCH_ROUNDS rounds. Reports; asserts nothing.
import { randomBytes } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { createSealer } from '../server/crypto.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { createEnterprise } from '../server/domain/enterprises.js'
import { createToken } from '../server/domain/tokens.js'
import { createProviders } from '../server/engine/agent/providers.js'
import { startEngine } from '../server/engine/index.js'
import { createApp } from '../server/http/app.js'
import { allScopes } from '../shared/scopes.js'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { median, percentile } from './bench-lib.js'

const messages = Number(process.env.BENCH_MESSAGES ?? 200)
const runs = Number(process.env.BENCH_RUNS ?? 300)
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const chatters = 50

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-chat-'))
const model = await startFakeModelProvider()
const config = {
  ...loadConfig({ dataDir }, { DATABASE_URL: process.env.DATABASE_URL ?? '' }),
  providerBaseUrls: { provider_a: model.url, provider_b: model.url },
}
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const sealer = createSealer(randomBytes(32))
const app = createApp({ sql, config, log, sealer })
const providers = createProviders({ baseUrls: config.providerBaseUrls })
const engine = await startEngine({ sql, log, config, sealer, providers })

const enterprise = await createEnterprise(sql, { name: `Bench chat ${Date.now()}` }, config)
await sql`update enterprises set concurrent_run_limit = 1000, chat_memory_depth = 'off' where id = ${enterprise.id}`
const { token } = await createToken(sql, enterprise.id, { name: 'bench', scopes: allScopes })
async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await app.request(`/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return (text ? JSON.parse(text) : undefined) as T
}

await call('POST', '/llm/bindings', { apiKey: `bench-${randomBytes(6).toString('hex')}` })
/** How long the fake takes to answer: at once for the reply latency; BENCH_REPLY_MS under load. */
let replyMs = 0
const loadReplyMs = Number(process.env.BENCH_REPLY_MS ?? 500)
model.onRequest(() => ({ text: 'Aye.', delayMs: replyMs }))
const member = await call<{ id: string }>('POST', '/members', { name: 'Bench Member' })

/** One message sent and its reply read by the long-poll: ms from the POST to the answer. */
async function exchange(chatId: string, n: number): Promise<number> {
  const began = performance.now()
  const sent = await call<{ id: string }>('POST', `/chats/${chatId}/messages`, {
    content: `message ${n}`,
  })
  for (;;) {
    const detail = await call<{ messages: { role: string }[]; replying: boolean }>(
      'GET',
      `/chats/${chatId}?afterMessageId=${sent.id}&waitSeconds=10`,
    )
    // The reply ends its turn in the same commit: the next message may follow at once.
    if (detail.messages.some((m) => m.role === 'member')) return performance.now() - began
  }
}

async function replyLatency(): Promise<{ p50: number; p99: number }> {
  const chat = await call<{ id: string }>('POST', '/chats', { memberId: member.id })
  const times: number[] = []
  for (let n = 0; n < messages; n++) times.push(await exchange(chat.id, n))
  return { p50: median(times), p99: percentile(times, 99) }
}

const tasks: { id: string }[] = []
for (let i = 0; i < concurrency; i++)
  tasks.push(
    await call('POST', '/tasks', {
      name: `Bench chat run ${i}`,
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
    }),
  )

/** Median ms from a run's start to its dispatch (running, or past it), `concurrency` lanes of starts at a time. */
async function dispatch(): Promise<number> {
  const times: number[] = []
  let n = 0
  await Promise.all(
    tasks.map(async (task) => {
      while (n < runs) {
        const i = n++
        const began = performance.now()
        const run = await call<{ id: string; status: string }>('POST', `/tasks/${task.id}/runs`, {
          n: `${Date.now()}-${i}`,
        })
        let status = run.status
        let after: string | undefined
        while (status === 'pending' || status === 'queued') {
          const detail = await call<{ status: string; events: { id: string }[] }>(
            'GET',
            `/runs/${run.id}?waitSeconds=5${after ? `&afterEventId=${after}` : ''}`,
          )
          status = detail.status
          after = detail.events.at(-1)?.id ?? after
        }
        times.push(performance.now() - began)
      }
    }),
  )
  return median(times)
}

/** 50 chats, each sending its next message as soon as its reply is there, until stopped. */
async function chatting(): Promise<{ stop(): Promise<number> }> {
  const chats = await Promise.all(
    Array.from({ length: chatters }, () =>
      call<{ id: string }>('POST', '/chats', { memberId: member.id }),
    ),
  )
  let going = true
  let replies = 0
  const loops = chats.map(async (chat) => {
    let n = 0
    while (going) {
      await exchange(chat.id, n++)
      replies++
    }
  })
  return {
    async stop() {
      going = false
      await Promise.all(loops)
      return replies
    },
  }
}

const results: { p50: number; p99: number; alone: number; busy: number; replies: number }[] = []
for (let round = 1; round <= rounds; round++) {
  const latency = await replyLatency()
  const alone = await dispatch()
  replyMs = loadReplyMs
  const load = await chatting()
  // Measured once the 50 chats reply steadily, not during their first burst of messages.
  await new Promise((r) => setTimeout(r, 2 * loadReplyMs + 500))
  const busy = await dispatch()
  const replies = await load.stop()
  replyMs = 0
  results.push({ ...latency, alone, busy, replies })
  console.log(
    `round ${round}: reply p50 ${latency.p50.toFixed(1)} ms, p99 ${latency.p99.toFixed(1)} ms; ` +
      `run dispatch median ${alone.toFixed(1)} ms alone, ${busy.toFixed(1)} ms with ${chatters} chats replying (${replies} replies meanwhile)`,
  )
}
const alone = median(results.map((r) => r.alone))
const busy = median(results.map((r) => r.busy))
console.log(
  `\nbench:chat  ${rounds} rounds, ${messages} messages, ${runs} runs ${concurrency} at a time, fake provider answering at once`,
)
console.log(
  `reply (POST -> long-poll answer): p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms, p99 ${median(results.map((r) => r.p99)).toFixed(1)} ms (targets 30 / 100)`,
)
console.log(
  `run dispatch: ${alone.toFixed(1)} ms alone, ${busy.toFixed(1)} ms with ${chatters} chats replying (each reply taking ${loadReplyMs} ms): x${(busy / alone).toFixed(2)} (target <= 1.10)`,
)
await engine.stop()
await model.close()
await db.close()
process.exit(0)
