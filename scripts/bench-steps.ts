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
//
// Then what a run and a chat cost (issue 29): their input cost with prompt caching against
// OSD_PROMPT_CACHE=off, in the same run (the engine's providers switched between the two settings). A
// run of BENCH_COST_STEPS tool steps (default 50) and its finish, whose first prompt (tools, system
// and input) is about 3,000 tokens; a chat of BENCH_CHAT_MESSAGES person messages (default 20), each
// replied to (streamed), whose member's persona makes its first prompt about 3,000 tokens. Each in an
// enterprise of its own, costed from its key's usage rows (GET /v1/llm/connections/{id}/usage): input,
// cache read and cache write tokens at the model's prices (claude-sonnet-5-5 for provider_a, gpt-5.4
// for provider_b). The fake provider caches as each provider documents (test/fakes/model-provider.ts):
// target, cached at most 30% of off. provider_b caches by itself whatever OSD_PROMPT_CACHE says: its
// line compares the input osd records with the same tokens at the full input price (what a count that
// ignores cached_tokens would say).
// BENCH_PARTS=steps or =cost runs one part (default both).
// BENCH_TRACES=ab: the steps part's runs with traces on (exported to a local OTLP sink) and off, in
// turn within each round, and the median ms per step of each (issue 49's target: a 50-step run within
// 0.3 ms per step: BENCH_STEPS=50).
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { loadConfig, tracesConfig } from '../server/config.js'
import { startTraces, stopTraces } from '../server/traces/index.js'
import { createSealer } from '../server/crypto.js'
import { openDatabase } from '../server/db/index.js'
import { migrate } from '../server/db/migrate.js'
import { createEnterprise } from '../server/domain/enterprises/index.js'
import { createToken } from '../server/domain/people/index.js'
import { AgentExecutor } from '../server/engine/runs/index.js'
import { createProviders, type ModelProvider } from '../server/engine/models/index.js'
import { startEngine, toolLimits } from '../server/engine/index.js'
import { createApp } from '../server/http/app.js'
import { allScopes } from '../shared/scopes.js'
import { priceOf, type Provider } from '../shared/schemas/models.js'
import { startFakeMcpServer } from '../test/fakes/mcp-server.js'
import { startFakeModelProvider } from '../test/fakes/model-provider.js'
import { median, otlpSink } from './bench-lib.js'

const steps = Number(process.env.BENCH_STEPS ?? 200)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
const costSteps = Number(process.env.BENCH_COST_STEPS ?? 50)
const chatMessages = Number(process.env.BENCH_CHAT_MESSAGES ?? 20)
const parts = (process.env.BENCH_PARTS ?? 'steps,cost').split(',')
const window = Math.min(10, Math.floor(steps / 2))

