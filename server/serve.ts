import { createServer as createNetServer, type AddressInfo } from 'node:net'
import { homedir } from 'node:os'
import { basename, delimiter, dirname, isAbsolute, relative, resolve } from 'node:path'
import { createServer, type Server } from 'node:http'
import { ConfigError, defaultPasswordLog2N, type Config } from './config.js'
import { createSealer, loadKeyring, type Keyring } from './crypto.js'
import { checkDataDir } from './data-dir.js'
import { connectedRole, openDatabase, superuserMessage } from './db/index.js'
import { migrate } from './db/migrate.js'
import { loadServiceCatalog } from './domain/catalog/index.js'
import { anyEnterprise } from './domain/enterprises/index.js'
import { usePasswordCost } from './domain/people/index.js'
import { archiveDirProblem } from './domain/retention/index.js'
import { memorySupport, noTrigramMessage } from './domain/learning/index.js'
import { startEngine, type Engine } from './engine/index.js'
import { TokenUses } from './http/token-uses.js'
import type { AppDeps } from './http/context.js'
import type { Logger } from './log.js'
import {
  enableMetrics,
  scrape,
  setScrapeSources,
  type PoolStats,
  type ScrapeSources,
} from './metrics.js'
import type { Sql } from './db/sql.js'
import { runGauges } from './domain/runs/index.js'
import { spendCapUse } from './domain/models/index.js'
import { secretKeyProblem, secretKeysChangedChannel } from './domain/sealed/index.js'
import { startTraces, stopTraces } from './traces/index.js'

export interface Running {
  /** Base URL of the API (ends in /v1), when this process serves HTTP. */
  url: string | undefined
  /** Where Prometheus scrapes this process (ends in /metrics), when metrics are on. */
  metricsUrl: string | undefined
  engine: Engine | undefined
  /**
   * Stops taking requests (streams and long-polls end at once, what arrives on a connection still open
   * is 503 shutting_down), lets the requests in flight finish, stops background work, closes the
   * database (and stops the embedded server unless another osd process uses it).
   */
  stop(): Promise<void>
  /**
   * Stops at once, whatever stop() is still waiting for (a second Ctrl+C; issue 51): connections cut,
   * pools closed, and the embedded server stopped unless another osd process uses it.
   */
  halt(): Promise<void>
}

export interface DaemonOptions {
  /** How `osd` is run on this host, for the commands the daemon logs (main.ts: osdCommand). */
  osd?: string
}

