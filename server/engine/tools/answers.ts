import type { Fetch } from '../../egress.js'

// A tool server's answers, read with a size (OSD_TOOL_RESULT_MAX_BYTES; issue 44). The MCP SDK reads
// and parses a response whole (JSON, or the events of a stream), so the bound is put on the body as
// the SDK gets it: past the cap, the server's body is cancelled (the connection is dropped, the rest
// never read) and, for a tool call, the SDK is handed a well-formed result made of what came so far
// and a line saying it was cut. osd then holds about the cap for a call, and the journal, the run log
// and the model's next request carry the cut form. Other answers (the tool list, a session's start)
// get a wider bound, past which they fail; an error answer's text is kept short.

/** What the model is told when a result was cut. */
export function cutNotice(maxBytes: number): string {
  return `[osd cut this tool result at ${maxBytes} bytes; the tool sent more]`
}

/** The bound on answers other than tool results: the list of a server's tools, its start. */
export function otherAnswerMaxBytes(maxBytes: number): number {
  return Math.max(10 * maxBytes, 1_000_000)
}

/** The most of an error answer's body kept: the SDK puts it in the error's message. */
const errorAnswerMaxBytes = 16_000

/** A response without its body's size, by what was asked (null when the body is no JSON-RPC call). */
function requestOf(body: unknown): { id: string | number; method: string } | undefined {
  if (typeof body !== 'string') return undefined
  try {
    const message = JSON.parse(body) as { id?: unknown; method?: unknown }
    if (
      (typeof message.id === 'string' || typeof message.id === 'number') &&
      typeof message.method === 'string'
    )
      return { id: message.id, method: message.method }
  } catch {
    // not a JSON-RPC message: no call to answer for
  }
  return undefined
}

/**
 * The text parts of a cut JSON-RPC answer (a body or an event's data): the JSON strings under "text"
 * keys, each up to where it ends or the cut came. A JSON string holds no bare quote, so a match of the
 * key pattern is always a key of the structure, never a part of a text.
 */
export function textOfCut(head: string): string {
  const parts: string[] = []
  const key = /"text"\s*:\s*"/g
  for (let match = key.exec(head); match; match = key.exec(head)) {
    const { text, end } = readJsonString(head, match.index + match[0].length)
    parts.push(text)
    key.lastIndex = end
  }
  return parts.join('\n')
}

const escapes: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
}

/** A JSON string's value from `start` (just past its opening quote) to its close or the text's end. */
function readJsonString(text: string, start: number): { text: string; end: number } {
  let out = ''
  let at = start
  for (;;) {
    const next = text.slice(at).search(/["\\]/)
    if (next < 0) return { text: out + text.slice(at).replace(/\uFFFD+$/, ''), end: text.length }
    out += text.slice(at, at + next)
    at += next
    if (text[at] === '"') return { text: out, end: at + 1 }
    const kind = text[at + 1]
    if (kind === undefined) return { text: out, end: text.length }
    if (kind === 'u') {
      const hex = text.slice(at + 2, at + 6)
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) return { text: out, end: text.length }
      out += String.fromCharCode(parseInt(hex, 16))
      at += 6
    } else {
      out += escapes[kind] ?? kind
      at += 2
    }
  }
}

function cutResult(id: string | number, head: string, maxBytes: number): string {
  // At most the cap of text: the part read may run past it by what its last chunk brought.
  const text = Buffer.from(textOfCut(head))
    .subarray(0, maxBytes)
    .toString('utf8')
    .replace(/\uFFFD+$/, '')
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    result: {
      content: [
        { type: 'text', text: text ? `${text}\n${cutNotice(maxBytes)}` : cutNotice(maxBytes) },
      ],
    },
  })
}

export interface CutAnswer {
  method: string
  maxBytes: number
}

/**
 * Wraps a fetch so each answer's body is read with a bound: tool results are cut at `maxBytes` (and
 * `onCut` is told), other answers fail past otherAnswerMaxBytes, error answers are shortened.
 */
export function cappedFetch(
  base: Fetch,
  maxBytes: number,
  onCut: (cut: CutAnswer) => void = () => undefined,
): Fetch {
  return async (url, init) => {
    const response = await base(url, init)
    if (!response.body || response.status === 204 || response.status === 304) return response
    const request = requestOf(init?.body)
    const call = response.ok && request?.method === 'tools/call' ? request : undefined
    const limit = !response.ok
      ? errorAnswerMaxBytes
      : call
        ? maxBytes
        : otherAnswerMaxBytes(maxBytes)
    const stream = /^\s*text\/event-stream/i.test(response.headers.get('content-type') ?? '')
    const over = () => {
      if (call) onCut({ method: call.method, maxBytes })
    }
    const body = stream
      ? boundEvents(response.body, limit, call?.id, over)
      : boundWhole(response.body, limit, response.ok ? call?.id : null, over)
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    })
  }
}

const encoder = new TextEncoder()

/**
 * A whole body (JSON) up to `limit` bytes. Past it: a tool call's id gets the cut result, null keeps
 * the first part (an error's text), undefined fails the read.
 */
function boundWhole(
  body: ReadableStream<Uint8Array>,
  limit: number,
  callId: string | number | null | undefined,
  onCut: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) {
          for (const chunk of chunks) controller.enqueue(chunk)
          chunks.length = 0
          return controller.close()
        }
        size += value.byteLength
        chunks.push(value)
        if (size <= limit) continue
        await reader.cancel().catch(() => undefined)
        const head = Buffer.concat(chunks).subarray(0, limit)
        chunks.length = 0
        if (callId === undefined)
          return controller.error(new Error(`the tool server answered more than ${limit} bytes`))
        if (callId !== null) onCut()
        controller.enqueue(
          callId === null ? head : encoder.encode(cutResult(callId, head.toString('utf8'), limit)),
        )
        return controller.close()
      }
    },
    cancel: (reason) => reader.cancel(reason),
  })
}

/**
 * An event stream whose events pass as they complete. A tool call's stream may carry `limit` bytes in
 * all; past it, the event under way is given as the cut result. Any other stream may carry events of
 * up to `limit` bytes each (the session's stream runs for as long as the session); a larger one fails
 * it.
 */
function boundEvents(
  body: ReadableStream<Uint8Array>,
  limit: number,
  callId: string | number | undefined,
  onCut: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let pending = ''
  let size = 0
  const boundary = /\r\n\r\n|\n\n|\r\r/g
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) {
          pending += decoder.decode()
          if (pending) controller.enqueue(encoder.encode(pending))
          return controller.close()
        }
        size += value.byteLength
        pending += decoder.decode(value, { stream: true })
        let end = 0
        boundary.lastIndex = 0
        for (let match = boundary.exec(pending); match; match = boundary.exec(pending))
          end = match.index + match[0].length
        const whole = end > 0 ? pending.slice(0, end) : ''
        pending = pending.slice(end)
        if (callId === undefined) size = Buffer.byteLength(pending)
        if (size > limit) {
          await reader.cancel().catch(() => undefined)
          if (whole) controller.enqueue(encoder.encode(whole))
          if (callId === undefined)
            return controller.error(
              new Error(`the tool server sent an event of more than ${limit} bytes`),
            )
          onCut()
          const data = pending
            .split(/\r\n|\n|\r/)
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).replace(/^ /, ''))
            .join('\n')
          pending = ''
          controller.enqueue(
            encoder.encode(`event: message\ndata: ${cutResult(callId, data, limit)}\n\n`),
          )
          return controller.close()
        }
        if (whole) return controller.enqueue(encoder.encode(whole))
      }
    },
    cancel: (reason) => reader.cancel(reason),
  })
}