const log = pino({ level: process.env.OSD_LOG_LEVEL ?? 'warn' })
const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-steps-'))
const model = await startFakeModelProvider()
const mcp = await startFakeMcpServer()
const config = {
  // The fake tool server is on 127.0.0.1, which a tenant's tool connection may reach only if allowed.
  ...loadConfig(
    { dataDir },
    { DATABASE_URL: process.env.DATABASE_URL ?? '', OSD_EGRESS_ALLOW: '127.0.0.0/8,::1' },
  ),
  providerBaseUrls: { provider_a: model.url, provider_b: model.url },
}
const db = await openDatabase(config, log)
await migrate(db.sql)
const { sql } = db
const sealer = createSealer(randomBytes(32))
const app = createApp({ sql, config, log, sealer })
// The engine's providers, with cache breakpoints or without (as OSD_PROMPT_CACHE=off makes them).
let promptCache = true
const withCache = createProviders({ baseUrls: config.providerBaseUrls, promptCache: true, log })
const withoutCache = createProviders({ baseUrls: config.providerBaseUrls, promptCache: false, log })
const switched = (provider: Provider): ModelProvider => ({
  call: (...args) => (promptCache ? withCache : withoutCache)[provider].call(...args),
  listModels: (...args) => withCache[provider].listModels(...args),
})
const providers = { provider_a: switched('provider_a'), provider_b: switched('provider_b') }
const engine = await startEngine({
  sql,
  log,
  config,
  sealer,
  providers,
  executors: {
    llm: new AgentExecutor({
      sql,
      sealer,
      providers,
      log,
      maxModelCalls: Math.max(steps, costSteps) + 10,
      toolLimits: toolLimits(config),
    }),
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
/** BENCH_TRACES=ab: runs traced and untraced in turn; the median ms per step of each (wall, CPU). */
async function timeStepsTracesAB(): Promise<void> {
  const sink = await otlpSink()
  const setTraces = async (on: boolean) => {
    if (!on) return stopTraces(1000)
    const env = { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: sink.url }
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.url
    await startTraces(tracesConfig(env), { version: 'bench', role: 'all', warn: () => undefined })
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT
  }
  const per = {
    on: { wall: [] as number[], cpu: [] as number[] },
    off: { wall: [] as number[], cpu: [] as number[] },
  }
  for (const on of [true, false]) {
    await setTraces(on)
    await oneRun(0, 20) // warm-up of each: JIT, pools, prepared statements, the SDK's first spans
  }
  for (let round = 1; round <= rounds; round++)
    for (const on of round % 2 === 1 ? [true, false] : [false, true]) {
      await setTraces(on)
      const run = await oneRun(round, steps)
      const side = on ? per.on : per.off
      side.wall.push(median(run.wall))
      side.cpu.push(median(run.cpu))
      console.log(
        `round ${round} traces ${on ? 'on ' : 'off'}: wall ${ms(median(run.wall))} ms/step  cpu ${ms(median(run.cpu))} ms/step`,
      )
    }
  await setTraces(false)
  console.log(
    `\n${steps} tool calls per run, ${rounds} run(s) each way; medians over runs (ms per step):`,
  )
  console.log('         traces on  traces off  difference')
  for (const of of ['wall', 'cpu'] as const) {
    const on = median(per.on[of])
    const off = median(per.off[of])
    console.log(
      `  ${of.padEnd(5)} ${ms(on)}    ${ms(off)}     ${(on - off).toFixed(3).padStart(7)}`,
    )
  }
  console.log(`traces: ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(2)} MB to the sink`)
  await sink.close()
}

async function timeSteps(): Promise<void> {
  if (process.env.BENCH_TRACES === 'ab') return timeStepsTracesAB()
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
}

// --- what a run and a chat cost: prompt caching against OSD_PROMPT_CACHE=off ----------------------

/** About `tokens` tokens of prose, as the fake counts them (a token per 4 characters). */
const prose = (tokens: number) =>
  'Reconcile each ledger line against the bank statement, and say which ones differ. '
    .repeat(Math.ceil((tokens * 4) / 84))
    .slice(0, tokens * 4)

/** An enterprise of its own: a key on `provider`, the bench's tool server on its team. */
async function costTenant(provider: Provider) {
  const e = await createEnterprise(
    sql,
    { name: `Bench cost ${randomBytes(4).toString('hex')}` },
    config,
  )
  const own = await createToken(sql, e.id, { name: 'bench', scopes: allScopes })
  const as = async <T = any>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await app.request(`/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${own.token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
    return (text ? JSON.parse(text) : undefined) as T
  }
  const key = `bench-cost-${randomBytes(6).toString('hex')}`
  await as('POST', '/llm/bindings', { apiKey: key, provider })
  const [team] = await as<{ id: string }[]>('GET', '/teams')
  await as('POST', '/tools/bindings', {
    name: 'bench',
    url: mcp.url,
    layer: 'team',
    layerId: team!.id,
  })
  return { id: e.id, key, as, teamId: team!.id }
}

interface Cost {
  calls: number
  /** The first call's input tokens, all kinds. */
  firstPrompt: number
  inputTokens: number
  cacheReadTokens: number
  cacheWriteTokens: number
  /** Micro-dollars: the input at its kinds' prices, and the same tokens all at the full input price. */
  input: number
  inputUncached: number
}

/** What the enterprise's key was billed for, from its usage rows. */
async function costOf(
  tenant: Awaited<ReturnType<typeof costTenant>>,
  provider: Provider,
): Promise<Cost> {
  const [connection] = await tenant.as<{ id: string }[]>('GET', '/llm/connections')
  const usage = await tenant.as<{
    days: {
      model: string
      calls: number
      inputTokens: number
      cacheReadTokens: number
      cacheWriteTokens: number
    }[]
  }>('GET', `/llm/connections/${connection!.id}/usage`)
  const cost: Cost = {
    calls: 0,
    firstPrompt: 0,
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    input: 0,
    inputUncached: 0,
  }
  for (const day of usage.days) {
    const price = priceOf(provider, day.model)
    cost.calls += day.calls
    cost.inputTokens += day.inputTokens
    cost.cacheReadTokens += day.cacheReadTokens
    cost.cacheWriteTokens += day.cacheWriteTokens
    cost.input +=
      day.inputTokens * price.input +
      day.cacheReadTokens * price.cacheRead +
      day.cacheWriteTokens * price.cacheWrite
    cost.inputUncached +=
      (day.inputTokens + day.cacheReadTokens + day.cacheWriteTokens) * price.input
  }
  const first = model.callsWith(tenant.key)[0]?.usage
  cost.firstPrompt = first ? first.input + first.cacheRead + first.cacheWrite : 0
  return cost
}

/** A run of `n` tool steps and its finish, with a ~3,000-token prompt and tools. */
async function costRun(provider: Provider, n: number): Promise<Cost> {
  const tenant = await costTenant(provider)
  const task = await tenant.as<{ id: string }>('POST', '/tasks', {
    name: 'Costed steps',
    teamId: tenant.teamId,
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
    tools: ['bench.echo'],
    skillMd: `# Keep the books\n\n${prose(2_850)}`,
  })
  model.script(
    tenant.key,
    ...Array.from({ length: n }, (_, i) => ({
      toolCalls: [{ name: 'bench.echo', arguments: { text: `line ${i + 1} checked` } }],
      usage: { output: 40 },
    })),
    {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }],
      usage: { output: 40 },
    },
  )
  const run = await tenant.as<{ id: string }>('POST', `/tasks/${task.id}/runs`, {
    month: 'June',
  })
  const deadline = Date.now() + n * 2_000 + 30_000
  for (;;) {
    const [row] = await sql<{ status: string; reason: string | null }[]>`
      select status, reason from runs where id = ${run.id}`
    if (row?.status === 'succeeded') break
    if (row && ['failed', 'cancelled', 'blocked', 'paused_spend'].includes(row.status))
      throw new Error(`the costed run ended ${row.status}: ${row.reason ?? ''}`)
    if (Date.now() > deadline) throw new Error(`the costed run is still ${row?.status}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return costOf(tenant, provider)
}

/** A chat of `n` person messages, each replied to, whose persona makes a ~3,000-token prompt. */
async function costChat(provider: Provider, n: number): Promise<Cost> {
  const tenant = await costTenant(provider)
  const member = await tenant.as<{ id: string }>('POST', '/members', {
    name: 'Ledger Keeper',
    persona: `You keep the harbour's books. ${prose(2_900)}`,
  })
  const chat = await tenant.as<{ id: string }>('POST', '/chats', { memberId: member.id })
  for (let i = 1; i <= n; i++) {
    model.script(tenant.key, {
      text: `Line ${i}: ${prose(120)}`,
      usage: { output: 120 },
    })
    const sent = await tenant.as<{ id: string }>('POST', `/chats/${chat.id}/messages`, {
      content: `What of ledger line ${i}? ${prose(40)}`,
    })
    for (;;) {
      const detail = await tenant.as<{ messages: { role: string }[]; replying: boolean }>(
        'GET',
        `/chats/${chat.id}?afterMessageId=${sent.id}&waitSeconds=10`,
      )
      if (detail.messages.some((m) => m.role === 'member') && !detail.replying) break
    }
  }
  return costOf(tenant, provider)
}

