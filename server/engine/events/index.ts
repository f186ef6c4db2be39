import type { Config } from '../../config.js'
import type { Sealer } from '../../crypto.js'
import type { Sql } from '../../db/sql.js'
import type { Logger } from '../../log.js'
import { strictEgress } from '../../egress.js'
import { DeliveryLoop, type DeliveryLoopOptions } from './deliveries.js'
import { Mailer } from './mailer.js'
import { FeedSequencer } from './sequencer.js'

// What the engine does for the event feed (issue 47): gives events their positions, delivers them to
// subscriptions, mails people. Started and stopped with the engine (engine/index.ts).

export { DeliveryLoop, FeedSequencer, Mailer }

export interface EventWork {
  sequencer: FeedSequencer
  deliveries: DeliveryLoop
  /** None without OSD_SMTP_URL and OSD_MAIL_FROM. */
  mailer: Mailer | undefined
  stop(): Promise<void>
}

export interface EventWorkOptions {
  sql: Sql
  log: Logger
  sealer: Sealer
  engineId: string
  config: Partial<
    Pick<Config, 'egress' | 'publicUrl' | 'smtpUrl' | 'mailFrom' | 'leaseSeconds' | 'feedKeepHours'>
  >
  sweepMs?: number
  /** The delivery loop's pool (sql unless given: engine/index.ts EngineOptions.deliverySql). */
  deliverySql?: Sql
  /** The delivery loop's limits and timeout (its defaults unless told: tests make them small). */
  deliveries?: Pick<
    DeliveryLoopOptions,
    'maxInFlight' | 'maxSubscriptions' | 'perSubscription' | 'timeoutMs'
  >
}

export async function startEventWork(options: EventWorkOptions): Promise<EventWork> {
  const { sql, log, sealer, engineId, config } = options
  const leaseSeconds = config.leaseSeconds
  const deliveries = new DeliveryLoop({
    sql: options.deliverySql ?? sql,
    log,
    sealer,
    engineId,
    egress: config.egress ?? strictEgress,
    publicUrl: config.publicUrl,
    leaseSeconds,
    sweepMs: options.sweepMs,
    ...options.deliveries,
  })
  const mailer =
    config.smtpUrl && config.mailFrom
      ? new Mailer({
          sql,
          log,
          engineId,
          smtpUrl: config.smtpUrl,
          from: config.mailFrom,
          sweepMs: options.sweepMs,
        })
      : undefined
  const sequencer = new FeedSequencer({
    sql,
    log,
    mail: mailer !== undefined,
    keepMs: config.feedKeepHours === undefined ? undefined : config.feedKeepHours * 3_600_000,
    sweepMs: options.sweepMs === undefined ? undefined : Math.min(options.sweepMs, 1_000),
    onSequenced: (done) => {
      if (done.deliveries > 0) deliveries.wake()
      if (done.mails > 0) mailer?.wake()
    },
  })
  await deliveries.start()
  await mailer?.start()
  await sequencer.start()
  return {
    sequencer,
    deliveries,
    mailer,
    async stop() {
      await sequencer.stop()
      await Promise.all([deliveries.stop(), mailer?.stop()])
    },
  }
}
