import type { Metric, Registry } from 'prom-client'

/** prom-client, loaded when metrics are turned on: off (the default), osd never loads it. */
type PromClient = typeof import('prom-client')

// What this process measures, for Prometheus (DESIGN 13; issue 33): `GET /metrics` on a listener of its
// own (serve.ts), off unless OSD_METRICS_PORT is set. A leaf beside log.ts: the domain and the engine
// count through the functions of `metrics` below without knowing whether anything listens, and none of
// them imports prom-client. Off, every one of them is a check of one variable and a return: no
// registry, no label hashing, nothing kept.
//
// Names are `osd_*` with the unit in the name; label values come from small fixed sets (statuses,
// origins, kinds of failure, route templates), never an id, a slug or a path, so a series cannot be
// made per run, per task or per caller. Values kept in the database (runs under way, gates waiting, the
// spend against its caps) are read at scrape time in one query (refresh below), never counted here: any
// number of processes share the database, and each would count only its own share.

/** Counts of the database, read at scrape time (domain/runs gauges, domain/models spend). */
export interface DatabaseGauges {
  /** Runs under way by status (DESIGN 5: pending, queued, running, blocked, paused_spend). */
  runsUnderWay: Record<string, number>
  /** How long the oldest pending run that is due (no delay left) has waited, in seconds; 0 if none. */
  oldestPendingSeconds: number
  gatesWaiting: number
  /** Per spend layer, the highest share of its daily cap that today's spend and reservations take. */
  spendCapUse: Record<string, number>
}

/** What one pool of postgres.js holds now (scripts/patch-postgres.mjs adds the reading). */
export interface PoolStats {
  /** Connections running a query, holding a transaction or reserved. */
  inUse: number
  idle: number
  connecting: number
  /** Queries waiting for a connection. */
  waiting: number
}

/** What the daemon reads at scrape time. */
export interface ScrapeSources {
  database(): Promise<DatabaseGauges>
  pools: { name: string; stats(): PoolStats | undefined }[]
}

const secondsBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
// A run waits and works from milliseconds (a deterministic step) to hours (an llm run with its tools).
const runBuckets = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400]
const modelBuckets = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300]

