import type { Context } from 'hono'
import type { AppEnv } from './env.js'
import type { Config } from '../config.js'
import type { Sql } from '../db/sql.js'
import type { Logger } from '../log.js'
import type { Sealer } from '../crypto.js'
import type { ModelProvider } from '../engine/models/index.js'
import type { Caches } from './caches.js'
import type { Limits } from './limits.js'
import type { ChangeWatch } from '../db/change-watch.js'
import type { RunStarts } from '../domain/runs/index.js'
import type { TokenUses } from './token-uses.js'

export type AppContext = Context<AppEnv>

/** What the app is built from (STYLE: createApp(deps)); main.ts and tests supply it. */
export interface AppDeps {
  sql: Sql
  config: Config
  log: Logger
  /** Encrypts what the service must use again (webhook bodies for replays, model keys, tool tokens). */
  sealer: Sealer
  /** Aborted when the daemon stops: long-polls answer at once instead of holding the shutdown. */
  shutdown?: AbortSignal
  /** Model providers (to list their models); by default those of config.providerBaseUrls. */
  providers?: Record<'provider_a' | 'provider_b', ModelProvider>
  /** What chat readers wait with (one following the chat channel is made unless given: tests look in). */
  chatWatch?: ChangeWatch
  /** Where requests note their tokens' use (one is made unless given: tests flush it). */
  tokenUses?: TokenUses
  /**
   * The API's base URL as osd listens (ends in /v1), for links it answers when OSD_PUBLIC_URL is not
   * set; serve.ts knows it once listening. Never the Host header a caller sent (issue 44).
   */
  listenUrl?: () => string | undefined
}

/**
 * The address callers reach the API at (ends in /v1), for links in answers (a task's webhook URL, an
 * OAuth redirect URI): OSD_PUBLIC_URL, else the address osd listens on; never the Host header a caller
 * sent, which would let anyone make osd hand out a link to their own host (issue 44).
 */
export function apiBaseOf(deps: Pick<AppDeps, 'config' | 'listenUrl'>): string {
  const { config } = deps
  if (config.publicUrl) return config.publicUrl
  const listening = deps.listenUrl?.()
  if (listening) return listening
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.port}/v1`
}

/** What route factories get: the app's deps and what createApp makes once for all routes. */
export interface RouteDeps extends AppDeps {
  caches: Caches
  /** Rate limits and what they count by (http/limits.ts). */
  limits: Limits
  /** What run long-polls wait with: the run events' NOTIFY, one LISTEN for the app. */
  runWatch: ChangeWatch
  /** The same, for chat messages (the chat long-poll and event stream). */
  chatWatch: ChangeWatch
  providers: Record<'provider_a' | 'provider_b', ModelProvider>
  /** What starts runs for requests (by API, by webhook): the app's, batching its starts only. */
  starts: RunStarts
}

export type { AppEnv } from './env.js'
