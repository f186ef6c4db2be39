// npm run bench:schedules: schedules at scale (issue 15). BENCH_SCHEDULES (default 10,000) deterministic
// tasks, each with a schedule due in the same minute, and two `osd serve --role engine` processes on one
// database (the first process, which also runs an engine, is stopped once they are up). Every fire must
// start its run within 5 s of the fire time, exactly once. The tasks are made through the domain
// functions and the schedules written in one statement (the API would take minutes); the fires go
// through the real engine processes. Prints the fires, the runs per fire, and the delay from the fire
// time to each run created (the fire starts its run) and to its `running` (the engine picked it up).
// Reports; asserts nothing.
import { createTask } from '../server/domain/tasks/index.js'
import { api, benchDaemon, largest, median, percentile, smallest } from './bench-lib.js'

const count = Number(process.env.BENCH_SCHEDULES ?? 10_000)
/** The fire minute is the first minute boundary at least this far after the schedules are written. */
const leadMs = Number(process.env.BENCH_LEAD_MS ?? 10_000)

const daemon = await benchDaemon({ OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn' })
const { sql } = daemon
const call = api(daemon)
await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 10_000 })
const [enterprise] = await sql<{ id: string }[]>`
  select id from enterprises where slug = ${daemon.enterpriseSlug}`
const enterpriseId = enterprise!.id

const engines = await Promise.all([
  daemon.start(['--role', 'engine']),
  daemon.start(['--role', 'engine']),
])
await daemon.first.stop()

let made = Date.now()
const stamp = made.toString(36)
// One task through the domain function; the others are copies of its rows, made in one statement
// (10,000 createTask calls take minutes on a loaded machine).
const template = await createTask(sql, enterpriseId, {
  name: `Scheduled ${stamp} 0`,
  kind: 'deterministic',
  assigneeRole: 'ceo',
  overlapPolicy: 'os',
})
await sql.begin(async (tx) => {
  await tx`
    with src as (
      select t.*, v.definition from tasks t join task_versions v on v.id = t.current_version_id
       where t.id = ${template}
    ), copy as (
      select gen_random_uuid() as id, gen_random_uuid() as version_id, n
        from generate_series(1, ${count - 1}::int) as n
    ), task as (
      insert into tasks (id, enterprise_id, slug, name, assignee_role, kind, status, definition_issues,
                         current_version_id)
      select copy.id, src.enterprise_id, src.slug || '-' || copy.n, src.name || ' ' || copy.n,
             src.assignee_role, src.kind, src.status, src.definition_issues, copy.version_id
        from copy, src
      returning id
    )
    insert into task_versions (id, enterprise_id, task_id, number, definition)
    select copy.version_id, src.enterprise_id, copy.id, 1, src.definition
      from copy join task on task.id = copy.id, src`
})
const taskIds = (
  await sql<{ id: string }[]>`
    select id from tasks where enterprise_id = ${enterpriseId} and name like ${`Scheduled ${stamp} %`}`
).map((row) => row.id)
console.log(`${count} tasks made in ${((Date.now() - made) / 1000).toFixed(1)} s`)

const fireAt = new Date(Math.ceil((Date.now() + leadMs) / 60_000) * 60_000)
const cron = `${fireAt.getUTCMinutes()} ${fireAt.getUTCHours()} * * *`
made = Date.now()
await sql`
  insert into task_schedules (task_id, enterprise_id, cron, timezone, input)
  select id, ${enterpriseId}, ${cron}, 'UTC', jsonb_build_object('n', n)
    from unnest(${sql.array(taskIds)}::uuid[]) with ordinality as t(id, n)`
console.log(
  `${count} schedules "${cron}" (UTC) written in ${Date.now() - made} ms; fire at ${fireAt.toISOString()}`,
)

// Until every task has its run of that minute running or ended, or a minute after the fire time.
const deadline = fireAt.getTime() + 60_000
const runsOfFire = () => sql<{ taskId: string; createdAt: Date; startedAt: Date | null }[]>`
  select task_id, created_at, started_at from runs
   where enterprise_id = ${enterpriseId} and origin = 'schedule'
     and created_at >= ${fireAt} and created_at < ${new Date(fireAt.getTime() + 60_000)}`
let runs = await runsOfFire()
while (Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 1000))
  if (Date.now() < fireAt.getTime()) continue
  runs = await runsOfFire()
  if (runs.length >= count && runs.every((r) => r.startedAt)) break
}
await new Promise((r) => setTimeout(r, 2000)) // a late second run of a fire, if any
runs = await runsOfFire()
const [fires] = await sql<{ n: number; started: number }[]>`
  select count(*)::int as n, count(*) filter (where outcome = 'started')::int as started
    from schedule_fires where enterprise_id = ${enterpriseId} and fire_at = ${fireAt}`

await Promise.all(engines.map((e) => e.stop()))
await daemon.close()

const perTask = new Map(taskIds.map((id) => [id, 0]))
for (const run of runs) perTask.set(run.taskId, (perTask.get(run.taskId) ?? 0) + 1)
const perFire = [...perTask.values()]
const created = runs.map((r) => r.createdAt.getTime() - fireAt.getTime())
const started = runs
  .filter((r) => r.startedAt)
  .map((r) => r.startedAt!.getTime() - fireAt.getTime())
const spread = (values: number[]) =>
  values.length === 0
    ? 'none'
    : `p50 ${median(values).toFixed(0)} ms, p99 ${percentile(values, 99).toFixed(0)} ms, max ${largest(values)} ms`

console.log(`\nbench:schedules  two osd serve --role engine on one embedded PostgreSQL`)
console.log(`tasks with a schedule due at ${fireAt.toISOString()}: ${count}`)
console.log(`fires recorded: ${fires!.n} (started a run: ${fires!.started})`)
console.log(
  `runs per fire: min ${smallest(perFire)}, max ${largest(perFire)}; fires with != 1 run: ${perFire.filter((n) => n !== 1).length}`,
)
console.log(`fire time -> run created:  ${spread(created)}  (${created.length} runs)`)
console.log(`fire time -> run running:  ${spread(started)}  (${started.length} runs)`)
console.log(
  `target: every fire starts exactly one run within 5 s: ${perFire.every((n) => n === 1) && created.every((d) => d <= 5000) ? 'met' : 'NOT met'}`,
)
