import { setTimeout as sleep } from 'node:timers/promises'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'

// The one place a failed model call is tried again in place, streamed or not (issue 34): the SDKs are
// made with no retries of their own, so that what a provider's refusal means is decided here once.
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

/** A failure's status, when the provider answered one. */
export function statusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | undefined)?.status
  return typeof status === 'number' ? status : undefined
}

/** Whether a failure is a call that took longer than it may (the SDK's, or undici's while streaming). */
export function timedOut(err: unknown): boolean {
  const e = err as { code?: string } | undefined
  return (
    sdkTimedOut(err) || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT'
  )
}

/** The SDKs' own timeout (the whole call, unstreamed). */
export function sdkTimedOut(err: unknown): boolean {
  return (
    err instanceof OpenAI.APIConnectionTimeoutError ||
    err instanceof Anthropic.APIConnectionTimeoutError
  )
}

/** The provider's retry-after, in milliseconds: `retry-after-ms`, else `retry-after` (seconds or a date). */
export function retryAfterOf(err: unknown): number | undefined {
  const ms = Number(header(err, 'retry-after-ms'))
  if (header(err, 'retry-after-ms') !== undefined && Number.isFinite(ms) && ms >= 0) return ms
  const after = header(err, 'retry-after')
  if (after === undefined) return undefined
  const seconds = Number(after)
  if (after.trim() !== '' && Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
  const at = Date.parse(after)
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined
}

function retriedInPlace(err: unknown): boolean {
  const status = statusOf(err)
  if (status === 429 || status === 529) return false
  const should = header(err, 'x-should-retry')
  if (should === 'true') return true
  if (should === 'false') return false
  if (status === undefined) return !timedOut(err)
  return status === 408 || status === 409 || status >= 500
}

function waitBefore(tried: number, err: unknown): number {
  const asked = retryAfterOf(err)
  if (asked !== undefined && asked < 60_000) return asked
  return Math.min(500 * 2 ** (tried - 1), 8_000) * (1 - Math.random() * 0.25)
}

/** A header of the failed answer: the SDKs' errors carry a Headers, stream.ts's a plain record. */
function header(err: unknown, name: string): string | undefined {
  const headers = (err as { headers?: unknown } | undefined)?.headers
  if (!headers || typeof headers !== 'object') return undefined
  if (typeof (headers as Headers).get === 'function')
    return (headers as Headers).get(name) ?? undefined
  const value = (headers as Record<string, string | string[] | undefined>)[name]
  return Array.isArray(value) ? value[0] : value
}
