// npm run bench:chat: chat replies (issue 18, Speed). osd runs as processes of its own, as bench:runs
// starts them (benchDaemon: `osd serve` on a throwaway embedded PostgreSQL, or DATABASE_URL); this
// process holds only what a deployment has elsewhere: the fake model provider (its URL given to osd as
// OSD_PROVIDER_A_BASE_URL / OSD_PROVIDER_B_BASE_URL, an LLM key bound through POST /v1/llm/bindings) and
// the clients, which talk HTTP to osd. It replaces the in-process variant, where the fake provider and the
// 50 clients shared osd's event loop and slowed it as no deployment would. Two layouts in the same run:
// one `osd serve` process (API and engine), then an API process and one `--role engine` process.
//   reply:    from a message POST to the member's reply answered by the long-poll
//             (GET /v1/chats/{id}?afterMessageId=<the message>&waitSeconds=10), one message at a time,
//             BENCH_MESSAGES of them, the fake answering at once: p50 and p99 (targets: p50 <= 30 ms,
//             p99 <= 100 ms);
//   dispatch: BENCH_RUNS deterministic runs started BENCH_CONCURRENCY at a time, from each start's POST to
//             its run read as dispatched (running, or past it) from the database, alone and then while 50
//             chats keep replying (each sends its next message as soon as its reply is there; the fake
//             answers those after BENCH_REPLY_MS, default 500, so 50 replies are in progress at any
//             time): the median latency of both, and their ratio (target: <= 1.10). BENCH_REPLY_MS=0 is
//             the worst case: 50 chats in a closed loop, as fast as they go.
//   CPU:      of osd, the embedded PostgreSQL and this process (from /proc) while dispatch is measured,
//             alone and loaded, as a share of a core; and per reply: the loaded stretch's CPU less what
//             the same dispatches cost alone, shared among the replies made meanwhile. On a small
//             machine the three compete for the same cores.
// Medians of BENCH_ROUNDS rounds. Reports; asserts nothing.
import { randomBytes } from 'node:crypto'
import { freePort } from '../server/db/embedded.js'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { benchDaemon, median, percentile, watchRuns } from './bench-lib.js'

const messages = Number(process.env.BENCH_MESSAGES ?? 200)
const runs = Number(process.env.BENCH_RUNS ?? 300)
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const chatters = 50

const model = await startFakeModelProvider()
/** How long the fake takes to answer: at once for the reply latency; BENCH_REPLY_MS under load. */
let replyMs = 0
const loadReplyMs = Number(process.env.BENCH_REPLY_MS ?? 500)
model.onRequest(() => ({ text: 'Aye.', delayMs: replyMs }))
const daemon = await benchDaemon({
  OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn',
  OSD_PROVIDER_A_BASE_URL: model.url,
  OSD_PROVIDER_B_BASE_URL: model.url,
})
const { sql } = daemon
const watch = await watchRuns(sql)
/** Where the clients send their requests: the first process, then the API process of the split layout. */
let base = daemon.url

async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return (text ? JSON.parse(text) : undefined) as T
}

await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 1000 })
await sql`update enterprises set chat_memory_depth = 'off' where slug = ${daemon.enterpriseSlug}`
await call('POST', '/llm/bindings', { apiKey: `bench-${randomBytes(6).toString('hex')}` })
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

/** Resolves once the run is past pending/queued in the database: at its next notification, or 100 ms. */
async function dispatched(runId: string): Promise<void> {
  for (;;) {
    const moved = watch.next(runId)
    const [run] = await sql<{ status: string }[]>`select status from runs where id = ${runId}`
    if (run && run.status !== 'pending' && run.status !== 'queued') return
    await Promise.race([moved, new Promise((r) => setTimeout(r, 100))])
  }
}

/** Medians of the starts' POSTs alone (ms), of the last dispatch() */
let startMedian = 0

/** Median ms from a run's start to its dispatch, `concurrency` lanes of starts at a time. */
async function dispatch(): Promise<number> {
  const times: number[] = []
  const starts: number[] = []
  let n = 0
  await Promise.all(
    tasks.map(async (task) => {
      while (n < runs) {
        const i = n++
        const began = performance.now()
        const run = await call<{ id: string }>('POST', `/tasks/${task.id}/runs`, {
          n: `${Date.now()}-${i}`,
        })
        starts.push(performance.now() - began)
        await dispatched(run.id)
        times.push(performance.now() - began)
      }
    }),
  )
  startMedian = median(starts)
  return median(times)
}

/** 50 chats, each sending its next message as soon as its reply is there, until stopped. */
async function chatting(): Promise<{ replies(): number; stop(): Promise<number> }> {
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
    replies: () => replies,
    async stop() {
      going = false
      await Promise.all(loops)
      return replies
    },
  }
}

/** CPU of each side over a stretch of time, as cores busy (1 = one core all the time). */
interface Cores {
  osd: number
  postgres: number
  bench: number
}

