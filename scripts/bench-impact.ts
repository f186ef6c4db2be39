// npm run bench:impact: what keeping notes' impact current costs, and what the alternatives would
// (issue 31: "a counter table updated when a run ends, or a materialised summary refreshed by the
// engine: measure"). One enterprise, BENCH_TASKS tasks (default 20), BENCH_NOTES enterprise notes
// (default 10,000) and BENCH_RUNS finished runs (default 100,000), 70% succeeded, each with a
// memory.recalled event of up to 10 notes (a few hundred notes popular, as a real memory's are), the
// counters built as migration 0023 builds them. Times:
// - the counters: what a run's end adds (countImpact for one run that recalled 10 notes, in its own
//   transaction, as finishAll calls it), and the reads: GET /v1/memory/{id}, a page of GET /v1/memory,
//   and GET /v1/memory?sort=impact over every note;
// - a summary refreshed from runs and events (what the migration's backfill computes: every note's
//   counts from scratch), which is what the engine would run per refresh;
// - impact computed at read from runs and events for one popular note (no counters, no summary).
// On a throwaway embedded PostgreSQL (or DATABASE_URL). Reports; asserts nothing.
import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { readPage } from '../server/db/paging.js'
import { transaction } from '../server/db/sql.js'
import { createEnterprise } from '../server/domain/enterprises/index.js'
import { countImpact, getNote, listNotes } from '../server/domain/learning/index.js'
import { createTask } from '../server/domain/tasks/index.js'
import { noteSorts } from '../shared/values.js'
import { median, percentile } from './bench-lib.js'

const taskCount = Number(process.env.BENCH_TASKS ?? 20)
const noteCount = Number(process.env.BENCH_NOTES ?? 10_000)
const runCount = Number(process.env.BENCH_RUNS ?? 100_000)
const samples = Number(process.env.BENCH_SAMPLES ?? 200)

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-impact-'))
const config = loadConfig({ dataDir }, { DATABASE_URL: process.env.DATABASE_URL ?? '' })
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const ms = (n: number) => n.toFixed(2).padStart(8)
const report = (label: string, times: number[]) =>
  console.log(
    `${label.padEnd(52)} p50 ${ms(median(times))} ms  p99 ${ms(percentile(times, 99))} ms  (${times.length})`,
  )
async function timeEach(label: string, n: number, fn: (i: number) => Promise<unknown>) {
  for (let i = 0; i < Math.min(10, n); i++) await fn(i) // warm-up
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    await fn(i)
    times.push(performance.now() - t0)
  }
  report(label, times)
}
async function once(label: string, fn: () => Promise<unknown>) {
  const t0 = performance.now()
  await fn()
  console.log(`${label.padEnd(52)} ${ms(performance.now() - t0)} ms`)
}

