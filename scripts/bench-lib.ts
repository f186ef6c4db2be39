import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa, type ResultPromise } from 'execa'
import type { Pool } from 'undici'
import { freePort } from '../server/db/embedded.js'
import { readySql, type Sql } from '../server/db/sql.js'
import { projectRoot } from '../shared/paths.js'

// Shared by the bench:* scripts: osd processes of their own on a throwaway embedded PostgreSQL (or
// DATABASE_URL when set), an enterprise with an all-scope token, a direct connection for reading
// timings, and medians. Benchmarks report; they assert nothing.

export interface BenchDaemon {
  /** The API of the first process (role all). */
  url: string
  token: string
  enterpriseSlug: string
  /** A connection to the database the daemon uses, for reading run timestamps. */
  sql: Sql
  /** Its URL (the embedded PostgreSQL's, or DATABASE_URL), for `osd admin` commands on it. */
  databaseUrl: string
  /** The daemon's data dir (its archive, its embedded PostgreSQL). */
  dataDir: string
  /** Another `osd serve` process on the same database (e.g. --role engine). */
  start(args?: string[], extraEnv?: Record<string, string>): Promise<{ stop(): Promise<void> }>
  /** The first process (role all, at `url`), to stop on its own once others have taken over. */
  first: { stop(): Promise<void> }
  /**
   * CPU ms used so far (user + system, from /proc: Linux only, else 0) by the osd processes still
   * running and by the embedded PostgreSQL (its postmaster and every backend, those that ended
   * included; 0 with DATABASE_URL).
   */
  cpu(): Promise<{ osd: number; postgres: number }>
  /**
   * Waits until the daemon has all but stopped working after a load: a checkpoint (so the next load
   * does not write the last one's pages), then until its osd processes and PostgreSQL together use
   * under 25 ms of CPU in 250 ms (a tenth of a core), 30 s at most.
   */
  settle(): Promise<void>
  close(): Promise<void>
}

/** A process's CPU ms, its parent, and the CPU ms of its children that ended. */
type ProcessTime = { ms: number; parent: number; endedChildrenMs: number }

/**
 * One process's CPU ms (user + system), its parent, and the CPU of its children that have ended (and
 * been waited for), from /proc; undefined once it is gone (or off Linux).
 */
export async function processTime(pid: number): Promise<ProcessTime | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  if (!stat) return undefined
  // After the command's closing parenthesis: state, ppid, ... utime (14th field), stime (15th),
  // cutime and cstime (16th, 17th: its children that ended), in clock ticks of 10 ms.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return {
    ms: (Number(fields[11]) + Number(fields[12])) * 10,
    parent: Number(fields[1]),
    endedChildrenMs: (Number(fields[13]) + Number(fields[14])) * 10,
  }
}

/** processTime of every process, by pid: one read of /proc. */
async function processTimes(): Promise<Map<number, ProcessTime>> {
  const times = new Map<number, ProcessTime>()
  const entries = await readdir('/proc').catch(() => [] as string[])
  await Promise.all(
    entries
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        const time = await processTime(Number(name))
        if (time) times.set(Number(name), time)
      }),
  )
  return times
}

const osd = join(projectRoot, 'bin', 'osd')