/** Starts measuring the CPU of osd, PostgreSQL and this process; `done` answers cores and CPU ms. */
async function measureCpu(): Promise<{
  done(): Promise<{ cores: Cores; ms: Cores; wallMs: number }>
}> {
  const before = await daemon.cpu()
  const bench = process.cpuUsage()
  const wall = performance.now()
  return {
    async done() {
      const after = await daemon.cpu()
      const used = process.cpuUsage(bench)
      const wallMs = performance.now() - wall
      const ms: Cores = {
        osd: after.osd - before.osd,
        postgres: after.postgres - before.postgres,
        bench: (used.user + used.system) / 1000,
      }
      const cores: Cores = {
        osd: ms.osd / wallMs,
        postgres: ms.postgres / wallMs,
        bench: ms.bench / wallMs,
      }
      return { cores, ms, wallMs }
    },
  }
}

const pct = (cores: Cores) =>
  `osd ${(cores.osd * 100).toFixed(0)}%, PostgreSQL ${(cores.postgres * 100).toFixed(0)}%, bench ${(cores.bench * 100).toFixed(0)}%`

interface Round {
  p50: number
  p99: number
  alone: number
  busy: number
  replies: number
  /** CPU per reply (ms) in osd, PostgreSQL and the bench process, from the loaded dispatch's stretch. */
  perReply: Cores
}

async function layout(name: string): Promise<Round[]> {
  const results: Round[] = []
  for (let round = 1; round <= rounds; round++) {
    const latency = await replyLatency()
    const quiet = await measureCpu()
    const alone = await dispatch()
    const aloneStart = startMedian
    const before = await quiet.done()
    replyMs = loadReplyMs
    const load = await chatting()
    // Measured once the 50 chats reply steadily, not during their first burst of messages.
    await new Promise((r) => setTimeout(r, 2 * loadReplyMs + 500))
    // The CPU of every side while it measured: on a small machine the bench process (clients and fake
    // provider) and PostgreSQL compete with osd for the cores even out of osd's process.
    const loaded = await measureCpu()
    const repliesBefore = load.replies()
    const busy = await dispatch()
    const busyStart = startMedian
    const during = await loaded.done()
    const repliesDuring = load.replies() - repliesBefore
    const replies = await load.stop()
    replyMs = 0
    // What the replies cost: the CPU of the loaded stretch less what its dispatches cost alone (their
    // CPU per run, measured without chats), shared among the replies made meanwhile.
    const perReply = {} as Cores
    for (const side of ['osd', 'postgres', 'bench'] as const)
      perReply[side] = Math.max(0, during.ms[side] - before.ms[side]) / Math.max(1, repliesDuring)
    results.push({ ...latency, alone, busy, replies, perReply })
    console.log(
      `${name}, round ${round}: reply p50 ${latency.p50.toFixed(1)} ms, p99 ${latency.p99.toFixed(1)} ms; ` +
        `run dispatch median ${alone.toFixed(1)} ms alone (its POST ${aloneStart.toFixed(1)} ms; ${pct(before.cores)} of a core), ${busy.toFixed(1)} ms (its POST ${busyStart.toFixed(1)} ms) with ${chatters} chats replying (${pct(during.cores)}; ${repliesDuring} replies in ${(during.wallMs / 1000).toFixed(1)} s, ${replies} in all); ` +
        `CPU per reply: osd ${perReply.osd.toFixed(2)} ms, PostgreSQL ${perReply.postgres.toFixed(2)} ms, bench ${perReply.bench.toFixed(2)} ms`,
    )
  }
  return results
}

const layouts: [string, Round[]][] = []
layouts.push(['1 process (osd serve)', await layout('1 process')])
// An API process and an engine process take over; the first process stops, its engine with it.
const apiPort = await freePort()
const processes = [
  await daemon.start(['--role', 'api', '--port', String(apiPort)]),
  await daemon.start(['--role', 'engine']),
]
await daemon.first.stop()
base = `http://127.0.0.1:${apiPort}/v1`
layouts.push(['api + 1 engine', await layout('api + 1 engine')])
for (const p of processes) await p.stop()
await watch.stop()
await daemon.close()
await model.close()

console.log(
  `\nbench:chat  ${rounds} rounds, ${messages} messages, ${runs} runs ${concurrency} at a time; osd in processes of its own, fake provider in the bench process answering at once`,
)
for (const [name, results] of layouts) {
  const alone = median(results.map((r) => r.alone))
  const busy = median(results.map((r) => r.busy))
  console.log(
    `${name.padEnd(22)} reply (POST -> long-poll answer): p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms, p99 ${median(results.map((r) => r.p99)).toFixed(1)} ms (targets 30 / 100); ` +
      `run dispatch: ${alone.toFixed(1)} ms alone, ${busy.toFixed(1)} ms with ${chatters} chats replying (${loadReplyMs} ms each): x${(busy / alone).toFixed(2)} (target <= 1.10); ` +
      `CPU per reply: osd ${median(results.map((r) => r.perReply.osd)).toFixed(2)} ms, PostgreSQL ${median(results.map((r) => r.perReply.postgres)).toFixed(2)} ms, bench ${median(results.map((r) => r.perReply.bench)).toFixed(2)} ms`,
  )
}
process.exit(0)
