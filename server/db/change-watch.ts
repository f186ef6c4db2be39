import type { Sql } from './sql.js'

/** A wait for the next change of one key: `ready` resolves at it, at its time or when its signal aborts. */
export interface Watch {
  ready: Promise<void>
  cancel(): void
}

/**
 * Waiting in this process for changes any osd process announces with NOTIFY on one channel, the payload
 * naming what changed (a run's id on the run events' channel, a chat's on the chat messages' one): the
 * long-polls (GET /v1/runs/{id}, GET /v1/chats/{id}; domain/long-poll/long-poll.ts) and a chat's event stream
 * wait with it. One LISTEN per process, however many wait. A notification is a hint, never the record:
 * whoever is woken reads again, and a (re)connect of the listener wakes everyone, since notifications
 * sent while it was away are gone.
 */
export class ChangeWatch {
  constructor(readonly channel: string) {}

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
        (key) => this.wake(key),
        () => this.wakeAll(),
      )
      .catch(onError)
  }

  /**
   * Starts waiting for the key's next change before the caller reads, so a change that lands in
   * between is not missed. `ready` resolves at the next change, after `ms`, or when `signal` aborts.
   */
  subscribe(key: string, ms: number, signal?: AbortSignal): Watch {
    let wake!: () => void
    const ready = new Promise<void>((resolve) => (wake = resolve))
    const set = this.waiters.get(key) ?? new Set()
    this.waiters.set(key, set)
    set.add(wake)
    const timer = setTimeout(wake, ms)
    const stopWaking = signal ? this.wakeOnAbort(signal, wake) : undefined
    let ended = false
    // Once, whoever calls it first (the wait's own end, or its reader). The key leaves the waits only
    // while they are still this set: a wait on the key started since (the reader's next, another
    // reader's) has a set of its own there, and dropping it left that wait deaf to every NOTIFY.
    const cancel = () => {
      if (ended) return
      ended = true
      clearTimeout(timer)
      stopWaking?.()
      set.delete(wake)
      if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key)
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

  /** How many waits are open now, over every key (for tests that check none is left behind). */
  get waiting(): number {
    let n = 0
    for (const set of this.waiters.values()) n += set.size
    return n
  }

  private wake(key: string): void {
    for (const wake of this.waiters.get(key) ?? []) wake()
  }

  private wakeAll(): void {
    for (const set of this.waiters.values()) for (const wake of set) wake()
  }
}
