// Connections a provider throttled (429 too many requests, 529 overloaded), in this process's memory
// (issue 34). A throttled call's work leaves its worker and waits the provider's retry-after (at least
// 1 s, at most 5 minutes), doubled at each throttle in a row, plus up to half of it again at random so
// that many works throttled at once do not come back together. When the wait is over, one call on the
// connection goes first (the probe); the others that come back meanwhile wait again, a fraction of the
// wait, until it answers: if it is throttled too, they all wait the next, longer wait; if it answers, the
// throttle is over and they call. So 50 runs throttled for 10 s make about one call each in that time,
// not one per retry-after.
//
// A hint, not a record: another process learns of a throttle from its own first call, and a restart
// forgets it; nothing is lost either way, only a call made that could have waited.

/** The longest a throttled connection waits (the provider may ask for more). */
export const maxThrottleMs = 5 * 60_000
const minThrottleMs = 1_000
/** A probe not answered in this long (its work died) lets another call go first. */
const probeLapseMs = 2 * 60_000
/**
 * A throttle over and unused this long is forgotten: its connection's work went elsewhere or ended (a
 * key unbound, an enterprise gone), and one kept until its connection's next answer was kept for good.
 */
const forgetMs = maxThrottleMs + probeLapseMs

interface Gate {
  /** Until when the connection is not called. */
  until: number
  /** The wait this throttle set, doubled at each throttle in a row. */
  waitMs: number
  /** When the call that went first after the wait was made, while it has not answered. */
  probing?: number
}

export class Throttles {
  private gates = new Map<string, Gate>()
  /** When the throttles were last looked over for ones to forget. */
  private sweptAt = 0

  constructor(
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * Before a call on the connection: undefined to make it (the first after a throttle's wait goes as the
   * probe), else how many milliseconds the work waits first.
   */
  admit(connection: string): number | undefined {
    const gate = this.gates.get(connection)
    if (!gate) return undefined
    const now = this.now()
    if (now < gate.until) return this.spread(gate.until - now, gate.waitMs)
    if (gate.probing !== undefined && now - gate.probing < probeLapseMs)
      return this.spread(minThrottleMs, gate.waitMs)
    gate.probing = now
    return undefined
  }

  /** A call on the connection was throttled, the provider asking `retryAfterMs`: how long its work waits. */
  throttled(connection: string, retryAfterMs: number | undefined): number {
    const now = this.now()
    const asked = Math.min(maxThrottleMs, Math.max(minThrottleMs, retryAfterMs ?? minThrottleMs))
    const gate = this.gates.get(connection)
    if (!gate) {
      // Looked over at most once a minute, when a throttle starts: never on a call's way.
      if (now - this.sweptAt >= 60_000) this.sweep(now)
      this.gates.set(connection, { until: now + asked, waitMs: asked })
      return this.spread(asked, asked)
    }
    if (gate.probing !== undefined || now >= gate.until) {
      // Throttled again after the wait: the next wait is longer.
      gate.waitMs = Math.min(maxThrottleMs, Math.max(asked, gate.waitMs * 2))
      gate.until = now + gate.waitMs
      gate.probing = undefined
    } else {
      // A call made before the throttle was known here, throttled in the same wait.
      gate.until = Math.max(gate.until, now + asked)
    }
    return this.spread(gate.until - now, gate.waitMs)
  }

  /** A call on the connection answered, or failed otherwise than throttled: it is not throttled. */
  answered(connection: string): void {
    this.gates.delete(connection)
  }

  /** A call given up before its answer (its work stopped): if it went first, another may. */
  abandoned(connection: string): void {
    const gate = this.gates.get(connection)
    if (gate) gate.probing = undefined
  }

  /** How many connections are throttled, or were and are not forgotten yet (for tests). */
  get size(): number {
    return this.gates.size
  }

  private sweep(now: number): void {
    this.sweptAt = now
    for (const [connection, gate] of this.gates)
      if (now - Math.max(gate.until, gate.probing ?? 0) >= forgetMs) this.gates.delete(connection)
  }

  /** `ms` and up to half the throttle's wait again, at random; at most the longest wait. */
  private spread(ms: number, waitMs: number): number {
    return Math.round(Math.min(maxThrottleMs, ms + (this.random() * waitMs) / 2))
  }
}

/** This process's throttles, shared by every run and chat reply it makes calls for. */
export const throttles = new Throttles()
