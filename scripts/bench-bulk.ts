// npm run bench:bulk: how fast a bulk operation acts on runs (issue 50: Act on a filter, Measure), and
// what it costs the engine meanwhile. One osd process (osd serve: the API and the engine) on a
// throwaway embedded PostgreSQL. Reports; asserts nothing.
//   retry:  BENCH_BULK_RUNS (10,000) failed runs of a deterministic task are made at once (copies of a
//           real run, in one insert), then POST /v1/runs/bulk {action: retry, filter: {taskId, status:
//           failed}}; the operation's rate is matched / (its finishedAt - its createdAt), the server's
//           own times. The retried runs are pending at once and the engine runs them as they come.
//           Median of BENCH_ROUNDS (3), each on a task of its own.
//   beside: bench:runs' load (BENCH_CONCURRENCY API starts in flight on 40 deterministic tasks) for
//           BENCH_SECONDS, and its done/s (runs of the load that succeeded in the window) alone, then
//           with a bulk operation started at the same time: a cancel of BENCH_BULK_RUNS pending runs
//           delayed a day (the operation's own cost: it makes no run) and a retry of as many failed runs
//           (its cost and that of running the 10,000 runs it makes). Median of the rounds each.
import { Pool } from 'undici'
import { api, benchDaemon, median } from './bench-lib.js'

const bulkRuns = Number(process.env.BENCH_BULK_RUNS ?? 10_000)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const seconds = Number(process.env.BENCH_SECONDS ?? 10)
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32)

// The limits of one token (issue 44) would cap the load at 100 starts/s: off, as bench:api has them.
const daemon = await benchDaemon({
  OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn',
  OSD_RATE_LIMIT_PER_MINUTE: 'off',
})
const { sql } = daemon
const call = api(daemon)
await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 10000 })

const newTask = (name: string) =>
  call<{ id: string }>('POST', '/tasks', {
    name,
    kind: 'deterministic',
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
    serializeOn: ['n'],
  })

/** Waits until `check` holds, looking every 50 ms (5 minutes at most). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 300_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 5 minutes`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/**
 * A task with `n` runs in `status` (failed, or pending and delayed a day), each in a lane and an
 * execution of its own: copies of one real run of the task, made in one insert.
 */
async function runsOf(label: string, n: number, status: 'failed' | 'pending') {
  const task = await newTask(`${label} ${Date.now()}`)
  const seed = await call<{ id: string }>('POST', `/tasks/${task.id}/runs`, { n: -1 })
  await until(async () => {
    const [r] = await sql`select status from runs where id = ${seed.id}`
    return r!.status === 'succeeded'
  }, 'the seed run')
  const fields =
    status === 'failed'
      ? sql`'status', 'failed', 'reason', 'provider outage', 'result',
            jsonb_build_object('outcome', 'failed', 'summary', 'provider outage')`
      : sql`'status', 'pending', 'not_before', now() + interval '1 day', 'member_id', null,
            'queued_at', null, 'started_at', null, 'finished_at', null, 'result', null`
  await sql`
    insert into runs
    select copy.*
      from runs r,
           (select gen_random_uuid() as id, g from generate_series(1, ${n}::int) g) x,
           jsonb_populate_record(null::runs, to_jsonb(r) || jsonb_build_object(
             'id', x.id, 'execution_id', x.id, 'lane', r.lane || ':' || x.g,
             'input', jsonb_build_object('n', x.g), ${fields})) copy
     where r.id = ${seed.id}`
  await sql`analyze runs`
  return task
}

/** Starts a bulk operation; answers when it completed and its rate (runs/s, the server's times). */
async function bulk(action: 'retry' | 'cancel', taskId: string) {
  const status = action === 'retry' ? 'failed' : 'pending'
  const began = performance.now()
  const op = await call<{ id: string; matched: number }>('POST', '/runs/bulk', {
    action,
    filter: { taskId, status },
    idempotencyKey: `bench-${taskId}`,
  })
  const answeredMs = performance.now() - began
  let end: { status: string; matched: number; done: number; skipped: number; failed: number }
  await until(async () => {
    end = await call('GET', `/runs/bulk/${op.id}`)
    return end.status === 'completed'
  }, `bulk ${action}`)
  const [times] = await sql<{ seconds: number }[]>`
    select extract(epoch from finished_at - created_at)::float8 as seconds
      from run_bulk_operations where id = ${op.id}`
  return { ...end!, answeredMs, seconds: times!.seconds, rate: end!.matched / times!.seconds }
}

/** Waits until the engine has run every run of the enterprise it can run now (the retried ones). */
async function drained() {
  await until(async () => {
    const [r] = await sql<{ n: number }[]>`
      select count(*)::int as n from runs
       where status in ('queued', 'running') or (status = 'pending' and not_before is null)`
    return r!.n === 0
  }, 'the backlog')
}

