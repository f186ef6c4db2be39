import type { Readable } from 'node:stream'
import type { request } from 'undici'
import { firstBytes } from '../../egress.js'

// A streamed model call over HTTP, for both wire formats (providers.ts): the request is POSTed with
// undici's request() and its server-sent events are handed on as they come. The SDKs make unstreamed
// calls; a streamed one through them reads the answer as a web stream through several async iterators,
// which for a chat reply of 200 tokens cost the daemon more than the rest of the reply (issue 26,
// npm run bench:chat). One attempt: a failed one is tried again, or not, by retries.ts, as an SDK's
// is; its status, message and headers are what the caller classifies.

/**
 * What osd reads of a refusal's body (its words end in failures.ts's message, cut to 300 characters),
 * and the largest event of an answer it holds: a provider's events are deltas of a few hundred bytes.
 * Past either, a server that sends without end (a misbehaving gateway, an address that is no provider)
 * is read no further, instead of held whole in memory.
 */
export const errorBodyMaxBytes = 64 * 1024
export const eventMaxChars = 4 * 1024 * 1024

export interface StreamRequest {
  url: string
  headers: Record<string, string>
  body: unknown
  signal: AbortSignal
  /** The longest wait for the answer to begin, and between two pieces of it (OSD_MODEL_IDLE_SECONDS). */
  idleMs: number
  /** Each event: its name (undefined when it has none) and its data. */
  onEvent(name: string | undefined, data: string): void
}

/** A provider's refusal or failure, as the SDKs report it: the status, what the answer said, its headers. */
export class StreamError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly headers?: Record<string, string | string[] | undefined>,
    /** What failed underneath (a connection refused): failures.ts reads its code. */
    cause?: unknown,
  ) {
    super(message, { cause })
  }
}

export async function postStream(call: StreamRequest): Promise<void> {
  let res: Awaited<ReturnType<typeof request>>
  try {
    // Loaded at the first streamed call, as egress.ts does: most processes that load this never stream.
    const { request } = await import('../../undici.js')
    res = await request(call.url, {
      method: 'POST',
      headers: { ...call.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(call.body),
      signal: call.signal,
      headersTimeout: call.idleMs,
      bodyTimeout: call.idleMs,
    })
  } catch (err) {
    // A timeout keeps its code (failures.ts timedOut); an abort is the caller's to tell.
    if (call.signal.aborted || (err as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT')
      throw err
    throw new StreamError(`Connection error: ${(err as Error).message}`, undefined, undefined, err)
  }
  if (res.statusCode >= 200 && res.statusCode < 300) return readEvents(res.body, call)
  const text = await firstBytes(res.body, errorBodyMaxBytes)
  throw new StreamError(`${res.statusCode} ${text}`.trim(), res.statusCode, res.headers)
}

/**
 * Reads server-sent events from the answer's body: `event:` and `data:` lines up to a blank line.
 * Read by its data events (an async iterator over a stream costs a few promises per piece).
 */
function readEvents(body: Readable, call: StreamRequest): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let pending = ''
    body.setEncoding('utf8')
    body.on('data', (chunk: string) => {
      pending += chunk
      try {
        for (let end = frameEnd(pending); end.at !== -1; end = frameEnd(pending)) {
          const frame = pending.slice(0, end.at)
          pending = pending.slice(end.at + end.length)
          let name: string | undefined
          let data: string | undefined
          for (const line of frame.split(/\r?\n/)) {
            if (line.startsWith('data:')) {
              const value = line.slice(line[5] === ' ' ? 6 : 5)
              data = data === undefined ? value : `${data}\n${value}`
            } else if (line.startsWith('event:')) name = line.slice(line[6] === ' ' ? 7 : 6)
          }
          if (data !== undefined) call.onEvent(name, data)
        }
        // What is left is the start of the next event: past its cap, no event is coming.
        if (pending.length > eventMaxChars)
          throw new StreamError(`an event of the answer is longer than ${eventMaxChars} characters`)
      } catch (err) {
        body.destroy()
        reject(err)
      }
    })
    let ended = false
    body.once('error', reject)
    body.once('end', () => {
      ended = true
      resolve()
    })
    // Closed without its end and without an error: aborted, or cut off. Never a whole answer.
    body.once('close', () => {
      if (!ended)
        reject(
          call.signal.aborted
            ? Object.assign(new Error('aborted'), { name: 'AbortError' })
            : new StreamError('the answer was cut off'),
        )
    })
  })
}

/** Where the first event of `text` ends, and how long its blank line is. */
function frameEnd(text: string): { at: number; length: number } {
  const lf = text.indexOf('\n\n')
  const crlf = text.indexOf('\r\n\r\n')
  if (crlf !== -1 && (lf === -1 || crlf < lf)) return { at: crlf, length: 4 }
  return { at: lf, length: 2 }
}
