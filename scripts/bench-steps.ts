// npm run bench:steps: whether a step of the agent loop costs the same late in a run as early in it
// (issue 15: the loop must not do work in proportion to the run's length at every step). One run of a
// kind llm task whose fake model calls a cheap tool (echo on a fake MCP tool server) BENCH_STEPS times
// (default 200), one tool call per model reply, then finishes. A step is a model call and its tool call:
// from one model request reaching the fake provider to the next. Prints the median ms per step of steps
// 1-10 and of the last ten, and their ratio, in wall time and in this process's CPU time (the engine,
// the API and both fakes; PostgreSQL is another process), which a loaded machine disturbs less; after a
// warm-up run of 20 steps, BENCH_ROUNDS runs (default 3), one after the other, and the median of each
// figure over them. The model's request carries the whole conversation, so some growth is the
// provider's work (SDK and fake serialising a longer history), not the loop's.
// In process: the engine (with a model call limit above BENCH_STEPS), the API, a fake model provider and
// a fake MCP server, on a throwaway embedded PostgreSQL (or DATABASE_URL). Reports; asserts nothing.
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
import { createToken } from '../server/domain/people/index.js'
import { AgentExecutor } from '../server/engine/runs/index.js'
import { createProviders } from '../server/engine/models/index.js'
import { startEngine } from '../server/engine/index.js'
import { createApp } from '../server/http/app.js'
import { allScopes } from '../shared/scopes.js'
import { startFakeMcpServer } from '../test/fakes/mcp-server.js'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { median } from './bench-lib.js'

const steps = Number(process.env.BENCH_STEPS ?? 200)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const window = Math.min(10, Math.floor(steps / 2))

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-steps-'))
const model = await startFakeModelProvider()
const mcp = await startFakeMcpServer()
const config = {
  ...loadConfig({ dataDir }, { DATABASE_URL: process.env.DATABASE_URL ?? '' }),
  providerBaseUrls: { provider_a: model.url, provider_b: model.url },
}
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const sealer = createSealer(randomBytes(32))
const app = createApp({ sql, config, log, sealer })
const providers = createProviders({ baseUrls: config.providerBaseUrls })
const engine = await startEngine({
  sql,
  log,
  config,
  sealer,
  providers,
  executors: {
    llm: new AgentExecutor({ sql, sealer, providers, log, maxModelCalls: steps + 10 }),
  },
})

const enterprise = await createEnterprise(sql, { name: `Bench steps ${Date.now()}` }, config)
const { token } = await createToken(sql, enterprise.id, { name: 'bench', scopes: allScopes })
async function call<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await app.request(`/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return (text ? JSON.parse(text) : undefined) as T
}

const key = `bench-key-${randomBytes(6).toString('hex')}`
await call('POST', '/llm/bindings', { apiKey: key })
const [team] = await call<{ id: string }[]>('GET', '/teams')
await call('POST', '/tools/bindings', {
  name: 'bench',
  url: mcp.url,
  layer: 'team',
  layerId: team!.id,
})
const task = await call<{ id: string }>('POST', '/tasks', {
  name: 'Many steps',
  teamId: team!.id,
  assigneeRole: 'ceo',
  overlapPolicy: 'os',
  tools: ['bench.echo'],
})

/** When each model request reached the fake: wall and CPU ms. */
let arrivals: { wall: number; cpu: number }[] = []
model.onRequest(() => {
  const cpu = process.cpuUsage()
  arrivals.push({ wall: performance.now(), cpu: (cpu.user + cpu.system) / 1000 })
  return undefined // the script answers
})

/** One run of `steps` tool calls; answers the wall and CPU ms of each step, in order. */
async function oneRun(round: number, steps: number): Promise<{ wall: number[]; cpu: number[] }> {
  arrivals = []
  model.script(
    key,
    ...Array.from({ length: steps }, (_, n) => ({
      toolCalls: [{ name: 'bench.echo', arguments: { text: `round ${round} step ${n + 1}` } }],
    })),
    { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }] },
  )
  const run = await call<{ id: string }>('POST', `/tasks/${task.id}/runs`, {})
  const deadline = Date.now() + steps * 2_000 + 30_000
  for (;;) {
    const [row] = await sql<{ status: string; reason: string | null }[]>`
      select status, reason from runs where id = ${run.id}`
    if (row?.status === 'succeeded') break
    if (row && ['failed', 'cancelled', 'blocked', 'paused_spend'].includes(row.status))
      throw new Error(`the run ended ${row.status}: ${row.reason ?? ''}`)
    if (Date.now() > deadline) throw new Error(`the run is still ${row?.status}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  if (arrivals.length !== steps + 1)
    throw new Error(`expected ${steps + 1} model calls, the fake had ${arrivals.length}`)
  const step = (of: 'wall' | 'cpu') => arrivals.slice(1).map((a, n) => a[of] - arrivals[n]![of])
  return { wall: step('wall'), cpu: step('cpu') }
}

const figures = {
  wall: { early: [] as number[], late: [] as number[] },
  cpu: { early: [] as number[], late: [] as number[] },
}
const ms = (n: number) => n.toFixed(2).padStart(7)
try {
  await oneRun(0, 20) // warm-up: JIT, pools, prepared statements
  for (let round = 1; round <= rounds; round++) {
    const run = await oneRun(round, steps)
    const line = [`round ${round}:`]
    for (const of of ['wall', 'cpu'] as const) {
      const first = median(run[of].slice(0, window))
      const last = median(run[of].slice(-window))
      figures[of].early.push(first)
      figures[of].late.push(last)
      line.push(`${of} ${ms(first)} -> ${ms(last)} ms/step (x${(last / first).toFixed(2)})`)
    }
    console.log(line.join('  '))
  }
  console.log(`\n${steps} tool calls per run, ${rounds} run(s); medians over runs (ms per step):`)
  console.log(`         steps 1-${window}  steps ${steps - window + 1}-${steps}  ratio`)
  for (const of of ['wall', 'cpu'] as const) {
    const first = median(figures[of].early)
    const last = median(figures[of].late)
    console.log(`  ${of.padEnd(5)} ${ms(first)}     ${ms(last)}     ${(last / first).toFixed(2)}`)
  }
} finally {
  await engine.stop()
  await mcp.close()
  await model.close()
  await db.close()
  await rm(dataDir, { recursive: true, force: true })
}
