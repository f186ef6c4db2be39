import { defaultEngineConcurrency, defaultLeaseSeconds } from '../config.js'
import { metrics } from '../metrics.js'
import { isDatabaseUnavailable, isRetryable, type Sql } from '../db/sql.js'
import type { Logger } from '../log.js'
import { followWakes } from './wakes.js'

// One skeleton for every kind of background work (STYLE: One skeleton per kind of background work;
// DESIGN 5, 11): claim rows with `for update skip locked` and a lease, woken by NOTIFY with a slow sweep
// as the safety net, renew the leases of what is in progress, abort what is no longer held, try a failed
// pass again within a second, and on stop give the work in progress a grace before handing its leases
// back. Runs and chat turns are the two kinds (runs/loop.ts, chats/loop.ts): each says how its rows are
// claimed, renewed and released, and what executing one does.
//
// A loop has a capacity (OSD_ENGINE_CONCURRENCY; STYLE: Concurrency has a number): it claims only for
// its free slots, as graphile-worker fetches for idle workers only, so the first engine to wake does
// not take every piece of work there is and a second engine shares it. A slot that frees wakes the
// loop to claim again. Work is never claimed beyond the free slots to wait here for one: it would be
// running under this engine's lease with nobody at it, and lapse and be taken over.

/** A piece of work this engine holds the lease of. */
export interface Leased {
  id: string
  /** The payload on the kind's channel that names this work (a run's id, a turn's chat id). */
  wakeKey: string
}

export interface WorkKind<W extends Leased> {
  /** Names the kind in logs: 'run', 'chat turn'. */
  name: string
  /** The log field that carries a work's id: 'runId', 'turnId'. */
  logKey: string
  /** NOTIFY channel whose payloads name work that may be claimed or has moved. */
  channel: string
  /** The same payloads told at this process's own commits, heard before their NOTIFY comes back. */
  listenLocally: (heard: (payload: string) => void) => () => void
  /**
   * One step of a pass: claims at most `room` pieces of work (the loop's free slots; 0 when it is at
   * capacity, when a kind may still move work that takes no slot), and answers what it claimed and
   * whether another step may find more.
   */
  claim(room: number): Promise<{ claimed: W[]; more: boolean }>
  /**
   * How long (ms) until the next work that waits for a time (a delay, a back-off) becomes due, if any:
   * by the database's clock, which set that time and decides when it is due, never this process's.
   */
  nextDue?(): Promise<number | null>
  /** Does the work, until it ends, waits, or `signal` aborts (cancelled, lease lost, engine stopping). */
  execute(work: W, signal: AbortSignal): Promise<void>
  /** Renews the leases of these ids; answers the ids still held by this engine. */
  renew(ids: string[]): Promise<Set<string>>
  /** Whether this work is still this engine's to do (not cancelled, closed, or taken over). */
  stillHeld(id: string): Promise<boolean>
  /** Hands these leases back at once, for the next engine to take the work over (on stop). */
  release(ids: string[]): Promise<void>
}

export interface LeaseLoopOptions {
  sql: Sql
  log: Logger
  /** The safety net: a pass this often even if no notification arrives. */
  sweepMs?: number
  /** How long a lease lasts; work in progress renews it every third of it. */
  leaseSeconds?: number
  /** How many pieces of work this loop executes at once (OSD_ENGINE_CONCURRENCY). */
  capacity?: number
}

/** The longest a due timer waits before looking again: a due time may move earlier meanwhile. */
const maxDueWaitMs = 60_000

export class LeaseLoop<W extends Leased> {
  private readonly executing = new Map<string, { work: W; controller: AbortController }>()
  /** Work in progress, to wait for on stop. */
  private readonly working = new Set<Promise<void>>()
  /** Work a pass under way claimed once the loop was told to stop: not begun, handed back by stop. */
  private readonly unbegun = new Set<string>()
  /** When this engine last renewed its leases; past a lease's length, it holds none of them. */
  private renewedAt = performance.now()
  private passing = false
  private renewing = false
  private again = false
  private stopped = false
  private renewTimer: NodeJS.Timeout | undefined
  private dueTimer: NodeJS.Timeout | undefined
  private retryTimer: NodeJS.Timeout | undefined
  private wakes: { stop(): Promise<void> } | undefined

