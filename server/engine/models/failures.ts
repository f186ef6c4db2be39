import type { Provider } from '../../../shared/schemas/models.js'
import { ProviderError } from '../../domain/models/index.js'
import { shorten } from '../../../shared/text.js'

// What a failed model call is, decided here once (issue 43) from what the SDKs and stream.ts throw:
// its kind (domain/models/provider.ts), its status, the provider's retry-after, whether it timed out,
// and whether it is tried again in place (retries.ts). Everything else reads the ProviderError made
// here: the work's hold (domain/models/holds.ts), the throttles (throttles.ts), the metrics.

/** The provider a call went to: where, for the words of a failure to connect; how long it may take. */
export interface Wire {
  provider: Provider
  baseUrl: string
  timeoutMs: number
  idleMs: number
}

/** The setting that moves a provider's address (config.ts). */
export function addressSetting(provider: Provider): string {
  return provider === 'provider_a' ? 'OSD_PROVIDER_A_BASE_URL' : 'OSD_PROVIDER_B_BASE_URL'
}

/** What the system said of a connection that could not be made, in the words an operator reads. */
const connectWords: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the name could not be resolved now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'the connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  CERT_HAS_EXPIRED: "the server's certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the server's certificate is self-signed",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the server's certificate could not be verified",
}

/** The code of a failure to connect, however deep the SDK or fetch wrapped it. */
function connectCode(err: unknown): string | undefined {
  for (
    let e = err as { code?: unknown; cause?: unknown; errors?: unknown[] } | undefined, depth = 0;
    e && depth < 6;
    depth++
  ) {
    if (typeof e.code === 'string' && e.code in connectWords) return e.code
    const inner = Array.isArray(e.errors) ? e.errors[0] : undefined
    e = (e.cause ?? inner) as typeof e
  }
  return undefined
}

/** host:port of a base URL, the port said even when it is the scheme's. */
function hostPort(baseUrl: string): string {
  try {
    const url = new URL(baseUrl)
    return `${url.hostname}:${url.port || (url.protocol === 'http:' ? '80' : '443')}`
  } catch {
    return baseUrl
  }
}

/** The kind of a provider's answer by its status alone (a status of 2xx is not a failure). */
function kindOfStatus(status: number): 'throttled' | 'refused_key' | 'outage' | 'bad_request' {
  if (status === 429 || status === 529) return 'throttled'
  if (status === 401 || status === 403) return 'refused_key'
  if (status === 408 || status === 409 || status >= 500) return 'outage'
  return 'bad_request'
}

/** What a failed attempt (or a whole call, after its tries in place) is, as the work needs it. */
export function classify(err: unknown, wire: Wire): ProviderError {
  if (err instanceof ProviderError) return err
  const e = err as { name?: string; message?: string }
  if (e?.name === 'APIUserAbortError' || e?.name === 'AbortError')
    return new ProviderError('aborted', 'aborted')
  if (timedOut(err))
    return new ProviderError(
      'outage',
      sdkTimedOut(err)
        ? `the provider did not answer within ${seconds(wire.timeoutMs)}`
        : `the provider sent nothing for ${seconds(wire.idleMs)}`,
      { timedOut: true },
    )
  const status = statusOf(err)
  const detail = shorten(e?.message ?? String(err), 300)
  if (status === undefined) {
    // Named with the address and the setting that moves it (issue 51): a local server not started
    // and a mistyped address are the operator's to mend.
    const code = connectCode(err)
    return code
      ? new ProviderError(
          'outage',
          `could not connect to ${hostPort(wire.baseUrl)} (${wire.provider}, ${addressSetting(wire.provider)}): ${connectWords[code]}`,
          { unreachable: true },
        )
      : new ProviderError('outage', `the provider did not answer: ${detail}`)
  }
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

/**
 * The SDKs' timeout errors, of those loaded so far: each wire format imports its SDK at its first call
 * (the two are most of what osd loads at start), and only a loaded SDK can throw one.
 */
const sdkTimeouts: (abstract new (...args: never[]) => Error)[] = []

/** Called by a wire format as its SDK loads: failures of that SDK's own timeout are then known. */
export function knowTimeoutsOf(timeoutError: abstract new (...args: never[]) => Error): void {
  if (!sdkTimeouts.includes(timeoutError)) sdkTimeouts.push(timeoutError)
}

/** The SDKs' own timeout (the whole call, unstreamed). */
function sdkTimedOut(err: unknown): boolean {
  return sdkTimeouts.some((timeoutError) => err instanceof timeoutError)
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
