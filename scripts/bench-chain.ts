// npm run bench:chain: how fast successors carry work along (issue: Successors and executions,
// Benchmark). A chain of 40 deterministic tasks linked by successors, from the first POST to the 40th
// run's succeeded; 40 independent starts (fan-out) to all succeeded; and, as the baseline measured in the
// same run, one run from POST to succeeded. Medians of several rounds. Reports; asserts nothing.
// Anchor: the Windmill benchmark's 40 lightweight tasks (Hatchet 1.2 s, Temporal 3.0 s, Windmill 2.1 s on
// an AWS m4.large). Target: the 40-chain under 0.4 s here.
import { api, benchDaemon, largest, median, smallest, watchRuns } from './bench-lib.js'

const rounds = Number(process.env.BENCH_ROUNDS ?? 7)
const length = Number(process.env.BENCH_CHAIN ?? 40)

const daemon = await benchDaemon({ OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn' })
const call = api(daemon)
await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 1000 })

const stamp = Date.now().toString(36)
const task = (name: string, successors: { slug: string }[] = []) =>
  call<{ id: string; slug: string }>('POST', '/tasks', {
    name,
    slug: name.toLowerCase().replaceAll(' ', '-'),
    kind: 'deterministic',
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
    successors,
  })

// The chain is made from its end, so every successor names a task that exists.
const chain: { id: string; slug: string }[] = []
for (let i = length - 1; i >= 0; i--) {
  const after = chain[0]
  chain.unshift(await task(`Chain ${stamp} ${i}`, after ? [{ slug: after.slug }] : []))
}
const independent: { id: string }[] = []
for (let i = 0; i < length; i++) independent.push(await task(`Fan ${stamp} ${i}`))
const single = await task(`Single ${stamp}`)

const watch = await watchRuns(daemon.sql)

/**
 * Waits until `count` runs of the executions succeeded; answers ms from `t0` to the last of their ends
 * (the commit that ended each run, seen as its last notification).
 */
async function finished(executionIds: string[], count: number, t0: number): Promise<number> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const rows = await daemon.sql<{ id: string }[]>`
      select id from runs
       where execution_id = any(${daemon.sql.array(executionIds)}::uuid[]) and status = 'succeeded'`
    if (rows.length >= count) {
      await new Promise((r) => setTimeout(r, 20)) // the last notifications are on their way
      return largest(rows.map((r) => watch.lastMoved.get(r.id)!)) - t0
    }
    if (Date.now() > deadline)
      throw new Error(`only ${rows.length} of ${count} runs succeeded in 60 s`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const start = (taskId: string) => call<{ executionId: string }>('POST', `/tasks/${taskId}/runs`, {})

const results = { single: [] as number[], chain: [] as number[], fanOut: [] as number[] }
for (let round = 0; round < rounds; round++) {
  let t0 = performance.now()
  results.single.push(await finished([(await start(single.id)).executionId], 1, t0))

  t0 = performance.now()
  results.chain.push(await finished([(await start(chain[0]!.id)).executionId], length, t0))

  t0 = performance.now()
  const fan = await Promise.all(independent.map((t) => start(t.id)))
  results.fanOut.push(
    await finished(
      fan.map((r) => r.executionId),
      length,
      t0,
    ),
  )
}
await watch.stop()
await daemon.close()

const ms = (values: number[]) => `${median(values).toFixed(0)} ms`.padStart(8)
const spread = (values: number[]) =>
  `(min ${smallest(values)}, max ${largest(values)})`.padStart(20)
console.log(`\nbench:chain  ${rounds} rounds, one osd (role all), embedded PostgreSQL`)
console.log('1 run, POST -> succeeded    ', ms(results.single), spread(results.single))
console.log(`${length}-chain of successors     `, ms(results.chain), spread(results.chain))
console.log(`${length} independent starts     `, ms(results.fanOut), spread(results.fanOut))
const step = median(results.chain) / length
console.log(
  `\nper chain step ${step.toFixed(1)} ms = ${(step / median(results.single)).toFixed(2)} x one run's POST -> succeeded; target: ${length}-chain < 200 ms (issue 15)`,
)
