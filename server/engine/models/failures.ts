import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { ProviderError } from '../../domain/models/index.js'

// What a failed model call is, decided here once (issue 43) from what the SDKs and stream.ts throw:
// its kind (domain/models/provider.ts), its status, the provider's retry-after, whether it timed out,
// and whether it is tried again in place (retries.ts). Everything else reads the ProviderError made
// here: the work's hold (domain/models/holds.ts), the throttles (throttles.ts), the metrics.

/** How long calls may take, for the words of a timeout. */
export interface Limits {
  timeoutMs: number
  idleMs: number
}

/** The kind of a provider's answer by its status alone (a status of 2xx is not a failure). */
function kindOfStatus(status: number): 'throttled' | 'refused_key' | 'outage' | 'bad_request' {
  if (status === 429 || status === 529) return 'throttled'
  if (status === 401 || status === 403) return 'refused_key'
  if (status === 408 || status === 409 || status >= 500) return 'outage'
  return 'bad_request'
}

/** What a failed attempt (or a whole call, after its tries in place) is, as the work needs it. */
export function classify(err: unknown, limits: Limits): ProviderError {
  if (err instanceof ProviderError) return err
  const e = err as { name?: string; message?: string }
  if (e?.name === 'APIUserAbortError' || e?.name === 'AbortError')
    return new ProviderError('aborted', 'aborted')
  if (timedOut(err))
    return new ProviderError(
      'outage',
      sdkTimedOut(err)
        ? `the provider did not answer within ${seconds(limits.timeoutMs)}`
        : `the provider sent nothing for ${seconds(limits.idleMs)}`,
      { timedOut: true },
    )
  const status = statusOf(err)
  const detail = (e?.message ?? String(err)).slice(0, 300)
  if (status === undefined)
    return new ProviderError('outage', `the provider did not answer: ${detail}`)
  switch (kindOfStatus(status)) {
    case 'throttled':
      return new ProviderError(
        'throttled',
        `the provider asked for fewer calls (${status}${status === 429 ? ' too many requests' : ' overloaded'})`,
        { status, retryAfterMs: retryAfterOf(err) },
      )
    case 'refused_key':
      return new ProviderError(
        'refused_key',
        `the provider refused the key (${status}): ${detail}`,
        { status },
      )
    case 'outage':
      return new ProviderError('outage', `the provider did not answer (${status}): ${detail}`, {
        status,
      })
    case 'bad_request':
      return new ProviderError(
        'bad_request',
        `the provider refused the request (${status}): ${detail}`,
        { status },
      )
  }
}

/**
 * Whether a failed attempt is a blip tried again in place (retries.ts): an outage that did not time
 * out (a connection refused or reset, 408, 409, a 5xx other than 529). A throttle is waited out off
 * the worker and a timeout by the back-off; `x-should-retry` overrides the status otherwise, as the
 * SDKs read it.
 */
export function retriedInPlace(err: unknown): boolean {
  const status = statusOf(err)
  if (status !== undefined && kindOfStatus(status) === 'throttled') return false
  if (timedOut(err)) return false
  const should = header(err, 'x-should-retry')
  if (should === 'true') return true
  if (should === 'false') return false
  return status === undefined || kindOfStatus(status) === 'outage'
}

/** A failure's status, when the provider answered one. */
export function statusOf(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | undefined)?.status
  return typeof status === 'number' ? status : undefined
}

/** Whether a failure is a call that took longer than it may (the SDK's, or undici's while streaming). */
function timedOut(err: unknown): boolean {
  const e = err as { code?: string } | undefined
  return (
    sdkTimedOut(err) || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT'
  )
}

/** The SDKs' own timeout (the whole call, unstreamed). */
function sdkTimedOut(err: unknown): boolean {
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

/** A header of the failed answer: the SDKs' errors carry a Headers, stream.ts's a plain record. */
function header(err: unknown, name: string): string | undefined {
  const headers = (err as { headers?: unknown } | undefined)?.headers
  if (!headers || typeof headers !== 'object') return undefined
  if (typeof (headers as Headers).get === 'function')
    return (headers as Headers).get(name) ?? undefined
  const value = (headers as Record<string, string | string[] | undefined>)[name]
  return Array.isArray(value) ? value[0] : value
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`