try {
  const enterprise = await createEnterprise(sql, { name: `Bench impact ${Date.now()}` }, config)
  const tasks: string[] = []
  for (let i = 0; i < taskCount; i++)
    tasks.push(
      await createTask(sql, enterprise.id, {
        name: `Bench task ${i}`,
        kind: 'llm',
        assigneeRole: 'ceo',
        goal: 'Keep the billing pipeline healthy',
      } as never),
    )
  const started = performance.now()
  await sql`
    insert into memory_notes (enterprise_id, layer, text, source, created_by)
    select ${enterprise.id}, 'enterprise', 'lesson ' || g || ' about billing step ' || (g * 7919) % 100003,
           'training', 'bench'
      from generate_series(1, ${noteCount}::int) g`
  const notes = (
    await sql<{ id: string }[]>`
      select id from memory_notes where enterprise_id = ${enterprise.id} order by created_at, id`
  ).map((n) => n.id)
  // Runs ended over the last 30 days; 9 in 10 recalled up to 10 notes, mostly of the first 300.
  const [template] = await sql<{ versionId: string }[]>`
    select current_version_id as version_id from tasks where id = ${tasks[0]!}`
  for (let from = 0; from < runCount; from += 20_000) {
    const to = Math.min(runCount, from + 20_000)
    await sql`
      with made as (
        insert into runs (enterprise_id, task_id, task_version_id, task_slug, task_name, kind,
                          overlap_policy, lane, status, origin, input, execution_id, finished_at)
        select ${enterprise.id}, (${sql.array(tasks)}::uuid[])[1 + g % ${tasks.length}::int],
               ${template!.versionId}, 'bench', 'Bench', 'llm', 'os', 'bench:' || g,
               case when random() < 0.7 then 'succeeded' else 'failed' end, 'api', '{}',
               gen_random_uuid(), now() - interval '30 days' * random()
          from generate_series(${from}::int, ${to - 1}::int) g
        returning id
      )
      insert into run_events (enterprise_id, run_id, type, payload)
      select ${enterprise.id}, made.id, 'memory.recalled',
             jsonb_build_object('noteIds', coalesce((
               select jsonb_agg(distinct (${sql.array(notes)}::uuid[])[
                        1 + case when random() < 0.8 then floor(random() * 300)::int
                                 else floor(random() * ${notes.length}::int)::int end])
                 from generate_series(1, 1 + floor(random() * 10)::int)
                -- made.id: drawn for each run, not once for all
                where made.id is not null), '[]'::jsonb))
        from made where random() < 0.9`
  }
  // The counters as migration 0023 builds them (its backfill, timed: a summary's refresh is this).
  const backfill = (await import('node:fs/promises')).readFile(
    join(import.meta.dirname, '..', 'migrations', '0023_memory_impact.sql'),
    'utf8',
  )
  const statements = (await backfill)
    .split(/\n(?=with ended as \()/)
    .slice(1)
    .map((s) => s.slice(0, s.indexOf(';') + 1))
  await sql`vacuum analyze`
  console.log(
    `${noteCount} notes, ${taskCount} tasks, ${runCount} finished runs with their recall events written in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  )
  console.log('\nthe machine is shared and loaded: compare figures of the same run\n')
  await once("summary from scratch: every task's counts", () => sql.unsafe(statements[0]!))
  await once("summary from scratch: every note's counts", () => sql.unsafe(statements[1]!))
  await sql`analyze memory_note_impact`
  const [counted] = await sql<{ pairs: number; recalls: number }[]>`
    select count(*)::int as pairs, sum(succeeded + failed)::int as recalls from memory_note_impact`
  console.log(`(${counted!.pairs} note-task rows counting ${counted!.recalls} recalls)`)

  // Impact at read from runs and events, without counters: one popular note.
  const popular = notes[0]!
  await timeEach(
    'impact of one note from runs and events',
    5,
    () =>
      sql`
      with rec as (
        select e.run_id from run_events e
         where e.enterprise_id = ${enterprise.id} and e.type = 'memory.recalled'
           and e.payload -> 'noteIds' ? ${popular}),
      per as (
        select r.task_id, min(r.finished_at) as a, max(r.finished_at) as b,
               count(*) filter (where r.status = 'succeeded') as s,
               count(*) filter (where r.status = 'failed') as f
          from runs r join rec on rec.run_id = r.id
         where r.status in ('succeeded', 'failed') group by r.task_id)
      select sum(per.s) as s, sum(per.f) as f,
             sum((select count(*) from runs x
                   where x.enterprise_id = ${enterprise.id} and x.task_id = per.task_id
                     and x.status in ('succeeded', 'failed')
                     and x.finished_at between per.a and per.b)) - sum(per.s + per.f) as base
        from per`,
  )

  // The counters: what a run's end adds, and the reads.
  const ends: { runId: string; taskId: string }[] = []
  for (let i = 0; i < samples + 10; i++) {
    const taskId = tasks[i % tasks.length]!
    const [run] = await sql<{ id: string }[]>`
      insert into runs (enterprise_id, task_id, task_version_id, task_slug, task_name, kind,
                        overlap_policy, lane, status, origin, input, execution_id, finished_at)
      values (${enterprise.id}, ${taskId}, ${template!.versionId}, 'bench', 'Bench', 'llm', 'os',
              ${`bench:end:${i}`}, 'failed', 'api', '{}', ${randomUUID()}, now())
      returning id`
    await sql`
      insert into run_events (enterprise_id, run_id, type, payload)
      values (${enterprise.id}, ${run!.id}, 'memory.recalled',
              ${sql.json({ noteIds: notes.slice(i % 50, (i % 50) + 10) })})`
    ends.push({ runId: run!.id, taskId })
  }
  console.log('')
  await timeEach("counters: a run's end (10 notes recalled)", samples, (i) =>
    transaction(sql, (tx) =>
      countImpact(tx, [
        {
          enterpriseId: enterprise.id,
          taskId: ends[i]!.taskId,
          runId: ends[i]!.runId,
          outcome: 'failed',
        },
      ]),
    ),
  )
  await timeEach("  beside: a run's end without recall (one task row)", samples, (i) =>
    transaction(sql, (tx) =>
      countImpact(tx, [
        {
          enterpriseId: enterprise.id,
          taskId: ends[i]!.taskId,
          runId: randomUUID(),
          outcome: 'succeeded',
        },
      ]),
    ),
  )
  await timeEach('counters: GET /v1/memory/{id} (getNote)', samples, (i) =>
    getNote(sql, enterprise.id, notes[i % 300]!),
  )
  await timeEach('counters: a page of 25 notes (listNotes)', samples, () =>
    listNotes(sql, enterprise.id, {}, readPage({}, noteSorts)),
  )
  await timeEach('counters: sort=impact over every note (listNotes)', 20, () =>
    listNotes(sql, enterprise.id, {}, readPage({ sort: 'impact' }, noteSorts)),
  )
} finally {
  await db.close()
  await rm(dataDir, { recursive: true, force: true })
}
