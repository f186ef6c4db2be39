import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { packageVersion } from '../shared/paths.js'
import { connectionOf, DatabaseUrlError } from './db/url.js'
import { EgressConfigError, parseEgressAllow, type EgressRule } from './egress.js'
import { parseCidr } from './http/addresses.js'
import type { TraceSettings } from './traces/index.js'

export type Role = 'all' | 'api' | 'engine'
export const roles: Role[] = ['all', 'api', 'engine']

/** Every OSD_* variable and serve flag, parsed once (DESIGN 2, config.ts). */
export interface Config {
  /** 0 asks the system for a free port. */
  port: number
  host: string
  dataDir: string
  /** External PostgreSQL; without it the embedded server in dataDir is used. */
  databaseUrl: string | undefined
  role: Role
  logLevel: string
  /**
   * Where `GET /metrics` listens (DESIGN 13): undefined is off (the default), 0 asks for a free port.
   * A listener of its own, so the API's authentication and rate rules stay as they are.
   */
  metricsPort: number | undefined
  metricsHost: string
  /** How long an engine's claim on a running run lasts before another engine may take it over. */
  leaseSeconds: number
  /**
   * How many runs, and apart how many chat replies, one engine process works on at once
   * (OSD_ENGINE_CONCURRENCY): it claims only for free slots, so other engines share the work.
   */
  engineConcurrency: number
  /**
   * log2 of scrypt's N for the password hashes this process makes (OSD_PASSWORD_COST): 17 unless set,
   * OWASP's minimum. Lower only where nobody's password is at stake (tests, a laptop's demo): each step
   * down halves what a guess costs. osd warns at start when it is below 17.
   */
  passwordLog2N: number
  /** Address that callers reach this daemon at, for links such as a task's webhook URL. */
  publicUrl: string | undefined
  mailDomain: string
  /** Base URLs of the model providers (DESIGN 6): any compatible server can stand in. */
  providerBaseUrls: { provider_a: string; provider_b: string }
  /**
   * Chat replies call the model with streaming on, their text shown as it comes (DESIGN 13).
   * OSD_CHAT_STREAM=off makes them unstreamed: for a compatible server that cannot stream.
   */
  chatStreaming: boolean
  /** The longest a tool server's call may take before it is answered to the model as not answered. */
  toolTimeoutSeconds: number
  /**
   * The most of a tool result osd reads (OSD_TOOL_RESULT_MAX_BYTES): past it the call is ended and the
   * model gets the first part with a line saying it was cut (issue 44).
   */
  toolResultMaxBytes: number
  /**
   * The most runs one bulk operation acts on (OSD_BULK_MAX_RUNS; issue 50): a filter matching more
   * is refused, so an operation's making and its work stay bounded.
   */
  bulkMaxRuns: number
  /**
   * Where osd may connect on a tenant's behalf (DESIGN 15): OSD_EGRESS_ALLOW's networks and names, which
   * may be reached although private. Tests give it a resolver of their own.
   */
  egress: EgressRule
  /** The longest an unstreamed model call may take: past it, an outage (the work waits and retries). */
  modelTimeoutSeconds: number
  /** The longest a streamed model call may go without a piece of its answer (its first included). */
  modelIdleSeconds: number
  /**
   * Cache breakpoints on provider_a's requests, so each call reads the conversation so far from the
   * provider's cache (DESIGN 13). OSD_PROMPT_CACHE=off sends none: to compare costs, or for a compatible
   * server that refuses them (one that answers them 400 is also found out by itself, per connection).
   */
  promptCache: boolean
  /** provider_b subscription sign-in (OAuth authorization code with PKCE). */
  providerBOAuth: {
    authorizeUrl: string
    tokenUrl: string
    clientId: string | undefined
    redirectUri: string
    scope: string
  }
  /** At most one os-improve run starts by itself per task in this many minutes (DESIGN 10); undefined: off. */
  improveIntervalMinutes: number | undefined
  /** OSD_MAX_EXECUTION_RUNS, checked at start (read where used: maxExecutionRuns). */
  maxExecutionRuns: number
  /**
   * Mail to people (issue 47): OSD_SMTP_URL (`smtp://user:pass@host:587`, STARTTLS when the server offers
   * it; `smtps://` for TLS from the start) and OSD_MAIL_FROM. Without them osd mails nobody.
   */
  smtpUrl: string | undefined
  mailFrom: string | undefined
  /**
   * Event streams (GET /v1/events) one token or session holds open at once in a process (issue 47);
   * and, counted apart, the long-polls it holds at once (http/limits.ts longPoll).
   */
  maxStreamsPerToken: number
  /** A person's session ends after this long without a request, and this long after sign-in at most. */
  session: { idleMinutes: number; maxHours: number }
  /**
   * Where the retention pass archives what leaves the live tables, and where every process reads it
   * back (issue 46): OSD_ARCHIVE_DIR, by default <data dir>/archive (also with DATABASE_URL, whose
   * processes then each have their own unless it is shared storage).
   */
  archiveDir: string
  /**
   * The retention pass of an engine (issue 46): every OSD_RETENTION_INTERVAL_SECONDS (60 by default);
   * OSD_RETENTION=off runs none in this process (another process's pass still moves the data).
   */
  retention: { enabled: boolean; intervalSeconds: number }
  /**
   * How long the event feed keeps an event, a delivery to a subscription and a mail item
   * (OSD_FEED_KEEP_HOURS, 168: 7 days). A busy enterprise's feed is large (bench:runs at 500 runs a
   * second writes 2 GB of it an hour): an operator may keep less.
   */
  feedKeepHours: number
  /**
   * Rate limits (issue 44; http/limits.ts), counted in this process: per token or session, and per
   * client address on the routes that take no token. undefined: off.
   */
  rateLimits: {
    perMinute: number | undefined
    ipPerMinute: number | undefined
    /** Peers whose X-Forwarded-For is believed (OSD_TRUSTED_PROXIES): networks as CIDRs. */
    trustedProxies: string[]
  }
  /**
   * Traces (issue 49; traces/index.ts): on when an OTLP endpoint is set by the standard variables.
   * The SDK reads the rest of its OTEL_* variables itself (endpoint, headers, sampler, batching).
   */
  traces: TraceSettings
  version: string
}

