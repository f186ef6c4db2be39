import type { Watch } from '../../db/change-watch.js'

// The long-poll of a run and of a chat (DESIGN 5, 11): a read held until it has something new, so
// callers follow a run or a reply without polling busily. Written once for both; each says what it
// reads and what counts as an answer.

/** The longest a long-poll holds its answer (waitSeconds up to 30, beyond the spec). */
export const longPollMaxSeconds = 30

/**
 * What a long-poll waits with: a watch of its channel (ChangeWatch, woken by the NOTIFY of any osd
 * process), and the signal that cuts every wait short (the daemon stopping).
 */
export interface LongPollWait {
  watch: { subscribe(key: string, ms: number, signal?: AbortSignal): Watch }
  signal?: AbortSignal
}

/**
 * How long a `waitSeconds` holds the answer, in ms: 0 to 30 s. The query schemas refuse anything else
 * (400, shared/schemas/common.ts); a caller in the daemon is held to the same bounds.
 */
export function longPollMs(waitSeconds: number | undefined): number {
  return Math.min(longPollMaxSeconds, Math.max(0, waitSeconds || 0)) * 1000
}

export interface LongPoll<T> {
  /** What changes on the watch's channel wake the wait: the run's or the chat's id. */
  key: string
  /** As the query gives it; undefined (no wait) where the query names nothing to wait after. */
  waitSeconds: number | undefined
  /** Without one the read answers at once. */
  wait?: LongPollWait
  /** Reads the answer; `last` is the read that answers whatever it finds (the wait is over). */
  read(last: boolean): Promise<T>
  /** Whether a read may answer now: something new, or nothing new can come (a run ended). */
  answers(read: T): boolean
  /**
   * A cheaper look, after a wake, for whether anything new exists; the answer is read when it says
   * so. Without it, each wake reads the answer itself.
   */
  changed?(): Promise<boolean>
}

/**
 * Holds a read until it answers, `waitSeconds` runs out or the wait's signal aborts, and then reads
 * the answer a last time. Each wait starts before the read it guards, so a change landing in between
 * is not missed; however it ends (an answer, a 404, a failure), its wait stops holding a listener.
 */
export async function longPoll<T>(poll: LongPoll<T>): Promise<T> {
  const waitMs = longPollMs(poll.waitSeconds)
  if (!poll.wait || waitMs === 0) return poll.read(true)
  const { watch, signal } = poll.wait
  const deadline = Date.now() + waitMs
  let waiting = watch.subscribe(poll.key, waitMs, signal)
  try {
    const stopped = signal?.aborted === true
    let found = await poll.read(stopped)
    while (!stopped && !poll.answers(found)) {
      await waiting.ready
      if (Date.now() >= deadline || signal?.aborted) return await poll.read(true)
      waiting = watch.subscribe(poll.key, deadline - Date.now(), signal)
      if (!poll.changed) found = await poll.read(false)
      else if (await poll.changed()) return await poll.read(true)
    }
    return found
  } finally {
    waiting.cancel()
  }
}