  /** The kind's name as a metrics label: run, chat_turn. */
  private readonly metricsKind: string

  constructor(
    private readonly kind: WorkKind<W>,
    private readonly options: LeaseLoopOptions,
  ) {
    this.metricsKind = kind.name.replace(/\W+/g, '_')
  }

  get leaseSeconds(): number {
    return this.options.leaseSeconds ?? defaultLeaseSeconds
  }

  /** How many pieces of work this loop executes at once. */
  get capacity(): number {
    return Math.max(1, this.options.capacity ?? defaultEngineConcurrency)
  }

  /** The ids of the work this loop is doing now. */
  get inProgress(): string[] {
    return [...this.executing.keys()]
  }

  async start(): Promise<void> {
    const { sql, sweepMs = 5_000 } = this.options
    this.wakes = await followWakes({
      sql,
      channel: this.kind.channel,
      listenLocally: this.kind.listenLocally,
      heard: (payload) => {
        for (const { work } of this.executing.values())
          if (work.wakeKey === payload) void this.checkStillHeld(work.id)
        this.wake()
      },
      wake: () => this.wake(),
      sweepMs,
    })
    this.renewTimer = setInterval(() => void this.renew(), (this.leaseSeconds * 1000) / 3)
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
    const { log } = this.options
    try {
      do {
        // Each step sees every commit that woke the loop so far (its own previous step's too).
        this.again = false
        for (let more = true; more && !this.stopped;) {
          // Only this pass claims, and the executions it starts are counted before the next step: the
          // room is what is free now (a slot freed meanwhile wakes another pass).
          const room = Math.max(0, this.capacity - this.executing.size)
          const step = await this.kind.claim(room)
          metrics.enginePass(this.metricsKind, step.claimed.length)
          // All of it, even past the room (a kind's mistake): claimed work not executed would lapse.
          for (const work of step.claimed) this.execute(work)
          more = step.more
        }
        // Inside the loop: a wake while the timer is armed is a wake during this pass, not a lost one.
        await this.armDueTimer()
      } while (this.again && !this.stopped)
    } catch (err) {
      // A step PostgreSQL stopped to break a deadlock did nothing and goes again at once; anything
      // else (the database away, say) is tried again in a second.
      metrics.statementError(err)
      const retryable = isRetryable(err)
      if (retryable)
        log.warn({ err }, `${this.kind.name} pass stopped by the database; trying again`)
      else if (isDatabaseUnavailable(err))
        log.warn(
          { code: (err as { code?: string }).code },
          `${this.kind.name} pass: the database is unavailable; trying again in a second`,
        )
      else log.error({ err }, `${this.kind.name} pass failed; trying again in a second`)
      clearTimeout(this.retryTimer)
      this.retryTimer = setTimeout(() => this.wake(), retryable ? 0 : 1_000)
    } finally {
      this.passing = false
    }
  }

  /** Wakes when the next work waiting for a time becomes due. */
  private async armDueTimer(): Promise<void> {
    if (!this.kind.nextDue) return
    // A time the database wrote and compares with its now(), measured against this process's clock,
    // was off by their skew: a process ahead of the database passed again and again, claiming
    // nothing, until the database's clock reached it; one behind slept past it.
    const inMs = await this.kind.nextDue()
    clearTimeout(this.dueTimer)
    if (inMs !== null && !this.stopped) {
      const wait = Math.max(0, Math.min(inMs + 5, maxDueWaitMs))
      this.dueTimer = setTimeout(() => this.wake(), wait)
    }
  }