// The operation alone.
const retries: (Awaited<ReturnType<typeof bulk>> & { cpuSeconds: number })[] = []
for (let round = 0; round < rounds; round++) {
  const task = await runsOf('Bench failed', bulkRuns, 'failed')
  const before = await daemon.cpu()
  const retried = await bulk('retry', task.id)
  const after = await daemon.cpu()
  // CPU of osd and PostgreSQL while the operation went (the engine's runs of the retries included):
  // what the rate would be on an idle machine of two cores is about matched / (cpu / 2).
  const cpuSeconds = (after.osd + after.postgres - before.osd - before.postgres) / 1000
  retries.push({ ...retried, cpuSeconds })
  await drained()
}

// bench:runs' load alone and beside an operation (BENCH_ONLY=retry: the operation alone only).
const loadTasks: { id: string }[] = []
for (let i = 0; i < 40; i++) loadTasks.push(await newTask(`Bench load ${i}`))
const origin = new URL(daemon.url).origin
let n = 0

/** Keeps `concurrency` starts in flight for `seconds`; answers the load's runs that succeeded per s. */
async function load(): Promise<number> {
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 })
  const ids: string[] = []
  const [began] = await sql<{ at: Date }[]>`select clock_timestamp() as at`
  const from = began!.at
  const until = performance.now() + seconds * 1000
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const k = n++
        const res = await pool.request({
          method: 'POST',
          path: `/v1/tasks/${loadTasks[k % loadTasks.length]!.id}/runs`,
          headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ n: k }),
        })
        const body = (await res.body.json()) as { id?: string }
        if (res.statusCode < 300 && body.id) ids.push(body.id)
      }
    }),
  )
  const [ended] = await sql<{ at: Date }[]>`select clock_timestamp() as at`
  const to = ended!.at
  await pool.close()
  const [done] = await sql<{ n: number }[]>`
    select count(*)::int as n from runs
     where id = any(${sql.array(ids)}::uuid[]) and status = 'succeeded' and finished_at <= ${to}`
  return done!.n / ((to.getTime() - from.getTime()) / 1000)
}

const alone: number[] = []
const besideCancel: number[] = []
const besideRetry: number[] = []
const cancels: Awaited<ReturnType<typeof bulk>>[] = []
for (let round = 0; round < (process.env.BENCH_ONLY === 'retry' ? 0 : rounds); round++) {
  alone.push(await load())
  await drained()
  const pending = await runsOf('Bench delayed', bulkRuns, 'pending')
  const cancelling = bulk('cancel', pending.id)
  besideCancel.push(await load())
  cancels.push(await cancelling)
  await drained()
  const failed = await runsOf('Bench failed beside', bulkRuns, 'failed')
  const retrying = bulk('retry', failed.id)
  besideRetry.push(await load())
  await retrying
  await drained()
}
await daemon.close()

const m = (values: number[], digits = 0) => median(values).toFixed(digits)
console.log(
  `\nbench:bulk  ${rounds} rounds, ${bulkRuns} runs per operation, one osd process, embedded PostgreSQL`,
)
console.log(
  `retry of ${bulkRuns} failed runs: ${m(retries.map((r) => r.rate))} runs/s` +
    ` (rounds: ${retries.map((r) => r.rate.toFixed(0)).join(', ')};` +
    ` ${m(
      retries.map((r) => r.seconds),
      1,
    )} s; POST answered in ${m(retries.map((r) => r.answeredMs))} ms;` +
    ` done ${retries.map((r) => r.done).join('/')}, skipped ${retries.map((r) => r.skipped).join('/')})`,
)
console.log(
  `  CPU (osd + PostgreSQL) while it went: ${m(
    retries.map((r) => r.cpuSeconds),
    1,
  )} s,` +
    ` ${m(
      retries.map((r) => (r.cpuSeconds * 1000) / r.matched),
      2,
    )} ms a run, the engine's runs of the retries included`,
)
if (alone.length > 0) {
  console.log(
    `cancel of ${bulkRuns} delayed pending runs beside the load: ${m(cancels.map((r) => r.rate))} runs/s`,
  )
  const base = median(alone)
  console.log(
    `load (${concurrency} API starts in flight, ${seconds} s) done/s: alone ${base.toFixed(0)};` +
      ` beside a cancel ${m(besideCancel)} (${((median(besideCancel) / base - 1) * 100).toFixed(0)}%);` +
      ` beside a retry ${m(besideRetry)} (${((median(besideRetry) / base - 1) * 100).toFixed(0)}%,` +
      ` the engine also running the ${bulkRuns} retried runs)`,
  )
  console.log(
    `rounds: alone ${alone.map((x) => x.toFixed(0)).join(', ')}; beside cancel ${besideCancel
      .map((x) => x.toFixed(0))
      .join(', ')}; beside retry ${besideRetry.map((x) => x.toFixed(0)).join(', ')}`,
  )
}
