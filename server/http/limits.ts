import type { Context } from 'hono'
import type { IncomingMessage } from 'node:http'
import type { BlockList } from 'node:net'
import { ApiError, type ErrorCode } from '../../shared/errors.js'
import type { Config } from '../config.js'
import { NotifiedCache } from '../db/notified-cache.js'
import type { Sql } from '../db/sql.js'
import { sessionChangedChannel, tokenChangedChannel } from '../domain/people/index.js'
import { hashSecret } from '../domain/secrets.js'
import type { Logger } from '../log.js'
import { addressKey, clientAddress, networks } from './addresses.js'
import type { Caller } from './caller.js'
import type { AppEnv } from './env.js'
import { requestHeader } from './headers.js'

// What one caller can make osd spend (issue 44; DESIGN 15): a token bucket per token or session, one per
// client address on the routes that take no token, and a bounded memory of secrets that named nobody,
// so that a wrong token costs a database look-up once. Counted in this process only: with several osd
// processes behind a balancer, a caller gets each process's rate (docs/configuration.md).

/**
 * A bucket per key: `perMinute` a minute, of which a whole minute's worth may be spent at once.
 * Measured by the monotonic clock: by the wall clock, one stepped back (NTP, a VM restored) emptied
 * every bucket in use by the length of the step, and refused their callers for as long.
 */
export class RateLimiter {
  private buckets = new Map<string, { tokens: number; at: number }>()
  private readonly perMs: number
  /** The policy, as RateLimit-Policy says it (IETF draft-ietf-httpapi-ratelimit-headers). */
  readonly policy: string

  constructor(
    readonly name: string,
    readonly perMinute: number,
    private readonly maxKeys = 100_000,
    private readonly windowSeconds = 60,
  ) {
    this.perMs = perMinute / (windowSeconds * 1000)
    this.policy = `"${name}";q=${perMinute};w=${windowSeconds}`
  }

  /**
   * Takes one request from `key`'s bucket: the remaining count and the seconds until the bucket is
   * full again, and `retryAfter` (seconds) when it was empty, nothing taken.
   */
  take(
    key: string,
    now = performance.now(),
  ): { remaining: number; reset: number; retryAfter?: number } {
    let bucket = this.buckets.get(key)
    if (bucket === undefined) {
      if (this.buckets.size >= this.maxKeys) this.sweep(now)
      bucket = { tokens: this.perMinute, at: now }
      this.buckets.set(key, bucket)
    } else {
      bucket.tokens = Math.min(this.perMinute, bucket.tokens + (now - bucket.at) * this.perMs)
      bucket.at = now
    }
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000))
      return { remaining: 0, reset: retryAfter, retryAfter }
    }
    bucket.tokens -= 1
    const reset = Math.ceil((this.perMinute - bucket.tokens) / this.perMs / 1000)
    return { remaining: Math.floor(bucket.tokens), reset }
  }

  /**
   * Room for new keys: a bucket full by now holds nothing a new one would not, so those go first;
   * should every key be in use (a flood of addresses), the oldest tenth.
   */
  private sweep(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + (now - bucket.at) * this.perMs >= this.perMinute) this.buckets.delete(key)
    }
    if (this.buckets.size < this.maxKeys) return
    let drop = Math.ceil(this.maxKeys / 10)
    for (const key of this.buckets.keys()) {
      if (drop-- <= 0) break
      this.buckets.delete(key)
    }
  }

  /** Seconds until `key` may spend again, when its bucket is empty; nothing is taken. */
  emptyFor(key: string, now = performance.now()): number | undefined {
    const bucket = this.buckets.get(key)
    if (!bucket) return undefined
    const tokens = Math.min(this.perMinute, bucket.tokens + (now - bucket.at) * this.perMs)
    return tokens < 1 ? Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000)) : undefined
  }

  get size(): number {
    return this.buckets.size
  }
}

/**
 * Consent requests an address may make (issue 44): 20 in 15 minutes, so that one address cannot come
 * near the global cap of pending requests (domain/people/consent.ts: 1,000).
 */
export const consentPerAddress = { requests: 20, minutes: 15 } as const

/** Paths of no credential that are not counted per address: the health checks a balancer polls. */
const uncounted = ['/v1/health']