  private execute(work: W): void {
    // This engine's own work whose lease lapsed while it stalled, claimed again: it goes on.
    if (this.executing.has(work.id)) return
    // Claimed by a pass that was under way when stop() began: stop has aborted what was in progress
    // already, and would neither abort this nor hand its lease back (it ran on here, unstoppable, and
    // the next engine waited for its lease to lapse). Not begun; its lease goes back with the others.
    if (this.stopped) {
      this.unbegun.add(work.id)
      return
    }
    const controller = new AbortController()
    this.executing.set(work.id, { work, controller })
    if (this.executing.size === 1) this.renewedAt = performance.now()
    const done = this.kind
      .execute(work, controller.signal)
      .catch((err: unknown) =>
        this.options.log.error(
          { err, [this.kind.logKey]: work.id },
          `${this.kind.name} failed; the lease will lapse and it be taken over`,
        ),
      )
      .finally(() => {
        this.executing.delete(work.id)
        this.working.delete(done)
        this.wake()
      })
    this.working.add(done)
  }

  /** Keeps the leases of the work in progress; work no longer held (cancelled, closed) is aborted. */
  private async renew(): Promise<void> {
    const entries = [...this.executing.values()]
    // One renewal at a time: on a loaded database one can outlast the interval, and the next would
    // wait behind it for the same rows.
    if (entries.length === 0 || this.renewing) return
    this.renewing = true
    try {
      const held = await this.kind.renew(entries.map(({ work }) => work.id))
      this.renewedAt = performance.now()
      for (const entry of entries)
        if (!held.has(entry.work.id))
          this.abortIfCurrent(entry, new Error(`${this.kind.name} no longer held`))
    } catch (err) {
      // Unrenewed for a lease's length, the leases have lapsed: another engine may hold this work
      // now, so this one stops doing it (it writes nothing more for it: each write checks the lease).
      const lapsed = performance.now() - this.renewedAt >= this.leaseSeconds * 1000
      this.options.log.warn(
        { err, lapsed },
        lapsed
          ? `could not renew ${this.kind.name} leases, which have lapsed; stopping that work here`
          : `could not renew ${this.kind.name} leases`,
      )
      if (lapsed)
        for (const { controller } of this.executing.values())
          controller.abort(new Error('lease lapsed'))
    } finally {
      this.renewing = false
    }
  }

  /** Work that moved is aborted at once if it is no longer this engine's (cancelled, closed). */
  private async checkStillHeld(id: string): Promise<void> {
    const entry = this.executing.get(id)
    if (!entry) return
    const held = await this.kind.stillHeld(id).catch(() => true)
    if (!held) this.abortIfCurrent(entry, new Error(`${this.kind.name} moved`))
  }

  /**
   * Aborts the execution a check was made for, unless another execution of the same work has taken
   * its place meanwhile. A run that went back to pending at a gate's decision was found not held, the
   * answer came after the same engine had dispatched it again, and the new execution was aborted: the
   * run stayed running with nobody at it until its lease lapsed (issue 42's stress test).
   */
  private abortIfCurrent(entry: { work: W; controller: AbortController }, reason: Error): void {
    if (this.executing.get(entry.work.id) === entry) entry.controller.abort(reason)
  }

  /**
   * Stops taking work, aborts the work in progress and, once it has stopped writing (or after
   * `graceMs`), hands its leases back at once, so another engine takes it over from its journal
   * without this one still at work on it.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopped = true
    clearInterval(this.renewTimer)
    clearTimeout(this.dueTimer)
    clearTimeout(this.retryTimer)
    await this.wakes?.stop()
    const ids = this.inProgress
    for (const { controller } of this.executing.values())
      controller.abort(new Error('engine stopping'))
    let grace: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.all(this.working),
      new Promise((resolve) => (grace = setTimeout(resolve, graceMs))),
    ])
    clearTimeout(grace)
    while (this.passing) await new Promise((resolve) => setTimeout(resolve, 10))
    ids.push(...this.unbegun)
    if (ids.length) await this.kind.release(ids).catch(() => undefined)
  }
}