/** Every instrument, made when metrics are turned on. */
function instruments(registry: Registry, { Counter, Gauge, Histogram }: PromClient) {
  const registers = [registry]
  return {
    httpDuration: new LightHistogram(
      'osd_http_request_duration_seconds',
      'HTTP requests by method, route template (/v1/tasks/{id}; unmatched for none) and status class (2xx..5xx)',
      secondsBuckets,
      registry,
    ),
    runsStarted: new Counter({
      name: 'osd_runs_started_total',
      help: 'Runs started (written pending or queued), by origin and task kind; refused API starts (skipped_overlap) are not counted',
      labelNames: ['origin', 'kind'] as const,
      registers,
    }),
    runsEnded: new Counter({
      name: 'osd_runs_ended_total',
      help: 'Runs that reached an end (succeeded, failed, cancelled), counted once their transaction committed',
      labelNames: ['status'] as const,
      registers,
    }),
    runsUnderWay: new Gauge({
      name: 'osd_runs_under_way',
      help: 'Runs under way now by status, read from the database at scrape time (the same in every process on it)',
      labelNames: ['status'] as const,
      registers,
    }),
    oldestPending: new Gauge({
      name: 'osd_runs_oldest_pending_seconds',
      help: 'How long the oldest due pending run has waited for admission, in seconds (0: none), read at scrape time',
      registers,
    }),
    runWait: new Histogram({
      name: 'osd_run_wait_seconds',
      help: "Time from a run's creation to its first start (running)",
      buckets: runBuckets,
      registers,
    }),
    runDuration: new Histogram({
      name: 'osd_run_duration_seconds',
      help: "Time from a run's first start (running) to its end, by the status it ended in",
      labelNames: ['status'] as const,
      buckets: runBuckets,
      registers,
    }),
    admissionPasses: new Counter({
      name: 'osd_admission_passes_total',
      help: 'Admission passes (pending -> queued) made by this process',
      registers,
    }),
    admissionDuration: new Histogram({
      name: 'osd_admission_pass_duration_seconds',
      help: 'How long an admission pass took, its locks included',
      buckets: secondsBuckets,
      registers,
    }),
    engineClaimed: new Counter({
      name: 'osd_engine_claimed_total',
      help: 'Work this engine claimed and began to execute, by kind (run, chat_turn)',
      labelNames: ['kind'] as const,
      registers,
    }),
    enginePasses: new Counter({
      name: 'osd_engine_passes_total',
      help: 'Passes of the lease loop (claim steps), by kind of work; a process whose count stops growing has stopped looking for work',
      labelNames: ['kind'] as const,
      registers,
    }),
    modelDuration: new Histogram({
      name: 'osd_model_call_duration_seconds',
      help: 'Model calls by provider, tier (exact: a model named by the task) and outcome (answered, failed)',
      labelNames: ['provider', 'tier', 'outcome'] as const,
      buckets: modelBuckets,
      registers,
    }),
    modelTokens: new Counter({
      name: 'osd_model_tokens_total',
      help: 'Tokens of answered model calls by provider, tier and type (input, cache_read, cache_write, output)',
      labelNames: ['provider', 'tier', 'type'] as const,
      registers,
    }),
    modelCost: new Counter({
      name: 'osd_model_cost_cents_total',
      help: 'What answered model calls cost, in US cents (from the price table), by provider and tier',
      labelNames: ['provider', 'tier'] as const,
      registers,
    }),
    modelErrors: new Counter({
      name: 'osd_model_errors_total',
      help: 'Failed model calls by provider and kind (refused_key, outage, bad_request, timeout, throttled, aborted)',
      labelNames: ['provider', 'kind'] as const,
      registers,
    }),
    toolCalls: new Counter({
      name: 'osd_tool_calls_total',
      help: 'Tool calls made by source (os: built-in tools that act; mcp: tool servers) and outcome (ok, error)',
      labelNames: ['source', 'outcome'] as const,
      registers,
    }),
    toolDuration: new Histogram({
      name: 'osd_tool_call_duration_seconds',
      help: 'How long tool calls took, by source',
      labelNames: ['source'] as const,
      buckets: modelBuckets,
      registers,
    }),
    gatesWaiting: new Gauge({
      name: 'osd_gates_waiting',
      help: 'Gates waiting for a decision now, read from the database at scrape time',
      registers,
    }),
    chatReplies: new Counter({
      name: 'osd_chat_replies_total',
      help: 'Chat turns ended, by outcome (answered; blocked, paused_spend or done with a notice instead; stopped by the person)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    chatFirstToken: new Histogram({
      name: 'osd_chat_first_token_seconds',
      help: "Time from a chat reply's model call step to the first piece of its text (streamed replies)",
      buckets: secondsBuckets,
      registers,
    }),
    scheduleFires: new Counter({
      name: 'osd_schedule_fires_total',
      help: 'Schedule fires this process claimed, by outcome (started a run, or no_run: the task cannot run)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    webhookDeliveries: new Counter({
      name: 'osd_webhook_deliveries_total',
      help: 'Inbound webhook deliveries and replays answered, by outcome (accepted, refused, failed)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    spendRefused: new Counter({
      name: 'osd_spend_reservations_refused_total',
      help: 'Model calls not made because a daily spend cap had no room for their worst case, by layer',
      labelNames: ['layer'] as const,
      registers,
    }),
    spendCapUse: new Gauge({
      name: 'osd_spend_cap_used_ratio',
      help: "The highest share of a daily spend cap that today's spend and reservations take, by layer, read at scrape time (1: at the cap)",
      labelNames: ['layer'] as const,
      registers,
    }),
    poolConnections: new Gauge({
      name: 'osd_db_pool_connections',
      help: 'Connections of a postgres.js pool of this process by state (in_use, idle, connecting)',
      labelNames: ['pool', 'state'] as const,
      registers,
    }),
    poolWaiting: new Gauge({
      name: 'osd_db_pool_waiting_queries',
      help: 'Queries waiting for a connection of a pool of this process',
      labelNames: ['pool'] as const,
      registers,
    }),
    statementErrors: new Counter({
      name: 'osd_db_statement_errors_total',
      help: 'Database errors that reached a handler (HTTP, engine passes, the scheduler), by SQLSTATE class (connection: the database could not be reached)',
      labelNames: ['class'] as const,
      registers,
    }),
    databaseUp: new Gauge({
      name: 'osd_database_up',
      help: "1 when the database answered this scrape's query, 0 when it did not",
      registers,
    }),
    embeddedRestarts: new Counter({
      name: 'osd_embedded_postgres_restarts_total',
      help: 'Times the embedded PostgreSQL was found dead and started again (by: this process; other: another osd process on the data dir)',
      labelNames: ['by'] as const,
      registers,
    }),
  }
}

type Instruments = ReturnType<typeof instruments>

let on: { registry: Registry; m: Instruments; sources?: ScrapeSources } | undefined

/**
 * Turns metrics on for this process, labelled with its role; later calls answer the same registry
 * (tests may start several daemons in one process: the first one's role labels them all).
 */
