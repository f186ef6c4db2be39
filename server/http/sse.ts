// Server-Sent Events (text/event-stream) from an async iterable of events: each `event:` and one
// `data:` line of JSON (with `id:` when the event has one), a comment as `: text`. The iterable ends
// the stream; a client that goes away cancels it, which aborts `controller` so that whatever the
// iterable waits on ends too.

export type SseEvent = { event: string; data: unknown; id?: string } | { comment: string }

const encoder = new TextEncoder()

export function sseFrame(item: SseEvent): string {
  if ('comment' in item) return `: ${item.comment}\n\n`
  return `event: ${item.event}\ndata: ${JSON.stringify(item.data)}\n${item.id ? `id: ${item.id}\n` : ''}\n`
}

/** The answer streaming `events`; `controller` is aborted when the client goes away. */
export function sseResponse(events: AsyncGenerator<SseEvent>, controller: AbortController): Response {
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
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      // Proxies that buffer (nginx) pass the stream on as it comes.
      'x-accel-buffering': 'no',
    },
  })
}