export interface ConfigFlags {
  port?: string | number
  host?: string
  dataDir?: string
  role?: string
  metricsPort?: string | number
}

export class ConfigError extends Error {}

/** DATABASE_URL, read now as every pool will read it (server/db/url.ts): its faults said at start. */
function databaseUrl(url: string | undefined): string | undefined {
  if (!url) return undefined
  try {
    connectionOf(url)
  } catch (err) {
    if (err instanceof DatabaseUrlError) throw new ConfigError(err.message)
    throw err
  }
  return url
}

/** The providers' own addresses: osd calls them unless OSD_PROVIDER_A/B_BASE_URL says otherwise. */
export const defaultProviderBaseUrls = {
  provider_a: 'https://api.anthropic.com',
  provider_b: 'https://api.openai.com',
} as const

/**
 * Whether the operator pointed a provider elsewhere than its own address (a local server, a
 * compatible one, the tests' fake): a model osd has no price for is then priced at 0, unpriced, rather
 * than as the provider's frontier model (issue 51).
 */
export function baseUrlSetByOperator(
  baseUrls: { provider_a: string; provider_b: string },
  provider: keyof typeof defaultProviderBaseUrls,
): boolean {
  return baseUrls[provider].replace(/\/+$/, '') !== defaultProviderBaseUrls[provider]
}

/**
 * How long a lease on running work (a run, a chat turn) lasts without renewal, unless OSD_LEASE_SECONDS
 * says otherwise: the one default every lease falls back to, in the engine and the domain alike.
 */
export const defaultLeaseSeconds = 30

/**
 * OSD_ENGINE_CONCURRENCY's default: 32 runs, and apart 32 chat replies, at once. Each spends nearly all
 * its time waiting for the model and holds a database connection only between calls, so one process
 * keeps many going on its pools (20 connections, 8 more for chats); the bound keeps work past it queued
 * for another engine process, and a burst from starting hundreds of model calls in one process.
 */
export const defaultEngineConcurrency = 32

/**
 * OSD_BULK_MAX_RUNS's default: 100,000 runs an operation. Writing down what it matched takes a few
 * seconds at that size (one insert in the request), and the engines then act on them 250 at a time;
 * a filter matching more (a million runs) is refused, to be cut by time into several.
 */
export const defaultBulkMaxRuns = 100_000

/** OSD_PASSWORD_COST's default: scrypt's N = 2^17, OWASP's minimum (issue 45). */
export const defaultPasswordLog2N = 17

