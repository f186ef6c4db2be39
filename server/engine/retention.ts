import type { Sql } from '../db/sql.js'
import {
  backgroundDuty,
  RetentionPassError,
  retentionPass,
  type Moved,
} from '../domain/retention/index.js'
import type { Logger } from '../log.js'

export interface RetentionOptions {
  /** OSD_ARCHIVE_DIR. */
  archiveDir: string
  /** OSD_RETENTION_INTERVAL_SECONDS: the wait from the end of one pass to the start of the next. */
  intervalSeconds: number
  /** Executions per transaction (the domain's default unless given). */
  batchSize?: number
  /** The share of the time the pass works (backgroundDuty unless given; tests: 1). */
  duty?: number
}

/**
 * How often a pass that works counts what is left to move, and doubles its share of the time if that
 * grew (at most; the interval when it is shorter): runs ending faster than the pass moves them are
 * caught up with in a minute, not over several.
 */
const catchUpSeconds = 15

/**
 * The retention pass of one engine process (issue 46): every interval, what is past its enterprise's
 * window leaves the live tables (domain/retention). Every engine runs one; the enterprise's retention
 * lock gives each enterprise's work to one of them at a time, so they share it and never move a row
 * twice. A pass that fails is logged and tried again at the next interval; stop() lets the batch under
 * way finish and starts no other.
 */
export class RetentionLoop {
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private readonly stopping = new AbortController()
  /**
   * The share of the time the next pass starts at: where the last one's catch-up left it, halved
   * after a pass that kept up at its share, never below the share asked. Runs that end faster than
   * a tenth of the time moves them are caught up with from the start of each pass, not again from a
   * tenth every interval.
   */
  private duty: number

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly options: RetentionOptions,
  ) {
    this.duty = options.duty ?? backgroundDuty
  }

  /** The share of the time the next pass starts at (tests). */
  get share(): number {
    return this.duty
  }

  start(): void {
    this.schedule()
  }

  /** One pass now (tests, and the pass's own schedule); answers what moved. */
  async runOnce(): Promise<Moved[]> {
    const asked = this.options.duty ?? backgroundDuty
    let doubled = false
    const moved = await retentionPass(this.sql, {
      archiveDir: this.options.archiveDir,
      batchSize: this.options.batchSize,
      signal: this.stopping.signal,
      duty: this.duty,
      catchUpMs: Math.min(this.options.intervalSeconds, catchUpSeconds) * 1000,
      onDuty: (duty) => {
        doubled = true
        this.duty = duty
        this.log.info(
          { duty },
          'retention pass falling behind: it now works a larger share of the time',
        )
      },
    })
      .finally(() => {
        if (!doubled) this.duty = Math.max(asked, this.duty / 2)
      })
      .catch((err: unknown) => {
        // What the other enterprises moved is logged as usual; the failure is the caller's to log.
        if (err instanceof RetentionPassError) this.logMoved(err.moved)
        throw err
      })
    this.logMoved(moved)
    return moved
  }

  private logMoved(moved: Moved[]): void {
    for (const m of moved)
      if (!m.busy)
        this.log.info(
          {
            enterpriseId: m.enterpriseId,
            runs: m.runs,
            chats: m.chats,
            webhookDeliveries: m.webhookDeliveries,
            unauthenticatedDeliveries: m.unauthenticatedDeliveries,
            scheduleFires: m.scheduleFires,
            bulkOperations: m.bulkOperations,
            archived: m.archive,
          },
          'retention moved data out of the live tables',
        )
  }

  private schedule(): void {
    if (this.stopping.signal.aborted) return
    this.timer = setTimeout(() => {
      this.running = this.runOnce().then(
        () => undefined,
        (err: unknown) => this.log.warn({ err }, 'retention pass failed; trying again later'),
      )
      void this.running.finally(() => this.schedule())
    }, this.options.intervalSeconds * 1000)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    this.stopping.abort()
    clearTimeout(this.timer)
    await this.running
  }
}
