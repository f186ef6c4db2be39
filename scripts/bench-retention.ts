// npm run bench:retention: what retention and backups cost (issue 46). Three parts, each on a daemon and
// an embedded PostgreSQL of its own (BENCH_ONLY=steady|pass|backup runs one):
//   steady: finishedRuns at one minute, the pass every OSD_RETENTION_INTERVAL_SECONDS (60 by default),
//           starts sent at a steady BENCH_STEADY_RATE per second (500) for BENCH_STEADY_MINUTES (10):
//           the database's size each minute; the target is the last minute within 10% of minute 4 (of
//           the same share of the duration when it is shorter); the feed is kept OSD_FEED_KEEP_HOURS
//           (osd's 7 days unless set: the feed then grows the whole run, by design);
//   pass:   BENCH_PASS_RUNS finished runs (100,000) made past their window, then bench:runs's load
//           (BENCH_CONCURRENCY starts in flight for BENCH_SECONDS: done/s) and one start at a time
//           (BENCH_LATENCY_RUNS: p50 from the start's answer to the commit that ended the run), first
//           without a pass, then while a pass (run here, as an engine's would) moves those runs: the
//           target is both within 10% of the run without; then GET /v1/runs/{id} of BENCH_READ_RUNS (200)
//           archived runs, one at a time: p50/p99 (target under 200 ms);
//   backup: BENCH_BACKUP_RUNS runs (100,000) and BENCH_BACKUP_NOTES memory notes (100,000), then
//           `osd admin backup --out`, `--verify` and `osd admin restore` into a new data dir, as an
//           operator runs them: the time of each and the file's size.
// Reports; asserts nothing. The scale is in the environment: on a small machine, run it smaller and
// say so.
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { Pool } from 'undici'
import { readySql } from '../server/db/sql.js'
import { backgroundDuty, retentionPass } from '../server/domain/retention/index.js'
import { projectRoot } from '../shared/paths.js'
import {
  api,
  benchDaemon,
  laneTasks,
  median,
  percentile,
  watchRuns,
  type BenchDaemon,
} from './bench-lib.js'

const wanted = (name: string) => !process.env.BENCH_ONLY || process.env.BENCH_ONLY.includes(name)
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const osd = join(projectRoot, 'bin', 'osd')
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
const out: string[] = []
const say = (line: string) => {
  console.log(line)
  out.push(line)
}

/** Deterministic tasks, each run in a lane of its own; answers a start request for run n. */
async function setUp(daemon: BenchDaemon, tasks = 40) {
  const ids = (await laneTasks(daemon, tasks, 'Bench retention')).map((task) => task.id)
  const origin = new URL(daemon.url).origin
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' }
  return {
    call: api(daemon),
    ids,
    origin,
    async start(pool: Pool, n: number): Promise<string | undefined> {
      const res = await pool.request({
        method: 'POST',
        path: `/v1/tasks/${ids[n % ids.length]}/runs`,
        headers,
        body: JSON.stringify({ n }),
      })
      const body = (await res.body.json()) as { id?: string }
      return res.statusCode < 300 ? body.id : undefined
    },
  }
}

type Setup = Awaited<ReturnType<typeof setUp>>

/** `total` starts, `concurrency` in flight, then waits until none is left unfinished. */
async function makeRuns(daemon: BenchDaemon, setup: Setup, total: number, concurrency = 32) {
  const pool = new Pool(setup.origin, { connections: concurrency })
  let n = 0
  let refused = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (n < total) if (!(await setup.start(pool, n++))) refused++
    }),
  )
  await pool.close()
  // A refused start (the token's rate limit, before it was turned off here) would leave the table far
  // smaller than the scale said: stop rather than report a measure of something else.
  if (refused > 0) throw new Error(`${refused} of ${total} starts were refused`)
  await until(daemon, `select count(*)::int as n from runs where finished_at is null`)
}

/** Waits until the query's n is 0. */
async function until(daemon: BenchDaemon, query: string) {
  for (;;) {
    const [row] = await daemon.sql.unsafe<{ n: number }[]>(query)
    if (row!.n === 0) return
    await new Promise((r) => setTimeout(r, 250))
  }
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const path = join(dir, entry.name)
    total += entry.isDirectory() ? await dirBytes(path) : (await stat(path)).size
  }
  return total
}

