// npm run bench:chat: chat replies (issue 18, Speed). osd runs as processes of its own, as bench:runs
// starts them (benchDaemon: `osd serve` on a throwaway embedded PostgreSQL, or DATABASE_URL). What a
// deployment has elsewhere is in a worker thread of this process (bench-chat-load.ts): the fake model
// provider (its URL given to osd as OSD_PROVIDER_A_BASE_URL / OSD_PROVIDER_B_BASE_URL, an LLM key bound
// through POST /v1/llm/bindings) and the 50 chatting clients, so that their event loop is not the one
// that times run dispatch. Three layouts in the same run: one `osd serve` process (API and engine), then an
// API process and one `--role engine` process, then the same with a second engine process (issue 43:
// each of two engines should make 35-65% of the replies, and two at least as many replies/s as one;
// each engine's share is told by its /metrics, osd_chat_replies_total, before and after the window).
//   reply:    from a message POST to the member's reply answered by the long-poll
//             (GET /v1/chats/{id}?afterMessageId=<the message>&waitSeconds=10), one message at a time,
//             BENCH_MESSAGES of them, the fake answering at once: p50 and p99 (targets: p50 <= 30 ms,
//             p99 <= 100 ms);
//   dispatch: deterministic runs started BENCH_CONCURRENCY at a time for BENCH_SECONDS, from each start's
//             POST to its run read as dispatched (running, or past it) from the database, while 50 chats
//             keep replying, and alone for half that time before and half after (pooled): the median
//             latency of both and their ratio (target: <= 1.10), with the parts the database's
//             timestamps tell (the POST, queued -> started). The 50 chats each send their next message
//             as soon as their reply is there, so 50 replies are in progress at any time; the fake takes
//             each answer time of BENCH_REPLY_MS (a comma list, default 500,2000,5000 ms, each answer
//             +-25% so that the chats, started spread over one answer time, do not reply in waves). 500
//             ms makes ~100 replies a second, far more than 50 people at a real model; 5,000 ms is a
//             quick real model's answer.
//   CPU:      of osd, the embedded PostgreSQL and this process (from /proc), as a share of a core, alone
//             and loaded; and per reply: the loaded window's CPU less what its runs cost alone (CPU per
//             run alone), shared among the replies made meanwhile. On a small machine the three compete
//             for the same cores.
//   stream:   (issue 26) the fake streams a token every 20 ms and a reader follows each chat through
//             GET /v1/chats/{id}/events: the time from the fake writing a reply's first token to the reader
//             getting its first delta, BENCH_STREAM_SAMPLES replies of 50 tokens one after another, p50
//             and p99 (target: p50 <= 20 ms), in both layouts; and the CPU of osd and PostgreSQL per
//             reply of 200 tokens, 10 chats replying 5 times each, streamed and then unstreamed (a
//             process with OSD_CHAT_STREAM=off, the fake answering whole after the same 4 s): their
//             ratio (target: osd <= 2x).
// BENCH_PARTS=dispatch or =stream runs one part (default both); BENCH_ONLY=engine (or "1 process",
// "2 engines") the dispatch part of the layouts whose name contains it only.
// Medians of BENCH_ROUNDS rounds (the ratio: the median of each round's own). Reports; asserts nothing.
import { randomBytes } from 'node:crypto'
import { Worker } from 'node:worker_threads'
import { freePort } from '../server/db/embedded.js'
import type { LoadRequest } from './bench-chat-load.js'
import { Pool } from 'undici'
import {
  api,
  benchDaemon,
  chatExchange,
  formatShares,
  median,
  percentile,
  sharesOf,
  watchRuns,
} from './bench-lib.js'

const messages = Number(process.env.BENCH_MESSAGES ?? 200)
const windowMs = Number(process.env.BENCH_SECONDS ?? 6) * 1000
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 8)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const answerTimes = (process.env.BENCH_REPLY_MS ?? '500,2000,5000').split(',').map(Number)
const chatters = 50
const wanted = (name: string) => !process.env.BENCH_ONLY || name.includes(process.env.BENCH_ONLY)
/** The /metrics of each engine process of the split layouts, in the order they started. */
const engineMetrics: string[] = []