export interface Limits {
  /** The client's address (the socket's, or X-Forwarded-For's from a trusted proxy). */
  clientOf(c: Context<AppEnv>): string
  /**
   * What the client is counted under: its address, an IPv6 one by its /64 (addressKey). What sign-ins
   * are counted and queued by, so that one host cannot take a fresh address of its block for each try.
   */
  clientKeyOf(c: Context<AppEnv>): string
  /** A call to a route that takes no token: counted under its address; 429 rate_limited when over. */
  publicCall(c: Context<AppEnv>): void
  /**
   * What `cache` holds for `secret`, else what `load` finds by its hash. A secret that found nobody is
   * refused from then on without a look-up; a look-up is counted under the caller's address.
   */
  lookUp<V>(
    c: Context<AppEnv>,
    secret: string,
    cache: NotifiedCache<V>,
    load: (hash: Buffer) => Promise<V | undefined>,
    /** Until when a value found may be kept (a token's expiry): NotifiedCache.through. */
    until?: (value: V) => number | null,
  ): Promise<V | undefined>
  /** A request of a known caller (`key`: its token or session): 429 rate_limited when over its rate. */
  spend(c: Context<AppEnv>, key: string): void
  /** A consent request from the caller's address: 429 too_many_consent_requests past its share. */
  consentRequest(c: Context<AppEnv>): void
  /**
   * An event stream the caller's token or session opens (the event feed, a chat's events): 429
   * too_many_streams when it holds OSD_MAX_STREAMS_PER_TOKEN open already. `end` ends the stream: it is
   * called when its credential stops signing in (a token revoked, changed or rotated, or past its
   * expiry or grace; a session ended, moved, or its person's membership changed), as the next request
   * would be refused; the client reconnects with its credential as it is now. The answer gives the slot
   * back; call it once the stream ends however it ends (more calls do nothing).
   */
  openStream(c: Context<AppEnv>, end: () => void): () => void
  /**
   * A long-poll of the caller's (`waitSeconds`: a run's events, a chat's messages, a page of the event
   * feed): `answer` is given the waitSeconds it may hold for. A token or session holds at most
   * OSD_MAX_STREAMS_PER_TOKEN long-polls at once, counted apart from its streams; past them the
   * long-poll answers at once, as with waitSeconds=0, so no client is refused and none holds more.
   */
  longPoll<T>(
    c: Context<AppEnv>,
    waitSeconds: number | undefined,
    answer: (waitSeconds: number | undefined) => Promise<T>,
  ): Promise<T>
}

/** What the long-polls' descriptions say of their bound (Limits.longPoll). */
export const longPollBound =
  'A token (or session) holds at most OSD_MAX_STREAMS_PER_TOKEN (50) long-polls at once in a process, those of runs, chats and event pages together (its streams apart): past them a long-poll answers at once, as with waitSeconds=0.'

/** An open event stream: what ends it, and the person whose session holds it. */
interface OpenStream {
  end: () => void
  userId?: string
}

/** The longest delay setTimeout keeps (a longer one fires at once). */
const maxTimerMs = 2 ** 31 - 1