/** The composition root (DESIGN 2): config -> db -> app -> engine -> listen. */
export async function startDaemon(
  config: Config,
  log: Logger,
  options: DaemonOptions = {},
): Promise<Running> {
  // Before the database opens, so that what happens to it from the start (a restart of the embedded
  // server) is counted; every count is a no-op while metrics are off.
  if (config.metricsPort !== undefined) await enableMetrics(config.role)
  // Traces (issue 49) when an OTLP endpoint is set, the SDK loaded only then. Stopped (what is held
  // sent) by the stop of whoever turned them on: a test's own tracing outlives its daemons.
  const traced = await startTraces(config.traces, {
    version: config.version,
    role: config.role,
    warn: (fields, message) => log.warn(fields, message),
  })
  usePasswordCost(config.passwordLog2N)
  if (config.passwordLog2N < defaultPasswordLog2N)
    log.warn(
      { passwordCost: config.passwordLog2N, default: defaultPasswordLog2N },
      'OSD_PASSWORD_COST is below OWASP’s minimum: new password hashes are cheaper to guess',
    )
  // A port taken is said in one line before the database starts (issue 51), not after the embedded
  // server's start as a stack: nothing else osd does then helps.
  // An address that is not this host's, or a name that resolves to none, too: it was a stack once the
  // embedded server and the engine had started, and left the server running.
  if (config.role !== 'engine')
    await portFree(config.host, config.port, '--port or OSD_PORT', '--host or OSD_HOST')
  if (config.metricsPort !== undefined)
    await portFree(
      config.metricsHost,
      config.metricsPort,
      '--metrics-port or OSD_METRICS_PORT',
      'OSD_METRICS_HOST',
    )
  await checkDataDir(config)
  // The key read (a malformed OSD_SECRET_KEY, a key file that cannot be read: said in a line) before
  // the database opens: the embedded server started 1.5 s for nothing. A key a first start makes is
  // written only once the database's secrets are checked (keep() below).
  let keyring: Keyring
  try {
    keyring = loadKeyring(config.dataDir)
  } catch (err) {
    if (traced) await stopTraces(0)
    throw err
  }
  const db = await openDatabase(config, log, { max: 20 })
  const sealer = createSealer(keyring)
  let empty: boolean
  try {
    const applied = await migrate(db.sql, undefined, { log })
    log.info({ database: db.location, applied }, 'database ready')
    const catalog = await loadServiceCatalog(db.sql)
    log.info(catalog, 'catalogue loaded')
    // Said once, here: recall without pg_trgm works, only less forgiving (issue 31).
    if (!(await memorySupport(db.sql)).trigram) log.warn({ extension: 'pg_trgm' }, noTrigramMessage)
    // Said once, here (issue 41). The embedded server's role never is one; DATABASE_URL's may be.
    const connected = await connectedRole(db.sql)
    if (connected.superuser) log.warn({ databaseRole: connected.role }, superuserMessage)
    empty = !(await anyEnterprise(db.sql))
    // A restored backup's secrets need the key of the instance it was made on (issue 46). A new data
    // dir's key is written only then, so a refused start leaves no key file of its own behind.
    let keyProblem = await secretKeyProblem(db.sql, sealer)
    if (!keyProblem) {
      const checked = keyring.current.id
      keyring.keep()
      // Another process wrote its key first: this one uses that, which must open them too.
      if (keyring.current.id !== checked) keyProblem = await secretKeyProblem(db.sql, sealer)
    }
    if (keyProblem) throw new ConfigError(keyProblem)
  } catch (err) {
    await db.close().catch(() => undefined)
    if (traced) await stopTraces(0)
    throw err
  }

  const shutdown = new AbortController()
  // rotate-key adds a key (and the operator removes one) while osd runs: read them again when told.
  await followKeyChanges(db.sql, log, () => {
    const failed = keyring.reload()
    if (failed)
      log.error({ err: failed }, 'cannot read the secret keys again; keeping those read before')
    else
      log.info({ current: keyring.current.id, keys: keyring.all.length }, 'secret keys read again')
  })
  // Held here so that stop writes the token uses of the last second before the database closes.
  const tokenUses = new TokenUses(db.sql, log)
  const deps: AppDeps = {
    sql: db.sql,
    config,
    log,
    sealer,
    shutdown: shutdown.signal,
    tokenUses,
  }
  // Chat replies have a pool of their own (EngineOptions.chatSql), so they never hold dispatch's.
  const chatSql =
    config.role === 'api' ? undefined : await db.pool({ max: 8, applicationName: 'osd chats' })
  // Event deliveries too (EngineOptions.deliverySql): their POSTs hold no connection, their statements
  // a few, and never dispatch's.
  const deliverySql =
    config.role === 'api' ? undefined : await db.pool({ max: 4, applicationName: 'osd deliveries' })
  const engine = chatSql
    ? await startEngine({
        sql: db.sql,
        chatSql,
        deliverySql,
        log,
        config,
        sealer: deps.sealer,
        retention: await retentionOf(config, log),
      })
    : undefined
  // A listen that fails (its port taken since portFree looked, or by the other listener of this osd)
  // stops what started: the engine, the pools, the embedded server unless others use it.
  let server: Server | undefined
  let metricsServer: Server | undefined
  try {
    server = config.role === 'engine' ? undefined : await listenHttp(deps)
    metricsServer =
      config.metricsPort === undefined
        ? undefined
        : await listenMetrics(
            config,
            db.sql,
            { main: db.sql, chats: chatSql, deliveries: deliverySql },
            log,
          )
  } catch (err) {
    if (server) await closeHttp(server, log)
    await engine?.stop()
    await db.close()
    if (traced) await stopTraces(0)
    throw err
  }
  const url =
    server && `http://${formatHost(config.host)}:${(server.address() as AddressInfo).port}/v1`
  const metricsUrl =
    metricsServer &&
    `http://${formatHost(config.metricsHost)}:${(metricsServer.address() as AddressInfo).port}/metrics`
  log.info({ url, metricsUrl, role: config.role, version: config.version }, 'osd started')
  // A first start (issue 35): nothing answers a token yet, so say how the first one is made.
  if (empty && server) log.info({}, firstStartHint(config, options.osd ?? 'osd'))
  // Written now, not at the log buffer's next half second (log.ts): whoever waits for "osd started" (a
  // supervisor, a deploy script, a person) reads it as osd starts to answer.
  log.flush()

  let stopping: Promise<void> | undefined
  let halting: Promise<void> | undefined
  return {
    url,
    metricsUrl,
    engine,
    stop: () =>
      (stopping ??= (async () => {
        // Long-polls answer and event streams end now, and what comes after is refused (requestLog),
        // rather than hold the shutdown.
        shutdown.abort()
        if (server) await closeHttp(server, log)
        // The last requests' token uses wait for a batch that would find the database closed.
        await tokenUses.flush()
        // Scraped until the API has stopped, so the last requests' durations can still be read.
        if (metricsServer) await closeHttp(metricsServer, log)
        await engine?.stop()
        await db.close()
        // The last passes' spans, sent within a second: the stop stays within its budget
        // (docs/configuration.md#shutdown) when no collector answers.
        if (traced) await stopTraces(1000)
        log.info({}, 'osd stopped')
      })()),
    halt: () =>
      (halting ??= (async () => {
        shutdown.abort()
        for (const s of [server, metricsServer]) {
          s?.close()
          s?.closeAllConnections()
        }
        // The engine is not waited for: its work in flight fails with the pools, and is taken up again
        // at the next start as after a crash (DESIGN 5).
        await db.close({ now: true })
        if (traced) await stopTraces(0)
        log.info({}, 'osd stopped at once')
      })()),
  }
}