export async function enableMetrics(role: string): Promise<Registry> {
  if (on) return on.registry
  const client = await import('prom-client')
  if (on) return (on as { registry: Registry }).registry // turned on by another caller meanwhile
  const { Registry, collectDefaultMetrics } = client
  const registry = new Registry()
  registry.setDefaultLabels({ role })
  // prom-client's process and Node.js metrics (CPU, memory, heap, event loop lag, handles) under their
  // standard names, process_* and nodejs_*, as every Prometheus client library exports them: stock
  // dashboards and alerts find them there (DESIGN 13; issue 51). osd's own are osd_*.
  collectDefaultMetrics({ register: registry })
  on = { registry, m: instruments(registry, client) }
  return registry
}

/** The database and the pools to read at each scrape (serve.ts, once it has them). */
export function setScrapeSources(sources: ScrapeSources): void {
  if (on) on.sources = sources
}

export function metricsEnabled(): boolean {
  return on !== undefined
}

/** The text a scrape answers: the database's counts read first, then every metric written. */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  if (!on) throw new Error('metrics are off')
  await refresh(on.m, on.sources)
  return { contentType: on.registry.contentType, body: await on.registry.metrics() }
}

async function refresh(m: Instruments, sources: ScrapeSources | undefined): Promise<void> {
  if (!sources) return
  for (const pool of sources.pools) {
    const stats = pool.stats()
    if (!stats) continue
    m.poolConnections.set({ pool: pool.name, state: 'in_use' }, stats.inUse)
    m.poolConnections.set({ pool: pool.name, state: 'idle' }, stats.idle)
    m.poolConnections.set({ pool: pool.name, state: 'connecting' }, stats.connecting)
    m.poolWaiting.set({ pool: pool.name }, stats.waiting)
  }
  try {
    const gauges = await sources.database()
    m.databaseUp.set(1)
    // Statuses with no run are answered 0, not left at their last value.
    for (const status of underWay) m.runsUnderWay.set({ status }, gauges.runsUnderWay[status] ?? 0)
    m.oldestPending.set(gauges.oldestPendingSeconds)
    m.gatesWaiting.set(gauges.gatesWaiting)
    m.spendCapUse.reset()
    for (const [layer, ratio] of Object.entries(gauges.spendCapUse))
      m.spendCapUse.set({ layer }, ratio)
  } catch (err) {
    // The database away: said by osd_database_up; the counts keep their last values.
    m.databaseUp.set(0)
    statementError(m, err)
  }
}

const underWay = ['pending', 'queued', 'running', 'blocked', 'paused_spend']

/** A SQLSTATE's class, or `connection` for an error that says the database cannot be reached. */
function errorClass(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code
  if (typeof code !== 'string') return undefined
  if (/^[0-9A-Z]{5}$/.test(code)) return code.startsWith('08') ? 'connection' : code.slice(0, 2)
  // postgres.js's own (CONNECTION_CLOSED, CONNECT_TIMEOUT, ...) and the socket's (ECONNREFUSED, ...).
  if (/^(CONNECT|CONNECTION_|E[A-Z]+$)/.test(code)) return 'connection'
  return undefined
}

function statementError(m: Instruments, err: unknown): void {
  const cls = errorClass(err)
  if (cls) m.statementErrors.inc({ class: cls })
}

/** A route's template as Prometheus labels it: `/v1/tasks/:id` -> `/v1/tasks/{id}`. */
export function routeTemplate(honoPath: string): string {
  return honoPath.replace(/:(\w+)(\{[^/]*\})?/g, '{$1}')
}

/**
 * A histogram observed on every request (issue 33: at most 5% fewer requests/s with metrics on). A
 * prom-client child hashes its label object at each observe, 3% of a cached read's CPU in the bench's
 * profile; this one finds its series by a string key and counts in an array, and answers the registry
 * in prom-client's own shape (bucket, sum and count values with their metric names) when scraped.
 */
class LightHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private series = new Map<
    string,
    { labels: Record<string, string>; counts: number[]; sum: number; count: number }
  >()

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric)
  }

  /** Observes `value` in the series `key`, made with `labels()` the first time. */
  observe(key: string, labels: () => Record<string, string>, value: number): void {
    let s = this.series.get(key)
    if (!s) {
      s = {
        labels: labels(),
        counts: new Array<number>(this.bounds.length).fill(0),
        sum: 0,
        count: 0,
      }
      this.series.set(key, s)
    }
    let i = 0
    while (i < this.bounds.length && value > this.bounds[i]!) i++
    if (i < this.bounds.length) s.counts[i]! += 1
    s.sum += value
    s.count += 1
  }

  async get() {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] =
      []
    for (const s of this.series.values()) {
      let acc = 0
      this.bounds.forEach((le, i) => {
        acc += s.counts[i]!
        values.push({ labels: { ...s.labels, le }, value: acc, metricName: `${this.name}_bucket` })
      })
      values.push({
        labels: { ...s.labels, le: '+Inf' },
        value: s.count,
        metricName: `${this.name}_bucket`,
      })
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels: s.labels, value: s.count, metricName: `${this.name}_count` })
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    }
  }

  reset(): void {
    this.series.clear()
  }
}

