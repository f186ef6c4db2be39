// npm run bench:memory: how fast memory answers with BENCH_NOTES active notes (default 100,000) in one
// enterprise (issue 16: ask p50 <= 10 ms, p99 <= 30 ms). The notes are spread over the enterprise layer,
// the General team and BENCH_TASKS tasks (default 100), each 8 to 30 words: mostly common words of
// operations prose (each in about 5% of the notes) and some rarer names and codes. Times, over
// BENCH_QUERIES queries (default 300) of 1 to 4 varied words each, after a warm-up:
// - GET /v1/tasks/{id}/memory/ask through the HTTP app (in process, app.request: no socket);
// - recallNotes, the domain function a run calls at its start (it also counts the recall);
// - the same ask with a run-sized question (a goal of about 25 words), what a run's recall searches for;
// - the same asks with one word misspelt (two letters swapped), which recall looks for as the most
//   similar words notes hold (memory_typos, pg_trgm; issue 31), and a person's note written, with
//   its check for a near-duplicate among the layer's notes;
// - what memory adds to an llm run's start (server/engine/agent/engine/runs/memory.ts, as the agent loop's
//   prepare() calls it, issue 16: <= 5 ms): reading the run's recorded recall, recalling for its goal
//   (about 25 words) and input, and recording memory.recalled under the run's lock; and the same on a
//   resumed run, which reads its recorded notes back. Beside it, the reads a run's start makes anyway
//   (its version, member and enterprise), as the start without memory;
// - and GET /v1/enterprise/concurrency through the same app as a baseline of an authenticated read.
// On a throwaway embedded PostgreSQL (or DATABASE_URL). Reports; asserts nothing.
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { createSealer } from '../server/crypto.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { createEnterprise } from '../server/domain/enterprises/index.js'
import {
  memorySupport,
  recallNotes,
  searchTaskNotes,
  writeNote,
} from '../server/domain/learning/index.js'
import { appendWhileHeld, enqueueRun, type RunRow } from '../server/domain/runs/index.js'
import { readRecordedMemory, recallForRun, recallText } from '../server/engine/runs/index.js'
import { createTask } from '../server/domain/tasks/index.js'
import { createToken } from '../server/domain/people/index.js'
import { createApp } from '../server/http/app.js'
import { allScopes } from '../shared/scopes.js'
import { median, percentile } from './bench-lib.js'

const notes = Number(process.env.BENCH_NOTES ?? 100_000)
const taskCount = Number(process.env.BENCH_TASKS ?? 100)
const queries = Number(process.env.BENCH_QUERIES ?? 300)

const common =
  `deploy release invoice customer billing refund payment account database migration backup
restore staging production server cluster pipeline build test review approve reject ticket issue bug
incident outage alert monitor latency error timeout retry queue worker schedule report weekly monthly
daily friday monday budget forecast contract vendor supplier order shipment warehouse inventory stock
price discount quote renewal subscription plan trial onboarding support email phone escalation manager
team lead owner policy security password token certificate firewall network storage bucket log audit
compliance privacy gdpr export import csv spreadsheet dashboard metric kpi revenue churn signup login
branch merge commit tag version changelog rollback hotfix feature flag config secret key rotate expire
renew archive delete cleanup cache index query slow fast timezone holiday deadline sla priority urgent
translation language french german spanish legal finance payroll tax vat receipt expense travel hotel
flight meeting calendar agenda minutes follow summary draft template brand logo website blog social
campaign newsletter discount coupon partner reseller region europe asia america office remote laptop`
    .split(/\s+/)
    .filter(Boolean)
const syllables = 'ka lo mi ra ven tor al is ex qu bri dan sel mor pha zu nel gri ost'.split(' ')
// Rarer words: names of customers, products and codes, about 8,000 of them.
const rare = Array.from({ length: 8000 }, (_, i) => {
  const a = syllables[i % syllables.length]!
  const b = syllables[Math.floor(i / syllables.length) % syllables.length]!
  const c = syllables[Math.floor(i / 400) % syllables.length]!
  return `${a}${b}${c}`
})

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-memory-'))
const config = loadConfig({ dataDir }, { DATABASE_URL: process.env.DATABASE_URL ?? '' })
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const app = createApp({ sql, config, log, sealer: createSealer(randomBytes(32)) })
const ms = (n: number) => n.toFixed(2).padStart(7)

