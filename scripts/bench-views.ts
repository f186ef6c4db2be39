// npm run bench:views: what the views a UI polls cost on a long history: one enterprise with BENCH_RUNS
// runs (default 500,000) shaped like real use, and the median and p95 of BENCH_CALLS calls (default 20,
// after 2 unmeasured) of each of
//   GET /v1/executions/counts, /v1/executions/board, /v1/executions?limit=50 (by updatedAt and by
//   runCount; status=running and status=failed), /v1/runs?limit=50 and /v1/runs?limit=50&status=running,
// one at a time, through the HTTP app in process (app.request: no socket, no engine to move the runs).
// The runs are made in the database (insert ... select generate_series), not through the API: executions
// of 1 to 3 runs (a run and its successor or retry) over BENCH_DAYS (90: the default window of finished
// runs), 40 tasks on 5 teams and 20 members; most executions long finished (succeeded, failed,
// cancelled; about 60% of them closed), 1% refused starts (skipped_overlap), and BENCH_OPEN (300)
// executions open (running, queued, pending, waiting at a gate, blocked) spread over the history. Then
// vacuum analyze.
// BENCH_DATA_DIR keeps the embedded PostgreSQL's data there and reuses the runs it already holds (the
// same BENCH_RUNS): made once, measured before and after a change (its migrations are applied at each
// start). Otherwise a throwaway dir, or DATABASE_URL. Reports; asserts nothing.
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { createSealer } from '../server/crypto.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { createEnterprise } from '../server/domain/enterprises/index.js'
import { createMember, createTeam } from '../server/domain/org/index.js'
import { createToken } from '../server/domain/people/index.js'
import { createTask } from '../server/domain/tasks/index.js'
import { createApp } from '../server/http/app.js'
import { allScopes } from '../shared/scopes.js'
import { median, percentile } from './bench-lib.js'

const runs = Number(process.env.BENCH_RUNS ?? 500_000)
const calls = Number(process.env.BENCH_CALLS ?? 20)
const days = Number(process.env.BENCH_DAYS ?? 90)
const open = Number(process.env.BENCH_OPEN ?? 300)
const keep = process.env.BENCH_DATA_DIR
const name = `Bench views ${runs}`

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = keep ?? (await mkdtemp(join(tmpdir(), 'osd-bench-views-')))
if (keep) await mkdir(keep, { recursive: true })
const config = loadConfig({ dataDir }, { DATABASE_URL: process.env.DATABASE_URL ?? '' })
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const app = createApp({ sql, config, log, sealer: createSealer(randomBytes(32)) })

/** The enterprise's runs, made in the database: see the head of this file. */
async function fill(enterpriseId: string) {
  const teams: string[] = []
  for (let i = 0; i < 5; i++)
    teams.push((await createTeam(sql, enterpriseId, { name: `Bench team ${i}` })).id)
  const members: string[] = []
  for (let i = 0; i < 20; i++)
    members.push(
      (await createMember(sql, enterpriseId, { name: `Bench member ${i}` }, config.mailDomain)).id,
    )
  for (let i = 0; i < 40; i++)
    await createTask(sql, enterpriseId, {
      name: `Bench task ${i}`,
      kind: 'llm',
      teamId: teams[i % teams.length]!,
      assigneeRole: 'ceo',
      goal: 'Keep the billing pipeline healthy',
    } as never)
  const tasks = await sql<
    { id: string; versionId: string; slug: string; name: string; teamId: string }[]
  >`
    select id, current_version_id as version_id, slug, name, team_id from tasks
     where enterprise_id = ${enterpriseId} and slug like 'bench-task-%' order by slug`
  const arr = (values: string[]) => sql.array(values)
  // Run g of 0..runs-1, in cycles of 6: an execution of 1 run (p 0), one of 2 (p 1, 2), one of 3
  // (p 3, 4, 5). x numbers the executions (3 a cycle), i is the run's place in its execution.
  const executions = Math.floor(runs / 6) * 3 + Math.min(3, Math.ceil((runs % 6) / 2))
  const stride = Math.max(1, Math.floor(executions / Math.max(1, open)))
  const began = performance.now()
  const batch = 50_000
  for (let from = 0; from < runs; from += batch) {
    await sql`
      insert into runs (id, enterprise_id, task_id, task_version_id, task_slug, task_name, team_id, kind,
                        overlap_policy, lane, member_id, status, origin, input, execution_id,
                        previous_run_id, cost_usd_micros, created_at, queued_at, started_at, finished_at,
                        updated_at)
      select md5('run' || g)::uuid, ${enterpriseId}::uuid, (${arr(tasks.map((t) => t.id))}::uuid[])[t],
             (${arr(tasks.map((t) => t.versionId))}::uuid[])[t], (${arr(tasks.map((t) => t.slug))}::text[])[t],
             (${arr(tasks.map((t) => t.name))}::text[])[t], (${arr(tasks.map((t) => t.teamId))}::uuid[])[t],
             'llm', 'os', 'bench:' || g,
             case when status in ('pending', 'skipped_overlap') then null
                  else (${arr(members)}::uuid[])[1 + (g * 7) % ${members.length}::int] end,
             status,
             case when i = 0 then (case when x % 3 = 0 then 'schedule' else 'api' end)
                  when retried then 'retry' else 'successor' end,
             jsonb_build_object('n', g),
             md5('run' || (g - i))::uuid,
             case when i > 0 then md5('run' || (g - 1))::uuid end,
             case when status = 'skipped_overlap' then 0 else (g::bigint * 7919) % 400000 end,
             at, at,
             case when status not in ('pending', 'queued', 'skipped_overlap') then at end,
             case when status in ('succeeded', 'failed', 'cancelled', 'skipped_overlap') then moved end,
             moved
        from generate_series(${from}::int, ${Math.min(runs, from + batch) - 1}::int) g,
             lateral (select g % 6 as p, g / 6 as c) cy,
             lateral (select case when p = 0 then 0 when p <= 2 then p - 1 else p - 3 end as i,
                             case when p = 0 then 1 when p <= 2 then 2 else 3 end as size,
                             c * 3 + case when p = 0 then 0 when p <= 2 then 1 else 2 end as x) ex,
             lateral (select 1 + abs(hashint4(x)) % ${tasks.length}::int as t0,
                             abs(hashint4(x + 1000000)) % 100 as h,
                             x % ${stride}::int = ${stride - 1}::int and x / ${stride}::int < ${open}::int as is_open,
                             -- A run that failed and was retried, before its execution's last run.
                             i > 0 and x % 4 = 0 as retried) k,
             lateral (select 1 + (t0 - 1 + i) % ${tasks.length}::int as t,
                             timestamptz '2026-11-30 00:00:00+00'
                               - make_interval(secs => (${runs}::int - g)::float8 * ${(days * 86400) / runs}::float8)
                               as at) tm,
             lateral (select case
                      when size = 1 and x % 100 = 3 then 'skipped_overlap'
                      when i < size - 1 then (case when x % 4 = 0 and i = size - 2 then 'failed' else 'succeeded' end)
                      when is_open then (array['running', 'queued', 'pending', 'waiting_on_gate', 'blocked'])[1 + (x / ${stride}::int) % 5]
                      when h < 80 then 'succeeded' when h < 92 then 'failed' else 'cancelled' end as status) st,
             lateral (select at + make_interval(secs => 5 + (g * 13) % 600) as moved) mv`
  }
  // About 60% of the finished executions closed, an hour after their last move.
  await sql`
    insert into execution_closures (execution_id, enterprise_id, closed_at)
    select execution_id, ${enterpriseId}::uuid, max(updated_at) + interval '1 hour'
      from runs where enterprise_id = ${enterpriseId} and status <> 'skipped_overlap'
     group by execution_id
    having bool_and(status in ('succeeded', 'failed', 'cancelled')) and abs(hashtext(execution_id::text)) % 10 < 6`
  await sql`vacuum analyze runs`
  await sql`vacuum analyze execution_closures`
  console.log(
    `${runs} runs (${executions} executions, ${open} open) made in ${((performance.now() - began) / 1000).toFixed(1)} s`,
  )
}