/** The limits of one app (createApp makes them once): each counts in this process. */
export function createLimits(
  sql: Sql,
  config: Pick<Config, 'rateLimits' | 'maxStreamsPerToken'>,
  log: Pick<Logger, 'error'>,
): Limits {
  const { perMinute, ipPerMinute, trustedProxies } = config.rateLimits
  const callers = perMinute === undefined ? undefined : new RateLimiter('caller', perMinute)
  const addresses = ipPerMinute === undefined ? undefined : new RateLimiter('address', ipPerMinute)
  const consent = new RateLimiter(
    'consent',
    consentPerAddress.requests,
    100_000,
    consentPerAddress.minutes * 60,
  )
  const trusted = trustedProxies.length ? networks(trustedProxies) : undefined
  // Event streams open per token or session, every kind together: a holder cannot pin connections,
  // LISTEN wake-ups and readers without end, whichever streams it opens. A stream outlives no change of
  // its credential (issue 45): each is ended when its token or session changes, as announced, and a
  // token's at the end of its expiry or grace.
  const streams = new Map<string, Set<OpenStream>>()
  // Long-polls held per token or session: each holds a request, a socket and a wake-up listener for up
  // to 30 s, which the rate alone would let one holder pile up by the thousand.
  const heldPolls = new Map<string, number>()
  const endStreams = (holder: string) => {
    for (const stream of streams.get(holder) ?? []) stream.end()
  }
  const endEveryStream = () => {
    for (const holder of streams.keys()) endStreams(holder)
  }
  // Hashes of secrets that named no caller. A token or session secret is random and new when made, so
  // one that named nobody cannot name anyone later; the entries are dropped anyway whenever a token
  // changes (tokenChangedChannel; a token whose expiry moves), and after ten minutes (a database put
  // back from a backup).
  // Not emptied when the listener (re)connects, as the caches of callers are: a change missed meanwhile
  // is bounded by the ten minutes.
  const unknown = new NotifiedCache<true>(tokenChangedChannel, () => true, 10 * 60_000, 10_000)
  // A change missed while the listener was away could be one that ends a stream: each (re)connect
  // ends them all (there are none at the first), and their clients open them again.
  sql
    .listen(
      tokenChangedChannel,
      (tokenId) => {
        unknown.clear()
        endStreams(`token:${tokenId}`)
      },
      endEveryStream,
    )
    .catch((err: unknown) => log.error({ err }, 'cannot follow token changes'))
  // The payload names a session, or a person (all their sessions).
  sql
    .listen(
      sessionChangedChannel,
      (id) => {
        endStreams(`session:${id}`)
        for (const [holder, open] of streams) {
          if (!holder.startsWith('session:')) continue
          for (const stream of open) if (stream.userId === id) stream.end()
        }
      },
      endEveryStream,
    )
    .catch((err: unknown) => log.error({ err }, 'cannot follow session changes'))

  function clientOf(c: Context<AppEnv>): string {
    const known = c.get('clientAddress')
    if (known !== undefined) return known
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming
    const address = clientAddress(
      // app.request (the tests) has no socket: every such call is one client.
      incoming?.socket.remoteAddress ?? 'local',
      trusted && requestHeader(c, 'x-forwarded-for'),
      trusted,
    )
    c.set('clientAddress', address)
    return address
  }

  function charge(c: Context<AppEnv>, limiter: RateLimiter, key: string, code: ErrorCode) {
    const taken = limiter.take(key)
    c.header('RateLimit-Policy', limiter.policy)
    c.header('RateLimit', `"${limiter.name}";r=${taken.remaining};t=${taken.reset}`)
    if (taken.retryAfter !== undefined) throw refusal(code, limiter, taken.retryAfter)
  }

  return {
    clientOf,
    clientKeyOf: (c) => addressKey(clientOf(c)),
    publicCall(c) {
      if (!addresses || uncounted.some((prefix) => c.req.path.startsWith(prefix))) return
      charge(c, addresses, addressKey(clientOf(c)), 'rate_limited')
    },
    async lookUp(c, secret, cache, load, until) {
      const cached = cache.get(secret)
      if (cached !== undefined) return cached
      const hash = hashSecret(secret)
      const key = hash.toString('base64')
      if (unknown.get(key)) return undefined
      // A look-up that finds nobody is counted against the address; an address past its rate is
      // refused before any more (a token of a caller behind it is too, until this process knows it).
      const address = addresses && addressKey(clientOf(c))
      const wait = address === undefined ? undefined : addresses!.emptyFor(address)
      if (wait !== undefined) {
        c.header('RateLimit-Policy', addresses!.policy)
        c.header('RateLimit', `"${addresses!.name}";r=0;t=${wait}`)
        throw refusal('rate_limited', addresses!, wait)
      }
      const found = await cache.through(secret, () => load(hash), until)
      if (found === undefined) {
        unknown.set(key, true)
        if (address !== undefined) charge(c, addresses!, address, 'rate_limited')
      }
      return found
    },
    spend(c, key) {
      if (callers) charge(c, callers, key, 'rate_limited')
    },
    consentRequest(c) {
      charge(c, consent, addressKey(clientOf(c)), 'too_many_consent_requests')
    },
    openStream(c, end) {
      const caller = c.var.caller
      const holder = holderOf(caller)
      const open = streams.get(holder) ?? new Set<OpenStream>()
      const held = open.size
      if (held >= config.maxStreamsPerToken)
        throw new ApiError(
          'too_many_streams',
          `This credential holds ${held} event streams open already, the most it may (OSD_MAX_STREAMS_PER_TOKEN): close one, or read pages.`,
          { retryAfterSeconds: 5 },
        )
      const stream: OpenStream = {
        end,
        userId: caller.kind === 'session' ? caller.userId : undefined,
      }
      open.add(stream)
      streams.set(holder, open)
      // Until when the credential signs in: a token's expiry or the end of its grace.
      const until = caller.kind === 'token' ? caller.validUntil : c.var.session?.validUntil
      let timer: NodeJS.Timeout | undefined
      const schedule = () => {
        const left = until! - Date.now()
        timer = setTimeout(left > maxTimerMs ? schedule : end, Math.min(left, maxTimerMs))
        timer.unref()
      }
      if (until !== undefined && until !== null) schedule()
      let released = false
      return () => {
        if (released) return
        released = true
        clearTimeout(timer)
        open.delete(stream)
        if (open.size === 0 && streams.get(holder) === open) streams.delete(holder)
      }
    },
    async longPoll(c, waitSeconds, answer) {
      if (!waitSeconds) return answer(waitSeconds)
      const holder = holderOf(c.var.caller)
      const held = heldPolls.get(holder) ?? 0
      if (held >= config.maxStreamsPerToken) return answer(0)
      heldPolls.set(holder, held + 1)
      try {
        return await answer(waitSeconds)
      } finally {
        const left = heldPolls.get(holder)! - 1
        if (left === 0) heldPolls.delete(holder)
        else heldPolls.set(holder, left)
      }
    },
  }
}

/** What a caller's streams and long-polls are counted under: its token, or its session. */
function holderOf(caller: Caller): string {
  return caller.kind === 'token' ? `token:${caller.tokenId}` : `session:${caller.sessionId}`
}

function refusal(code: ErrorCode, limiter: RateLimiter, retryAfter: number): ApiError {
  const message =
    code === 'rate_limited'
      ? `More than ${limiter.perMinute} requests a minute; try again in ${retryAfter} seconds.`
      : `Too many consent requests from this address; try again in ${retryAfter} seconds.`
  return new ApiError(code, message, { retryAfterSeconds: retryAfter })
}
