// npm run bench:runs: how fast runs go from start to succeeded (issue: the run engine, Benchmark).
// Deterministic tasks, many of them and each run in its own lane (serializeOn a unique input), so lanes
// do not serialise. For API starts and webhook starts, with one and with two engine processes:
//   load:    `concurrency` starts kept in flight for `seconds`: starts/s, runs succeeded/s meanwhile, how
//            long the backlog took to drain after, and the latency of each run under that load;
//   latency: one start in flight at a time (as graphile-worker measures add-to-start): from the start's
//            answer to the commit that ended the run.
// A run's end is the commit of the transaction that ended it, seen as its last notification. The
// baseline, measured in the same run: GET /v1/runs/{id}/os-tool at the same concurrency (an authenticated
// request that does two small queries). Medians of BENCH_ROUNDS rounds. Reports; asserts nothing.
// Targets: >= 1,000 runs/s sustained, p50 <= 10 ms, p99 <= 50 ms.
import { Pool } from 'undici'
import { api, benchDaemon, median, percentile, watchRuns, type BenchDaemon } from './bench-lib.js'

const seconds = Number(process.env.BENCH_SECONDS ?? 5)
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32)
const taskCount = Number(process.env.BENCH_TASKS ?? 40)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const latencyRuns = Number(process.env.BENCH_LATENCY_RUNS ?? 200)
// BENCH_ONLY=webhook (or API, "1 engine", ...): only the scenarios whose name contains it.
const wanted = (name: string) => !process.env.BENCH_ONLY || name.includes(process.env.BENCH_ONLY)

type Request = { method?: string; path: string; headers: Record<string, string>; body?: string }

interface Load {
  requests: number
  perSecond: number
  succeededPerSecond: number
  drainMs: number
  p50: number
  p99: number
  failed: number
}

const daemon = await benchDaemon({ OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn' })
const origin = new URL(daemon.url).origin
const watch = await watchRuns(daemon.sql)

/** Keeps `concurrency` requests in flight for `seconds`; answers each run id and when its answer came. */
async function load(request: (n: number) => Request) {
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 })
  const answers: { runId: string; at: number }[] = []
  let ok = 0
  let failed = 0
  let n = 0
  const began = performance.now()
  const until = began + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const { method = 'POST', ...rest } = request(n++)
        const res = await pool.request({ method, ...rest })
        const body = (await res.body.json()) as {
          id?: string
          runId?: string
          run?: { id: string }
        }
        const runId = body.id ?? body.runId ?? body.run?.id
        if (res.statusCode >= 300) failed++
        else if (runId) answers.push({ runId, at: performance.now() })
        else ok++
      }
    }),
  )
  const ended = performance.now()
  await pool.close()
  return { answers, ok, failed, began, ended }
}

/** Waits until every run succeeded (or a minute passed); answers when each one's end was seen. */
async function ends(runIds: string[]): Promise<Map<string, number>> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const [row] = await daemon.sql<{ n: number }[]>`
      select count(*)::int as n from runs where id = any(${daemon.sql.array(runIds)}::uuid[]) and status <> 'succeeded'`
    if (row!.n === 0 || Date.now() > deadline) break
    await new Promise((r) => setTimeout(r, 50))
  }
  await new Promise((r) => setTimeout(r, 50)) // the last notifications are on their way
  const rows = await daemon.sql<{ id: string }[]>`
    select id from runs where id = any(${daemon.sql.array(runIds)}::uuid[]) and status = 'succeeded'`
  return new Map(rows.map((r) => [r.id, watch.lastMoved.get(r.id)!]))
}

async function underLoad(start: (n: number) => Request): Promise<Load> {
  const { answers, failed, began, ended } = await load(start)
  const finished = await ends(answers.map((a) => a.runId))
  const latencies = answers
    .filter((a) => finished.has(a.runId))
    .map((a) => Math.max(0, finished.get(a.runId)! - a.at))
  const window = (ended - began) / 1000
  return {
    requests: answers.length,
    perSecond: answers.length / window,
    succeededPerSecond: [...finished.values()].filter((t) => t <= ended).length / window,
    drainMs: Math.max(0, Math.max(...finished.values()) - ended),
    p50: median(latencies),
    p99: percentile(latencies, 99),
    failed: failed + answers.length - finished.size,
  }
}