export async function benchDaemon(extraEnv: Record<string, string> = {}): Promise<BenchDaemon> {
  const dataDir = await mkdtemp(join(tmpdir(), 'osd-bench-'))
  const env: Record<string, string> = {
    OSD_DATA_DIR: dataDir,
    DATABASE_URL: process.env.DATABASE_URL ?? '',
    OSD_LOG_LEVEL: process.env.OSD_LOG_LEVEL ?? 'info',
    ...extraEnv,
  }
  const made = await execa(
    'node',
    [osd, 'admin', 'enterprise', 'create', '--name', `Bench ${Date.now()}`, '--json'],
    { env },
  )
  const { token, enterprise } = JSON.parse(made.stdout) as {
    token: string
    enterprise: { slug: string }
  }
  const running: ResultPromise[] = []
  const alive = new Set<number>()

  /**
   * Starts a process and waits until it is ready: one serving HTTP when its health answers, one serving
   * /metrics (OSD_METRICS_PORT in `more`) when that answers, an engine when it logs that it started
   * (or after 5 s, should its log level hide that line: on a loaded machine it may not be up by then).
   */
  async function start(args: string[] = [], more: Record<string, string> = {}) {
    // BENCH_PROFILE_DIR: each osd process writes a CPU profile there when it stops (node --cpu-prof).
    const profile = process.env.BENCH_PROFILE_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`]
      : []
    const portAt = args.indexOf('--port')
    const metricsPort = Number(more.OSD_METRICS_PORT)
    const health =
      portAt >= 0
        ? `http://127.0.0.1:${args[portAt + 1]}/v1/health`
        : metricsPort > 0
          ? `http://127.0.0.1:${metricsPort}/metrics`
          : undefined
    // A process that serves HTTP logs to a file, as `osd serve >> osd.log` would: piped to this
    // process, its request lines (one per request) were read here, on the cores the load is made on,
    // which took 10-20% off the requests/s measured (issue 30). Its readiness is its health.
    const child = execa('node', [...profile, osd, 'serve', ...args], {
      env: { ...env, ...more },
      buffer: false,
      stdout: health ? { file: join(dataDir, `osd-${running.length}.log`) } : 'pipe',
      stderr: 'inherit',
      reject: false,
    })
    running.push(child)
    if (child.pid) alive.add(child.pid)
    await new Promise<void>((resolve, reject) => {
      let pending = ''
      child.stdout?.on('data', (chunk: Buffer) => {
        pending += chunk.toString()
        if (!health && pending.includes('"osd started"')) resolve()
        pending = pending.slice(-200)
      })
      child.once('exit', (code) => reject(new Error(`osd exited ${code}`)))
      if (!health) setTimeout(resolve, 5000)
      else {
        const poll = () =>
          fetch(health).then(
            (r) => (r.ok ? resolve() : setTimeout(poll, 100)),
            () => setTimeout(poll, 100),
          )
        poll()
      }
    })
    child.stdout?.resume()
    return {
      async stop() {
        child.kill('SIGTERM')
        await child
        alive.delete(child.pid!)
      },
    }
  }

  const port = await freePort()
  const first = await start(['--port', String(port)])
  const url = `http://127.0.0.1:${port}/v1`
  let databaseUrl = process.env.DATABASE_URL
  if (!databaseUrl) {
    const credentials = JSON.parse(await readFile(join(dataDir, 'embedded.json'), 'utf8')) as {
      user: string
      password: string
    }
    const pid = (await readFile(join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')
    databaseUrl = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${pid[3]}/osd`
  }
  const sql = await readySql(databaseUrl, { max: 4, applicationName: 'osd bench' })
  const postmaster = process.env.DATABASE_URL
    ? undefined
    : Number((await readFile(join(dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0])
  async function cpu() {
    const times = await processTimes()
    let osd = 0
    let postgres = 0
    for (const [pid, { ms, parent, endedChildrenMs }] of times) {
      if (alive.has(pid)) osd += ms
      // The backends that have ended count too (the postmaster waits for each): a connection closed
      // during a round would otherwise take its CPU out of the total.
      if (postmaster && pid === postmaster) postgres += ms + endedChildrenMs
      else if (postmaster && parent === postmaster) postgres += ms
    }
    return { osd, postgres }
  }
  return {
    url,
    token,
    enterpriseSlug: enterprise.slug,
    sql,
    databaseUrl,
    dataDir,
    start,
    first,
    cpu,
    async settle() {
      await sql`checkpoint`.catch(() => undefined)
      const busy = async () => {
        const { osd, postgres } = await cpu()
        return osd + postgres
      }
      const deadline = Date.now() + 30_000
      for (let before = await busy(); Date.now() < deadline;) {
        await new Promise((r) => setTimeout(r, 250))
        const now = await busy()
        if (now - before < 25) break
        before = now
      }
    },
    async close() {
      await sql.end()
      for (const child of running) child.kill('SIGTERM')
      await Promise.all(running)
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}

/**
 * When each run was last seen to move (performance.now()): the time its last notification (DESIGN 5:
 * one per run once a transaction that wrote its events commits) reached this process. A run's end is
 * the commit of the transaction that ended it, which its timestamps (the transaction's start) do not show.
 */
export async function watchRuns(sql: Sql) {
  const lastMoved = new Map<string, number>()
  const waiting = new Map<string, () => void>()
  const listener = await sql.listen('osd_run', (runId) => {
    lastMoved.set(runId, performance.now())
    waiting.get(runId)?.()
  })
  return {
    lastMoved,
    /** Resolves at the run's next notification. */
    next: (runId: string) =>
      new Promise<void>((resolve) =>
        waiting.set(runId, () => {
          waiting.delete(runId)
          resolve()
        }),
      ),
    stop: () => listener.unlisten(),
  }
}

/**
 * bench:chat's unit of load: a chat message sent and its reply read by the long-poll
 * (GET /v1/chats/{id}?afterMessageId=&waitSeconds=10), through `client` (a Pool to the API's origin)
 * with undici's request rather than fetch: the clients stand in for other machines, so the less CPU
 * they take from osd on the same cores the better. The reply ends its turn in the same commit, so the
 * next message may follow at once.
 */
export async function chatExchange(
  client: Pool,
  daemon: Pick<BenchDaemon, 'url' | 'token'>,
  chatId: string,
  n: number,
): Promise<void> {
  const prefix = new URL(daemon.url).pathname
  const headers = { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' }
  const sent = await client.request({
    method: 'POST',
    path: `${prefix}/chats/${chatId}/messages`,
    headers,
    body: JSON.stringify({ content: `message ${n}` }),
  })
  const message = (await sent.body.json()) as { id: string }
  if (sent.statusCode !== 201)
    throw new Error(`POST message: ${sent.statusCode} ${JSON.stringify(message)}`)
  for (;;) {
    const res = await client.request({
      method: 'GET',
      path: `${prefix}/chats/${chatId}?afterMessageId=${message.id}&waitSeconds=10`,
      headers,
    })
    const detail = (await res.body.json()) as { messages: { role: string }[] }
    if (res.statusCode !== 200)
      throw new Error(`GET chat: ${res.statusCode} ${JSON.stringify(detail)}`)
    if (detail.messages.some((m) => m.role === 'member')) return
  }
}

/** A small JSON client for the bench's own calls (setup), not the load. */
export function api(daemon: Pick<BenchDaemon, 'url' | 'token'>) {
  return async <T = any>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${daemon.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`)
    return (text ? JSON.parse(text) : undefined) as T
  }
}

/**
 * `count` deterministic tasks named `name` and a number, each run of which goes in a lane of its own
 * (serializeOn its input's `n`), in an enterprise whose concurrency limit no bench reaches: the runs
 * bench:runs, bench:retention and bench:traces start. Answers their ids and slugs.
 */
export async function laneTasks(
  daemon: Pick<BenchDaemon, 'url' | 'token'>,
  count: number,
  name: string,
): Promise<{ id: string; slug: string }[]> {
  const call = api(daemon)
  await call('PATCH', '/enterprise/concurrency', { concurrentRunLimit: 10000 })
  const tasks: { id: string; slug: string }[] = []
  for (let i = 0; i < count; i++)
    tasks.push(
      await call('POST', '/tasks', {
        name: `${name} ${i}`,
        kind: 'deterministic',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        serializeOn: ['n'],
      }),
    )
  return tasks
}

/**
 * Scrapes `url` every `ms` as Prometheus would at a short interval (each scrape reads the database's
 * counts too), for benches that measure a process with metrics on. Answers how to stop.
 */
export function scrapeEvery(url: string, ms = 1000): () => void {
  const timer = setInterval(
    () =>
      void fetch(url).then(
        (r) => r.text(),
        () => undefined,
      ),
    ms,
  )
  return () => clearInterval(timer)
}

/**
 * The sum of a counter's series (every label set) that the process at `metricsUrl` has counted so far;
 * `labels` keeps the series whose labels include it (`outcome="answered"`). For the share of the work
 * each engine process did: osd_runs_ended_total, osd_chat_replies_total.
 */
export async function counterTotal(metricsUrl: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(metricsUrl)).text()
  let total = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    if (labels && !line.includes(labels)) continue
    total += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return total
}