export function loadConfig(flags: ConfigFlags = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const port = parsePort(flags.port ?? env.OSD_PORT ?? 8080)
  const role = flags.role ?? env.OSD_ROLE ?? 'all'
  const metricsPort = flags.metricsPort ?? env.OSD_METRICS_PORT?.trim()
  if (!roles.includes(role as Role)) {
    throw new ConfigError(`--role must be one of ${roles.join(', ')}; got "${role}"`)
  }
  const dataDir = resolve(expandHome(flags.dataDir ?? env.OSD_DATA_DIR ?? '~/.osd'))
  return {
    port,
    host: flags.host ?? env.OSD_HOST ?? '127.0.0.1',
    dataDir,
    databaseUrl: databaseUrl(env.DATABASE_URL),
    role: role as Role,
    logLevel: logLevel(env.OSD_LOG_LEVEL, 'info'),
    metricsPort:
      metricsPort === undefined || metricsPort === '' ? undefined : parsePort(metricsPort),
    metricsHost: env.OSD_METRICS_HOST || '127.0.0.1',
    leaseSeconds: Math.max(1, positive(env, 'OSD_LEASE_SECONDS', defaultLeaseSeconds, timer)),
    engineConcurrency: engineConcurrency(env.OSD_ENGINE_CONCURRENCY),
    passwordLog2N: passwordLog2N(env.OSD_PASSWORD_COST),
    publicUrl: env.OSD_PUBLIC_URL?.replace(/\/+$/, '') || undefined,
    mailDomain: env.OSD_MAIL_DOMAIN ?? 'osd.local',
    providerBaseUrls: {
      provider_a: (env.OSD_PROVIDER_A_BASE_URL || defaultProviderBaseUrls.provider_a).replace(
        /\/+$/,
        '',
      ),
      provider_b: (env.OSD_PROVIDER_B_BASE_URL || defaultProviderBaseUrls.provider_b).replace(
        /\/+$/,
        '',
      ),
    },
    chatStreaming: (env.OSD_CHAT_STREAM ?? '').trim().toLowerCase() !== 'off',
    toolTimeoutSeconds: positive(env, 'OSD_TOOL_TIMEOUT_SECONDS', 120, timer),
    toolResultMaxBytes: positive(env, 'OSD_TOOL_RESULT_MAX_BYTES', 100_000, { whole: true }),
    bulkMaxRuns: positive(env, 'OSD_BULK_MAX_RUNS', defaultBulkMaxRuns, { whole: true }),
    egress: { allow: egressAllow(env.OSD_EGRESS_ALLOW) },
    modelTimeoutSeconds: positive(env, 'OSD_MODEL_TIMEOUT_SECONDS', 120, timer),
    modelIdleSeconds: positive(env, 'OSD_MODEL_IDLE_SECONDS', 60, timer),
    promptCache: (env.OSD_PROMPT_CACHE ?? '').trim().toLowerCase() !== 'off',
    providerBOAuth: {
      authorizeUrl:
        env.OSD_PROVIDER_B_OAUTH_AUTHORIZE_URL || 'https://auth.openai.com/oauth/authorize',
      tokenUrl: env.OSD_PROVIDER_B_OAUTH_TOKEN_URL || 'https://auth.openai.com/oauth/token',
      clientId: env.OSD_PROVIDER_B_OAUTH_CLIENT_ID || undefined,
      // Where the provider sends the person back: the portal's page that calls .../oauth/complete.
      redirectUri:
        env.OSD_PROVIDER_B_OAUTH_REDIRECT_URI ||
        `${env.OSD_PUBLIC_URL?.replace(/\/+$/, '') || `http://127.0.0.1:${port}/v1`}/llm/provider_b/oauth/callback`,
      scope: env.OSD_PROVIDER_B_OAUTH_SCOPE || 'openid profile offline_access',
    },
    improveIntervalMinutes: improveIntervalMinutes(env),
    maxExecutionRuns: maxExecutionRuns(env),
    ...mailConfig(env),
    maxStreamsPerToken: positive(env, 'OSD_MAX_STREAMS_PER_TOKEN', 50, { whole: true }),
    session: {
      idleMinutes: positive(env, 'OSD_SESSION_IDLE_MINUTES', 12 * 60),
      maxHours: positive(env, 'OSD_SESSION_MAX_HOURS', 7 * 24),
    },
    archiveDir: resolve(expandHome(env.OSD_ARCHIVE_DIR?.trim() || join(dataDir, 'archive'))),
    retention: {
      enabled: (env.OSD_RETENTION ?? '').trim().toLowerCase() !== 'off',
      intervalSeconds: retentionIntervalSeconds(env.OSD_RETENTION_INTERVAL_SECONDS),
    },
    feedKeepHours: positive(env, 'OSD_FEED_KEEP_HOURS', 7 * 24),
    rateLimits: {
      perMinute: rate(env.OSD_RATE_LIMIT_PER_MINUTE, 6000, 'OSD_RATE_LIMIT_PER_MINUTE'),
      ipPerMinute: rate(env.OSD_RATE_LIMIT_IP_PER_MINUTE, 600, 'OSD_RATE_LIMIT_IP_PER_MINUTE'),
      trustedProxies: trustedProxies(env.OSD_TRUSTED_PROXIES),
    },
    traces: tracesConfig(env),
    version: packageVersion,
  }
}

