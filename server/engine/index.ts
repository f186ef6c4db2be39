import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Config } from '../config.js'
import type { Sealer } from '../crypto.js'
import type { Sql } from '../db/sql.js'
import { keyBoundChannel } from '../domain/models/index.js'
import { resumeDueHolds } from '../domain/runs/index.js'
import { installLearning } from '../domain/learning/index.js'
import type { Logger } from '../log.js'
import { AgentExecutor, BulkLoop, RunLoop } from './runs/index.js'
import { createProviders, loadModelSdks, type ModelProvider } from './models/index.js'
import type { Executor } from './runs/index.js'
import { ChatLoop } from './chats/index.js'
import { Scheduler } from './scheduler.js'
import { RetentionLoop, type RetentionOptions } from './retention.js'
import { defaultToolLimits, type ToolLimits } from './tools/index.js'
import { startEventWork, type EventWork, type EventWorkOptions } from './events/index.js'

export interface Engine {
  id: string
  runs: RunLoop
  chats: ChatLoop
  /** Bulk operations on runs (issue 50). */
  bulk: BulkLoop
  /** The retention pass, when this engine runs one (EngineOptions.retention). */
  retention: RetentionLoop | undefined
  /** The event feed's positions, deliveries to subscriptions, mail (issue 47). */
  events: EventWork
  stop(): Promise<void>
}

export interface EngineOptions {
  sql: Sql
  /**
   * The pool of chat replies (sql unless given). Apart in osd serve: 50 replies waiting on each other's
   * locks (every reply of an enterprise settles its spend on the same rows) would otherwise hold the
   * connections run dispatch needs.
   */
  chatSql?: Sql
  /**
   * The pool of event deliveries' statements (sql unless given). Apart in osd serve: a subscription
   * sends 16 at once, and a busy one's statements would otherwise queue in front of run dispatch's.
   */
  deliverySql?: Sql
  log: Logger
  config: Pick<Config, 'providerBaseUrls' | 'providerBOAuth' | 'leaseSeconds'> &
    Partial<
      Pick<
        Config,
        | 'engineConcurrency'
        | 'chatStreaming'
        | 'toolTimeoutSeconds'
        | 'promptCache'
        | 'modelTimeoutSeconds'
        | 'modelIdleSeconds'
        | 'egress'
        | 'toolResultMaxBytes'
        | 'publicUrl'
        | 'smtpUrl'
        | 'mailFrom'
      >
    >
  sealer: Sealer
  /** Providers to use instead of the configured ones (none in production). */
  providers?: Record<'provider_a' | 'provider_b', ModelProvider>
  /** Executors to use instead of the agent loop for kind llm (none in production). */
  executors?: Partial<Record<'llm' | 'deterministic', Executor>>
  /** How often the engine looks for work unasked (RunLoop's default unless given). */
  sweepMs?: number
  /** The retention pass (issue 46): none unless given (osd serve gives it unless OSD_RETENTION=off). */
  retention?: RetentionOptions
  /** The event deliveries' limits and timeout (tests make them small). */
  deliveries?: EventWorkOptions['deliveries']
}