// The fake provider and the 50 chatting clients: a worker thread, asked by message. Its hooks are
// registered in the worker itself: Node 20 loads a worker's entry before inherited --import hooks apply.
const load = new Worker(
  `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(
    new URL('./bench-chat-load.ts', import.meta.url).href,
  )}) })`,
  { eval: true },
)
const answers = new Map<number, (answer: unknown) => void>()
let asked = 0
const modelUrl = new Promise<string>((resolve) => answers.set(0, resolve as (a: unknown) => void))
load.on('message', ({ id, answer }: { id: number; answer: unknown }) => {
  answers.get(id)?.(answer)
  answers.delete(id)
})
load.on('error', (err) => {
  console.error('bench load failed:', err)
  process.exit(1)
})
type Ask = LoadRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never
function ask<T = unknown>(request: Ask): Promise<T> {
  const id = ++asked
  const answered = new Promise<T>((resolve) => answers.set(id, resolve as (a: unknown) => void))
  load.postMessage({ ...request, id })
  return answered
}

const model = { url: await modelUrl }
const daemon = await benchDaemon({
  OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn',
  OSD_PROVIDER_A_BASE_URL: model.url,
  OSD_PROVIDER_B_BASE_URL: model.url,
})
const { sql } = daemon
const watch = await watchRuns(sql)
/** Where the clients send their requests: the first process, then the API process of the split layout. */
let base = daemon.url

/** The bench's own calls (setup, starts), to the first process and then the split layout's API. */
let call = api({ url: base, token: daemon.token })

await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 1000 })
await sql`update enterprises set chat_memory_depth = 'off' where slug = ${daemon.enterpriseSlug}`
await call('POST', '/llm/bindings', { apiKey: `bench-${randomBytes(6).toString('hex')}` })
const member = await call<{ id: string }>('POST', '/members', { name: 'Bench Member' })

