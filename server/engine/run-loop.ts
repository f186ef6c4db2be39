import { isDatabaseUnavailable, isRetryable, type Sql } from '../db/sql.js'
import { advance, renewLeases, takeOverLapsed } from '../domain/admission.js'
import { engineChannel, listenLocally } from '../domain/engine-wake.js'
import type { RunRow } from '../domain/runs.js'
import type { Logger } from '../log.js'
import { completeDeterministic, type Executor } from './executor.js'
import { followWakes } from './wakes.js'

export interface RunLoopOptions {
  sql: Sql
  log: Logger
  engineId: string
  /** Executors by task kind, for runs that outlive their dispatch (kind llm). */
  executors: Partial<Record<RunRow['kind'], Executor>>
  /** The safety net: a pass this often even if no notification arrives. */
  sweepMs?: number
  /** How long a lease lasts; runs being executed renew theirs every third of it (DESIGN 5). */
  leaseSeconds?: number
}

/**
 * The engine's work on runs (DESIGN 5): admission (pending -> queued), dispatch (queued -> running) and
 * execution, woken by NOTIFY of run events, with a slow sweep as the safety net and a timer for the
 * next delayed run. Correctness never depends on a notification: every decision is a locking query.
 */
export class RunLoop {
  private readonly executing = new Map<string, AbortController>()
  /** Executions in progress, to wait for on stop. */
  private readonly working = new Set<Promise<void>>()
  /** When this engine last renewed its leases; past a lease's length, it holds none of them. */
  private renewedAt = performance.now()
  private passing = false
  private again = false
  private stopped = false
  private timers: NodeJS.Timeout[] = []
  private dueTimer: NodeJS.Timeout | undefined
  private retryTimer: NodeJS.Timeout | undefined
  private wakes: { stop(): Promise<void> } | undefined

  constructor(private readonly options: RunLoopOptions) {}

  private get leaseSeconds(): number {
    return this.options.leaseSeconds ?? 30
  }

  async start(): Promise<void> {
    const { sql, sweepMs = 5_000 } = this.options
    const renewMs = (this.leaseSeconds * 1000) / 3
    this.wakes = await followWakes({
      sql,
      channel: engineChannel,
      listenLocally,
      heard: (runId) => {
        if (this.executing.has(runId)) void this.checkStillHeld(runId)
        this.wake()
      },
      wake: () => this.wake(),
      sweepMs,
    })
    this.timers.push(setInterval(() => void this.renew(), renewMs))
    this.wake()
  }

  /** Runs a pass soon; a wake during a pass makes another one follow it. */
  wake(): void {
    if (this.stopped) return
    if (this.passing) {
      this.again = true
      return
    }
    this.passing = true
    setImmediate(() => void this.pass())
  }

  private async pass(): Promise<void> {
    const { sql, log, engineId } = this.options
    try {
      do {
        let progress = true
        while (progress && !this.stopped) {
          // This step sees every commit that woke the engine so far (its own previous step's too).
          this.again = false
          const step = await advance(sql, engineId, completeDeterministic, {
            leaseSeconds: this.leaseSeconds,
          })
          for (const run of step.started) this.execute(run, false)
          for (const run of await takeOverLapsed(sql, engineId, this.leaseSeconds))
            this.execute(run, true)
          progress = step.moved > 0
        }
        // Inside the loop: a wake while the timer is armed is a wake during this pass, not a lost one.
        await this.armDueTimer()
      } while (this.again && !this.stopped)
    } catch (err) {
      // A step PostgreSQL stopped to break a deadlock did nothing and goes again at once; anything
      // else (the database away, say) is tried again in a second.
      const retryable = isRetryable(err)
      if (retryable) log.warn({ err }, 'engine pass stopped by the database; trying again')
      else if (isDatabaseUnavailable(err))
        log.warn(
          { code: (err as { code?: string }).code },
          'engine pass: the database is unavailable; trying again in a second',
        )
      else log.error({ err }, 'engine pass failed; trying again in a second')
      clearTimeout(this.retryTimer)
      this.retryTimer = setTimeout(() => this.wake(), retryable ? 0 : 1_000)
    } finally {
      this.passing = false
    }
  }