try {
  const enterprise = await createEnterprise(sql, { name: `Bench memory ${Date.now()}` }, config)
  const { token } = await createToken(sql, enterprise.id, { name: 'bench', scopes: allScopes })
  const [team] = await sql<{ id: string }[]>`
    select id from teams where enterprise_id = ${enterprise.id} order by created_at limit 1`
  const tasks: string[] = []
  for (let i = 0; i < taskCount; i++) {
    const id = await createTask(sql, enterprise.id, {
      name: `Bench task ${i}`,
      kind: 'llm',
      teamId: team!.id,
      assigneeRole: 'ceo',
      goal: 'Keep the billing pipeline healthy and refunds on time',
    } as never)
    tasks.push(id)
  }
  const started = performance.now()
  // In batches of 10,000, generated in the database: 40% enterprise notes, 20% team notes, 40% task notes.
  const batch = 10_000
  for (let from = 0; from < notes; from += batch) {
    await sql`
      insert into memory_notes (enterprise_id, layer, task_id, team_id, text, source, created_by)
      select ${enterprise.id},
             case when g % 10 < 4 then 'enterprise' when g % 10 < 6 then 'team' else 'task' end,
             case when g % 10 >= 6 then (${sql.array(tasks)}::uuid[])[1 + g % ${tasks.length}::int] end,
             case when g % 10 between 4 and 5 then ${team!.id}::uuid end,
             (select string_agg(
                       case when random() < 0.8
                            then (${sql.array(common)}::text[])[1 + floor(${common.length}::int * random())::int]
                            else (${sql.array(rare)}::text[])[1 + floor(${rare.length}::int * random())::int] end,
                       ' ')
                from generate_series(1, 8 + (g * 7) % 23) w),
             'training', 'bench'
        from generate_series(${from}::int, ${Math.min(notes, from + batch) - 1}::int) g`
  }
  await sql`vacuum analyze memory_notes`
  console.log(
    `${notes} active notes over ${taskCount} tasks written in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  )

  const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!
  const question = (words: number) =>
    Array.from({ length: words }, () => (Math.random() < 0.6 ? pick(common) : pick(rare))).join(' ')
  const questions = Array.from({ length: queries }, () =>
    question(1 + Math.floor(Math.random() * 4)),
  )
  const goals = Array.from({ length: Math.max(50, queries / 3) }, () => question(25))
  // One word of the question misspelt: two letters of its longest word swapped.
  const misspell = (q: string) => {
    const words = q.split(' ')
    const i = words.reduce((best, w, j) => (w.length > words[best]!.length ? j : best), 0)
    const w = words[i]!
    const at = Math.max(1, Math.floor(w.length / 2) - 1)
    words[i] = w.length < 4 ? w : `${w.slice(0, at)}${w[at + 1]}${w[at]}${w.slice(at + 2)}`
    return words.join(' ')
  }
  const typos = questions.map(misspell)
  const typoGoals = goals.map(misspell)
  const headers = { authorization: `Bearer ${token}` }

  async function timeEach(label: string, items: string[], fn: (item: string) => Promise<unknown>) {
    for (const item of items.slice(0, 20)) await fn(item) // warm-up
    const times: number[] = []
    for (const item of items) {
      const t0 = performance.now()
      await fn(item)
      times.push(performance.now() - t0)
    }
    console.log(
      `${label.padEnd(44)} p50 ${ms(median(times))} ms  p99 ${ms(percentile(times, 99))} ms  (${items.length})`,
    )
    return times
  }
  const ask = async (q: string) => {
    const task = pick(tasks)
    const res = await app.request(`/v1/tasks/${task}/memory/ask?q=${encodeURIComponent(q)}`, {
      headers,
    })
    if (res.status !== 200) throw new Error(`ask: ${res.status} ${await res.text()}`)
    return res.json()
  }
  let hits = 0
  console.log('\nthe machine is shared and loaded: compare with the baseline of the same run')
  await timeEach('baseline GET /v1/enterprise/concurrency', questions, async () => {
    const res = await app.request('/v1/enterprise/concurrency', { headers })
    await res.text()
  })
  await timeEach('GET /v1/tasks/{id}/memory/ask (1-4 words)', questions, async (q) => {
    hits += ((await ask(q)) as { notes: unknown[] }).notes.length
  })
  await timeEach('recallNotes (1-4 words, counts recalls)', questions, (q) =>
    recallNotes(sql, enterprise.id, pick(tasks), q, 10),
  )
  await timeEach('GET .../memory/ask (a 25-word goal)', goals, ask)
  await timeEach('recallNotes (a 25-word goal)', goals, (q) =>
    recallNotes(sql, enterprise.id, pick(tasks), q, 10),
  )
  console.log(
    `\npg_trgm: ${(await memorySupport(sql)).trigram ? 'yes' : 'no (recall full-text only)'}`,
  )
  let typoHits = 0
  await timeEach('GET .../memory/ask (1-4 words, one misspelt)', typos, async (q) => {
    typoHits += ((await ask(q)) as { notes: unknown[] }).notes.length
  })
  await timeEach('GET .../memory/ask (a 25-word goal, one misspelt)', typoGoals, ask)
  // A fresh lesson each time (the warm-up's would be duplicates of the ones timed after it).
  await timeEach("a person's note written (duplicate check)", goals, () =>
    writeNote(sql, enterprise.id, { layer: 'enterprise', text: question(25), source: 'person' }),
  )
  console.log(`${(typoHits / typos.length).toFixed(1)} notes answered per misspelt ask on average`)
  console.log(
    `\n${(hits / questions.length).toFixed(1)} notes answered per 1-4 word ask on average`,
  )

  // A run's start, with and without memory (runs pending on the bench's tasks; no engine runs them).
  const runs: RunRow[] = []
  for (let i = 0; i < goals.length; i++)
    runs.push(
      await enqueueRun(
        sql,
        enterprise.id,
        pick(tasks),
        { customer: pick(rare), month: 'May' },
        {
          origin: 'api',
        },
      ),
    )
  // Running under a lease of the bench's, as an engine's run is when it starts (no engine runs them).
  await sql`
    update runs set status = 'running', lease_owner = 'bench', lease_expires_at = now() + interval '1 hour'
     where id = any(${sql.array(runs.map((r) => r.id))}::uuid[])`
  const byIndex = runs.map((_, i) => String(i))
  const startReads = (run: RunRow) =>
    Promise.all([
      sql`select definition from task_versions where id = ${run.taskVersionId}`,
      sql`select name, email, persona from members where id = ${run.memberId}`,
      sql`select name from enterprises where id = ${run.enterpriseId}`,
    ])
  // What prepare() adds: the recorded recall read (beside the reads above in prepare, here after
  // them), the recall, and recording its event under the run's lock (appendWhileHeld, as the agent).
  // Each part's time at the last step, for the parts' medians of the first starts.
  const parts = { read: 0, recall: 0, record: 0 }
  const memoryStep = async (run: RunRow, goal: string) => {
    const t0 = performance.now()
    const recorded = await readRecordedMemory(sql, run.id)
    const t1 = performance.now()
    const { event, notes } = await recallForRun(sql, run, goal, recorded, undefined)
    const t2 = performance.now()
    if (event) await appendWhileHeld(sql, run.id, 'bench', [event])
    Object.assign(parts, { read: t1 - t0, recall: t2 - t1, record: performance.now() - t2 })
    return notes.length
  }
  console.log('')
  const without = await timeEach('run start reads, without memory', byIndex, (i) =>
    startReads(runs[Number(i)]!),
  )
  let recalled = 0
  // No warm-up here: each run recalls once, at its first start (timeEach's warm-up would start the
  // first 20 runs before they are timed). Warmed by the recalls above.
  const first: number[] = []
  const byPart = { read: [] as number[], recall: [] as number[], record: [] as number[] }
  for (let i = 0; i < runs.length; i++) {
    const t0 = performance.now()
    recalled += await memoryStep(runs[i]!, goals[i]!)
    first.push(performance.now() - t0)
    for (const part of ['read', 'recall', 'record'] as const) byPart[part].push(parts[part])
  }
  console.log(
    `${'memory at a first start (recall + record)'.padEnd(44)} p50 ${ms(median(first))} ms  p99 ${ms(percentile(first, 99))} ms  (${runs.length})`,
  )
  console.log(
    `  its parts, p50: the recorded recall read ${ms(median(byPart.read))} ms, the recall ${ms(median(byPart.recall))} ms, its record ${ms(median(byPart.record))} ms`,
  )
  const searched = await timeEach('  of which the search (goal + input)', byIndex, (i) => {
    const run = runs[Number(i)]!
    return searchTaskNotes(sql, enterprise.id, run.taskId, recallText(goals[Number(i)], run.input))
  })
  const resumed = await timeEach('memory at a resumed start (read back)', byIndex, (i) =>
    memoryStep(runs[Number(i)]!, goals[Number(i)]!),
  )
  console.log(
    `\na run's start without memory p50 ${ms(median(without))} ms; memory adds p50 ${ms(median(first))} ms, p99 ${ms(percentile(first, 99))} ms at its first start (${(recalled / runs.length).toFixed(1)} notes per run), p50 ${ms(median(resumed))} ms on a resumed start (issue 16: <= 5 ms)`,
  )
  if (process.env.BENCH_EXPLAIN) {
    // The plan of one run-sized recall, for looking into where its time goes.
    const plan = await sql.unsafe(
      `explain (analyze, buffers) with s as materialized (select t.first as filter, t.query from memory_search_terms($2, $1) t),
         t as materialized (select id, team_id from tasks where enterprise_id = $2 and id = $3)
       select n.id, ts_rank(n.search, s.query) as score from s, t, memory_notes n
        where n.search @@ s.filter and n.status = 'active' and n.enterprise_id = $2
          and (n.task_id = t.id or n.team_id = t.team_id or n.layer = 'enterprise')
        order by score desc limit 10`,
      [process.env.BENCH_EXPLAIN === 'short' ? questions[0]! : goals[0]!, enterprise.id, tasks[0]!],
    )
    for (const row of plan) console.log(Object.values(row)[0])
  }
} finally {
  await db.close()
  await rm(dataDir, { recursive: true, force: true })
}
