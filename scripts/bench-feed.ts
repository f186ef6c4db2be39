// npm run bench:feed: what the event feed costs PostgreSQL per event (issue 47), apart from everything
// else bench:runs measures, so that a change of the feed's SQL can be weighed in µs rather than in
// done/s, which moves 20% between rounds on a shared machine. On a throwaway embedded PostgreSQL
// (the backends' CPU is read from /proc, so a DATABASE_URL elsewhere cannot be measured). Reports;
// asserts nothing.
//   BENCH_RUNS (3,000) runs of a deterministic task, made in one transaction and left pending (no
//   engine runs here). Each round writes three events of each run as the engine does (appendEvents:
//   run.queued in statements of BENCH_BATCH runs, then run.running and run.succeeded together), and
//   a sequencing pass (sequenceFeed) follows every BENCH_PASS_EVERY statements, as the engines' passes
//   follow the writers under load. Rounds alternate with the feed on and off (off: the trigger that
//   copies a run's events into the inbox disabled, as bench:runs's BENCH_FEED=ab does).
//   Reported, medians of BENCH_ROUNDS rounds each: the writer's backend CPU µs per event on and off
//   (their difference is the trigger's part), the sequencer's, and the inbox's vacuum's.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { transaction, type Sql } from '../server/db/sql.js'
import { createEnterprise } from '../server/domain/enterprises/index.js'
import { sequenceFeed, vacuumInbox } from '../server/domain/events/index.js'
import { appendEvents, enqueueRuns, type RunRow } from '../server/domain/runs/index.js'
import { createTask } from '../server/domain/tasks/index.js'
import { median, processTime } from './bench-lib.js'

const runCount = Number(process.env.BENCH_RUNS ?? 3000)
const batch = Number(process.env.BENCH_BATCH ?? 8)
const passEvery = Number(process.env.BENCH_PASS_EVERY ?? 10)
const rounds = Number(process.env.BENCH_ROUNDS ?? 6)

if (process.env.DATABASE_URL) {
  console.log(
    'bench:feed reads the backends CPU from /proc: it runs on its own embedded PostgreSQL only',
  )
  process.exit(0)
}

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-feed-'))
const config = loadConfig({ dataDir }, { DATABASE_URL: '' })
const db = await openDatabase(config, log)
await migrate(db.sql)

/** A connection of its own, and its backend's CPU µs so far (user + system, from /proc). */
async function backend(): Promise<{ sql: Sql; cpuUs(): Promise<number> }> {
  const sql = await db.pool({ max: 1 })
  const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`
  const pid = row!.pid
  return {
    sql,
    async cpuUs() {
      return (await processTime(pid))!.ms * 1000
    },
  }
}

try {
  const { sql } = db
  const enterprise = await createEnterprise(sql, { name: `Bench feed ${Date.now()}` }, config)
  const [team] = await sql<{ id: string }[]>`
    select id from teams where enterprise_id = ${enterprise.id} order by created_at limit 1`
  const taskId = await createTask(sql, enterprise.id, {
    name: 'Bench feed',
    kind: 'deterministic',
    teamId: team!.id,
    assigneeRole: 'ceo',
  } as never)
  const made = await transaction(sql, (tx) =>
    enqueueRuns(
      tx,
      Array.from({ length: runCount }, (_, n) => ({
        enterpriseId: enterprise.id,
        taskId,
        input: { n },
      })),
      { origin: 'api' },
    ),
  )
  const runs = made.filter((r): r is RunRow => !(r instanceof Error))
  const writer = await backend()
  const sequencer = await backend()
  const sequence = async () => {
    let moved = 0
    for (let done; (done = await sequenceFeed(sequencer.sql, { mail: false })).events > 0;)
      moved += done.events
    return moved
  }
  await sequence()

  async function round(feed: boolean) {
    await writer.sql.unsafe(
      `alter table run_events ${feed ? 'enable' : 'disable'} trigger run_events_feed`,
    )
    const [last] = await writer.sql<{ mark: string }[]>`
      select coalesce(max(seq), 0)::text as mark from run_events`
    const mark = last!.mark
    const writerAt = await writer.cpuUs()
    const sequencerAt = await sequencer.cpuUs()
    let statements = 0
    for (const types of [['run.queued'], ['run.running', 'run.succeeded']])
      for (let i = 0; i < runs.length; i += batch) {
        const events = runs
          .slice(i, i + batch)
          .flatMap((run) => types.map((type) => ({ run, type })))
        await transaction(writer.sql, (tx) => appendEvents(tx, events))
        if (++statements % passEvery === 0 && feed) await sequence()
      }
    if (feed) await sequence()
    const events = runs.length * 3
    const writerUs = ((await writer.cpuUs()) - writerAt) / events
    const sequencerUs = ((await sequencer.cpuUs()) - sequencerAt) / events
    const vacuumAt = await sequencer.cpuUs()
    if (feed) await vacuumInbox(sequencer.sql)
    const vacuumUs = ((await sequencer.cpuUs()) - vacuumAt) / events
    // The table as it was, so that each round writes into the same.
    await writer.sql`delete from run_events where seq > ${mark}::bigint`
    await writer.sql.unsafe('vacuum run_events')
    return { writerUs, sequencerUs, vacuumUs }
  }

  const on: Awaited<ReturnType<typeof round>>[] = []
  const off: typeof on = []
  await round(true) // warms the caches and the plans; not counted
  for (let r = 0; r < rounds; r++)
    for (const feed of r % 2 === 0 ? [true, false] : [false, true])
      (feed ? on : off).push(await round(feed))
  await writer.sql.unsafe('alter table run_events enable trigger run_events_feed')
  const us = (values: number[]) => median(values).toFixed(1).padStart(6)
  const writerOn = median(on.map((r) => r.writerUs))
  const writerOff = median(off.map((r) => r.writerUs))
  const sequencerOn = median(on.map((r) => r.sequencerUs))
  console.log(
    `\nbench:feed  ${runs.length} runs, 3 events each, ${batch} runs a statement, a pass every ${passEvery} statements, ${rounds} rounds\n`,
  )
  console.log(`writer, feed on     ${us(on.map((r) => r.writerUs))} µs/event`)
  console.log(`writer, feed off    ${us(off.map((r) => r.writerUs))} µs/event`)
  console.log(`sequencer           ${us(on.map((r) => r.sequencerUs))} µs/event`)
  console.log(`inbox vacuum        ${us(on.map((r) => r.vacuumUs))} µs/event`)
  console.log(
    `the feed's part     ${(writerOn - writerOff + sequencerOn).toFixed(1).padStart(6)} µs/event (the trigger's, on minus off, plus the sequencer's)`,
  )
} finally {
  await db.close()
  await rm(dataDir, { recursive: true, force: true })
}