  /** Wakes when the next delayed pending run becomes due (a successor's delay, a hold's back-off). */
  private async armDueTimer(): Promise<void> {
    const [next] = await this.options.sql<{ at: Date | null }[]>`
      select min(not_before) as at from runs where status in ('pending', 'blocked') and not_before > now()`
    clearTimeout(this.dueTimer)
    if (next?.at && !this.stopped) {
      const wait = Math.max(0, Math.min(next.at.getTime() - Date.now() + 5, 60_000))
      this.dueTimer = setTimeout(() => this.wake(), wait)
    }
  }

  private execute(run: RunRow, resumed: boolean): void {
    const { sql, log, engineId, executors } = this.options
    const executor = executors[run.kind]
    if (!executor || this.executing.has(run.id)) return
    const controller = new AbortController()
    this.executing.set(run.id, controller)
    if (this.executing.size === 1) this.renewedAt = performance.now()
    const work = executor
      .execute(run, { sql, log, engineId, signal: controller.signal, resumed })
      .catch((err: unknown) =>
        log.error(
          { err, runId: run.id },
          'executor failed; the lease will lapse and the run be taken over',
        ),
      )
      .finally(() => {
        this.executing.delete(run.id)
        this.working.delete(work)
        this.wake()
      })
    this.working.add(work)
  }

  /** Keeps the leases of runs being executed; a run no longer held (cancelled) is aborted. */
  private async renew(): Promise<void> {
    const ids = [...this.executing.keys()]
    if (ids.length === 0) return
    try {
      const held = await renewLeases(
        this.options.sql,
        this.options.engineId,
        ids,
        this.leaseSeconds,
      )
      this.renewedAt = performance.now()
      for (const id of ids)
        if (!held.has(id)) this.executing.get(id)?.abort(new Error('run no longer held'))
    } catch (err) {
      // Unrenewed for a lease's length, the leases have lapsed: another engine may hold these runs
      // now, so this one stops working on them (it writes nothing more for them: loop.ts lockRun).
      const lapsed = performance.now() - this.renewedAt >= this.leaseSeconds * 1000
      this.options.log.warn(
        { err, lapsed },
        lapsed
          ? 'could not renew leases, which have lapsed; stopping their runs here'
          : 'could not renew leases',
      )
      if (lapsed)
        for (const controller of this.executing.values())
          controller.abort(new Error('lease lapsed'))
    }
  }

  /**
   * A run being executed here moved: if it is no longer running under this engine's lease (it was
   * cancelled), its executor is aborted at once, an in-flight model call included.
   */
  private async checkStillHeld(runId: string): Promise<void> {
    const [row] = await this.options.sql<{ status: string; leaseOwner: string | null }[]>`
      select status, lease_owner from runs where id = ${runId}`.catch(() => [])
    if (row && (row.status !== 'running' || row.leaseOwner !== this.options.engineId)) {
      this.executing.get(runId)?.abort(new Error(`run ${row.status}`))
    }
  }

  /**
   * Stops taking work, aborts executions in progress and, once they have stopped writing (or after
   * `graceMs`), lets their leases lapse at once, so another engine resumes them from their journal
   * (DESIGN 5) without this one still at work on them.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopped = true
    for (const timer of this.timers) clearInterval(timer)
    clearTimeout(this.dueTimer)
    clearTimeout(this.retryTimer)
    await this.wakes?.stop()
    const ids = [...this.executing.keys()]
    for (const controller of this.executing.values()) controller.abort(new Error('engine stopping'))
    let grace: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.all(this.working),
      new Promise((r) => (grace = setTimeout(r, graceMs))),
    ])
    clearTimeout(grace)
    while (this.passing) await new Promise((r) => setTimeout(r, 10))
    if (ids.length) {
      // Released with no owner: the engine that takes them over does not count this as a death.
      await this.options.sql`
        update runs set lease_expires_at = now(), lease_owner = null
         where id = any(${this.options.sql.array(ids)}::uuid[]) and lease_owner = ${this.options.engineId}
           and status = 'running'`.catch(() => undefined)
    }
  }
}