/** Model usage as call.ts reads it from a reply. */
export interface TokenUsage {
  input: number
  cacheRead?: number
  cacheWrite?: number
  output: number
}

/**
 * What the daemon counts. Each function does nothing while metrics are off; none of them throws, so
 * measuring never fails the work it measures.
 */
export const metrics = {
  /** An HTTP request answered; `route` is the matched route's template, or undefined for none. */
  httpRequest(method: string, route: string | undefined, status: number, seconds: number): void {
    if (!on) return
    const statusClass = `${Math.trunc(status / 100)}xx`
    // Not any method a client sends: the ones the API has, else OTHER.
    const known = knownMethods.has(method) ? method : 'OTHER'
    on.m.httpDuration.observe(
      `${known} ${route} ${statusClass}`,
      () => ({ method: known, route: route ?? 'unmatched', status_class: statusClass }),
      seconds,
    )
  },

  runsStarted(runs: readonly { origin: string; kind: string; status: string }[]): void {
    if (!on) return
    for (const run of runs)
      if (run.status !== 'skipped_overlap')
        on.m.runsStarted.inc({ origin: run.origin, kind: run.kind })
  },

  /** Runs that moved to `to`, as written (their times are the database's). */
  runsMoved(
    to: string,
    runs: readonly {
      createdAt: Date
      startedAt: Date | null
      finishedAt: Date | null
      firstStart: boolean
    }[],
  ): void {
    if (!on) return
    for (const run of runs) {
      if (run.firstStart && run.startedAt)
        on.m.runWait.observe(seconds(run.createdAt, run.startedAt))
      if (run.finishedAt) {
        on.m.runsEnded.inc({ status: to })
        if (run.startedAt)
          on.m.runDuration.observe({ status: to }, seconds(run.startedAt, run.finishedAt))
      }
    }
  },

  admissionPass(seconds: number): void {
    if (!on) return
    on.m.admissionPasses.inc()
    on.m.admissionDuration.observe(seconds)
  },

  enginePass(kind: string, claimed: number): void {
    if (!on) return
    on.m.enginePasses.inc({ kind })
    if (claimed) on.m.engineClaimed.inc({ kind }, claimed)
  },

  modelCall(
    labels: { provider: string; tier: string },
    seconds: number,
    outcome: { usage: TokenUsage; costMicros: number } | { kind: string; timedOut: boolean },
  ): void {
    if (!on) return
    const { provider, tier } = labels
    if ('usage' in outcome) {
      on.m.modelDuration.observe({ provider, tier, outcome: 'answered' }, seconds)
      const { usage } = outcome
      const tokens = on.m.modelTokens
      tokens.inc({ provider, tier, type: 'input' }, usage.input)
      tokens.inc({ provider, tier, type: 'cache_read' }, usage.cacheRead ?? 0)
      tokens.inc({ provider, tier, type: 'cache_write' }, usage.cacheWrite ?? 0)
      tokens.inc({ provider, tier, type: 'output' }, usage.output)
      on.m.modelCost.inc({ provider, tier }, outcome.costMicros / 10_000)
      return
    }
    on.m.modelDuration.observe({ provider, tier, outcome: 'failed' }, seconds)
    const kind = outcome.timedOut ? 'timeout' : outcome.kind
    on.m.modelErrors.inc({ provider, kind })
  },

  toolCall(source: 'os' | 'mcp', ok: boolean, seconds: number): void {
    if (!on) return
    on.m.toolCalls.inc({ source, outcome: ok ? 'ok' : 'error' })
    on.m.toolDuration.observe({ source }, seconds)
  },

  chatReply(outcome: 'answered' | 'blocked' | 'paused_spend' | 'done' | 'stopped'): void {
    on?.m.chatReplies.inc({ outcome })
  },

  chatFirstToken(seconds: number): void {
    on?.m.chatFirstToken.observe(seconds)
  },

  scheduleFires(started: number, noRun: number): void {
    if (!on) return
    if (started) on.m.scheduleFires.inc({ outcome: 'started' }, started)
    if (noRun) on.m.scheduleFires.inc({ outcome: 'no_run' }, noRun)
  },

  webhookDelivery(outcome: string): void {
    on?.m.webhookDeliveries.inc({ outcome })
  },

  spendRefused(layer: string): void {
    on?.m.spendRefused.inc({ layer })
  },

  /** A database error that reached a handler; other errors are not counted. */
  statementError(err: unknown): void {
    if (on) statementError(on.m, err)
  },

  embeddedRestart(by: 'this' | 'other'): void {
    on?.m.embeddedRestarts.inc({ by })
  },
}

const knownMethods = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'])

function seconds(from: Date, to: Date): number {
  return Math.max(0, (to.getTime() - from.getTime()) / 1000)
}