/**
 * What each of a layout's engine processes did of some work meanwhile: `take()` reads each one's counter
 * (counterTotal) before, the function it answers reads them again and answers each engine's share of
 * the difference (0..1, in the order of `metricsUrls`).
 */
export async function sharesOf(
  metricsUrls: string[],
  name: string,
  labels = '',
): Promise<() => Promise<number[]>> {
  const read = () => Promise.all(metricsUrls.map((url) => counterTotal(url, name, labels)))
  const before = await read()
  return async () => {
    const done = (await read()).map((n, i) => n - before[i]!)
    const total = done.reduce((a, b) => a + b, 0)
    return done.map((n) => (total ? n / total : 0))
  }
}

/** Shares (0..1) as percentages joined by slashes: "48/52". */
export function formatShares(shares: number[]): string {
  return shares.map((s) => (s * 100).toFixed(0)).join('/')
}

/**
 * A collector that takes OTLP/HTTP exports and drops them (BENCH_TRACES=ab, issue 49): what traced osd
 * processes send their spans to, counted, answered at once as a collector on this machine would.
 */
export async function otlpSink(): Promise<{
  url: string
  readonly exports: number
  readonly bytes: number
  close(): Promise<void>
}> {
  let exports = 0
  let bytes = 0
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (bytes += chunk.length))
    req.on('end', () => {
      exports++
      res.writeHead(200, { 'content-type': String(req.headers['content-type'] ?? '') }).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get exports() {
      return exports
    },
    get bytes() {
      return bytes
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * The largest of `values` (-Infinity for none), in a loop: `Math.max(...values)` passes every value as an
 * argument and overflows the stack past about 100,000 of them (a 150-second bench finishes more runs).
 */
export function largest(values: Iterable<number>): number {
  let most = -Infinity
  for (const v of values) if (v > most) most = v
  return most
}

/** The smallest of `values` (Infinity for none), in a loop, as `largest`. */
export function smallest(values: Iterable<number>): number {
  let least = Infinity
  for (const v of values) if (v < least) least = v
  return least
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

/**
 * Follows an event stream of the API (a path under /v1) through `client` (a Pool to the API's origin):
 * `onEvent` gets each event's name (`message` when it has none) and parsed data, at the moment it
 * arrives; comments and keep-alives are skipped. Answers the function that ends it.
 */
export async function followStream(
  client: Pool,
  daemon: Pick<BenchDaemon, 'url' | 'token'>,
  path: string,
  onEvent: (event: string, data: any) => void,
): Promise<() => void> {
  const prefix = new URL(daemon.url).pathname
  const controller = new AbortController()
  const res = await client.request({
    method: 'GET',
    path: `${prefix}${path}`,
    headers: { authorization: `Bearer ${daemon.token}`, accept: 'text/event-stream' },
    signal: controller.signal,
  })
  if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode}`)
  let pending = ''
  res.body.setEncoding('utf8')
  res.body.on('data', (chunk: string) => {
    pending += chunk
    let end: number
    while ((end = pending.indexOf('\n\n')) !== -1) {
      const frame = pending.slice(0, end)
      pending = pending.slice(end + 2)
      const name = /^event: (.*)$/m.exec(frame)?.[1] ?? 'message'
      const data = /^data: (.*)$/m.exec(frame)?.[1]
      if (data) onEvent(name, JSON.parse(data))
    }
  })
  res.body.on('error', () => undefined)
  return () => controller.abort()
}

/** Follows GET /v1/chats/{id}/events (followStream). */
export function followChatEvents(
  client: Pool,
  daemon: Pick<BenchDaemon, 'url' | 'token'>,
  chatId: string,
  onEvent: (event: string, data: any) => void,
): Promise<() => void> {
  return followStream(client, daemon, `/chats/${chatId}/events`, onEvent)
}