/**
 * Calls `reload` whenever rotate-key says the keys changed; a failure to listen is logged, not fatal
 * (a value sealed under a key this process lacks also makes it read its keys again: crypto.ts).
 */
async function followKeyChanges(sql: Sql, log: Logger, reload: () => void): Promise<void> {
  await sql
    .listen(secretKeysChangedChannel, reload)
    .catch((err: unknown) => log.error({ err }, 'cannot follow changes of the secret keys'))
}

/**
 * The retention pass this engine runs (issue 46), unless OSD_RETENTION=off. An archive dir it cannot
 * write is said at start; the pass still runs, and its batches fail (and keep their rows) until the
 * dir can be written.
 */
async function retentionOf(config: Config, log: Logger) {
  if (!config.retention.enabled) return undefined
  const problem = await archiveDirProblem(config.archiveDir)
  if (problem) log.warn({ archiveDir: config.archiveDir, problem }, 'archive dir cannot be written')
  return { archiveDir: config.archiveDir, intervalSeconds: config.retention.intervalSeconds }
}

/**
 * The one command that makes the first enterprise with its owner, a new person (the password piped to
 * it), and prints a token holding every scope; with the data dir this daemon uses (a DATABASE_URL is
 * the operator's own setting, theirs to give osd admin too).
 */
export function firstStartHint(config: Config, osd: string): string {
  const dataDir =
    config.databaseUrl || config.dataDir === resolve(homedir(), '.osd')
      ? ''
      : ` --data-dir ${quoted(config.dataDir)}`
  const command =
    `${osd} admin${dataDir} enterprise create --name Acme --owner-email you@example.com ` +
    '--password-stdin'
  return `no enterprise yet: make the first, with you as its owner, on this host: ${command} (your password on stdin)`
}

/**
 * How this host runs osd, for the commands the daemon logs: `osd` when that is what the PATH finds
 * (npm link), else the launcher's path, relative when under the working directory (`./bin/osd`).
 */
export function osdCommand(
  script: string | undefined,
  cwd = process.cwd(),
  path = process.env.PATH ?? '',
): string {
  if (!script) return 'osd'
  const dirs = path.split(delimiter).filter(Boolean)
  if (basename(script) === 'osd' && dirs.some((dir) => resolve(dir) === dirname(script)))
    return 'osd'
  const relativePath = relative(cwd, script)
  return relativePath && !relativePath.startsWith('..') && !isAbsolute(relativePath)
    ? `./${relativePath}`
    : script
}

