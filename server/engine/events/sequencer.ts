import { isDatabaseUnavailable, isRetryable, type Sql } from '../../db/sql.js'
import { chatChannel } from '../../domain/chats/index.js'
import {
  inboxChannel,
  feedKeepDays,
  pruneFeed,
  sequenceFeed,
  vacuumInbox,
  type Sequenced,
} from '../../domain/events/index.js'
import { runChannel } from '../../domain/runs/index.js'
import type { Logger } from '../../log.js'

// Gives the feed's events their positions (domain/events/feed.ts sequenceFeed), in every engine
// process: woken by what tells of new events (a run's events, a chat's messages, the inbox's own
// NOTIFY from the slower tables' triggers), with a sweep as the safety net. Two engines sequence
// different enterprises at once (skip locked); an enterprise's events are sequenced by one at a time.
// Prunes what the feed keeps no longer, hourly (more often when it keeps less than 4 hours).

export interface SequencerOptions {
  sql: Sql
  log: Logger
  /** Whether this process sends mail, and so fans events out to mail (OSD_SMTP_URL). */
  mail: boolean
  /** Told after each pass that moved events: this process's delivery loop and mailer go at once. */
  onSequenced?: (done: Sequenced) => void
  /** The safety net's period (1 s unless told). */
  sweepMs?: number
  /** How long the feed keeps what it has (OSD_FEED_KEEP_HOURS; 7 days unless told). */
  keepMs?: number
  /**
   * How often to prune (hourly, or a quarter of keepMs when that is less, unless told); the first a
   * minute after start (or after one period, when that is less).
   */
  pruneMs?: number
  /** The inbox is vacuumed after this many rows moved (vacuumEveryRows unless told)... */
  vacuumEveryRows?: number
  /** ...at most this often (vacuumGapMs unless told). */
  vacuumGapMs?: number
}

/**
 * A pass right after another waits a moment, so the next takes more at once (one transaction for many
 * events, not one for each): what it adds to an event's latency is at most this. Each pass has a cost
 * whatever it moves (the inbox looked at, the heads locked, a NOTIFY): with every run's events waking
 * one, bench:runs made 35-100 passes a second 3 ms apart, a fifth of the feed's cost in PostgreSQL
 * (issue 47). So the gap is 25 ms after a pass that moved many events (under load) and 3 ms after one
 * that moved few (a gate now and then is told at once: bench:events's p50 was 22 ms at 25 ms, 10 at 3).
 */
const gapUnderLoadMs = 25
const quickGapMs = 3
/** A pass that moved at least this many events was made under load. */
const busyPassEvents = 20

/**
 * The inbox is vacuumed (vacuumInbox) once this many of its rows were moved since the last time, at
 * most every vacuumGapMs: under bench:runs's load, every 5 to 10 s, a few milliseconds each.
 */
const vacuumEveryRows = 20_000
const vacuumGapMs = 5_000

export class FeedSequencer {
  private passing = false
  private movedSinceVacuum = 0
  private vacuumedAt = 0
  private again = false
  private stopped = false
  private lastPassAt = 0
  /** Events the last pass moved. */
  private lastMoved = 0
  private listeners: { unlisten(): Promise<void> }[] = []
  private sweep: NodeJS.Timeout | undefined
  private prune: NodeJS.Timeout | undefined
  private firstPrune: NodeJS.Timeout | undefined
  private retry: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined

  /** How long the feed keeps what it has. */
  private readonly keepMs: number

  constructor(private readonly options: SequencerOptions) {
    this.keepMs = options.keepMs ?? feedKeepDays * 86_400_000
  }

  async start(): Promise<void> {
    const { sql } = this.options
    const wake = () => this.wake()
    for (const channel of [runChannel, chatChannel, inboxChannel])
      this.listeners.push(await sql.listen(channel, wake, wake))
    this.sweep = setInterval(wake, this.options.sweepMs ?? 1_000)
    const pruneMs = this.options.pruneMs ?? Math.max(1_000, Math.min(3_600_000, this.keepMs / 4))
    this.firstPrune = setTimeout(() => void this.pruneNow(), Math.min(60_000, pruneMs))
    this.prune = setInterval(() => void this.pruneNow(), pruneMs)
    this.wake()
  }

  /** A pass soon; a wake during a pass makes another follow it. */
  wake(): void {
    if (this.stopped) return
    if (this.passing) {
      this.again = true
      return
    }
    this.passing = true
    const since = performance.now() - this.lastPassAt
    const gap = this.lastMoved >= busyPassEvents ? gapUnderLoadMs : quickGapMs
    // The pass's promise from the moment it is planned, not from when it starts: stop() awaits it,
    // and awaiting the last pass's (long settled) while this one waited for its timer spun stop() in
    // microtasks that never let the timer fire (a full test run hung at 100% CPU in engine.stop()).
    this.running = new Promise<void>((resolve) => {
      const go = () => void this.pass().finally(resolve)
      if (since < gap) setTimeout(go, gap - since)
      else setImmediate(go)
    })
  }

  private async pass(): Promise<void> {
    const { sql, log } = this.options
    this.again = false
    this.lastMoved = 0
    try {
      for (let more = true; more && !this.stopped;) {
        const done = await sequenceFeed(sql, { mail: this.options.mail })
        if (done.events > 0) this.options.onSequenced?.(done)
        this.movedSinceVacuum += done.events
        this.lastMoved += done.events
        // Inbox rows of an enterprise another pass holds are that pass's to take.
        more = done.more && (done.events > 0 || done.madeHeads > 0)
      }
      if (
        this.movedSinceVacuum >= (this.options.vacuumEveryRows ?? vacuumEveryRows) &&
        performance.now() - this.vacuumedAt >= (this.options.vacuumGapMs ?? vacuumGapMs) &&
        !this.stopped
      ) {
        this.movedSinceVacuum = 0
        this.vacuumedAt = performance.now()
        // Not being allowed to (an owner other than osd's user) costs the feed speed, nothing else.
        await vacuumInbox(sql).catch((err: unknown) =>
          log.debug({ err }, 'feed inbox vacuum refused'),
        )
      }
      this.lastPassAt = performance.now()
    } catch (err) {
      if (isRetryable(err)) log.warn({ err }, 'feed pass stopped by the database; trying again')
      else if (isDatabaseUnavailable(err))
        log.warn({}, 'feed pass: the database is unavailable; trying again in a second')
      else log.error({ err }, 'feed pass failed; trying again in a second')
      clearTimeout(this.retry)
      // The retry is the next pass, whatever woke this one meanwhile.
      this.again = false
      this.retry = setTimeout(() => this.wake(), isRetryable(err) ? 0 : 1_000)
    } finally {
      this.passing = false
    }
    // A wake during the pass: the next follows, after the gap (wake).
    if (this.again) this.wake()
  }

  /** Deletes what the feed keeps no longer (keepMs). */
  async pruneNow(): Promise<number> {
    try {
      const gone = await pruneFeed(this.options.sql, new Date(Date.now() - this.keepMs))
      if (gone > 0) this.options.log.info({ events: gone }, 'feed pruned')
      return gone
    } catch (err) {
      this.options.log.warn({ err }, 'feed prune failed; trying again in an hour')
      return 0
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.sweep)
    clearInterval(this.prune)
    clearTimeout(this.firstPrune)
    clearTimeout(this.retry)
    await Promise.all(this.listeners.map((l) => l.unlisten().catch(() => undefined)))
    // No pass is planned once stopped (wake), and the one planned or under way ends its loops at once.
    await this.running
  }
}
