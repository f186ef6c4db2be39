import type { ServerResponse } from 'node:http'
import type { Context } from 'hono'

// Server-Sent Events (text/event-stream) from an async iterable of events: each `event:` and one
// `data:` line of JSON (with `id:` when the event has one), a comment as `: text`. The iterable ends
// the stream; a client that goes away aborts `controller`, so that whatever the iterable waits on ends
// too. Served by @hono/node-server, the frames are written to Node's response itself: a stream of many
// small frames (a reply's deltas) costs a fraction of the CPU it does through a web ReadableStream.

export type SseEvent = { event: string; data: unknown; id?: string } | { comment: string }

const headers = {
  'content-type': 'text/event-stream; charset=utf-8',
  // Written to node's response before the middleware sees it: what headers.ts and auth.ts add to every
  // answer, here too (issue 44).
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  connection: 'keep-alive',
  // Proxies that buffer (nginx) pass the stream on as it comes.
  'x-accel-buffering': 'no',
}

export function sseFrame(item: SseEvent): string {
  if ('comment' in item) return `: ${item.comment}\n\n`
  return `event: ${item.event}\ndata: ${JSON.stringify(item.data)}\n${item.id ? `id: ${item.id}\n` : ''}\n`
}

/** The answer streaming `events`; `controller` is aborted when the client goes away. */
export function sseAnswer(
  c: Context,
  events: AsyncGenerator<SseEvent>,
  controller: AbortController,
): Response {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing
  if (!outgoing) return sseResponse(events, controller)
  // Sent now, not with the first frame: a quiet stream (the feed with nothing new) is seen open at
  // once rather than at its first ping, 15 s on.
  outgoing.writeHead(200, headers).flushHeaders()
  outgoing.on('close', () => controller.abort())
  void (async () => {
    try {
      for await (const item of events) {
        if (outgoing.destroyed) break
        if (!outgoing.write(sseFrame(item))) await drainedOrClosed(outgoing)
      }
    } catch {
      // The stream ends: the client reconnects with its Last-Event-ID.
    } finally {
      outgoing.end()
    }
  })()
  // What tells @hono/node-server the answer is written already. Made here, with the Response of the
  // moment (the server's own once it serves), rather than its RESPONSE_ALREADY_SENT, made at import with
  // the global one, which the router would not take for a Response.
  return new Response(null, { headers: { 'x-hono-already-sent': 'true' } })
}

/**
 * Until the answer drains, closes or fails, each listener removed once one came: a race of once()s left
 * the loser's listeners on the answer, two more at each wait, for as long as a stream to a slow reader
 * lasted.
 */
function drainedOrClosed(outgoing: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      outgoing.off('drain', done)
      outgoing.off('close', done)
      outgoing.off('error', done)
      resolve()
    }
    outgoing.once('drain', done)
    outgoing.once('close', done)
    outgoing.once('error', done)
  })
}

const encoder = new TextEncoder()

/** The same through a web ReadableStream: for the app served otherwise (tests' app.request). */
function sseResponse(events: AsyncGenerator<SseEvent>, controller: AbortController): Response {
  const body = new ReadableStream<Uint8Array>({
    async pull(stream) {
      try {
        const next = await events.next()
        if (next.done) stream.close()
        else stream.enqueue(encoder.encode(sseFrame(next.value)))
      } catch (err) {
        stream.error(err)
      }
    },
    async cancel() {
      controller.abort()
      await events.return(undefined)
    },
  })
  return new Response(body, { status: 200, headers })
}

/** The streams open, by the signal that ends them all (the daemon's shutdown): see streamController. */
const openStreams = new WeakMap<AbortSignal, Set<AbortController>>()

/**
 * A stream's own controller, aborted when its client goes away (sseAnswer) and when `shutdown` aborts;
 * `done` forgets it, once the stream has ended however it ended. One listener on `shutdown` however
 * many streams are open, as ChangeWatch does. Not AbortSignal.any([own, shutdown]): Node 20 keeps a
 * reference to each such signal on the shutdown's for good, and the whole signal while a listener is
 * on it (a wait's, for a page never aborted), so a daemon up for months grew with every stream and
 * every page of the event feed.
 */
function streamController(shutdown: AbortSignal | undefined): {
  controller: AbortController
  done: () => void
} {
  const controller = new AbortController()
  if (!shutdown) return { controller, done: () => undefined }
  if (shutdown.aborted) {
    controller.abort(shutdown.reason)
    return { controller, done: () => undefined }
  }
  let open = openStreams.get(shutdown)
  if (!open) {
    const streams = (open = new Set())
    openStreams.set(shutdown, streams)
    shutdown.addEventListener(
      'abort',
      () => {
        for (const stream of streams) stream.abort(shutdown.reason)
      },
      { once: true },
    )
  }
  const streams = open
  streams.add(controller)
  return { controller, done: () => streams.delete(controller) }
}

/** The stream's events, `done` called when it ends however it ends (a slot of limits.ts given back). */
async function* counted<T>(events: AsyncGenerator<T>, done: () => void): AsyncGenerator<T> {
  try {
    yield* events
  } finally {
    done()
  }
}

/**
 * A stream of the caller's (the event feed's, a chat's): its controller (streamController, aborted when
 * the client goes away or the daemon stops), its place among the caller's streams (`take`: limits.ts
 * openStream, 429 too_many_streams when there is none), and its events as `open` makes them with the
 * stream's signal. The place and the controller are given back when the stream ends however it ends:
 * the client gone, the daemon stopping, the events ending, or the stream refused before it starts.
 */
export async function openSse(
  c: Context,
  shutdown: AbortSignal | undefined,
  take: (end: () => void) => () => void,
  open: (signal: AbortSignal) => Promise<AsyncGenerator<SseEvent>>,
): Promise<Response> {
  const { controller, done } = streamController(shutdown)
  let release: () => void = () => undefined
  const ended = () => {
    release()
    done()
  }
  controller.signal.addEventListener('abort', ended, { once: true })
  try {
    release = take(() => controller.abort())
    return sseAnswer(c, counted(await open(controller.signal), ended), controller)
  } catch (err) {
    ended()
    throw err
  }
}