async function replyLatency(): Promise<{ p50: number; p99: number }> {
  await ask({ kind: 'delay', ms: 0 })
  const chat = await call<{ id: string }>('POST', '/chats', { memberId: member.id })
  const times: number[] = []
  const client = new Pool(new URL(base).origin)
  for (let n = 0; n < messages; n++) {
    const began = performance.now()
    await chatExchange(client, { url: base, token: daemon.token }, chat.id, n)
    times.push(performance.now() - began)
  }
  await client.close()
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

/** Runs started `concurrency` at a time for `ms`: each one's ms to dispatch and its POST's ms. */
interface Dispatches {
  times: number[]
  posts: number[]
  ids: string[]
}

async function dispatch(ms: number, into: Dispatches = { times: [], posts: [], ids: [] }) {
  const until = performance.now() + ms
  await Promise.all(
    tasks.map(async (task) => {
      while (performance.now() < until) {
        const began = performance.now()
        const run = await call<{ id: string }>('POST', `/tasks/${task.id}/runs`, {
          n: `${Date.now()}-${randomBytes(4).toString('hex')}`,
        })
        into.posts.push(performance.now() - began)
        into.ids.push(run.id)
        await dispatched(run.id)
        into.times.push(performance.now() - began)
      }
    }),
  )
  return into
}

/** The median of queued -> started, from the runs' own timestamps (ms). */
async function claimMedian(ids: string[]): Promise<number> {
  const [row] = await sql<{ ms: number }[]>`
    select percentile_cont(0.5) within group (order by extract(epoch from started_at - queued_at) * 1000) as ms
      from runs where id = any(${sql.array(ids)}::uuid[])`
  return row!.ms
}

/** CPU of each side over a stretch of time. */
interface Cores {
  osd: number
  postgres: number
  bench: number
}
const sides = ['osd', 'postgres', 'bench'] as const

/** Starts measuring the CPU of osd, PostgreSQL and this process; `done` answers the CPU ms and wall ms. */
async function measureCpu(): Promise<{ done(): Promise<{ ms: Cores; wallMs: number }> }> {
  const before = await daemon.cpu()
  const bench = process.cpuUsage()
  const wall = performance.now()
  return {
    async done() {
      const after = await daemon.cpu()
      const used = process.cpuUsage(bench)
      return {
        ms: {
          osd: after.osd - before.osd,
          postgres: after.postgres - before.postgres,
          bench: (used.user + used.system) / 1000,
        },
        wallMs: performance.now() - wall,
      }
    },
  }
}

const pct = (cpu: { ms: Cores; wallMs: number }) =>
  sides
    .map(
      (s) =>
        `${s === 'postgres' ? 'PostgreSQL' : s} ${((cpu.ms[s] / cpu.wallMs) * 100).toFixed(0)}%`,
    )
    .join(', ')

interface Round {
  alone: number
  busy: number
  ratio: number
  postAlone: number
  postBusy: number
  claimAlone: number
  claimBusy: number
  repliesPerSecond: number
  /** CPU per reply (ms) in osd, PostgreSQL and the bench process, from the loaded window. */
  perReply: Cores
  /** Of two engine processes, each one's share of the replies and of the runs of the loaded window. */
  replyShares: number[]
  runShares: number[]
}

/** Dispatch alone (half before, half after) and while the 50 chats reply, the fake taking `answerMs`. */
async function loaded(answerMs: number): Promise<Round> {
  const quiet = await measureCpu()
  const alone = await dispatch(windowMs / 2)
  const aloneCpu = await quiet.done()
  await ask({ kind: 'delay', ms: answerMs })
  const chats = await Promise.all(
    Array.from({ length: chatters }, () =>
      call<{ id: string }>('POST', '/chats', { memberId: member.id }),
    ),
  )
  await ask({
    kind: 'chat',
    base,
    token: daemon.token,
    chatIds: chats.map((c) => c.id),
    spreadMs: answerMs,
  })
  // Measured once every chat replies steadily: all have started within one answer time.
  await new Promise((r) => setTimeout(r, 1.5 * answerMs + 500))
  const replyShares = await sharesOf(engineMetrics, 'osd_chat_replies_total', 'outcome="answered"')
  const runShares = await sharesOf(engineMetrics, 'osd_runs_ended_total', 'status="succeeded"')
  const busyCpu = await measureCpu()
  const repliesBefore = await ask<number>({ kind: 'replies' })
  const busy = await dispatch(windowMs)
  const during = await busyCpu.done()
  const replies = (await ask<number>({ kind: 'replies' })) - repliesBefore
  const split = engineMetrics.length > 1
  await ask({ kind: 'stop' })
  const after = await measureCpu()
  await dispatch(windowMs / 2, alone)
  const afterCpu = await after.done()
  const aloneMs = Object.fromEntries(
    sides.map((s) => [s, aloneCpu.ms[s] + afterCpu.ms[s]]),
  ) as unknown as Cores
  const aloneCores = { ms: aloneMs, wallMs: aloneCpu.wallMs + afterCpu.wallMs }
  // What the replies cost: the loaded window's CPU less what as many runs cost alone.
  const perReply = {} as Cores
  for (const side of sides)
    perReply[side] =
      Math.max(0, during.ms[side] - (aloneMs[side] / alone.times.length) * busy.times.length) /
      Math.max(1, replies)
  const round: Round = {
    alone: median(alone.times),
    busy: median(busy.times),
    ratio: median(busy.times) / median(alone.times),
    postAlone: median(alone.posts),
    postBusy: median(busy.posts),
    claimAlone: await claimMedian(alone.ids),
    claimBusy: await claimMedian(busy.ids),
    repliesPerSecond: (replies / during.wallMs) * 1000,
    perReply,
    replyShares: split ? await replyShares() : [],
    runShares: split ? await runShares() : [],
  }
  const shares = split
    ? `; engines %: replies ${formatShares(round.replyShares)}, runs ${formatShares(round.runShares)}`
    : ''
  console.log(
    `  answers in ${answerMs} ms: run dispatch ${round.alone.toFixed(1)} ms alone (${alone.times.length} runs; POST ${round.postAlone.toFixed(1)} ms, queued -> started ${round.claimAlone.toFixed(1)} ms; ${pct(aloneCores)} of a core), ` +
      `${round.busy.toFixed(1)} ms with ${chatters} chats replying (${busy.times.length} runs; POST ${round.postBusy.toFixed(1)} ms, queued -> started ${round.claimBusy.toFixed(1)} ms; ${pct(during)}; ${replies} replies in ${(during.wallMs / 1000).toFixed(1)} s): x${round.ratio.toFixed(2)}; ` +
      `CPU per reply: osd ${perReply.osd.toFixed(2)} ms, PostgreSQL ${perReply.postgres.toFixed(2)} ms, bench ${perReply.bench.toFixed(2)} ms${shares}`,
  )
  return round
}

async function layout(name: string) {
  const latencies: { p50: number; p99: number }[] = []
  const results = new Map<number, Round[]>(answerTimes.map((ms) => [ms, []]))
  for (let round = 1; round <= rounds; round++) {
    const latency = await replyLatency()
    latencies.push(latency)
    console.log(
      `${name}, round ${round}: reply p50 ${latency.p50.toFixed(1)} ms, p99 ${latency.p99.toFixed(1)} ms`,
    )
    for (const ms of answerTimes) results.get(ms)!.push(await loaded(ms))
  }
  return { latencies, results }
}

const parts = (process.env.BENCH_PARTS ?? 'dispatch,stream').split(',')
const samples = Number(process.env.BENCH_STREAM_SAMPLES ?? 20)
/** Replies each of the 10 chats makes for the CPU figures. */
const cpuReplies = Number(process.env.BENCH_STREAM_REPLIES ?? 5)

interface Streamed {
  firstDelta?: { p50: number; p99: number; n: number }
  /** CPU ms per reply of 200 tokens. */
  perReply?: { osd: number; postgres: number; replies: number }
}

/** The stream part on the processes serving `base`: first-delta latency (streamed) and CPU per reply. */
async function streamPart(
  streamed: boolean,
  { firstDelta = true }: { firstDelta?: boolean } = {},
): Promise<Streamed> {
  const result: Streamed = {}
  const chat = (n: number) =>
    Promise.all(
      Array.from({ length: n }, () =>
        call<{ id: string }>('POST', '/chats', { memberId: member.id }),
      ),
    )
  if (streamed && firstDelta) {
    const latency = await ask<{ firstDeltaMs: number[] }>({
      kind: 'stream',
      base,
      token: daemon.token,
      chatIds: (await chat(1)).map((c) => c.id),
      replies: samples,
      tokens: 50,
      tokenMs: 20,
      streamed,
    })
    const ms = latency.firstDeltaMs
    result.firstDelta = { p50: median(ms), p99: percentile(ms, 99), n: ms.length }
  }
  const chats = (await chat(10)).map((c) => c.id)
  // Warmed up first (a process's first replies also compile its code), as the streamed side is by
  // its first-delta replies.
  await ask({
    kind: 'stream',
    base,
    token: daemon.token,
    chatIds: chats,
    replies: 1,
    tokens: 50,
    tokenMs: 20,
    streamed,
  })
  const before = await daemon.cpu()
  const made = await ask<{ replies: number }>({
    kind: 'stream',
    base,
    token: daemon.token,
    chatIds: chats,
    replies: cpuReplies,
    tokens: 200,
    tokenMs: 20,
    streamed,
  })
  const after = await daemon.cpu()
  result.perReply = {
    osd: (after.osd - before.osd) / made.replies,
    postgres: (after.postgres - before.postgres) / made.replies,
    replies: made.replies,
  }
  return result
}

const layouts: [string, Awaited<ReturnType<typeof layout>>][] = []
const streams: [string, Streamed][] = []
const dispatching = (name: string) => parts.includes('dispatch') && wanted(name)
if (dispatching('1 process')) layouts.push(['1 process (osd serve)', await layout('1 process')])
if (parts.includes('stream')) streams.push(['1 process, streamed', await streamPart(true)])
// An API process and an engine process take over; the first process stops, its engine with it. Each
// engine serves /metrics, for its share of the work.
const engine = async () => {
  const port = await freePort()
  const child = await daemon.start(['--role', 'engine'], { OSD_METRICS_PORT: String(port) })
  engineMetrics.push(`http://127.0.0.1:${port}/metrics`)
  return child
}
const apiPort = await freePort()
const processes = [await daemon.start(['--role', 'api', '--port', String(apiPort)]), await engine()]
await daemon.first.stop()
base = `http://127.0.0.1:${apiPort}/v1`
call = api({ url: base, token: daemon.token })
if (dispatching('api + 1 engine')) layouts.push(['api + 1 engine', await layout('api + 1 engine')])
if (parts.includes('stream')) streams.push(['api + 1 engine, streamed', await streamPart(true)])
if (dispatching('api + 2 engines')) {
  processes.push(await engine())
  layouts.push(['api + 2 engines', await layout('api + 2 engines')])
}
for (const p of processes) await p.stop()
/** CPU per reply of fresh one-process layouts, streamed and unstreamed, alternating, BENCH_ROUNDS times. */
const cpuRounds: { streamed: Streamed['perReply'][]; unstreamed: Streamed['perReply'][] } = {
  streamed: [],
  unstreamed: [],
}
if (parts.includes('stream')) {
  for (let round = 1; round <= rounds; round++) {
    for (const streamed of [true, false]) {
      const port = await freePort()
      const process = await daemon.start(['--port', String(port)], {
        OSD_CHAT_STREAM: streamed ? 'on' : 'off',
      })
      base = `http://127.0.0.1:${port}/v1`
      call = api({ url: base, token: daemon.token })
      const { perReply } = await streamPart(streamed, { firstDelta: false })
      ;(streamed ? cpuRounds.streamed : cpuRounds.unstreamed).push(perReply)
      console.log(
        `stream round ${round}, one fresh process, ${streamed ? 'streamed' : 'unstreamed'}: CPU per reply: osd ${perReply!.osd.toFixed(1)} ms, PostgreSQL ${perReply!.postgres.toFixed(1)} ms`,
      )
      await process.stop()
    }
  }
}
await watch.stop()
await daemon.close()
await ask({ kind: 'close' })

const f = (n: number) => n.toFixed(1)
console.log(
  `\nbench:chat  ${rounds} rounds, ${messages} messages; dispatch ${windowMs / 1000} s alone and ${windowMs / 1000} s loaded per round and answer time, ${concurrency} runs at a time; osd in processes of its own, the fake provider and the chatting clients in a worker thread of the bench`,
)
for (const [name, { latencies, results }] of layouts) {
  console.log(
    `${name}: reply (POST -> long-poll answer, fake answering at once): p50 ${f(median(latencies.map((l) => l.p50)))} ms, p99 ${f(median(latencies.map((l) => l.p99)))} ms (targets 30 / 100)`,
  )
  for (const [ms, list] of results) {
    const m = (pick: (r: Round) => number) => median(list.map(pick))
    const shares = (pick: (r: Round) => number[]) =>
      formatShares((pick(list[0]!) ?? []).map((_, i) => m((r) => pick(r)[i] ?? 0)))
    const engines = list[0]?.replyShares.length
      ? `; engines %: replies ${shares((r) => r.replyShares)}, runs ${shares((r) => r.runShares)}`
      : ''
    console.log(
      `  answers in ${String(ms).padStart(5)} ms (${f(m((r) => r.repliesPerSecond))} replies/s): run dispatch ${f(m((r) => r.alone))} ms alone, ${f(m((r) => r.busy))} ms loaded: x${m((r) => r.ratio).toFixed(2)} (target <= 1.10; rounds ${list.map((r) => r.ratio.toFixed(2)).join(', ')}); ` +
        `POST ${f(m((r) => r.postAlone))} -> ${f(m((r) => r.postBusy))} ms, queued -> started ${f(m((r) => r.claimAlone))} -> ${f(m((r) => r.claimBusy))} ms; ` +
        `CPU per reply: osd ${m((r) => r.perReply.osd).toFixed(2)} ms, PostgreSQL ${m((r) => r.perReply.postgres).toFixed(2)} ms, bench ${m((r) => r.perReply.bench).toFixed(2)} ms${engines}`,
    )
  }
}
if (streams.length) {
  console.log(
    `stream: a token every 20 ms; first delta over ${samples} replies of 50 tokens; CPU over 10 chats x ${cpuReplies} replies of 200 tokens, after 10 replies to warm up`,
  )
  for (const [name, r] of streams) {
    const first = r.firstDelta
      ? `first delta after the first token: p50 ${f(r.firstDelta.p50)} ms, p99 ${f(r.firstDelta.p99)} ms (${r.firstDelta.n} replies; target p50 <= 20); `
      : ''
    console.log(
      `  ${name}: ${first}CPU per reply: osd ${f(r.perReply!.osd)} ms, PostgreSQL ${f(r.perReply!.postgres)} ms (${r.perReply!.replies} replies)`,
    )
  }
  const on = median(cpuRounds.streamed.map((r) => r!.osd))
  const off = median(cpuRounds.unstreamed.map((r) => r!.osd))
  const onPg = median(cpuRounds.streamed.map((r) => r!.postgres))
  const offPg = median(cpuRounds.unstreamed.map((r) => r!.postgres))
  console.log(
    `  one fresh process per measure, ${rounds} rounds each (medians): CPU per reply of 200 tokens streamed osd ${f(on)} ms, PostgreSQL ${f(onPg)} ms; unstreamed osd ${f(off)} ms, PostgreSQL ${f(offPg)} ms: osd x${(on / off).toFixed(2)} (target <= 2), PostgreSQL x${(onPg / offPg).toFixed(2)}`,
  )
}
process.exit(0)
