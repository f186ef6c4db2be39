import type { Sql } from '../db/sql.js'
import { runChannel } from '../domain/runs/index.js'

/**
 * Readers waiting for a run's next event (GET /v1/runs/{id}?waitSeconds, DESIGN 5), woken by the NOTIFY
 * every run event sends. One LISTEN per process, however many wait.
 */
export class RunWatch {
  /** The channel followed: run events by default; chat messages for the chat long-poll (DESIGN 11). */
  constructor(private readonly channel: string = runChannel) {}

  private waiters = new Map<string, Set<() => void>>()
  /**
   * Waiters to wake when a signal (the daemon's shutdown) aborts: one listener per signal, however many
   * wait, rather than one each (Node warns past ten listeners on a signal, as under 50 long-polls).
   */
  private aborting = new WeakMap<AbortSignal, Set<() => void>>()

  follow(sql: Sql, onError: (err: unknown) => void): void {
    sql
      .listen(
        this.channel,
        (runId) => this.wake(runId),
        () => this.wakeAll(),
      )
      .catch(onError)
  }

  /**
   * Starts waiting for the run before the caller reads its events, so an event that lands in between is
   * not missed. `ready` resolves on the next event, after `ms`, or when `signal` aborts.
   */
  subscribe(
    runId: string,
    ms: number,
    signal?: AbortSignal,
  ): { ready: Promise<void>; cancel(): void } {
    let wake!: () => void
    const ready = new Promise<void>((resolve) => (wake = resolve))
    const set = this.waiters.get(runId) ?? new Set()
    this.waiters.set(runId, set)
    set.add(wake)
    const timer = setTimeout(wake, ms)
    const stopWaking = signal ? this.wakeOnAbort(signal, wake) : undefined
    const cancel = () => {
      clearTimeout(timer)
      stopWaking?.()
      set.delete(wake)
      if (set.size === 0) this.waiters.delete(runId)
      wake()
    }
    void ready.then(cancel)
    return { ready, cancel }
  }

  private wakeOnAbort(signal: AbortSignal, wake: () => void): () => void {
    if (signal.aborted) {
      wake()
      return () => undefined
    }
    let set = this.aborting.get(signal)
    if (!set) {
      const waking = (set = new Set())
      this.aborting.set(signal, waking)
      signal.addEventListener('abort', () => waking.forEach((w) => w()), { once: true })
    }
    set.add(wake)
    return () => set.delete(wake)
  }

  /** How many waits are open now, over every run (for tests that check none is left behind). */
  get waiting(): number {
    let n = 0
    for (const set of this.waiters.values()) n += set.size
    return n
  }

  private wake(runId: string): void {
    for (const wake of this.waiters.get(runId) ?? []) wake()
  }

  private wakeAll(): void {
    for (const set of this.waiters.values()) for (const wake of set) wake()
  }
}
