import { metrics } from '../metrics.js'
import cron, { type ScheduledTask } from 'node-cron'
import { ApiError } from '../../shared/errors.js'
import { isRetryable, onCommit, transaction, type Sql } from '../db/sql.js'
import { enqueueRuns } from '../domain/runs/index.js'
import {
  claimFires,
  enabledSchedules,
  recordFires,
  type DueSchedule,
} from '../domain/tasks/index.js'
import { pruneRefusedDeliveries } from '../domain/webhooks/index.js'
import type { Logger } from '../log.js'

type ScheduleRow = DueSchedule

const minuteMs = 60_000
/** Fires claimed (and their runs started) per transaction, unless the constructor says otherwise. */
const claimBatch = 500
/** A process that wakes later than this after a minute (a stalled event loop) fires only the last one. */
const catchUpMinutes = 10
/** A change of a zone's clocks shorter than this (summer time) keeps a fixed-time schedule's fire once. */
const clockChangeMs = 3 * 3_600_000

const wallClocks = new Map<string, Intl.DateTimeFormat>()

/** The time on the clocks of `timezone` at `at`, as milliseconds since the epoch read as UTC. */
function wallClock(at: number, timezone: string): number {
  let format = wallClocks.get(timezone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    })
    wallClocks.set(timezone, format)
  }
  const part: Record<string, number> = {}
  for (const { type, value } of format.formatToParts(at)) part[type] = Number(value)
  return Date.UTC(part.year!, part.month! - 1, part.day, part.hour, part.minute)
}

/**
 * A cron at a fixed time of day: neither its minute nor its hour a wildcard ("30 2 * * *", not
 * "*\/15 * * * *" nor "0 * * * *"), the schedules cron's rule for summer time applies to.
 */
function fixedTime(cron: string): boolean {
  const [minute, hour] = cron.split(' ')
  return !minute!.startsWith('*') && !hour!.startsWith('*')
}

/**
 * Fires task schedules (DESIGN 7). Every engine process wakes once a minute, reads the enabled
 * schedules of active tasks and works out which are due that minute (node-cron's matcher, one per
 * distinct cron and time zone); it claims their fires by inserting (task, minute) into schedule_fires,
 * whose unique key lets exactly one process start each run however many try, in batches: the claims
 * and their runs are one transaction per batch. Each process begins at its own batch, so two processes
 * share a large minute instead of waiting on each other's claims.
 *
 * Not a node-cron timer per schedule: with thousands of schedules due in one minute their callbacks
 * ran late, and node-cron skips ("missed execution") a timer that runs over a second late, so fires
 * were lost in every process.
 */
