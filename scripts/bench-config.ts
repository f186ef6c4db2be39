// npm run bench:config: an apply of documents at the size (issue 48): BENCH_TASKS tasks
// (default 50), BENCH_TEAMS teams (10) with a role each, BENCH_MEMBERS members (30) on them, one
// `osd serve` on its own database. Times POST /v1/config/apply the first time (everything created),
// then BENCH_RUNS times (default 5) with nothing to change, a plan and an export, and `osctl apply -f`
// of the exported files end to end (osctl's start, reading the files, the apply). Target: the second
// apply under 2 s. Reports; asserts nothing.
import { spawnSync } from 'node:child_process'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeExport } from '../cli/config-files.js'
import { projectRoot } from '../shared/paths.js'
import { api, benchDaemon, median } from './bench-lib.js'

const tasks = Number(process.env.BENCH_TASKS ?? 50)
const teams = Number(process.env.BENCH_TEAMS ?? 10)
const members = Number(process.env.BENCH_MEMBERS ?? 30)
const runs = Number(process.env.BENCH_RUNS ?? 5)

const doc = (kind: string, name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'osd/v1',
  kind,
  metadata: { name },
  spec,
})

const documents = [
  ...Array.from({ length: teams }, (_, t) =>
    doc('Team', `team-${t}`, { name: `Team ${t}`, charter: `What team ${t} is for.` }),
  ),
  ...Array.from({ length: teams }, (_, t) => doc('Role', `team-${t}/worker`, { name: 'Worker' })),
  ...Array.from({ length: members }, (_, m) =>
    doc('Member', `Member ${m}`, {
      persona: `Member ${m}, careful.`,
      teams: [`team-${m % teams}`],
      roles: [`team-${m % teams}/worker`],
    }),
  ),
  ...Array.from({ length: tasks }, (_, k) =>
    doc('Task', `task-${k}`, {
      name: `Task ${k}`,
      team: `team-${k % teams}`,
      assigneeRole: 'worker',
      goal: `Do thing ${k}.`,
      tools: ['os.mail_send'],
      gates: [{ tool: 'os.mail_send' }],
      ...(k % 5 === 0 ? { schedule: { cron: `${k % 60} 9 * * 1` } } : {}),
      skillMd: `# Task ${k}\n\nRead the input, then do thing ${k}.\n`,
    }),
  ),
]

const daemon = await benchDaemon({ OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'warn' })
const call = api(daemon)

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const start = process.hrtime.bigint()
  const value = await fn()
  return [Number(process.hrtime.bigint() - start) / 1e6, value]
}

try {
  const [first, applied] = await timed(() =>
    call<{ changes: { action: string }[] }>('POST', '/config/apply', { documents }),
  )
  const created = applied.changes.filter((c) => c.action === 'create').length
  const seconds: number[] = []
  for (let i = 0; i < runs; i++) {
    const [ms, again] = await timed(() =>
      call<{ changes: { action: string }[] }>('POST', '/config/apply', { documents }),
    )
    if (again.changes.some((c) => c.action !== 'unchanged'))
      throw new Error('a second apply changed')
    seconds.push(ms)
  }
  const plans: number[] = []
  const exports: number[] = []
  let exported: { documents: never[] } = { documents: [] }
  for (let i = 0; i < runs; i++) {
    plans.push((await timed(() => call('POST', '/config/plan', { documents })))[0])
    const [ms, body] = await timed(() => call<{ documents: never[] }>('GET', '/config'))
    exports.push(ms)
    exported = body
  }
  const dir = await mkdtemp(join(tmpdir(), 'osd-bench-config-'))
  await writeExport(dir, exported.documents)
  const osctl: number[] = []
  // osctl's start and one request (its HTTP client loads), to tell them from the apply.
  const started: number[] = []
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint()
    spawnSync(process.execPath, [join(projectRoot, 'bin', 'osctl'), 'teams', 'list', '--json'], {
      env: { ...process.env, OSCTL_URL: daemon.url, OSCTL_TOKEN: daemon.token },
    })
    started.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint()
    const res = spawnSync(
      process.execPath,
      [join(projectRoot, 'bin', 'osctl'), 'apply', '-f', dir],
      {
        env: { ...process.env, OSCTL_URL: daemon.url, OSCTL_TOKEN: daemon.token, NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    osctl.push(Number(process.hrtime.bigint() - start) / 1e6)
    if (res.status !== 0) throw new Error(`osctl apply exited ${res.status}: ${res.stderr}`)
    const changed = res.stdout
      .toString()
      .trim()
      .split('\n')
      .filter((line) => !line.endsWith(' unchanged'))
    if (changed.length > 0)
      throw new Error(`osctl apply changed: ${changed.slice(0, 5).join('; ')}`)
  }
  const ms = (v: number) => `${v.toFixed(0)} ms`
  console.log(
    `${documents.length} documents: ${tasks} tasks, ${teams} teams (a role each), ${members} members`,
  )
  console.log(`first apply (${created} created)          ${ms(first)}`)
  console.log(
    `second apply (unchanged), median of ${runs}  ${ms(median(seconds))}  (target < 2000 ms)`,
  )
  console.log(`plan, median of ${runs}                      ${ms(median(plans))}`)
  console.log(`export (GET /v1/config), median of ${runs}   ${ms(median(exports))}`)
  console.log(`osctl apply -f (unchanged), median of ${runs} ${ms(median(osctl))}`)
  console.log(`osctl teams list --json, median of ${runs}    ${ms(median(started))}`)
} finally {
  await daemon.close()
}
