// npm run bench:traces: what tracing costs osd per run (issue 49), steadier than bench:runs's done/s.
// Two `osd serve` processes (role all), each on its own embedded PostgreSQL, so that each engine takes
// only the runs started at its own API: one traced (exporting over http/protobuf to a local OTLP sink),
// one not. Both stay up for the whole bench, so that every round after the first is of a warm process
// (bench:runs's BENCH_TRACES=ab starts a process per half round on one database, and its medians at
// saturation moved by a fifth between runs, a warm-up load before each measured one included). Rounds alternate between them (which goes first alternates too): BENCH_RUNS runs (default
// 1,500) of deterministic tasks, each in a lane of its own, started through the API at a steady
// BENCH_RATE per second (default 250: below what one process sustains here, so that neither is
// saturated and a round's CPU is the work's, not the contention's), or with BENCH_RATE=max kept
// BENCH_CONCURRENCY (32) in flight (saturation: issue 49's done/s), then awaited until every one
// succeeded. A round's figures: each osd process's CPU (/proc, every thread) over it, per run, its
// PostgreSQL's, and the runs succeeded per second from its first start to its last end. Reports the
// traced/untraced ratio of each round and their median, after a first round of each not counted (JIT,
// pools, the SDK's first spans). BENCH_TRACED_ENV: more variables for the traced process, as JSON
// ({"OTEL_TRACES_SAMPLER":"always_off"}). Reports; asserts nothing.
import { Pool } from 'undici'
import { benchDaemon, laneTasks, median, otlpSink, type BenchDaemon } from './bench-lib.js'

const runsPerRound = Number(process.env.BENCH_RUNS ?? 1500)
/** `max`: no rate, BENCH_CONCURRENCY (32) starts kept in flight instead: saturation. */
const saturate = process.env.BENCH_RATE === 'max'
const rate = Number(saturate ? 0 : (process.env.BENCH_RATE ?? 250))
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32)
const rounds = Number(process.env.BENCH_ROUNDS ?? 6)
const taskCount = 40
const tracedEnv = JSON.parse(process.env.BENCH_TRACED_ENV ?? '{}') as Record<string, string>

const sink = await otlpSink()
// The rate limits (issue 44) would refuse a round's starts: off, as bench:runs has them.
const settings = {
  OSD_LOG_LEVEL: 'warn',
  OSD_RATE_LIMIT_PER_MINUTE: 'off',
  OSD_RATE_LIMIT_IP_PER_MINUTE: 'off',
}

interface Side {
  name: string
  daemon: BenchDaemon
  tasks: string[]
  /** CPU µs per run of each counted round: osd's, PostgreSQL's. */
  osd: number[]
  postgres: number[]
  /** Runs succeeded per second of each counted round, from its first start to its last end. */
  perSecond: number[]
}

async function side(name: string, env: Record<string, string>): Promise<Side> {
  const daemon = await benchDaemon({ ...settings, ...env })
  const tasks = (await laneTasks(daemon, taskCount, 'Bench traces')).map((task) => task.id)
  return { name, daemon, tasks, osd: [], postgres: [], perSecond: [] }
}

const off = await side('untraced', {})
const on = await side('traced', { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, ...tracedEnv })
let sent = 0

/** One round on `s`: its runs started at the rate, awaited; answers CPU µs per run, and runs/s. */
async function round(s: Side): Promise<{ osd: number; postgres: number; perSecond: number }> {
  const { daemon } = s
  const pool = new Pool(new URL(daemon.url).origin, { connections: 64 })
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' }
  const before = await daemon.cpu()
  const ids: string[] = []
  const start = async () => {
    const k = sent++
    const res = await pool.request({
      method: 'POST',
      path: `/v1/tasks/${s.tasks[k % taskCount]}/runs`,
      headers,
      body: JSON.stringify({ n: k }),
    })
    const body = (await res.body.json()) as { id: string }
    if (res.statusCode !== 201) throw new Error(`start: ${res.statusCode}`)
    ids.push(body.id)
  }
  const starting: Promise<void>[] = []
  const began = performance.now()
  let n = 0
  if (saturate)
    for (let c = 0; c < concurrency; c++)
      starting.push(
        (async () => {
          while (n++ < runsPerRound) await start()
        })(),
      )
  else
    while (n < runsPerRound) {
      const due = Math.min(
        runsPerRound,
        Math.floor(((performance.now() - began) / 1000) * rate) + 1,
      )
      for (; n < due; n++) starting.push(start())
      await new Promise((r) => setTimeout(r, 2))
    }
  await Promise.all(starting)
  const deadline = Date.now() + 60_000
  for (;;) {
    const [left] = await daemon.sql<{ n: number }[]>`
      select count(*)::int as n from runs
       where id = any(${daemon.sql.array(ids)}::uuid[]) and status <> 'succeeded'`
    if (left!.n === 0) break
    if (Date.now() > deadline) throw new Error(`${left!.n} runs did not succeed within a minute`)
    await new Promise((r) => setTimeout(r, 10))
  }
  const perSecond = runsPerRound / ((performance.now() - began) / 1000)
  // The traced process's last spans are exported in the round they belong to (the batch's delay).
  await new Promise((r) => setTimeout(r, 300))
  const after = await daemon.cpu()
  await pool.close()
  const perRun = (ms: number) => (ms * 1000) / runsPerRound
  return {
    osd: perRun(after.osd - before.osd),
    postgres: perRun(after.postgres - before.postgres),
    perSecond,
  }
}

await round(off)
await round(on)
for (let r = 0; r < rounds; r++)
  for (const s of r % 2 === 0 ? [on, off] : [off, on]) {
    const { osd, postgres, perSecond } = await round(s)
    s.osd.push(osd)
    s.postgres.push(postgres)
    s.perSecond.push(perSecond)
  }

const column = (values: number[]) => values.map((v) => v.toFixed(0).padStart(5)).join(' ')
const ratios = (of: (s: Side) => number[]) => of(on).map((v, i) => v / of(off)[i]!)
const say = (values: number[]) =>
  `${median(values).toFixed(3)} (${values.map((v) => v.toFixed(2)).join(' ')})`
console.log(
  `bench:traces  ${rounds} rounds of ${runsPerRound} runs ${saturate ? `with ${concurrency} starts in flight` : `at ${rate}/s`} each way, deterministic tasks`,
)
console.log(`CPU µs per run       osd, each round             postgres, median`)
for (const s of [off, on])
  console.log(
    `  ${s.name.padEnd(9)} ${column(s.osd)}  median ${median(s.osd).toFixed(0).padStart(5)}   ${median(s.postgres).toFixed(0)}`,
  )
console.log(`traced/untraced, osd CPU per run: ${say(ratios((s) => s.osd))}`)
console.log(`traced/untraced, PostgreSQL CPU per run: ${say(ratios((s) => s.postgres))}`)
console.log(`traced/untraced, runs succeeded per second: ${say(ratios((s) => s.perSecond))}`)
console.log(`sink: ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`)
await Promise.all([off.daemon.close(), on.daemon.close()])
await sink.close()
