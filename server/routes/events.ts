import { FeedPage, FeedQuery } from '../../shared/schemas/events.js'
import { feedChannel, feedPage, openFeedStream } from '../domain/events/index.js'
import { ChangeWatch } from '../db/change-watch.js'
import type { RouteDeps } from '../http/context.js'
import { longPollBound } from '../http/limits.js'
import { requestHeader } from '../http/headers.js'
import { createRouter, route } from '../http/router.js'
import { openSse } from '../http/sse.js'

// GET /v1/events (issue 47; DESIGN 15; docs/events.md): the enterprise's one ordered feed, as a stream
// of server-sent events or as pages. Scope: events:read by the path rule, and then only the types of
// the resources the token may read (runs:read for run.*, gates:read for gate.*, ...).

/** Mounted at /v1/events. */
export function eventRoutes({ sql, log, shutdown, limits }: RouteDeps) {
  const app = createRouter()
  // Readers of this process wait for the feed's NOTIFY, one LISTEN however many read.
  const feedWatch = new ChangeWatch(feedChannel)
  feedWatch.follow(sql, (err) => log.error({ err }, 'cannot follow the event feed'))

  route(
    app,
    {
      operationId: 'readEvents',
      method: 'get',
      path: '/',
      summary:
        "The enterprise's events in order: a stream (Accept: text/event-stream) or a page (JSON)",
      description: [
        'Every event osd records (runs, gates, executions, chats, recommendations, memory review) has a position in one feed per enterprise: positions only grow, one by one, and what is read after a position is never missed nor repeated, across restarts and processes. A token sees the types of the resources it may read (runs:read for run.*, model.*, tool.*; gates:read for gate.*; executions:read, chats:read, recommendations:read, memory:read), besides events:read; a types filter naming a family it may not read is 403 api_token_scope.',
        'With Accept: text/event-stream, a stream: each event as `event: <type>`, `id: <position>`, `data: <FeedEvent>`; from Last-Event-ID (or after=), else from now; a `: ping` comment every 15 s; it ends when the daemon stops, or when its token or session stops or changes (revoked, changed, rotated, expired, its person removed: the next request would be refused or see other scopes); reconnect with Last-Event-ID. A token (or session) holds at most OSD_MAX_STREAMS_PER_TOKEN (50) streams open at once in a process, these and the event streams of chats together: one more is 429 too_many_streams. Otherwise a page: the events after after= (default 0), `next` to ask after next time, `more` when more are there already; waitSeconds holds an empty page until the next event. ' +
          longPollBound,
        'The feed keeps 7 days (unless the operator set OSD_FEED_KEEP_HOURS): a reader asking from before its first kept position (or past its newest) first gets a `feed.reset` event whose position is where it reads on from, and whose payload says the first position kept.',
      ].join('\n\n'),
      query: FeedQuery,
      response: FeedPage,
      rawResponse: 'text/event-stream',
      errors: ['too_many_streams'],
    },
    async (c, { query }) => {
      const caller = c.var.caller
      const request = { ...query, lastEventId: requestHeader(c, 'last-event-id') }
      const accept = requestHeader(c, 'accept') ?? ''
      if (!accept.includes('text/event-stream')) {
        // A page's wait ends at its next event, its time, or the daemon's stop.
        const signal = shutdown ?? new AbortController().signal
        const follow = {
          subscribe: (ms: number) => feedWatch.subscribe(caller.enterpriseId, ms, signal),
          signal,
        }
        // Held within the caller's share of long-polls (limits.ts), else answered at once.
        return limits.longPoll(c, request.waitSeconds, (waitSeconds) =>
          feedPage(sql, caller.enterpriseId, caller.scopes, { ...request, waitSeconds }, follow),
        )
      }
      // Ends when the client goes away (the stream is cancelled) or the daemon stops. One of the
      // caller's streams, of every kind (limits.ts openStream): 429 too_many_streams.
      return openSse(
        c,
        shutdown,
        (end) => limits.openStream(c, end),
        (signal) =>
          openFeedStream(sql, caller.enterpriseId, caller.scopes, request, {
            subscribe: (ms: number) => feedWatch.subscribe(caller.enterpriseId, ms, signal),
            signal,
          }),
      )
    },
  )
  return app
}