/** One start at a time: from its answer to the commit that ended the run. */
async function oneAtATime(start: (n: number) => Request): Promise<number[]> {
  const pool = new Pool(origin, { connections: 1 })
  const latencies: number[] = []
  for (let n = 0; n < latencyRuns; n++) {
    const { method = 'POST', ...rest } = start(1_000_000 + n)
    const res = await pool.request({ method, ...rest })
    const body = (await res.body.json()) as { id?: string; runId?: string }
    const answered = performance.now()
    const runId = body.id ?? body.runId
    if (!runId) throw new Error(`start refused: ${JSON.stringify(body)}`)
    for (;;) {
      const moved = watch.next(runId)
      const [run] = await daemon.sql<
        { status: string }[]
      >`select status from runs where id = ${runId}`
      if (run!.status === 'succeeded') break
      await moved
    }
    await new Promise((r) => setTimeout(r, 2))
    latencies.push(Math.max(0, watch.lastMoved.get(runId)! - answered))
  }
  await pool.close()
  return latencies
}

const call = api(daemon)
await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 10000 })
const tasks: { id: string; slug: string }[] = []
for (let i = 0; i < taskCount; i++) {
  tasks.push(
    await call('POST', '/tasks', {
      name: `Bench step ${i}`,
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
    }),
  )
}
const { secret } = await call<{ secret: string }>('POST', '/enterprise/webhook-secret/rotate')
const auth = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' }
const viaApi = (n: number): Request => ({
  path: `/v1/tasks/${tasks[n % tasks.length]!.id}/runs`,
  headers: auth,
  body: JSON.stringify({ n }),
})
const viaWebhook = (n: number): Request => ({
  path: `/v1/webhooks/${daemon.enterpriseSlug}/tasks/${tasks[n % tasks.length]!.slug}`,
  headers: { 'x-os-webhook-secret': secret, 'content-type': 'application/json' },
  body: JSON.stringify({ n }),
})
const someRun = (await call<{ id: string }>('POST', `/tasks/${tasks[0]!.id}/runs`, { n: -1 })).id
const readRun = (): Request => ({
  method: 'GET',
  path: `/v1/runs/${someRun}/os-tool`,
  headers: auth,
})

interface Scenario {
  name: string
  loads: Load[]
  latencies: number[]
}
const scenarios: Scenario[] = []
const baseline: number[] = []
async function scenario(name: string, start: (n: number) => Request) {
  if (!wanted(name)) return
  const s: Scenario = { name, loads: [], latencies: [] }
  for (let round = 0; round < rounds; round++) s.loads.push(await underLoad(start))
  s.latencies = await oneAtATime(start)
  scenarios.push(s)
}

for (let round = 0; round < rounds; round++) {
  const { ok, began, ended } = await load(readRun)
  baseline.push(ok / ((ended - began) / 1000))
}
await scenario('API starts, 1 engine', viaApi)
await scenario('webhook starts, 1 engine', viaWebhook)
if (wanted('API starts, 2 engines') || wanted('webhook starts, 2 engines')) {
  const second = await daemon.start(['--role', 'engine'])
  await scenario('API starts, 2 engines', viaApi)
  await scenario('webhook starts, 2 engines', viaWebhook)
  await second.stop()
}
await watch.stop()
await daemon.close()

const m = (values: number[], digits = 0) => median(values).toFixed(digits)
const base = median(baseline)
console.log(
  `\nbench:runs  ${rounds} rounds of ${seconds} s, ${concurrency} in flight, ${taskCount} deterministic tasks, embedded PostgreSQL`,
)
console.log(`baseline: GET /v1/runs/{id}/os-tool ${base.toFixed(0)} req/s\n`)
console.log(
  'scenario'.padEnd(26),
  'starts/s'.padStart(9),
  'x base'.padStart(7),
  'done/s'.padStart(7),
  'drain ms'.padStart(9),
  'load p50'.padStart(9),
  'load p99'.padStart(9),
  '| 1-at-a-time p50'.padStart(17),
  'p99'.padStart(6),
  'failed'.padStart(7),
)
for (const s of scenarios) {
  const perSecond = s.loads.map((l) => l.perSecond)
  console.log(
    s.name.padEnd(26),
    m(perSecond).padStart(9),
    (median(perSecond) / base).toFixed(2).padStart(7),
    m(s.loads.map((l) => l.succeededPerSecond)).padStart(7),
    m(s.loads.map((l) => l.drainMs)).padStart(9),
    m(s.loads.map((l) => l.p50)).padStart(9),
    m(s.loads.map((l) => l.p99)).padStart(9),
    m(s.latencies, 1).padStart(17),
    percentile(s.latencies, 99).toFixed(1).padStart(6),
    String(s.loads.reduce((n, l) => n + l.failed, 0)).padStart(7),
  )
}
console.log(
  '\ndone/s: runs that succeeded while starts kept coming; drain: how long the backlog took after;' +
    "\nlatency: from the start's answer to the commit that ended the run (ms), under load and one at a time",
)