/** The levels OSD_LOG_LEVEL takes: pino's. */
export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const

/**
 * OSD_LOG_LEVEL, `fallback` unless set (osd serve logs at info, osd admin at warn); a level pino does
 * not know stops osd at start in a line, not in pino's stack.
 */
export function logLevel(raw: string | undefined, fallback: string): string {
  const level = raw?.trim().toLowerCase()
  if (level === undefined || level === '') return fallback
  if (!(logLevels as readonly string[]).includes(level))
    throw new ConfigError(`OSD_LOG_LEVEL must be one of ${logLevels.join(', ')}; got "${raw}"`)
  return level
}

/**
 * OSD_IMPROVE_INTERVAL_MINUTES (default 60; 0 lets each failure start one, one at a time; `off` starts
 * none by itself, leaving `osctl tasks improve`). Read where a trigger decides, so every process on a
 * database decides with its own environment. undefined: off.
 */
export function improveIntervalMinutes(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.OSD_IMPROVE_INTERVAL_MINUTES?.trim()
  if (raw === undefined || raw === '') return 60
  if (raw.toLowerCase() === 'off') return undefined
  const value = Number(raw)
  // loadConfig reads it too, at start: a value it cannot take stops osd there, not at a trigger.
  if (!Number.isFinite(value) || value < 0)
    throw new ConfigError(
      `OSD_IMPROVE_INTERVAL_MINUTES must be a number of minutes (0 or more), or off; got "${env.OSD_IMPROVE_INTERVAL_MINUTES}"`,
    )
  return value
}

/**
 * OSD_MAX_EXECUTION_RUNS (default 500): the most runs one execution may hold. Read where a successor is
 * considered (domain/runs/successors.ts), and at start by loadConfig, so a value it cannot take stops
 * osd there: not a number, it had made no bound at all (every comparison with NaN is false).
 */
export function maxExecutionRuns(env: NodeJS.ProcessEnv = process.env): number {
  return positive(env, 'OSD_MAX_EXECUTION_RUNS', 500, { whole: true })
}

/**
 * OSD_ENGINE_CONCURRENCY: a whole number of 1 or more, else osd stops at start (a typo that made it 1
 * would quietly slow every run down).
 */
function engineConcurrency(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return defaultEngineConcurrency
  const value = Number(raw.trim())
  if (!Number.isInteger(value) || value < 1)
    throw new ConfigError(
      `OSD_ENGINE_CONCURRENCY must be a whole number of 1 or more; got "${raw}"`,
    )
  return value
}

/**
 * OSD_RETENTION_INTERVAL_SECONDS: a whole number of 1 or more, 60 unless set, else osd stops at start
 * (a typo that made it 60 would leave an operator who asked for a short window with a long one).
 */
function retentionIntervalSeconds(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return 60
  const value = Number(raw.trim())
  if (!Number.isInteger(value) || value < 1 || value > maxTimerSeconds)
    throw new ConfigError(
      `OSD_RETENTION_INTERVAL_SECONDS must be a whole number of seconds from 1 to ${maxTimerSeconds} (24 days); got "${raw}"`,
    )
  return value
}

/** OSD_PASSWORD_COST: a whole number from 10 to 20 (2^20 takes 1 GiB per hash), else osd stops at start. */
function passwordLog2N(raw: string | undefined): number {
  if (raw === undefined || raw.trim() === '') return defaultPasswordLog2N
  const value = Number(raw.trim())
  if (!Number.isInteger(value) || value < 10 || value > 20)
    throw new ConfigError(`OSD_PASSWORD_COST must be a whole number from 10 to 20; got "${raw}"`)
  return value
}