const databaseSize = async (daemon: BenchDaemon) =>
  Number(
    (
      await daemon.sql<{ bytes: string }[]>`
        select pg_database_size(current_database())::text as bytes`
    )[0]!.bytes,
  )

/**
 * The database by part: the feed (it keeps 7 days of events by design, whatever finishedRuns says),
 * the archive's index (a row for every run moved, kept for good), the runs' live tables, the rest.
 */
const parts = {
  feed: [
    'events',
    'event_inbox',
    'event_feed_heads',
    'event_deliveries',
    'event_delivery_attempts',
  ],
  archiveIndex: ['archive_index', 'archive_members'],
  runs: [
    'runs',
    'run_events',
    'run_journal',
    'run_logs',
    'gates',
    'execution_closures',
    'llm_usage',
  ],
}
type Part = keyof typeof parts | 'rest'
async function databaseParts(daemon: BenchDaemon): Promise<Record<Part, number>> {
  const rows = await daemon.sql<{ name: string; bytes: string }[]>`
    select c.relname as name, pg_total_relation_size(c.oid)::text as bytes
      from pg_class c where c.relkind = 'r' and c.relnamespace = 'public'::regnamespace`
  const out: Record<Part, number> = { feed: 0, archiveIndex: 0, runs: 0, rest: 0 }
  for (const row of rows) {
    const part = (Object.keys(parts) as (keyof typeof parts)[]).find((k) =>
      parts[k].includes(row.name),
    )
    out[part ?? 'rest'] += Number(row.bytes)
  }
  return out
}

// --- steady state ---------------------------------------------------------------------------------