/** Everything osd does in the background (DESIGN 1, 5, 7): runs, the agent loop, schedules, timers. */
export async function startEngine(options: EngineOptions): Promise<Engine> {
  const { sql, log, config, sealer } = options
  // A run that fails here calls for its task's improvement (DESIGN 10).
  installLearning()
  // Names this process in leases and events, so a takeover says whose run it took.
  const id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  const providers =
    options.providers ??
    createProviders({
      baseUrls: config.providerBaseUrls,
      promptCache: config.promptCache ?? true,
      timeoutMs: (config.modelTimeoutSeconds ?? 120) * 1000,
      idleMs: (config.modelIdleSeconds ?? 60) * 1000,
      log,
    })
  const agent = new AgentExecutor({
    sql,
    sealer,
    providers,
    log,
    oauth: config.providerBOAuth,
    toolTimeoutMs: toolTimeoutMs(config),
    toolLimits: toolLimits(config),
  })
  const executors = {
    llm: options.providers ? agent : loadingSdksFirst(agent, log),
    ...options.executors,
  }
  const runs = new RunLoop({
    sql,
    log,
    engineId: id,
    executors,
    leaseSeconds: config.leaseSeconds,
    capacity: config.engineConcurrency,
    sweepMs: options.sweepMs,
  })
  const scheduler = new Scheduler(sql, log)
  const bulk = new BulkLoop({
    sql,
    log,
    engineId: id,
    leaseSeconds: config.leaseSeconds,
    sweepMs: options.sweepMs,
  })
  const chats = new ChatLoop({
    sql: options.chatSql ?? sql,
    log,
    sealer,
    providers,
    engineId: id,
    leaseSeconds: config.leaseSeconds,
    capacity: config.engineConcurrency,
    sweepMs: options.sweepMs,
    oauth: config.providerBOAuth,
    streaming: config.chatStreaming ?? true,
    toolTimeoutMs: toolTimeoutMs(config),
    toolLimits: toolLimits(config),
  })
  await runs.start()
  await chats.start()
  await bulk.start()
  await scheduler.start()
  // Apart from the lease loop: it claims nothing of the runs' or chats' work (issue 46).
  const retention = options.retention && new RetentionLoop(sql, log, options.retention)
  retention?.start()
  const events = await startEventWork({
    sql,
    log,
    sealer,
    engineId: id,
    config,
    sweepMs: options.sweepMs,
    deliveries: options.deliveries,
    deliverySql: options.deliverySql,
  })
  // Said once, here (issue 47): mail is off unless configured.
  if (!events.mailer)
    log.info({}, 'mail is off: set OSD_SMTP_URL and OSD_MAIL_FROM to mail people when gates wait')
  // A bound key lets the enterprise's blocked runs try again at once (DESIGN 6).
  const keys = await sql.listen(keyBoundChannel, (enterpriseId) => {
    resumeDueHolds(sql, enterpriseId).then(
      () => runs.wake(),
      (err: unknown) => log.warn({ err }, 'could not retry blocked runs'),
    )
    chats
      .unblock(enterpriseId)
      .catch((err: unknown) => log.warn({ err }, 'could not retry blocked chat replies'))
  })
  log.info({ engine: id }, 'engine started')
  return {
    id,
    runs,
    chats,
    bulk,
    retention,
    events,
    async stop() {
      await retention?.stop()
      await keys.unlisten().catch(() => undefined)
      await events.stop()
      await scheduler.stop()
      await bulk.stop()
      await chats.stop()
      await runs.stop()
    },
  }
}

/** OSD_EGRESS_ALLOW and OSD_TOOL_RESULT_MAX_BYTES: nothing private, 100 KB unless configured. */
export function toolLimits(
  config: Partial<Pick<Config, 'egress' | 'toolResultMaxBytes'>>,
): ToolLimits {
  return {
    egress: config.egress ?? defaultToolLimits.egress,
    resultMaxBytes: config.toolResultMaxBytes ?? defaultToolLimits.resultMaxBytes,
  }
}

/**
 * The model SDKs load at their first call (models/wire). An engine starts loading them, in the
 * background, when it takes its first llm run, so that the run's first call waits for what is left of
 * the import, not all of it: not at the engine's start, since an engine that takes no llm run (a
 * deterministic-only one, most of the suite's) would spend half a CPU-second on them for nothing
 * (issue 40).
 */
function loadingSdksFirst(executor: Executor, log: Logger): Executor {
  let loading = false
  return {
    execute(run, context) {
      if (!loading) {
        loading = true
        loadModelSdks().catch((err: unknown) => log.warn({ err }, 'cannot load the model SDKs'))
      }
      return executor.execute(run, context)
    },
  }
}

/** OSD_TOOL_TIMEOUT_SECONDS, in milliseconds (120 s unless configured). */
function toolTimeoutMs(config: Partial<Pick<Config, 'toolTimeoutSeconds'>>): number {
  return (config.toolTimeoutSeconds ?? 120) * 1000
}