function egressAllow(raw: string | undefined) {
  try {
    return parseEgressAllow(raw)
  } catch (err) {
    if (err instanceof EgressConfigError) throw new ConfigError(err.message)
    throw err
  }
}

/** A rate per minute: a positive number, or `off` (or 0) for none. */
function rate(raw: string | undefined, fallback: number, name: string): number | undefined {
  const text = raw?.trim().toLowerCase()
  if (text === undefined || text === '') return fallback
  if (text === 'off' || text === '0') return undefined
  const value = Number(text)
  if (!Number.isFinite(value) || value < 0)
    throw new ConfigError(`${name} must be a number of requests per minute, or off; got "${raw}"`)
  return value === 0 ? undefined : value
}

function trustedProxies(raw: string | undefined): string[] {
  const list = (raw ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean)
  for (const item of list) {
    if (!parseCidr(item))
      throw new ConfigError(
        `OSD_TRUSTED_PROXIES takes addresses and CIDRs (10.0.0.0/8, ::1), comma-separated; got "${item}"`,
      )
  }
  return list
}

/**
 * The most seconds a duration that osd waits out with a timer may be: Node holds a timer of at most
 * 2^31 - 1 ms (24.8 days) and fires a longer one after 1 ms, so a model timeout of 30 days would
 * have ended every model call at once, and a retention interval of 30 days run the pass without rest.
 */
export const maxTimerSeconds = Math.floor((2 ** 31 - 1) / 1000)

/** What `positive` takes for a number of seconds osd waits out with a timer. */
const timer = { max: maxTimerSeconds, maxSaid: '(24 days)' }

/**
 * A positive number (a duration, a size, a count), `fallback` unless set; set to anything else, osd
 * stops at start: a typo that quietly became the default (a session kept a week, not the hours asked)
 * would be found late, if at all.
 */
function positive(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  { whole = false, max = Infinity, maxSaid = '' } = {},
): number {
  const raw = env[name]?.trim()
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (
    (whole ? !Number.isInteger(value) || value < 1 : !Number.isFinite(value) || value <= 0) ||
    value > max
  )
    throw new ConfigError(
      `${name} must be ${whole ? 'a whole number of 1 or more' : 'a positive number'}` +
        `${max < Infinity ? `, at most ${max}${maxSaid ? ` ${maxSaid}` : ''}` : ''}; got "${env[name]}"`,
    )
  return value
}

function parsePort(value: string | number): number {
  const port = Number(value)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`port must be a whole number from 0 to 65535; got "${value}"`)
  }
  return port
}

function expandHome(path: string): string {
  return path === '~' || path.startsWith('~/') ? homedir() + path.slice(1) : path
}

/** OSD_SMTP_URL and OSD_MAIL_FROM: both or neither; smtp: or smtps: only. */
function mailConfig(env: NodeJS.ProcessEnv): Pick<Config, 'smtpUrl' | 'mailFrom'> {
  const smtpUrl = env.OSD_SMTP_URL?.trim() || undefined
  const mailFrom = env.OSD_MAIL_FROM?.trim() || undefined
  if (!smtpUrl && !mailFrom) return { smtpUrl, mailFrom }
  if (!smtpUrl || !mailFrom)
    throw new ConfigError(
      `OSD_SMTP_URL and OSD_MAIL_FROM go together: ${smtpUrl ? 'OSD_MAIL_FROM' : 'OSD_SMTP_URL'} is not set`,
    )
  let url: URL
  try {
    url = new URL(smtpUrl)
  } catch {
    // Never echoed: it may carry a password.
    throw new ConfigError('OSD_SMTP_URL is not a URL (smtp://user:pass@host:587 or smtps://...)')
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:')
    throw new ConfigError(`OSD_SMTP_URL must be smtp:// or smtps://, not ${url.protocol}//`)
  // Without a host, nodemailer would try this machine's port 587, mail after mail.
  if (!url.hostname)
    throw new ConfigError('OSD_SMTP_URL names no host (smtp://user:pass@host:587 or smtps://...)')
  // An address the mail library cannot read becomes an empty sender (MAIL FROM:<>) and a From of
  // words alone: mail a server bounces or a reader's filter drops, found out only by the missing mail.
  if (!oneMailbox(mailFrom))
    throw new ConfigError(
      `OSD_MAIL_FROM must be one address, alone or with a name (osd@example.com, osd <osd@example.com>); got "${mailFrom}"`,
    )
  return { smtpUrl, mailFrom }
}

/** Whether `text` is one address, alone or after a name: `a@b.c`, `osd <a@b.c>`, `"O, S" <a@b.c>`. */
function oneMailbox(text: string): boolean {
  const match = /^(?:(?:"[^"]*"\s*|[^"<>]*)<([^<>\s]+)>|([^<>\s]+))$/.exec(text)
  const address = match?.[1] ?? match?.[2]
  return address !== undefined && /^[^@\s<>(),;:"]+@[^@\s<>(),;:"]+$/.test(address)
}