async function steady() {
  const rate = num('BENCH_STEADY_RATE', 500)
  const minutes = num('BENCH_STEADY_MINUTES', 10)
  const interval = process.env.OSD_RETENTION_INTERVAL_SECONDS ?? '60'
  // The feed's window (osd's 7 days unless set): BENCH_ONLY=steady OSD_FEED_KEEP_HOURS=0.05 keeps 3
  // minutes of it, as finishedRuns keeps a minute of runs.
  const feedKeepHours = process.env.OSD_FEED_KEEP_HOURS ?? '168'
  const daemon = await benchDaemon({
    OSD_LOG_LEVEL: 'warn',
    OSD_RETENTION_INTERVAL_SECONDS: interval,
    OSD_FEED_KEEP_HOURS: feedKeepHours,
    OSD_RATE_LIMIT_PER_MINUTE: 'off',
  })
  try {
    const setup = await setUp(daemon)
    await setup.call('PATCH', '/enterprise/retention', { finishedRuns: 'PT1M', archive: true })
    const pool = new Pool(setup.origin, { connections: 256 })
    const sizes: {
      minute: number
      database: number
      parts: Record<Part, number>
      archive: number
      live: number
    }[] = []
    let sent = 0
    let refused = 0
    const sending = new Set<Promise<void>>()
    const began = performance.now()
    let nextSample = 60_000
    while (performance.now() - began < minutes * 60_000) {
      const due = Math.floor(((performance.now() - began) / 1000) * rate)
      for (; sent < due; sent++) {
        const p: Promise<void> = setup.start(pool, sent).then(
          (id) => {
            if (!id) refused++
          },
          () => void refused++,
        )
        sending.add(p)
        void p.finally(() => sending.delete(p))
      }
      if (
        nextSample <= minutes * 60_000 &&
        performance.now() - began >= Math.min(nextSample, minutes * 60_000 - 1000)
      ) {
        const [live] = await daemon.sql<{ n: number }[]>`select count(*)::int as n from runs`
        sizes.push({
          minute: nextSample / 60_000,
          database: await databaseSize(daemon),
          parts: await databaseParts(daemon),
          archive: await dirBytes(join(daemon.dataDir, 'archive')),
          live: live!.n,
        })
        const s = sizes.at(-1)!
        console.log(
          `  minute ${s.minute}: database ${mb(s.database)} (runs ${mb(s.parts.runs)}, feed ${mb(s.parts.feed)}, archive index ${mb(s.parts.archiveIndex)}, rest ${mb(s.parts.rest)}), archive ${mb(s.archive)}, ${s.live} live runs, ${sent} sent`,
        )
        nextSample += 60_000
      }
      await new Promise((r) => setTimeout(r, 2))
    }
    await Promise.all(sending)
    await pool.close()
    const seconds = (performance.now() - began) / 1000
    const [done] = await daemon.sql<{ n: number }[]>`
      select (select count(*) from runs where status = 'succeeded')::int
           + (select count(*) from archive_index)::int as n`
    say(
      `\nsteady state: ${rate} starts/s for ${minutes} min (finishedRuns PT1M, pass every ${interval} s, feed kept ${feedKeepHours} h)`,
    )
    say(
      `  sent ${sent} (${(sent / seconds).toFixed(0)}/s), refused ${refused}, succeeded or archived ${done!.n}`,
    )
    say('  minute   database     runs' + '     feed  arch.idx     rest   archive  live runs')
    const col = (bytes: number) => mb(bytes).replace(' MB', '').padStart(9)
    for (const s of sizes)
      say(
        `  ${String(s.minute).padStart(6)}${col(s.database)}${col(s.parts.runs)}${col(s.parts.feed)}${col(s.parts.archiveIndex)}${col(s.parts.rest)}${col(s.archive)}  ${s.live}`,
      )
    say(
      '  (MB; feed: kept OSD_FEED_KEEP_HOURS, 7 days by default; arch.idx: a row per moved run, kept)',
    )
    const early = sizes[Math.max(0, Math.round(minutes * 0.4) - 1)]
    const last = sizes.at(-1)
    const change = (a: number, b: number) => `${(((b - a) / a) * 100).toFixed(1)}%`
    const kept = (s: (typeof sizes)[number]) => s.database - s.parts.feed - s.parts.archiveIndex
    if (early && last) {
      say(
        `  minute ${last.minute} vs minute ${early.minute}: database ${change(early.database, last.database)} (target within 10%)`,
      )
      say(
        `    without the feed and the archive index: ${change(kept(early), kept(last))}; the runs' tables ${change(early.parts.runs, last.parts.runs)}`,
      )
    }
  } finally {
    await daemon.close()
  }
}

// --- the pass's cost ------------------------------------------------------------------------------