async function cost(): Promise<void> {
  model.onRequest(() => undefined)
  const measured: { what: string; cached: Cost; against: Cost | 'full price' }[] = []
  const measure = async (what: string, make: (provider: Provider) => Promise<Cost>) => {
    promptCache = true
    const cached = await make('provider_a')
    promptCache = false
    const off = await make('provider_a')
    promptCache = true
    measured.push({ what: `provider_a ${what}`, cached, against: off })
    measured.push({
      what: `provider_b ${what}`,
      cached: await make('provider_b'),
      against: 'full price',
    })
  }
  await measure(`run of ${costSteps} steps`, (p) => costRun(p, costSteps))
  await measure(`chat of ${chatMessages} messages`, (p) => costChat(p, chatMessages))
  const usd = (micros: number) => `$${(micros / 1e6).toFixed(4)}`
  console.log('\ninput cost, prompt caching against OSD_PROMPT_CACHE=off (target: at most 30%):')
  for (const { what, cached, against } of measured) {
    const base = against === 'full price' ? cached.inputUncached : against.input
    console.log(
      `  ${what.padEnd(34)} ${String(cached.calls).padStart(3)} calls  cached ${usd(cached.input)}` +
        `  ${against === 'full price' ? 'at full price' : 'off'} ${usd(base)}` +
        `  ${((cached.input / base) * 100).toFixed(1).padStart(5)}%` +
        `  (first prompt ${cached.firstPrompt} tokens;` +
        ` input ${cached.inputTokens}, cache read ${cached.cacheReadTokens}, cache write ${cached.cacheWriteTokens})`,
    )
  }
}

try {
  if (parts.includes('steps')) await timeSteps()
  if (parts.includes('cost')) await cost()
} finally {
  await engine.stop()
  await mcp.close()
  await model.close()
  await db.close()
  await rm(dataDir, { recursive: true, force: true })
}