/**
 * Tracing's settings from the OpenTelemetry variables (issue 49): on when OTEL_EXPORTER_OTLP_ENDPOINT
 * or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, unless OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER says
 * off; the protocol of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, http/protobuf
 * unless it says http/json (grpc is refused at start: osd carries no gRPC exporter).
 */
export function tracesConfig(env: NodeJS.ProcessEnv = process.env): TraceSettings {
  // The standard ways to turn an SDK, or its traces, off whatever else is set (an endpoint set for the
  // whole host): OTEL_SDK_DISABLED=true (a boolean: "true" in any case) and OTEL_TRACES_EXPORTER=none.
  if (
    env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true' ||
    env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none'
  )
    return { enabled: false, protocol: 'http/protobuf', captureContent: false }
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : 'OTEL_EXPORTER_OTLP_ENDPOINT'
  const endpoint = env[variable]?.trim()
  // The SDK drops an endpoint it cannot parse without a word and sends to http://localhost:4318
  // instead, wherever that is. Its value is not said: it may hold credentials.
  if (endpoint && !/^https?:$/.test(urlProtocol(endpoint)))
    throw new ConfigError(
      `${variable} is not an http or https URL (http://collector:4318, say): osd sends traces over OTLP/HTTP`,
    )
  const protocol = (
    env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ||
    env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim() ||
    'http/protobuf'
  ).toLowerCase()
  if (endpoint && protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw new ConfigError(
      `OTEL_EXPORTER_OTLP_PROTOCOL ${protocol} is not one osd sends traces with: http/protobuf (the default) or http/json`,
    )
  if (endpoint) samplerCheck(env)
  return {
    enabled: Boolean(endpoint),
    protocol: protocol === 'http/json' ? 'http/json' : 'http/protobuf',
    captureContent:
      env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === 'true',
  }
}

/** The samplers the SDK makes from OTEL_TRACES_SAMPLER, as it spells them. */
const samplers = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
]

/**
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the SDK reads them: a sampler it does not know,
 * or a ratio that is no number from 0 to 1, it replaces with its default, which keeps every trace (a
 * warning in the log, and a collector sent a hundred times the traces asked for). And
 * OTEL_TRACES_EXPORTER, which osd does not read: any other exporter than otlp would be OTLP all the same.
 */
function samplerCheck(env: NodeJS.ProcessEnv): void {
  const sampler = env.OTEL_TRACES_SAMPLER?.trim()
  if (sampler && !samplers.includes(sampler))
    throw new ConfigError(
      `OTEL_TRACES_SAMPLER must be one of ${samplers.join(', ')}; got "${env.OTEL_TRACES_SAMPLER}"`,
    )
  const ratio = env.OTEL_TRACES_SAMPLER_ARG?.trim()
  if (sampler?.endsWith('traceidratio') && ratio) {
    const value = Number(ratio)
    if (!Number.isFinite(value) || value < 0 || value > 1)
      throw new ConfigError(
        `OTEL_TRACES_SAMPLER_ARG must be the share of traces kept, from 0 to 1 (0.1: one in ten); got "${env.OTEL_TRACES_SAMPLER_ARG}"`,
      )
  }
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase()
  if (exporter && exporter !== 'otlp')
    throw new ConfigError(
      `OTEL_TRACES_EXPORTER must be otlp (or none for no traces): osd sends traces over OTLP/HTTP only; got "${env.OTEL_TRACES_EXPORTER}"`,
    )
}

/** The scheme of `url` (`http:`), or '' when it is no URL. */
function urlProtocol(url: string): string {
  try {
    return new URL(url).protocol
  } catch {
    return ''
  }
}
