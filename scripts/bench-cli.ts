// npm run bench:cli: how long osctl takes to start (issue 15: pipelines call osctl in loops). Spawns
// `node bin/osctl --version`, `--help` and `runs --help` BENCH_RUNS times each (default 10) after a
// warm-up, beside `node -e 0` as the baseline measured in the same run, all taken in turn so a
// load that comes and goes falls on each alike. Prints median and p90 wall time in ms and the ratio of
// each median to the baseline's. Targets: --version and --help under 120 ms here, --help <= 1.5x the
// baseline (issue 30). `profile list` with --json and with --jq: what --jq costs (issue 48: under
// 20 ms), on two profiles and on 1,000 (about 90 KB of JSON, as a long list page). `runs list` as a
// pipeline runs it (OSCTL_URL and OSCTL_TOKEN; no profile store loaded), and `health` answered by a
// stand-in server (what parsing an answer costs). Reports; asserts nothing.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { projectRoot } from '../shared/paths.js'
import { median, percentile } from './bench-lib.js'

const runs = Number(process.env.BENCH_RUNS ?? 10)
/** A profile store of the bench's own, empty: `profile list` reads it. */
const configDir = mkdtempSync(join(tmpdir(), 'osctl-bench-'))
/** A profile store with 1,000 profiles: `profile list --json` prints about 90 KB. */
const manyDir = mkdtempSync(join(tmpdir(), 'osctl-bench-many-'))
const profiles = Object.fromEntries(
  Array.from({ length: 1000 }, (_, i) => [
    `profile-${i}`,
    { url: `https://osd-${i}.example.com/v1`, token: `osd_${'x'.repeat(40)}` },
  ]),
)
writeFileSync(join(manyDir, 'config.json'), JSON.stringify({ current: 'profile-0', profiles }), {
  mode: 0o600,
})
const osctl = join(projectRoot, 'bin', 'osctl')

// A command that gets an answer: osd's health, from a stand-in server in a process of its own (the
// bench's spawns block this one). Parsing it compiles undici's HTTP parser (WebAssembly).
const standIn = spawn(
  process.execPath,
  [
    '-e',
    `require('node:http').createServer((req, res) => {
       res.setHeader('content-type', 'application/json')
       res.end(JSON.stringify({ status: 'ok', version: '0.0.0' }))
     }).listen(0, '127.0.0.1', function () { console.log(this.address().port) })`,
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
)
const standInPort = await new Promise<string>((resolve) =>
  standIn.stdout.once('data', (chunk: Buffer) => resolve(chunk.toString().trim())),
)
// Ended with the bench (below), or as its process exits on a failure.
process.on('exit', () => standIn.kill())

const cases: {
  name: string
  args: string[]
  dir?: string
  env?: Record<string, string>
  exit?: number
}[] = [
  { name: 'node -e 0 (baseline)', args: ['-e', '0'] },
  { name: 'osctl --version', args: [osctl, '--version'] },
  { name: 'osctl --help', args: [osctl, '--help'] },
  // One command's help: its module and what it imports load, the other commands' do not (issue 30).
  { name: 'osctl runs --help', args: [osctl, 'runs', '--help'] },
  // What --jq adds to a command that prints JSON (issue 48: target under 20 ms): jq-wasm's load and
  // one filter, on a command that needs no daemon.
  // A pipeline's command: the target from OSCTL_URL and OSCTL_TOKEN, so no profile is read (the
  // profile store is not even loaded). Its osd is a closed port, which answers at once (exit 3): what
  // is measured is osctl's own start, its command's modules and undici's.
  {
    name: 'runs list (pipeline)',
    args: [osctl, 'runs', 'list', '--json'],
    env: { OSCTL_URL: 'http://127.0.0.1:1/v1', OSCTL_TOKEN: 'osd_bench' },
    exit: 3,
  },
  {
    name: 'health (answered)',
    args: [osctl, 'health', '--json'],
    env: { OSCTL_URL: `http://127.0.0.1:${standInPort}/v1`, OSCTL_TOKEN: 'osd_bench' },
  },
  { name: 'profile list --json', args: [osctl, 'profile', 'list', '--json'] },
  { name: 'profile list --jq', args: [osctl, 'profile', 'list', '--jq', 'length'] },
  { name: '1,000 profiles --json', args: [osctl, 'profile', 'list', '--json'], dir: manyDir },
  {
    name: '1,000 profiles --jq',
    args: [osctl, 'profile', 'list', '--jq', '.[].name'],
    dir: manyDir,
  },
]

/** Wall time of one spawn to its exit, in ms; a command that exits otherwise than told stops the bench. */
function time({ args, dir = configDir, env, exit = 0 }: (typeof cases)[number]): number {
  const start = process.hrtime.bigint()
  const res = spawnSync(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, OSCTL_CONFIG_DIR: dir, ...env },
  })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (res.status !== exit)
    throw new Error(`node ${args.join(' ')} exited ${res.status}: ${res.stderr.toString()}`)
  return ms
}

for (const c of cases) time(c)
const times = cases.map(() => [] as number[])
for (let i = 0; i < runs; i++) cases.forEach((c, j) => times[j]!.push(time(c)))

const baseline = median(times[0]!)
console.log(`${runs} runs each after a warm-up (node ${process.version})`)
console.log(`${'command'.padEnd(22)}${'median ms'.padStart(11)}${'p90 ms'.padStart(9)}  ratio`)
cases.forEach((c, j) => {
  const m = median(times[j]!)
  console.log(
    `${c.name.padEnd(22)}${m.toFixed(1).padStart(11)}${percentile(times[j]!, 90).toFixed(1).padStart(9)}` +
      `  ${(m / baseline).toFixed(2)}`,
  )
})
standIn.kill()
