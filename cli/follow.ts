import { finishedStatuses } from '../shared/values.js'
import type { Run, RunDetail, RunEvent, RunStatus } from '../shared/schemas/runs.js'
import type { ApiClient } from './client.js'
import { ApiRequestError, CliError, UnreachableError, exitCodes } from './errors.js'

/** How long one read holds for a new event (the daemon allows up to 30 s; DESIGN 5). */
export const longPollSeconds = 25

/** A held read answered sooner than this with nothing new was not held. */
const unheldMs = 1000

/**
 * How long to wait before reading again after a read asked to hold (`held`), asked at `askedAt`,
 * answered with `fresh` new things at `now`. Answered at once with nothing new, it was not held: osd
 * answers so past a token's share of long-polls (OSD_MAX_STREAMS_PER_TOKEN). Asked again at once, a
 * follow would spend the token's whole rate; a second between reads keeps it a slow poll until a share
 * is free again. Never past `deadline`.
 */
export function unheldPause(
  held: boolean,
  fresh: number,
  askedAt: number,
  now: number,
  deadline: number,
): number {
  return held && fresh === 0 && now - askedAt < unheldMs
    ? Math.max(0, Math.min(unheldMs, deadline - now))
    : 0
}

/** Events that mean the run has ended: the next read need not hold. */
const endEvents = new Set([
  'run.succeeded',
  'run.failed',
  'run.cancelled',
  'run.skipped',
  'run.skipped_overlap',
])

export function isEnded(status: RunStatus): boolean {
  return finishedStatuses.includes(status)
}

export interface FollowOptions {
  /** Give up after this many seconds; follow until the run ends when undefined. */
  timeoutSeconds?: number
  /** Each event once, in order, as it arrives. */
  onEvent?: (event: RunEvent) => void
  /** The run as each read answers it (its current status). */
  onRun?: (run: Run) => void
  /** A read failed for a reason that passes (osd restarting, say); the next one is in `delayMs`. */
  onRetry?: (err: Error, delayMs: number) => void
  /** How long osd may stay out of reach, with no timeout given, before the follow gives up. */
  maxOutageSeconds?: number
  now?: () => number
  sleep?: (ms: number) => Promise<void>
  /** Ends the follow at once, its long-poll with it (Ctrl+C): followRun then throws the reason. */
  signal?: AbortSignal
}

export interface FollowResult {
  /** The run as last read. */
  run: Run
  /** false when the timeout ran out first. */
  ended: boolean
}

/** A read that may answer if asked again: osd out of reach, or a proxy's 502/503/504 (osd restarting). */
export function isPassing(err: unknown): err is Error {
  return (
    err instanceof UnreachableError ||
    (err instanceof ApiRequestError && [502, 503, 504].includes(err.status))
  )
}

/**
 * Follows a run until it ends or the timeout runs out, with the daemon's long-poll
 * (`GET /v1/runs/{id}?afterEventId=<last seen>&waitSeconds=N`, DESIGN 5): each read is held until an
 * event after the last one seen exists, so nothing sleeps and nothing polls busily. Events read twice
 * (the spec allows a few from the same second to repeat) are passed on once. A read that fails while
 * osd restarts is made again after a growing pause (0.5 s up to 5 s), from the last event seen, so a
 * pipeline waiting on a run outlives a deploy; it gives up when the timeout, or with none
 * `maxOutageSeconds` (120) of osd out of reach, runs out first.
 */
export async function followRun(
  client: Pick<ApiClient, 'get'>,
  runId: string,
  options: FollowOptions = {},
): Promise<FollowResult> {
  const now = options.now ?? Date.now
  const deadline =
    options.timeoutSeconds === undefined ? Infinity : now() + options.timeoutSeconds * 1000
  const signal = options.signal
  const pause = options.sleep ?? ((ms: number) => new Promise((r) => setTimeout(r, ms)))
  // A pause ends when the follow is stopped, so Ctrl+C during a retry's wait answers at once.
  const sleep = async (ms: number) => {
    if (signal) {
      await Promise.race([
        pause(ms),
        new Promise((r) => signal.addEventListener('abort', r, { once: true })),
      ])
      signal.throwIfAborted()
    } else await pause(ms)
  }
  const maxOutageMs = (options.maxOutageSeconds ?? 120) * 1000
  const seen = new Set<string>()
  let after: string | undefined
  // The first read answers at once (every event so far); so does the read after an end event, since
  // the run's status may have been read a moment before that event was written.
  let hold = false
  let outageSince: number | undefined
  let failures = 0
  for (;;) {
    const remainingSeconds = Math.ceil((deadline - now()) / 1000)
    const waitSeconds =
      hold && after ? Math.max(1, Math.min(longPollSeconds, remainingSeconds)) : undefined
    let detail: RunDetail
    const asked = now()
    try {
      signal?.throwIfAborted()
      detail = await client.get<RunDetail>(
        `/runs/${runId}`,
        { afterEventId: after, waitSeconds },
        signal,
      )
    } catch (err) {
      signal?.throwIfAborted()
      if (!isPassing(err)) throw err
      outageSince ??= now()
      const delayMs = Math.min(5000, 500 * 2 ** failures++)
      const giveUpAt = Math.min(deadline, outageSince + maxOutageMs)
      if (now() + delayMs >= giveUpAt) throw err
      options.onRetry?.(err, delayMs)
      await sleep(delayMs)
      continue
    }
    outageSince = undefined
    failures = 0
    hold = true
    let fresh = 0
    for (const event of detail.events) {
      after = event.id
      if (seen.has(event.id)) continue
      seen.add(event.id)
      fresh++
      options.onEvent?.(event)
      if (endEvents.has(event.type)) hold = false
    }
    options.onRun?.(detail.run)
    if (isEnded(detail.run.status)) return { run: detail.run, ended: true }
    if (now() >= deadline) return { run: detail.run, ended: false }
    // A run without a single event cannot be long-polled (the hold needs an event to read after); it
    // has none only for the instant before its creation event commits.
    if (!after) await sleep(500)
    else {
      const ms = unheldPause(waitSeconds !== undefined, fresh, asked, now(), deadline)
      if (ms > 0) await sleep(ms)
    }
  }
}

/**
 * A follow of run `runId` that Ctrl+C stops (issue 51): the run goes on in osd, so osctl says so and
 * names the command that follows it again, exit 130 (the shell's for SIGINT). Until `work` ends,
 * Ctrl+C aborts the signal it is given instead of ending the process; afterwards it ends it again.
 */
export async function interruptible<T>(
  onInterrupt: (listener: () => void) => () => void,
  runId: string,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const stopped = new AbortController()
  const stopListening = onInterrupt(() => stopped.abort())
  try {
    return await work(stopped.signal)
  } catch (err) {
    if (!stopped.signal.aborted) throw err
    throw Object.assign(
      new CliError(`stopped following run ${runId}: the run goes on in osd`, exitCodes.interrupted),
      { hint: `follow it again with: osctl runs watch ${runId}` },
    )
  } finally {
    stopListening()
  }
}

/**
 * The exit code of `runs wait` and `runs start --wait` (DESIGN 9): 0 only if the run succeeded, 1 if
 * it ended otherwise (failed, cancelled, skipped), 8 if the timeout ran out first.
 */
export function waitExitCode(result: { ended: boolean; run: { status: RunStatus } }): number {
  if (!result.ended) return exitCodes.pending
  return result.run.status === 'succeeded' ? exitCodes.ok : exitCodes.failed
}
