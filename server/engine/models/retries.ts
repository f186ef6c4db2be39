import { setTimeout as sleep } from 'node:timers/promises'
import { retriedInPlace, retryAfterOf } from './failures.js'

// The one place a failed model call is tried again in place, streamed or not (issue 34): the SDKs are
// made with no retries of their own. Which failures are tried again is decided with the rest of what a
// failure is, in failures.ts:
//
// - A blip (408, 409, 5xx other than 529, a connection refused or reset before anything was told) is
//   tried again twice, after the provider's retry-after when it says one under a minute, else 0.5 s
//   doubling with jitter; `x-should-retry` overrides the status either way, as the SDKs read it.
// - A throttle (429 too many requests, 529 overloaded) is not waited out here: the work leaves its
//   worker and comes back after the provider's retry-after (throttles.ts), so a throttled provider
//   does not hold every worker asleep, and many throttled runs do not come back together.
// - A timeout is not tried again here either: a call that did not answer in OSD_MODEL_TIMEOUT_SECONDS
//   (or sent nothing for OSD_MODEL_IDLE_SECONDS while streaming) is an outage, and the work waits its
//   back-off before the next try rather than holding a worker three times as long.
// - Nothing is tried again once any of its text was told (a streamed answer cut off midway): the
//   reader would see it twice.

export interface RetryOptions {
  maxRetries: number
  signal: AbortSignal
  /** Whether the failed attempt already told some of its text. */
  told?: () => boolean
}

export async function withRetries<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  for (let tried = 1; ; tried++) {
    try {
      return await attempt()
    } catch (err) {
      if (options.signal.aborted || tried > options.maxRetries || options.told?.()) throw err
      if (!retriedInPlace(err)) throw err
      await sleep(waitBefore(tried, err), undefined, { signal: options.signal })
    }
  }
}

function waitBefore(tried: number, err: unknown): number {
  const asked = retryAfterOf(err)
  if (asked !== undefined && asked < 60_000) return asked
  return Math.min(500 * 2 ** (tried - 1), 8_000) * (1 - Math.random() * 0.25)
}