try {
  const [found] = await sql<{ id: string }[]>`select id from enterprises where name = ${name}`
  const enterpriseId =
    found?.id ?? (await createEnterprise(sql, { name }, { mailDomain: config.mailDomain })).id
  if (!found) await fill(enterpriseId)
  else console.log(`reusing the ${runs} runs in ${dataDir}`)
  const { token } = await createToken(sql, enterpriseId, { name: 'bench', scopes: allScopes })
  const headers = { authorization: `Bearer ${token}` }
  const [shape] = await sql<{ runs: number; executions: number; closed: number; open: number }[]>`
    select count(*)::int as runs, count(distinct execution_id)::int as executions,
           (select count(*)::int from execution_closures where enterprise_id = ${enterpriseId}) as closed,
           count(distinct execution_id) filter (where status in ('pending', 'queued', 'running', 'waiting_on_gate', 'blocked', 'paused_spend'))::int as open
      from runs where enterprise_id = ${enterpriseId}`
  console.log(
    `the enterprise: ${shape!.runs} runs, ${shape!.executions} executions (${shape!.closed} closed, ${shape!.open} with an open run)`,
  )

  const paths = [
    '/v1/executions/counts',
    '/v1/executions/board',
    '/v1/executions?limit=50',
    '/v1/executions?limit=50&sort=runCount',
    '/v1/executions?limit=50&status=running',
    '/v1/executions?limit=50&status=failed',
    '/v1/runs?limit=50',
    '/v1/runs?limit=50&status=running',
  ]
  console.log(`\n${'GET'.padEnd(40)} ${'p50 ms'.padStart(9)} ${'p95 ms'.padStart(9)}  answer`)
  for (const path of paths) {
    const times: number[] = []
    let body: any
    for (let n = 0; n < calls + 2; n++) {
      const began = performance.now()
      const res = await app.request(path, { headers })
      body = await res.json()
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(body)}`)
      if (n >= 2) times.push(performance.now() - began)
    }
    // What it answered, to compare before and after a change.
    const answer =
      'total' in body
        ? `total ${body.total}, first ${body.data[0]?.id.slice(0, 8)}`
        : 'lanes' in body
          ? body.lanes
              .map(
                (l: { lane: string; executions: unknown[] }) => `${l.lane} ${l.executions.length}`,
              )
              .join(', ')
          : JSON.stringify(body)
    console.log(
      `${path.padEnd(40)} ${median(times).toFixed(1).padStart(9)} ${percentile(times, 95).toFixed(1).padStart(9)}  ${answer}`,
    )
  }
} finally {
  await db.close()
  if (!keep) await rm(dataDir, { recursive: true, force: true })
}
