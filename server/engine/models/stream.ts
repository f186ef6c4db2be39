import { setTimeout as sleep } from 'node:timers/promises'
import type { Readable } from 'node:stream'
import { request } from 'undici'

// A streamed model call over HTTP, for both wire formats (providers.ts): the request is POSTed with
// undici's request() and its server-sent events are handed on as they come. The SDKs make unstreamed
// calls; a streamed one through them reads the answer as a web stream through several async iterators,
// which for a chat reply of 200 tokens cost the daemon more than the rest of the reply (issue 26,
// npm run bench:chat). What the SDKs do around a call is done here the same way: a failed answer
// (408, 409, 429, 5xx, or no connection) is tried again twice with a back-off, honouring the
// provider's retry-after (and x-should-retry), before anything of it was read; its status and message
// are what the caller classifies.

export interface StreamRequest {
  url: string
  headers: Record<string, string>
  body: unknown
  signal: AbortSignal
  /** The longest wait for the answer to begin, and between two pieces of it. */
  timeoutMs: number
  maxRetries: number
  /** Each event: its name (undefined when it has none) and its data. */
  onEvent(name: string | undefined, data: string): void
}

/** A provider's refusal or failure, as the SDKs report it: the status and what the answer said. */
export class StreamError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message)
  }
}

const retried = (status: number) =>
  status === 408 || status === 409 || status === 429 || status >= 500

/** How long to wait before try `attempt` (1, 2, ...): the provider's word, else 0.5 s doubling, jittered. */
function backoff(attempt: number, headers: Record<string, string | string[] | undefined>): number {
  const ms = Number(headers['retry-after-ms'])
  if (Number.isFinite(ms) && ms >= 0 && ms < 60_000) return ms
  const seconds = Number(headers['retry-after'])
  if (Number.isFinite(seconds) && seconds >= 0 && seconds < 60) return seconds * 1000
  return Math.min(500 * 2 ** (attempt - 1), 8_000) * (1 - Math.random() * 0.25)
}

export async function postStream(call: StreamRequest): Promise<void> {
  const body = JSON.stringify(call.body)
  for (let attempt = 0; ; attempt++) {
    let res: Awaited<ReturnType<typeof request>>
    try {
      res = await request(call.url, {
        method: 'POST',
        headers: {
          ...call.headers,
          'content-type': 'application/json',
          accept: 'text/event-stream',
        },
        body,
        signal: call.signal,
        headersTimeout: call.timeoutMs,
        bodyTimeout: call.timeoutMs,
      })
    } catch (err) {
      if (call.signal.aborted) throw err
      if (attempt < call.maxRetries) {
        await sleep(backoff(attempt + 1, {}), undefined, { signal: call.signal })
        continue
      }
      throw new StreamError(`Connection error: ${(err as Error).message}`)
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return readEvents(res.body, call)
    const text = await res.body.text().catch(() => '')
    const again = res.headers['x-should-retry']
    const retry = again === 'true' || (again !== 'false' && retried(res.statusCode))
    if (retry && attempt < call.maxRetries) {
      await sleep(backoff(attempt + 1, res.headers), undefined, { signal: call.signal })
      continue
    }
    throw new StreamError(`${res.statusCode} ${text}`.trim(), res.statusCode)
  }
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