export class Scheduler {
  /** The last minute (ms since the epoch) this process has fired. */
  private done = 0
  private timer: NodeJS.Timeout | undefined
  private ticking: Promise<void> | undefined
  private stopped = false
  /**
   * node-cron tasks, never started, used only to match minutes: one per cron, in UTC, asked about the
   * time on a zone's clocks (wallClock).
   */
  private matchers = new Map<string, ScheduledTask>()
  /** Which cron and time zone pairs are due at one minute, each worked out once. */
  private matched = { minute: 0, due: new Map<string, boolean>() }

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    private readonly batch = claimBatch,
  ) {}

  async start(): Promise<void> {
    // The minute under way when the process starts is not fired: its time has passed.
    this.done = Math.floor(Date.now() / minuteMs) * minuteMs
    this.arm()
  }

  private arm(): void {
    if (this.stopped) return
    const wait = Math.max(0, this.done + minuteMs - Date.now())
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => {
        this.ticking = undefined
        this.arm()
      })
    }, wait)
  }

  /** Fires every minute that began since the last one fired (one, unless the process stalled). */
  private async tick(): Promise<void> {
    const now = Math.floor(Date.now() / minuteMs) * minuteMs
    if (now - this.done > catchUpMinutes * minuteMs) {
      this.log.warn(
        { from: new Date(this.done + minuteMs), to: new Date(now) },
        'schedules: minutes skipped',
      )
      this.done = now - minuteMs
    }
    while (this.done < now && !this.stopped) {
      const minute = new Date(this.done + minuteMs)
      await this.fireMinute(minute)
      this.done = minute.getTime()
    }
    // The minute's housekeeping: webhook calls that never authenticated go after 3 days (issue 44).
    await pruneRefusedDeliveries(this.sql).catch((err: unknown) =>
      this.log.error({ err }, 'could not prune refused webhook calls'),
    )
  }

  /** Starts the run of every schedule due at `minute` that no other process has started. */
  async fireMinute(minute: Date): Promise<void> {
    let rows: ScheduleRow[]
    try {
      rows = await enabledSchedules(this.sql)
    } catch (err) {
      this.log.error({ err, fireAt: minute }, 'could not read schedules')
      return
    }
    const due = rows.filter((row) => this.due(row, minute))
    const crons = new Set([...this.matched.due.keys()].map((key) => key.slice(0, key.indexOf('|'))))
    for (const [key, matcher] of this.matchers) {
      if (crons.has(key)) continue // still some schedule's
      this.matchers.delete(key)
      await matcher.destroy()
    }
    const batches: ScheduleRow[][] = []
    for (let i = 0; i < due.length; i += this.batch) batches.push(due.slice(i, i + this.batch))
    const first = Math.floor(Math.random() * batches.length)
    for (let k = 0; k < batches.length && !this.stopped; k++) {
      await this.claim(batches[(first + k) % batches.length]!, minute)
    }
  }

  private due(row: ScheduleRow, minute: Date): boolean {
    if (this.matched.minute !== minute.getTime())
      this.matched = { minute: minute.getTime(), due: new Map() }
    const key = `${row.cron}|${row.timezone}`
    let due = this.matched.due.get(key)
    if (due === undefined) {
      try {
        due = this.dueInZone(row.cron, row.timezone, minute.getTime())
      } catch (err) {
        this.log.error({ err, cron: row.cron, timezone: row.timezone }, 'schedule cannot be read')
        due = false
      }
      this.matched.due.set(key, due)
    }
    return due
  }

  /**
   * Whether `cron` in `timezone` is due at `at` (a minute), as cron (Vixie's, cronie's) keeps summer
   * time: a schedule at a fixed time of day whose time the clocks skip (02:30 in Europe/Berlin on
   * the last Sunday of March) fires at the minute they jump to, and one whose time they show twice
   * (02:30 on the last Sunday of October) fires the first time only; a wildcard schedule ("every 15
   * minutes", "each hour at :00") fires by the clocks as they read. node-cron's matcher alone lost
   * the first and fired the second twice. Changes of three hours and more are taken as they come.
   */
  private dueInZone(expression: string, timezone: string, at: number): boolean {
    let matcher = this.matchers.get(expression)
    if (!matcher) {
      matcher = cron.createTask(expression, () => undefined, { timezone: 'UTC' })
      this.matchers.set(expression, matcher)
    }
    const matches = (wall: number) => matcher.match(new Date(wall))
    const wall = wallClock(at, timezone)
    const due = matches(wall)
    if (!fixedTime(expression)) return due
    const before = wallClock(at - minuteMs, timezone)
    if (wall - before > minuteMs) {
      // The clocks jumped forward to this minute: the times they skipped fire now.
      if (wall - before > clockChangeMs) return due
      for (let skipped = before + minuteMs; skipped < wall; skipped += minuteMs)
        if (matches(skipped)) return true
      return due
    }
    if (!due) return false
    // The clocks went back within the last hours: this time, shown before, fired then.
    const offset = wall - at
    const earlierOffset = wallClock(at - clockChangeMs, timezone) - (at - clockChangeMs)
    const back = earlierOffset - offset
    return !(back > 0 && wallClock(at - back, timezone) === wall)
  }

  /**
   * Claims the fires of `schedules` at `minute` and starts a run for each fire this process claimed,
   * in one transaction. The claims are inserted in task id order, as every process does, so two
   * processes claiming overlapping batches wait on each other in one order and never deadlock.
   */
  private async claim(schedules: ScheduleRow[], minute: Date, attempt = 1): Promise<void> {
    try {
      await transaction(this.sql, async (tx) => {
        const mine = await claimFires(tx, minute, schedules)
        if (mine.size === 0) return // other processes fired these
        const firing = schedules.filter((s) => mine.has(s.taskId))
        const outcomes = await enqueueRuns(tx, firing, { origin: 'schedule' })
        const fires = firing.map((schedule, i) => {
          const outcome = outcomes[i]!
          // A task that cannot run (deprecated since, nobody holds its role) starts nothing; its fire says why.
          if (outcome instanceof ApiError)
            return {
              taskId: schedule.taskId,
              runId: null,
              outcome: `${outcome.code}: ${outcome.message}`,
            }
          return { taskId: schedule.taskId, runId: outcome.id, outcome: 'started' }
        })
        await recordFires(tx, minute, fires)
        const started = fires.filter((fire) => fire.runId).length
        onCommit(tx, () => metrics.scheduleFires(started, fires.length - started))
        for (const fire of fires) {
          if (fire.runId)
            this.log.info(
              { taskId: fire.taskId, runId: fire.runId, fireAt: minute },
              'schedule fired',
            )
          else
            this.log.info(
              { taskId: fire.taskId, fireAt: minute, outcome: fire.outcome },
              'schedule fired no run',
            )
        }
      })
    } catch (err) {
      if (isRetryable(err) && attempt < 4) return this.claim(schedules, minute, attempt + 1)
      metrics.statementError(err)
      this.log.error({ err, fireAt: minute, schedules: schedules.length }, 'schedule fires failed')
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.ticking
    for (const matcher of this.matchers.values()) await matcher.destroy()
    this.matchers.clear()
  }
}
