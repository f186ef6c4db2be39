import { ApiError } from '../../../shared/errors.js'
import { EventTypes, type FeedEvent, type FeedPage } from '../../../shared/schemas/events.js'
import type { Db } from '../../db/sql.js'
import { feedFilter, feedHead, readFeed, type FeedFilter } from './feed.js'
import { longPollMs } from '../long-poll/index.js'

// GET /v1/events (issue 47; DESIGN 15): the feed as a stream (text/event-stream) or as pages, for one
// enterprise and what its reader may read. The stream is the chats' (DESIGN 13) made simple: no deltas,
// only what the table holds: the SSE id is the position, so Last-Event-ID (or after=) resumes with
// nothing missed and nothing repeated, across a restart and across processes. Woken by the feed's
// NOTIFY (a hint: the table is the record), with a ping every 15 s on a quiet stream.

export type FeedStreamEvent = { event: string; data: FeedEvent; id: string } | { comment: string }

export interface FollowFeed {
  /** Waits for the enterprise's feed to move: ready resolves then, after `ms`, or when the stream ends. */
  subscribe(ms: number): { ready: Promise<void>; cancel(): void }
  /** Ends the stream: the client went away, or the daemon stops. */
  signal: AbortSignal
  /** How long a quiet stream waits before a ping (15 s unless told). */
  pingMs?: number
}

/** The most events one read takes (as the chats' stream): the next read takes the rest at once. */
const readLimit = 200

/** As FeedQuery reads it (numbers in their bounds, 400 otherwise), and the Last-Event-ID header. */
export interface FeedRequest {
  /** The query's after=, and the Last-Event-ID header (which wins). */
  after?: number
  lastEventId?: string
  limit?: number
  types?: string
  waitSeconds?: number
}

/** A position a client sends (after=, Last-Event-ID): a whole number from 0; 400 otherwise. */
function position(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value.trim() === '') return undefined
  const n = Number(value.trim())
  if (!Number.isSafeInteger(n) || n < 0)
    throw new ApiError(
      'invalid_request',
      `${name}: a position (a whole number from 0); got "${value}".`,
      {
        issues: [{ field: name, message: 'a position: a whole number from 0' }],
      },
    )
  return n
}

/** The types filter: comma-separated exact types, families (run.*) or *; 400 for anything else. */
function typesOf(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined
  const types = value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
  const parsed = EventTypes.safeParse(types)
  if (!parsed.success)
    throw new ApiError(
      'invalid_request',
      `types: comma-separated types (gate.waiting), families (run.*) or *, at most 50; got "${value}".`,
      { issues: [{ field: 'types', message: 'types (gate.waiting), families (run.*) or *' }] },
    )
  return parsed.data
}

/** Where a reader starts and what it sees: refused (400, 403) before anything is sent. */
export function feedRequest(
  scopes: ReadonlySet<string>,
  request: FeedRequest,
): { after: number | undefined; filter: FeedFilter } {
  const after = position('Last-Event-ID', request.lastEventId) ?? request.after
  return { after, filter: feedFilter(scopes, typesOf(request.types)) }
}

/**
 * A page of the feed (JSON, for clients that poll): the events after `after` (0 unless given), at most
 * `limit` (1..200, 100 unless given); with waitSeconds (at most 30) and nothing there yet, held until
 * the next event or that time.
 */
export async function feedPage(
  db: Db,
  enterpriseId: string,
  scopes: ReadonlySet<string>,
  request: FeedRequest,
  follow: Pick<FollowFeed, 'subscribe' | 'signal'>,
): Promise<FeedPage> {
  const { after = 0, filter } = feedRequest(scopes, request)
  const limit = request.limit ?? 100
  const waitMs = longPollMs(request.waitSeconds)
  const deadline = Date.now() + waitMs
  for (;;) {
    // The wait starts before the read it guards, so an event landing in between is not missed.
    const watch = waitMs > 0 ? follow.subscribe(Math.max(0, deadline - Date.now())) : undefined
    const read = await readFeed(db, enterpriseId, after, filter, limit)
    const events = read.reset ? [read.reset, ...read.events] : read.events
    if (events.length > 0 || !watch || Date.now() >= deadline || follow.signal.aborted) {
      watch?.cancel()
      return { data: events, next: read.next, more: read.more }
    }
    await watch.ready
    watch.cancel()
  }
}

/**
 * Opens the stream: refused now (400, 403), before anything is sent; then the events from the
 * client's position (Last-Event-ID, else after=, else now), until `follow.signal` aborts.
 */
export async function openFeedStream(
  db: Db,
  enterpriseId: string,
  scopes: ReadonlySet<string>,
  request: FeedRequest,
  follow: FollowFeed,
): Promise<AsyncGenerator<FeedStreamEvent>> {
  const { after, filter } = feedRequest(scopes, request)
  const start = after ?? (await feedHead(db, enterpriseId))
  return stream(db, enterpriseId, start, filter, follow)
}

async function* stream(
  db: Db,
  enterpriseId: string,
  start: number,
  filter: FeedFilter,
  follow: FollowFeed,
): AsyncGenerator<FeedStreamEvent> {
  const pingMs = follow.pingMs ?? 15_000
  let cursor = start
  let lastSent = Date.now()
  for (;;) {
    const watch = follow.subscribe(pingMs)
    const read = await readFeed(db, enterpriseId, cursor, filter, readLimit)
    for (const event of read.reset ? [read.reset, ...read.events] : read.events) {
      yield { event: event.type, data: event, id: String(event.position) }
      lastSent = Date.now()
    }
    cursor = read.next
    if (follow.signal.aborted) {
      watch.cancel()
      return
    }
    if (read.more) {
      watch.cancel()
      continue
    }
    await watch.ready
    watch.cancel()
    if (follow.signal.aborted) return
    if (Date.now() - lastSent >= pingMs - 50) {
      yield { comment: 'ping' }
      lastSent = Date.now()
    }
  }
}