/** A path as one shell word. */
function quoted(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`
}

/**
 * Refuses, as a ConfigError naming the setting, a port another process listens on, and a host that is
 * no address of this machine's or a name that resolves to none. Port 0 picks a free one. A port taken
 * between this and the listen fails the listen all the same.
 */
async function portFree(
  host: string,
  port: number,
  setting: string,
  hostSetting: string,
): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createNetServer()
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(listenRefusal(err, host, port, setting, hostSetting)),
    )
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()))
  })
}

/** A listen's failure, as a ConfigError naming the setting when a person can act on it. */
function listenRefusal(
  err: NodeJS.ErrnoException,
  host: string,
  port: number,
  setting: string,
  hostSetting: string,
): Error {
  switch (err.code) {
    case 'EADDRINUSE':
      return new ConfigError(
        `port ${port} on ${formatHost(host)} is in use by another process: choose another with ${setting}`,
      )
    case 'EACCES':
      return new ConfigError(
        `port ${port} on ${formatHost(host)} may not be used by this user: choose another with ${setting}`,
      )
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
      return new ConfigError(
        `${host} (${hostSetting}) does not resolve to an address${err.code === 'ENOTFOUND' ? '' : ' now'}: give an address of this host (127.0.0.1, 0.0.0.0 for all) or a name of one`,
      )
    case 'EADDRNOTAVAIL':
    case 'EAFNOSUPPORT':
      return new ConfigError(
        `${host} (${hostSetting}) is not an address of this host: give one of its own (127.0.0.1, 0.0.0.0 for all)`,
      )
    default:
      return err
  }
}

async function listenHttp(deps: AppDeps): Promise<Server> {
  // Loaded here, not at the top: an engine process (--role engine) serves no HTTP, and the app with its
  // routes, their schemas and Hono is about a quarter of osd's modules (an engine started in 1.07
  // CPU-seconds instead of 1.33, issue 40).
  const [{ createApp }, { serve: listen }] = await Promise.all([
    import('./http/app.js'),
    import('@hono/node-server'),
  ])
  // Links in answers name the address listened on (with --port 0, known once listening).
  let url: string | undefined
  const app = createApp({ ...deps, listenUrl: () => url })
  return new Promise((resolve, reject) => {
    const server = listen({
      fetch: app.fetch,
      port: deps.config.port,
      hostname: deps.config.host,
    }) as Server
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        listenRefusal(
          err,
          deps.config.host,
          deps.config.port,
          '--port or OSD_PORT',
          '--host or OSD_HOST',
        ),
      ),
    )
    server.once('listening', () => {
      url = `http://${formatHost(deps.config.host)}:${(server.address() as AddressInfo).port}/v1`
      resolve(server)
    })
  })
}

/**
 * What a scrape reads besides the counts kept in process: the database's counts (runs under way, gates
 * waiting, spend against caps) in two statements sent together, bounded by a 2 s timeout so that a
 * scrape while the database is away answers at once with osd_database_up 0; and the pools' connections.
 */
export function metricsSources(sql: Sql, pools: Record<string, Sql | undefined>): ScrapeSources {
  return {
    database: async () => {
      const [runs, spend] = await withTimeout(Promise.all([runGauges(sql), spendCapUse(sql)]), 2000)
      return { ...runs, spendCapUse: spend }
    },
    pools: Object.entries(pools)
      .filter((entry): entry is [string, Sql] => entry[1] !== undefined)
      .map(([name, pool]) => ({
        name,
        stats: () => (pool as Sql & { osdPoolStats?: () => PoolStats }).osdPoolStats?.(),
      })),
  }
}

/**
 * GET /metrics for Prometheus (DESIGN 13), on a listener of its own: no token, none of the API's
 * middleware, and nothing else served.
 */
async function listenMetrics(
  config: Config,
  sql: Sql,
  pools: Record<string, Sql | undefined>,
  log: Logger,
): Promise<Server> {
  setScrapeSources(metricsSources(sql, pools))
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found: GET /metrics\n')
      return
    }
    scrape().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType }).end(req.method === 'HEAD' ? '' : body)
      },
      (err: unknown) => {
        log.error({ err }, 'metrics scrape failed')
        res.writeHead(500, { 'content-type': 'text/plain' }).end('scrape failed\n')
      },
    )
  })
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        listenRefusal(
          err,
          config.metricsHost,
          config.metricsPort!,
          '--metrics-port or OSD_METRICS_PORT',
          'OSD_METRICS_HOST',
        ),
      ),
    )
    server.listen(config.metricsPort, config.metricsHost, () => resolve(server))
  })
}

/** `promise`, or a rejection after `ms`: a statement still running then is left to end by itself. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/**
 * Stops accepting connections and waits for in-flight requests; after 30 s the rest are cut. A
 * connection is closed as soon as it is idle (issue 51): every answer given while osd stops says
 * `Connection: close` (requestLog), but an event stream's went out before, and a scrape's never does;
 * left to the keep-alive timeout (5 s), they would hold the stop that long after the last request.
 */
async function closeHttp(server: Server, log: Logger): Promise<void> {
  const force = setTimeout(() => {
    log.warn({}, 'requests still in flight after 30 s; closing their connections')
    server.closeAllConnections()
  }, 30_000)
  const idle = setInterval(() => server.closeIdleConnections(), 100)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  clearTimeout(force)
  clearInterval(idle)
}

function formatHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}
