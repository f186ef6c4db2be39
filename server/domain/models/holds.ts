import type { ProviderError } from './provider.js'

// Work held for want of a model (DESIGN 6, 13; issue 43): a run and a chat reply are held the same way
// when no key is bound, a key is refused, the provider is away or throttles, decided here once from
// what failed and how many times the work was held before (the `holds` counter on runs and
// chat_turns). A provider's throttle sets the wait itself (engine/models/throttles.ts spreads it); any
// other hold waits a back-off that grows with the holds: 30 s, 1, 2, 4, 8 minutes, then every 10.
// Either way the work is tried again at once when a key is bound.

/** Why work is held: a failed model call, or no key to make one with (chooseModel's reason). */
export type HoldCause = ProviderError | { noKey: string }

/** What a hold does to the work: blocked until `notBefore`, with its reason. */
export interface Hold {
  status: 'blocked'
  notBefore: Date
  reason: string
  /** The wait is the provider's (a throttle), not the back-off. */
  throttled: boolean
  waitMs: number
}

/** The back-off of work held `holds` times before: 30 s doubling, at most 10 minutes. */
export function backoffMs(holds: number): number {
  return Math.min(10 * 60_000, 30_000 * 2 ** Math.min(Math.max(holds, 0), 5))
}

/**
 * The hold for `cause`, of work held `holds` times before. A throttle waits what the provider asked
 * (spread by the caller, engine/models/throttles.ts); every other cause the back-off.
 */
export function holdFor(cause: HoldCause, holds: number, now = Date.now()): Hold {
  const throttled = 'noKey' in cause ? false : cause.throttled
  const waitMs =
    throttled && cause instanceof Error && cause.retryAfterMs !== undefined
      ? cause.retryAfterMs
      : backoffMs(holds)
  return {
    status: 'blocked',
    notBefore: new Date(now + waitMs),
    reason: 'noKey' in cause ? cause.noKey : cause.message,
    throttled,
    waitMs,
  }
}