async function passCost() {
  const runs = num('BENCH_PASS_RUNS', 100_000)
  const seconds = num('BENCH_SECONDS', 5)
  const concurrency = num('BENCH_CONCURRENCY', 32)
  const latencyRuns = num('BENCH_LATENCY_RUNS', 200)
  // The daemon runs no pass of its own: the one measured is started here, when wanted. It reads what
  // the pass archives back from the same dir.
  const archiveDir = await mkdtemp(join(tmpdir(), 'osd-bench-archive-'))
  const daemon = await benchDaemon({
    OSD_LOG_LEVEL: 'warn',
    OSD_RETENTION: 'off',
    OSD_ARCHIVE_DIR: archiveDir,
    OSD_RATE_LIMIT_PER_MINUTE: 'off',
  })
  const passSql = await readySql(daemon.databaseUrl, { max: 2, applicationName: 'osd retention' })
  const watch = await watchRuns(daemon.sql)
  try {
    const setup = await setUp(daemon)
    let made = performance.now()
    await makeRuns(daemon, setup, runs)
    made = (performance.now() - made) / 1000
    // Past a 30-day window: what a pass finds on a database that ran for months.
    await daemon.sql`
      update runs set created_at = created_at - interval '100 days',
                      finished_at = finished_at - interval '100 days'`
    await daemon.sql`vacuum analyze runs`
    await setup.call('PATCH', '/enterprise/retention', { finishedRuns: 'P30D', archive: true })

    let n = 10_000_000
    /** bench:runs's load: `concurrency` starts in flight for `seconds`; runs done per second. */
    async function load() {
      const pool = new Pool(setup.origin, { connections: concurrency })
      const ids: string[] = []
      const began = performance.now()
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (performance.now() - began < seconds * 1000) {
            const id = await setup.start(pool, n++)
            if (id) ids.push(id)
          }
        }),
      )
      const ended = performance.now()
      await pool.close()
      await until(
        daemon,
        `select count(*)::int as n from runs where finished_at is null and created_at > now() - interval '1 hour'`,
      )
      const done = ids.filter((id) => (watch.lastMoved.get(id) ?? Infinity) <= ended).length
      return done / ((ended - began) / 1000)
    }
    /** bench:runs's one at a time: from the start's answer to the commit that ended the run. */
    async function oneAtATime() {
      const pool = new Pool(setup.origin, { connections: 1 })
      const latencies: number[] = []
      for (let i = 0; i < latencyRuns; i++) {
        const id = await setup.start(pool, n++)
        const answered = performance.now()
        if (!id) throw new Error('a start was refused')
        for (;;) {
          const moved = watch.next(id)
          const [run] = await daemon.sql<
            { status: string }[]
          >`select status from runs where id = ${id}`
          if (run!.status === 'succeeded') break
          await moved
        }
        await new Promise((r) => setTimeout(r, 2))
        latencies.push(Math.max(0, watch.lastMoved.get(id)! - answered))
      }
      await pool.close()
      return median(latencies)
    }

    const without = { done: await load(), p50: await oneAtATime() }
    const passBegan = performance.now()
    let passEnded: number | undefined
    const pass = retentionPass(passSql, {
      archiveDir,
      duty: backgroundDuty,
      catchUpMs: 60_000,
    }).then((moved) => {
      passEnded = performance.now()
      return moved
    })
    const during = { done: await load(), p50: await oneAtATime() }
    const measured = performance.now()
    const moved = await pass
    const passSeconds = ((passEnded ?? performance.now()) - passBegan) / 1000
    const runsMoved = moved.reduce((total, m) => total + m.runs, 0)
    say(
      `\nthe pass's cost: ${runs} finished runs past their window (made in ${made.toFixed(0)} s), archive on`,
    )
    say(
      `  the pass moved ${runsMoved} runs in ${passSeconds.toFixed(1)} s (${(runsMoved / passSeconds).toFixed(0)} runs/s); ` +
        `archive ${mb(await dirBytes(archiveDir))}`,
    )
    say(
      `  measured ${((measured - passBegan) / 1000).toFixed(1)} s from the pass's start` +
        (passEnded && passEnded < measured
          ? `: the pass ended before the measure did (${passSeconds.toFixed(1)} s), so part of "during" ran without it`
          : ', all of it while the pass ran'),
    )
    // What the pass moved reads back: GET /v1/runs/{id} of archived runs spread over the archive, one
    // at a time through the daemon (each inflates the member of up to 500 executions that holds it).
    const archived = await daemon.sql<{ id: string }[]>`
      select id from archive_index order by random() limit ${num('BENCH_READ_RUNS', 200)}`
    const reads: number[] = []
    for (const { id } of archived) {
      const began = performance.now()
      const detail = await setup.call<{ archived?: boolean }>('GET', `/runs/${id}`)
      reads.push(performance.now() - began)
      if (!detail.archived) throw new Error(`run ${id} did not read back as archived`)
    }
    if (reads.length)
      say(
        `  GET /v1/runs/{id} of an archived run, ${reads.length} one at a time: p50 ${median(reads).toFixed(1)} ms, ` +
          `p99 ${percentile(reads, 99).toFixed(1)} ms (target under 200 ms)`,
      )
    const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`
    say(`  ${''.padEnd(16)} ${'done/s'.padStart(8)} ${'1-at-a-time p50 ms'.padStart(20)}`)
    say(
      `  ${'without a pass'.padEnd(16)} ${without.done.toFixed(0).padStart(8)} ${without.p50.toFixed(1).padStart(20)}`,
    )
    say(
      `  ${'during the pass'.padEnd(16)} ${during.done.toFixed(0).padStart(8)} ${during.p50.toFixed(1).padStart(20)}`,
    )
    say(
      `  change: done/s ${pct(during.done, without.done)}, p50 ${pct(during.p50, without.p50)} (target within 10%)`,
    )
  } finally {
    await watch.stop()
    await passSql.end()
    await daemon.close()
    await rm(archiveDir, { recursive: true, force: true })
  }
}

// --- backup and restore ---------------------------------------------------------------------------

async function backupRestore() {
  const runs = num('BENCH_BACKUP_RUNS', 100_000)
  const notes = num('BENCH_BACKUP_NOTES', 100_000)
  const daemon = await benchDaemon({
    OSD_LOG_LEVEL: 'warn',
    OSD_RETENTION: 'off',
    OSD_RATE_LIMIT_PER_MINUTE: 'off',
  })
  const work = await mkdtemp(join(tmpdir(), 'osd-bench-backup-'))
  try {
    const setup = await setUp(daemon)
    await makeRuns(daemon, setup, runs)
    const [enterprise] = await daemon.sql<{ id: string }[]>`
      select enterprise_id as id from tasks where id = ${setup.ids[0]!}`
    // Generated in the database, as bench:memory makes them: 8-30 words of operations prose each.
    const words =
      'invoice finance refund customer deploy release branch merge review ticket escalate vendor contract renewal budget quarter report audit payroll onboarding'.split(
        ' ',
      )
    for (let from = 0; from < notes; from += 10_000)
      await daemon.sql`
        insert into memory_notes (enterprise_id, layer, task_id, text, source, created_by)
        select ${enterprise!.id}, 'task', (${daemon.sql.array(setup.ids)}::uuid[])[1 + g % ${setup.ids.length}::int],
               (select string_agg((${daemon.sql.array(words)}::text[])[1 + floor(${words.length}::int * random())::int], ' ')
                  from generate_series(1, 8 + (g * 7) % 23) w),
               'training', 'bench'
          from generate_series(${from}::int, ${Math.min(notes, from + 10_000) - 1}::int) g`
    const database = await databaseSize(daemon)
    const [counted] = await daemon.sql<{ runs: number; notes: number; events: number }[]>`
      select (select count(*) from runs)::int as runs, (select count(*) from memory_notes)::int as notes,
             (select count(*) from run_events)::int as events`
    const file = join(work, 'osd.backup.gz')
    const env = { DATABASE_URL: daemon.databaseUrl, OSD_LOG_LEVEL: 'warn' }
    const timed = async (args: string[], more: Record<string, string> = {}) => {
      const began = performance.now()
      const res = await execa('node', [osd, ...args, '--json'], { env: { ...env, ...more } })
      return { seconds: (performance.now() - began) / 1000, result: JSON.parse(res.stdout) }
    }
    const made = await timed(['admin', 'backup', '--out', file])
    const verified = await timed(['admin', 'backup', '--verify', file])
    const restored = await timed(['admin', '--data-dir', join(work, 'restored'), 'restore', file], {
      DATABASE_URL: '',
    })
    say(
      `\nbackup and restore: ${runs} runs and ${notes} memory notes; the database ${mb(database)}`,
    )
    say(
      `  in the database: ${counted!.runs} runs (${counted!.events} of their events), ${counted!.notes} notes`,
    )
    say(
      `  osd admin backup --out:     ${made.seconds.toFixed(1)} s (the copy itself ${made.result.seconds.toFixed(1)} s), ` +
        `${mb(made.result.bytes)}, ${made.result.rows} rows in ${made.result.tables} tables`,
    )
    say(`  osd admin backup --verify:  ${verified.seconds.toFixed(1)} s`)
    say(
      `  osd admin restore:          ${restored.seconds.toFixed(1)} s into a new data dir (the embedded ` +
        `PostgreSQL made first; the restore itself ${restored.result.seconds.toFixed(1)} s)`,
    )
  } finally {
    await daemon.close()
    await rm(work, { recursive: true, force: true })
  }
}

if (wanted('steady')) await steady()
if (wanted('pass')) await passCost()
if (wanted('backup')) await backupRestore()
console.log(`\nbench:retention\n${out.join('\n')}`)
