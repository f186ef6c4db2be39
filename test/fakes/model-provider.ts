/**
 * A fake model provider for tests: a local HTTP server (node:http, 127.0.0.1, a free port) that speaks
 * two real wire formats and answers scripted replies.
 *
 * - format 'a', the Anthropic Messages API: `POST /v1/messages`. Point the SDK at it with
 *   `new Anthropic({ apiKey, baseURL: fake.url })`.
 * - format 'b', the OpenAI Chat Completions API: `POST /v1/chat/completions`. Point the SDK at it with
 *   `new OpenAI({ apiKey, baseURL: fake.url + '/v1' })`.
 * - both: `GET /v1/models` and `GET /v1/models/{id}`, in the Anthropic shape when the call carries an
 *   `x-api-key` or `anthropic-version` header, else in the OpenAI shape.
 *
 * Wire notes, checked against @anthropic-ai/sdk 1.12 and openai 6.x:
 * - @anthropic-ai/sdk 1.12 sends its `apiKey` as `Authorization: Bearer <key>` (not `x-api-key`), plus
 *   `anthropic-version`. So for format 'a' the key is read from `x-api-key`, else from the bearer token,
 *   and the models listing tells the formats apart by `anthropic-version` as well as `x-api-key`.
 * - Both SDKs retry 408, 409, 429 and 5xx (twice by default) unless the answer says
 *   `x-should-retry: false`, waiting `retry-after-ms`, else `retry-after` (seconds). The Anthropic SDK
 *   ignores a wait of 0 and backs off 0.4-0.5 s instead, so an error reply with `retryAfter` is answered
 *   with `retry-after: <retryAfter>` and `retry-after-ms: <max(1, retryAfter * 1000)>`: a `retryAfter: 0`
 *   makes both SDKs retry after 1 ms. Without `retryAfter` neither header is sent and the SDKs back off.
 *
 * Requests are checked as the real providers check them (roles, tool_use/tool_result pairing, tool
 * names, required fields) and a malformed one is answered 400 without taking a scripted reply; its
 * `invalid` names the problem.
 *
 * Streaming (`stream: true`) answers `text/event-stream` in each format's own events: provider_a's
 * message_start, content_block_start/delta/stop (text_delta, input_json_delta), message_delta and
 * message_stop; provider_b's chat.completion.chunk deltas (content, tool_calls by index), a last chunk
 * with finish_reason and, with `stream_options.include_usage`, a usage chunk with no choices. The text is
 * sent a token at a time (a word and the space after it, or the reply's own `tokens`), `tokenMs` apart;
 * `failAfterTokens` drops the connection after that many tokens (a provider that dies mid-answer).
 *
 * Prompt caches (issue 29), per API key (a provider caches per organisation) and per model, as each
 * provider documents its own; a reply that scripts `usage.input` reports it as is and leaves the cache
 * alone, otherwise the input is counted (a token per 4 characters of each block's JSON) and split:
 * - format 'a': a prompt is its blocks in order: tools, system, then each message's content blocks. A
 *   block with `cache_control` (at most 4 per request; `{type: 'ephemeral'}`, ttl '5m' or '1h') is a
 *   breakpoint. The longest prefix ending at a block boundary that an earlier request wrote, looked for
 *   at each breakpoint and up to 20 blocks before it, is read (`cache_read_input_tokens`); the prefix up
 *   to each later breakpoint is written (`cache_creation_input_tokens`: from the read's end to the last
 *   breakpoint), if it is at least 1,024 tokens (the minimum of most models; the fake has one for all);
 *   `input_tokens` is the rest, after the last breakpoint. An entry lives 5 minutes (or its ttl) from
 *   its last use. A prefix's identity is its blocks without their `cache_control`: a text message and the
 *   one text block carrying it are the same.
 * - format 'b': automatic, from 1,024 tokens: a prompt is its tools, then its messages, each one block
 *   (as sent, bytes and key order included); every block boundary from 1,024 tokens on is kept, and the
 *   longest kept prefix is read, counted from 1,024 in steps of 128 tokens
 *   (`prompt_tokens_details.cached_tokens`, within `prompt_tokens`). 5 minutes from its last use.
 * `now` (an option of startFakeModelProvider) is the clock entries expire by.
 */
import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http'
import { createHash } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

export type Format = 'a' | 'b'

export type Reply = (
  | { text: string }
  | { toolCalls: { name: string; arguments: Record<string, unknown> }[]; text?: string }
  | { status: number; message?: string; retryAfter?: number } // an error answer
) & {
  delayMs?: number
  /**
   * What the answer reports: `input` given, exactly that (no cache); else the input is counted from the
   * request and the provider's cache applies (see above). `output` defaults to 5.
   */
  usage?: { input?: number; output?: number }
  /** Streaming only: the pieces the text is sent in (default: a word and its space each). */
  tokens?: string[]
  /** Streaming only: milliseconds between two pieces of text. */
  tokenMs?: number
  /** Streaming only: the connection is dropped after this many pieces of text. */
  failAfterTokens?: number
}

export interface RecordedRequest {
  format: Format
  /** The API key sent: `x-api-key` or the bearer token for 'a', the bearer token for 'b'. */
  key: string | undefined
  model: string
  /** The parsed JSON body (the raw text if it was not JSON). */
  body: any
  /** The system prompt as text, whichever format and shape it came in ('' without one). */
  system: string
  /** Date.now() when the whole body had arrived. */
  receivedAt: number
  /** The client closed the connection before the answer was written (e.g. an aborted SDK call). */
  aborted: boolean
  /** The request headers, lower-cased (e.g. `x-stainless-retry-count` tells the SDKs' retries apart). */
  headers: IncomingHttpHeaders
  /** Set when the request was answered 400 for being malformed: what a real provider would object to. */
  invalid?: string
  /** A streamed answer: performance.now() as each piece of its text was written. */
  tokenTimes?: number[]
  /** What a model answer reported it used, each kind of input once (format 'b' folds cacheRead in). */
  usage?: { input: number; output: number; cacheRead: number; cacheWrite: number }
}

export interface FakeModelProvider {
  /** http://127.0.0.1:<port>, no trailing slash. */
  url: string
  /** Every model call (`/v1/messages`, `/v1/chat/completions`), in arrival order. */
  requests: RecordedRequest[]
  /** Replies for calls made with this API key, taken in order (a second call appends); a call with no
   *  scripted reply left gets { text: 'done' } unless a handler answers. Several keys let concurrent
   *  tests share one fake. A call without any key is answered 401 unless a handler answers. */
  script(key: string, ...replies: Reply[]): void
  /** Decides replies itself; returning undefined falls back to the script. Replaces an earlier handler.
   *  A handler that throws is answered 500 with `x-should-retry: false`, so the SDK does not retry. */
  onRequest(
    handler: (request: RecordedRequest) => Reply | undefined | Promise<Reply | undefined>,
  ): void
  /** The models `GET /v1/models` lists for a format; `null` makes the listing answer 503. */
  setModels(format: Format, ids: string[] | null): void
  /** Calls made with this key so far. */
  callsWith(key: string): RecordedRequest[]
  close(): Promise<void>
}

const defaultModels: Record<Format, string[]> = {
  a: ['claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-opus-5-5'],
  b: ['gpt-5.4', 'gpt-5.4-mini', 'gpt-5.4-nano'],
}

const defaultOutput = 5
/** Tool names: letters, digits, _ and -; at most 64 characters for OpenAI, 128 for Anthropic. */
const toolNameMax: Record<Format, number> = { a: 128, b: 64 }

type Handler = (request: RecordedRequest) => Reply | undefined | Promise<Reply | undefined>

/** What an answer reports: each kind of input once (format 'b' folds cacheRead into prompt_tokens). */
interface Usage {
  input: number
  output: number
  cacheRead: number
  cacheWrite: number
  /** Of cacheWrite, what was written for an hour (format 'a', `ttl: '1h'`). */
  cacheWriteHour: number
}

/** The least a prefix must be, in tokens, to be cached (both formats). */
const cacheMinimum = 1024
/** How far back from a breakpoint format 'a' looks for an entry, in blocks. */
const lookBack = 20
const fiveMinutes = 5 * 60_000

/** A prompt as its blocks in order, each with its token count and its cache marks. */
interface Block {
  /** What the block is, for the identity of the prefix it ends (no cache_control in it). */
  key: string
  tokens: number
  /** format 'a': a breakpoint, and how long its entry lives. */
  ttlMs?: number
}

/** Tokens of a block: a token per 4 characters of its JSON, at least one. */
function tokensOf(json: string): number {
  return Math.max(1, Math.ceil(json.length / 4))
}

function withoutCacheControl(block: unknown): unknown {
  if (!isObject(block) || !('cache_control' in block)) return block
  const { cache_control: _, ...rest } = block
  return rest
}

/**
 * The two providers' prompt caches (see the header): entries by the hash of the prefix they end, with
 * when they expire. One map for both: a prefix's hash starts from the format, the key and the model.
 */
class PromptCaches {
  private entries = new Map<string, number>()

  constructor(private readonly now: () => number) {}

  /** Hash of each prefix: after block i, for i = 0..n-1. */
  private prefixes(seed: string, blocks: Block[]): { hashes: string[]; ends: number[] } {
    const hashes: string[] = []
    const ends: number[] = []
    let hash = createHash('sha256').update(seed).digest('hex')
    let tokens = 0
    for (const block of blocks) {
      hash = createHash('sha256').update(hash).update(block.key).digest('hex')
      tokens += block.tokens
      hashes.push(hash)
      ends.push(tokens)
    }
    return { hashes, ends }
  }

  private live(hash: string): boolean {
    const until = this.entries.get(hash)
    if (until === undefined) return false
    if (until > this.now()) return true
    this.entries.delete(hash)
    return false
  }

  /** format 'a': explicit breakpoints. */
  anthropic(key: string, model: string, body: any): Omit<Usage, 'output'> {
    const blocks: Block[] = []
    const mark = (block: unknown, key: string) => {
      const control = isObject(block) ? block.cache_control : undefined
      const json = JSON.stringify(withoutCacheControl(block))
      blocks.push({
        key: `${key}${json}`,
        tokens: tokensOf(json),
        ...(isObject(control)
          ? { ttlMs: control.ttl === '1h' ? 12 * fiveMinutes : fiveMinutes }
          : {}),
      })
    }
    for (const tool of body.tools ?? []) mark(tool, 'tool')
    if (typeof body.system === 'string') {
      if (body.system) mark({ type: 'text', text: body.system }, 'system')
    } else for (const block of body.system ?? []) mark(block, 'system')
    for (const message of body.messages) {
      const content =
        typeof message.content === 'string'
          ? [{ type: 'text', text: message.content }]
          : (message.content as unknown[])
      content.forEach((block, j) => mark(block, `${message.role}${j === 0 ? ':first' : ''}`))
    }
    const total = blocks.reduce((sum, b) => sum + b.tokens, 0)
    const { hashes, ends } = this.prefixes(`a:${key}:${model}`, blocks)
    const breakpoints = blocks.flatMap((b, i) => (b.ttlMs !== undefined ? [i] : []))
    let readAt = -1
    for (const at of breakpoints) {
      for (let p = at; p >= 0 && p > at - lookBack; p--) {
        if (this.live(hashes[p]!)) {
          readAt = Math.max(readAt, p)
          break
        }
      }
    }
    const now = this.now()
    const read = readAt >= 0 ? ends[readAt]! : 0
    if (readAt >= 0) this.entries.set(hashes[readAt]!, now + (blocks[readAt]!.ttlMs ?? fiveMinutes))
    let written = read
    let hour = 0
    for (const at of breakpoints) {
      if (at <= readAt || ends[at]! < cacheMinimum) continue
      const ttl = blocks[at]!.ttlMs!
      this.entries.set(hashes[at]!, now + ttl)
      if (ttl > fiveMinutes) hour += ends[at]! - written
      written = ends[at]!
    }
    return {
      input: total - written,
      cacheRead: read,
      cacheWrite: written - read,
      cacheWriteHour: hour,
    }
  }

  /** format 'b': automatic prefix caching. */
  openAI(key: string, model: string, body: any): Omit<Usage, 'output'> {
    const blocks: Block[] = []
    for (const tool of body.tools ?? []) {
      const json = JSON.stringify(tool)
      blocks.push({ key: `tool${json}`, tokens: tokensOf(json) })
    }
    for (const message of body.messages) {
      const json = JSON.stringify(message)
      blocks.push({ key: `message${json}`, tokens: tokensOf(json) })
    }
    const total = blocks.reduce((sum, b) => sum + b.tokens, 0)
    const { hashes, ends } = this.prefixes(`b:${key}:${model}`, blocks)
    let longest = 0
    for (let p = blocks.length - 1; p >= 0; p--) {
      if (ends[p]! >= cacheMinimum && this.live(hashes[p]!)) {
        longest = ends[p]!
        break
      }
    }
    const now = this.now()
    for (let p = 0; p < blocks.length; p++)
      if (ends[p]! >= cacheMinimum) this.entries.set(hashes[p]!, now + fiveMinutes)
    const cached =
      longest >= cacheMinimum ? cacheMinimum + Math.floor((longest - cacheMinimum) / 128) * 128 : 0
    return { input: total - cached, cacheRead: cached, cacheWrite: 0, cacheWriteHour: 0 }
  }
}

/** A request's system prompt as text: format 'a' its `system` (text or blocks), 'b' its system messages. */
function systemText(format: Format, body: any): string {
  if (!isObject(body)) return ''
  const texts = (content: unknown): string =>
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? content.map((b) => (isObject(b) && typeof b.text === 'string' ? b.text : '')).join('')
        : ''
  if (format === 'a') return texts(body.system)
  return (Array.isArray(body.messages) ? body.messages : [])
    .filter((m: any) => isObject(m) && (m.role === 'system' || m.role === 'developer'))
    .map((m: any) => texts(m.content))
    .join('\n')
}

export interface FakeOptions {
  /** The clock prompt-cache entries expire by (Date.now unless given). */
  now?: () => number
}

export async function startFakeModelProvider(
  options: FakeOptions = {},
): Promise<FakeModelProvider> {
  const requests: RecordedRequest[] = []
  const caches = new PromptCaches(options.now ?? Date.now)
  const scripts = new Map<string, Reply[]>()
  const models: Record<Format, string[] | null> = {
    a: [...defaultModels.a],
    b: [...defaultModels.b],
  }
  let handler: Handler | undefined
  const counters = { message: 0, toolu: 0, completion: 0, call: 0, request: 0 }
  const next = (name: keyof typeof counters) => ++counters[name]

  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      // Only a bug in the fake itself lands here; answer it rather than crash the test process.
      send(res, 500, { error: { message: `fake model provider: ${String(err)}` } })
    })
  })
  server.on('clientError', (_err, socket) => socket.destroy())

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.on('error', () => undefined)
    res.on('error', () => undefined)
    const closed = new AbortController()
    let record: RecordedRequest | undefined
    res.on('close', () => {
      if (!res.writableFinished) {
        if (record) record.aborted = true
        closed.abort()
      }
    })

    const path = new URL(req.url ?? '/', 'http://fake').pathname.replace(/\/+$/, '')
    const method = req.method ?? 'GET'
    const guess = guessFormat(req.headers)

    if (path === '/v1/models' || path.startsWith('/v1/models/')) {
      if (method !== 'GET') return sendError(res, guess, 405, `${method} is not allowed on ${path}`)
      return answerModels(req, res, path)
    }
    const format: Format | undefined =
      path === '/v1/messages' ? 'a' : path === '/v1/chat/completions' ? 'b' : undefined
    if (!format) return sendError(res, guess, 404, `no route for ${method} ${path}`)
    if (method !== 'POST') return sendError(res, format, 405, `${method} is not allowed on ${path}`)

    let raw: string
    try {
      raw = await readBody(req)
    } catch {
      return // the client went away before its request was complete: not a model call
    }
    let body: any = raw
    let invalid: string | undefined
    try {
      body = JSON.parse(raw)
    } catch {
      invalid = 'the request body is not valid JSON'
    }
    invalid ??= format === 'a' ? checkAnthropic(body) : checkOpenAI(body)

    record = {
      format,
      key: keyOf(format, req.headers),
      model: typeof body?.model === 'string' ? body.model : '',
      body,
      system: systemText(format, body),
      receivedAt: Date.now(),
      aborted: closed.signal.aborted,
      headers: req.headers,
      ...(invalid !== undefined ? { invalid } : {}),
    }
    requests.push(record)
    if (invalid !== undefined) return sendError(res, format, 400, invalid)

    let reply: Reply | undefined
    try {
      reply = await handler?.(record)
    } catch (err) {
      const message = `the fake's onRequest handler threw: ${err instanceof Error ? err.message : String(err)}`
      return sendError(res, format, 500, message, { 'x-should-retry': 'false' })
    }
    if (reply === undefined) {
      if (record.key === undefined) {
        const message =
          format === 'a'
            ? 'x-api-key header is required'
            : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        return sendError(res, format, 401, message)
      }
      reply = scripts.get(record.key)?.shift() ?? { text: 'done' }
    }

    if (reply.delayMs) {
      try {
        await sleep(reply.delayMs, undefined, { signal: closed.signal })
      } catch {
        return // the client disconnected while we waited: `aborted` is already set
      }
    }
    if (closed.signal.aborted) return

    if ('status' in reply) {
      const headers: Record<string, string> = {}
      if (reply.retryAfter !== undefined) {
        headers['retry-after'] = String(reply.retryAfter)
        headers['retry-after-ms'] = String(Math.max(1, Math.round(reply.retryAfter * 1000)))
      }
      if (!(reply.status >= 400 && reply.status <= 599)) {
        const message = `a scripted error reply needs a status from 400 to 599, not ${reply.status}`
        return sendError(res, format, 500, message, { 'x-should-retry': 'false' })
      }
      return sendError(res, format, reply.status, reply.message, headers)
    }
    const usage = usageOf(record, reply)
    record.usage = {
      input: usage.input,
      output: usage.output,
      cacheRead: usage.cacheRead,
      cacheWrite: usage.cacheWrite,
    }
    if (record.body.stream === true) return streamReply(res, record, reply, usage, closed.signal)
    const body200 =
      format === 'a'
        ? anthropicMessage(record, reply, usage)
        : openAICompletion(record, reply, usage)
    send(res, 200, body200, requestIdHeader(format))
  }

  /** What an answer reports it used: scripted, or counted with the cache applied. */
  function usageOf(record: RecordedRequest, reply: Exclude<Reply, { status: number }>): Usage {
    const output = reply.usage?.output ?? defaultOutput
    if (reply.usage?.input !== undefined)
      return { input: reply.usage.input, output, cacheRead: 0, cacheWrite: 0, cacheWriteHour: 0 }
    const cached =
      record.format === 'a'
        ? caches.anthropic(record.key ?? '', record.model, record.body)
        : caches.openAI(record.key ?? '', record.model, record.body)
    return { ...cached, output }
  }

  /** A scripted reply as the format's stream of events, its text a token at a time. */
  async function streamReply(
    res: ServerResponse,
    record: RecordedRequest,
    reply: Exclude<Reply, { status: number }>,
    usage: Usage,
    closed: AbortSignal,
  ): Promise<void> {
    const final = record.format === 'a' ? anthropicMessage(record, reply, usage) : undefined
    const completion = record.format === 'b' ? openAICompletion(record, reply, usage) : undefined
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      ...requestIdHeader(record.format),
    })
    const event = (name: string | null, data: unknown) =>
      res.write(`${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(data)}\n\n`)
    const text = 'text' in reply && reply.text ? reply.text : ''
    const tokens = reply.tokens ?? text.match(/\S+\s*|\s+/g) ?? []
    const calls = 'toolCalls' in reply ? reply.toolCalls : []
    let sent = 0
    /** Sends the text's tokens; false when the reply is to fail (or the client left) meanwhile. */
    const sendTokens = async (one: (token: string) => void): Promise<boolean> => {
      for (const token of tokens) {
        if (reply.failAfterTokens !== undefined && sent >= reply.failAfterTokens) {
          // What was written reaches the client first; then the connection drops mid-answer.
          await new Promise<void>((resolve) => res.write('', () => resolve()))
          await sleep(20)
          res.destroy()
          return false
        }
        if (sent > 0 && reply.tokenMs) {
          try {
            await sleep(reply.tokenMs, undefined, { signal: closed })
          } catch {
            return false
          }
        }
        if (closed.aborted) return false
        one(token)
        ;(record.tokenTimes ??= []).push(performance.now())
        sent++
      }
      return true
    }
    if (final) {
      const { content, ...message } = final
      event('message_start', {
        type: 'message_start',
        message: {
          ...message,
          content: [],
          stop_reason: null,
          usage: { ...message.usage, output_tokens: 1 },
        },
      })
      let index = 0
      if (tokens.length) {
        event('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { type: 'text', text: '', citations: null },
        })
        const ok = await sendTokens((token) =>
          event('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'text_delta', text: token },
          }),
        )
        if (!ok) return
        event('content_block_stop', { type: 'content_block_stop', index })
        index++
      }
      for (const block of content as {
        type: string
        id?: string
        name?: string
        input?: unknown
      }[]) {
        if (block.type !== 'tool_use') continue
        event('content_block_start', {
          type: 'content_block_start',
          index,
          content_block: { ...block, input: {} },
        })
        const json = JSON.stringify(block.input)
        // The arguments in two pieces, as the provider sends partial JSON.
        for (const part of [json.slice(0, json.length >> 1), json.slice(json.length >> 1)])
          event('content_block_delta', {
            type: 'content_block_delta',
            index,
            delta: { type: 'input_json_delta', partial_json: part },
          })
        event('content_block_stop', { type: 'content_block_stop', index })
        index++
      }
      event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: final.stop_reason, stop_sequence: null, container: null },
        usage: {
          input_tokens: usage.input,
          output_tokens: usage.output,
          cache_creation_input_tokens: usage.cacheWrite,
          cache_read_input_tokens: usage.cacheRead,
          server_tool_use: null,
        },
      })
      event('message_stop', { type: 'message_stop' })
      res.end()
      return
    }
    const base = {
      id: completion!.id,
      object: 'chat.completion.chunk',
      created: completion!.created,
      model: completion!.model,
      system_fingerprint: 'fp_fake',
    }
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      event(null, {
        ...base,
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      })
    chunk({ role: 'assistant', content: '', refusal: null })
    const ok = await sendTokens((token) => chunk({ content: token }))
    if (!ok) return
    const message = completion!.choices[0]!.message as { tool_calls?: any[] }
    for (const [i, call] of (message.tool_calls ?? []).entries()) {
      chunk({
        tool_calls: [
          {
            index: i,
            id: call.id,
            type: 'function',
            function: { name: call.function.name, arguments: '' },
          },
        ],
      })
      const json: string = call.function.arguments
      for (const part of [json.slice(0, json.length >> 1), json.slice(json.length >> 1)])
        chunk({ tool_calls: [{ index: i, function: { arguments: part } }] })
    }
    chunk({}, calls.length > 0 ? 'tool_calls' : 'stop')
    if (record.body.stream_options?.include_usage)
      event(null, { ...base, choices: [], usage: completion!.usage })
    res.write('data: [DONE]\n\n')
    res.end()
  }

  function requestIdHeader(format: Format): Record<string, string> {
    const n = next('request')
    return format === 'a' ? { 'request-id': `req_fake_${n}` } : { 'x-request-id': `req_fake_${n}` }
  }

  function sendError(
    res: ServerResponse,
    format: Format,
    status: number,
    message: string | undefined,
    headers: Record<string, string> = {},
  ): void {
    const ids = requestIdHeader(format)
    const text =
      message ?? `${http.STATUS_CODES[status] ?? 'Error'} (scripted by the fake model provider)`
    const body =
      format === 'a'
        ? {
            type: 'error',
            error: { type: anthropicErrorType(status), message: text },
            request_id: ids['request-id'],
          }
        : { error: { message: text, ...openAIErrorTypeAndCode(status), param: null } }
    send(res, status, body, { ...ids, ...headers })
  }

  function anthropicMessage(
    record: RecordedRequest,
    reply: Exclude<Reply, { status: number }>,
    usage: Usage,
  ) {
    const content: unknown[] = []
    if (reply.text) content.push({ type: 'text', text: reply.text, citations: null })
    const calls = 'toolCalls' in reply ? reply.toolCalls : []
    for (const call of calls) {
      content.push({
        type: 'tool_use',
        id: `toolu_${next('toolu')}`,
        name: call.name,
        input: call.arguments,
        caller: { type: 'direct' },
      })
    }
    return {
      id: `msg_${next('message')}`,
      type: 'message',
      role: 'assistant',
      model: record.model,
      content,
      stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      stop_details: null,
      container: null,
      diagnostics: null,
      usage: {
        input_tokens: usage.input,
        output_tokens: usage.output,
        cache_creation_input_tokens: usage.cacheWrite,
        cache_read_input_tokens: usage.cacheRead,
        cache_creation: {
          ephemeral_5m_input_tokens: usage.cacheWrite - usage.cacheWriteHour,
          ephemeral_1h_input_tokens: usage.cacheWriteHour,
        },
        server_tool_use: null,
        service_tier: 'standard',
        inference_geo: null,
        output_tokens_details: null,
        speed: null,
      },
    }
  }

  function openAICompletion(
    record: RecordedRequest,
    reply: Exclude<Reply, { status: number }>,
    usage: Usage,
  ) {
    const calls = 'toolCalls' in reply ? reply.toolCalls : []
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: reply.text ? reply.text : null,
      refusal: null,
      annotations: [],
    }
    if (calls.length > 0) {
      message.tool_calls = calls.map((call) => ({
        id: `call_${next('call')}`,
        type: 'function',
        function: { name: call.name, arguments: JSON.stringify(call.arguments) },
      }))
    } else if (message.content === null) {
      message.content = ''
    }
    return {
      id: `chatcmpl-${next('completion')}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: record.model,
      choices: [
        {
          index: 0,
          message,
          logprobs: null,
          finish_reason: calls.length > 0 ? 'tool_calls' : 'stop',
        },
      ],
      usage: {
        // The cached tokens are within prompt_tokens (format 'b' writes none apart).
        prompt_tokens: usage.input + usage.cacheRead,
        completion_tokens: usage.output,
        total_tokens: usage.input + usage.cacheRead + usage.output,
        prompt_tokens_details: { cached_tokens: usage.cacheRead, audio_tokens: 0 },
        completion_tokens_details: {
          reasoning_tokens: 0,
          audio_tokens: 0,
          accepted_prediction_tokens: 0,
          rejected_prediction_tokens: 0,
        },
      },
      service_tier: 'default',
      system_fingerprint: 'fp_fake',
    }
  }

  function answerModels(req: IncomingMessage, res: ServerResponse, path: string): void {
    req.resume()
    const format = guessFormat(req.headers)
    if (keyOf(format, req.headers) === undefined) {
      return sendError(res, format, 401, 'an API key is required')
    }
    const ids = models[format]
    if (!ids) return sendError(res, format, 503, 'the models listing is down')
    const one = path.startsWith('/v1/models/')
      ? decodeURIComponent(path.slice('/v1/models/'.length))
      : undefined
    if (one !== undefined) {
      if (!ids.includes(one)) {
        return format === 'a'
          ? sendError(res, format, 404, `model: ${one}`)
          : send(
              res,
              404,
              {
                error: {
                  message: `The model '${one}' does not exist`,
                  type: 'invalid_request_error',
                  param: 'model',
                  code: 'model_not_found',
                },
              },
              requestIdHeader(format),
            )
      }
      const info = format === 'a' ? anthropicModel(one) : openAIModel(one)
      return send(res, 200, info, requestIdHeader(format))
    }
    if (format === 'b') {
      const data = ids.map(openAIModel)
      return send(res, 200, { object: 'list', data }, requestIdHeader(format))
    }
    // Anthropic pages with limit (default 20), after_id and before_id.
    const query = new URL(req.url ?? '/', 'http://fake').searchParams
    const limit = Math.min(1000, Math.max(1, Number(query.get('limit') ?? 20) || 20))
    const after = query.get('after_id')
    const before = query.get('before_id')
    let start = 0
    let end = ids.length
    if (after !== null) {
      const at = ids.indexOf(after)
      start = at < 0 ? ids.length : at + 1
      end = Math.min(ids.length, start + limit)
    } else if (before !== null) {
      const at = ids.indexOf(before)
      end = at < 0 ? 0 : at
      start = Math.max(0, end - limit)
    } else {
      end = Math.min(ids.length, limit)
    }
    const page = ids.slice(start, end)
    const hasMore = before !== null ? start > 0 : end < ids.length
    send(
      res,
      200,
      {
        data: page.map(anthropicModel),
        has_more: hasMore,
        first_id: page[0] ?? null,
        last_id: page[page.length - 1] ?? null,
      },
      requestIdHeader(format),
    )
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo
  let closing: Promise<void> | undefined

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    script(key, ...replies) {
      const queue = scripts.get(key) ?? []
      queue.push(...replies)
      scripts.set(key, queue)
    },
    onRequest(h) {
      handler = h
    },
    setModels(format, ids) {
      models[format] = ids && [...ids]
    },
    callsWith(key) {
      return requests.filter((r) => r.key === key)
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
      return closing
    },
  }
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  })
  res.end(text)
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
    req.on('close', () => {
      if (!req.complete) reject(new Error('request aborted'))
    })
  })
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

function bearer(headers: IncomingHttpHeaders): string | undefined {
  const match = /^Bearer\s+(.+)$/i.exec(header(headers, 'authorization') ?? '')
  return match?.[1]?.trim() || undefined
}

function keyOf(format: Format, headers: IncomingHttpHeaders): string | undefined {
  return format === 'a' ? (header(headers, 'x-api-key') ?? bearer(headers)) : bearer(headers)
}

function guessFormat(headers: IncomingHttpHeaders): Format {
  return header(headers, 'x-api-key') !== undefined ||
    header(headers, 'anthropic-version') !== undefined
    ? 'a'
    : 'b'
}

function anthropicErrorType(status: number): string {
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    402: 'billing_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    500: 'api_error',
    504: 'timeout_error',
    529: 'overloaded_error',
  }
  return types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

function openAIErrorTypeAndCode(status: number): { type: string; code: string | null } {
  if (status === 401) return { type: 'invalid_request_error', code: 'invalid_api_key' }
  if (status === 429) return { type: 'requests', code: 'rate_limit_exceeded' }
  if (status >= 500) return { type: 'server_error', code: null }
  return { type: 'invalid_request_error', code: null }
}

function displayName(id: string): string {
  return id
    .replace(/-\d{8}$/, '')
    .split('-')
    .reduce<string[]>((words, part) => {
      const last = words[words.length - 1]
      if (/^\d+$/.test(part) && last !== undefined && /^\d+(\.\d+)*$/.test(last)) {
        words[words.length - 1] = `${last}.${part}`
      } else {
        words.push(part.charAt(0).toUpperCase() + part.slice(1))
      }
      return words
    }, [])
    .join(' ')
}

function anthropicModel(id: string) {
  return {
    type: 'model',
    id,
    display_name: displayName(id),
    created_at: '2025-01-01T00:00:00Z',
    capabilities: null,
    deprecated_at: null,
    lifecycle: 'active',
    line: null,
    max_input_tokens: null,
    max_tokens: null,
    retires_at: null,
  }
}

function openAIModel(id: string) {
  return { id, object: 'model', created: 1_735_689_600, owned_by: 'openai' }
}

const isObject = (v: unknown): v is Record<string, any> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

function checkTools(
  format: Format,
  tools: unknown,
  nameOf: (tool: any) => unknown,
  extra: (tool: any, i: number) => string | undefined,
): string | undefined {
  if (tools === undefined) return undefined
  if (!Array.isArray(tools)) return 'tools: Input should be a valid list'
  const seen = new Set<string>()
  for (const [i, tool] of tools.entries()) {
    if (!isObject(tool)) return `tools.${i}: Input should be an object`
    const problem = extra(tool, i)
    if (problem) return problem
    const name = nameOf(tool)
    const pattern = `^[a-zA-Z0-9_-]{1,${toolNameMax[format]}}$`
    if (typeof name !== 'string' || !new RegExp(pattern).test(name)) {
      return `tools.${i}.name: String should match pattern '${pattern}' (got ${JSON.stringify(name)})`
    }
    if (seen.has(name)) return `tools: Tool names must be unique (${name})`
    seen.add(name)
  }
  return undefined
}

/** What the Anthropic Messages API would answer 400 for, or undefined. */
function checkAnthropic(body: any): string | undefined {
  if (!isObject(body)) return 'the request body must be a JSON object'
  if (body.stream !== undefined && typeof body.stream !== 'boolean')
    return 'stream: Input should be a valid boolean'
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required'
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    return 'max_tokens: Field required (a positive integer)'
  }
  if (body.system !== undefined && typeof body.system !== 'string') {
    if (!Array.isArray(body.system) || body.system.some((b: any) => b?.type !== 'text')) {
      return 'system: Input should be a valid string or a list of text blocks'
    }
  }
  const toolsProblem = checkTools(
    'a',
    body.tools,
    (tool) => tool.name,
    (tool, i) =>
      tool.type === undefined || tool.type === 'custom'
        ? isObject(tool.input_schema) && tool.input_schema.type === 'object'
          ? undefined
          : `tools.${i}.custom.input_schema: Field required (a JSON schema with type 'object')`
        : undefined,
  )
  if (toolsProblem) return toolsProblem
  const cacheProblem = checkCacheControl(body)
  if (cacheProblem) return cacheProblem
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0)
    return 'messages: Field required (a non-empty list)'
  for (const [i, message] of messages.entries()) {
    if (!isObject(message)) return `messages.${i}: Input should be an object`
    if (message.role !== 'user' && message.role !== 'assistant') {
      return message.role === 'system'
        ? `messages.${i}.role: Unexpected role "system". The Messages API accepts a top-level \`system\` parameter, not "system" as an input message role.`
        : `messages.${i}.role: Input should be 'user' or 'assistant'`
    }
    const content = message.content
    const finalAssistant = i === messages.length - 1 && message.role === 'assistant'
    if (typeof content === 'string') {
      if (content === '' && !finalAssistant) {
        return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`
      }
      continue
    }
    if (!Array.isArray(content))
      return `messages.${i}.content: Input should be a valid string or list`
    if (content.length === 0 && !finalAssistant) {
      return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`
    }
    let seenOther = false
    for (const [j, block] of content.entries()) {
      const at = `messages.${i}.content.${j}`
      if (!isObject(block) || typeof block.type !== 'string')
        return `${at}: Input should be a content block`
      if (block.type === 'text') {
        if (typeof block.text !== 'string') return `${at}.text: Field required`
        if (block.text === '') return 'messages: text content blocks must be non-empty'
      } else if (block.type === 'tool_use') {
        if (message.role !== 'assistant')
          return `${at}: tool_use blocks are only allowed in assistant messages`
        if (
          typeof block.id !== 'string' ||
          typeof block.name !== 'string' ||
          !isObject(block.input)
        ) {
          return `${at}: tool_use blocks need an id, a name and an input object`
        }
      } else if (block.type === 'tool_result') {
        if (message.role !== 'user')
          return `${at}: tool_result blocks are only allowed in user messages`
        if (typeof block.tool_use_id !== 'string') return `${at}.tool_use_id: Field required`
        if (seenOther) {
          return `${at}: tool_result blocks must come first in the content of a user message, before any other block`
        }
      }
      if (block.type !== 'tool_result') seenOther = true
    }
  }
  // Every tool_use must be answered by a tool_result in the very next message, and every tool_result
  // must answer a tool_use of the message just before it.
  for (const [i, message] of messages.entries()) {
    const blocks = (m: any): any[] => (Array.isArray(m?.content) ? m.content : [])
    const uses: string[] =
      message.role === 'assistant'
        ? blocks(message)
            .filter((b) => b.type === 'tool_use')
            .map((b) => b.id)
        : []
    const results: string[] = blocks(messages[i + 1])
      .filter((b) => b.type === 'tool_result')
      .map((b) => b.tool_use_id)
    const unanswered = uses.filter((id) => !results.includes(id))
    if (unanswered.length > 0) {
      return `messages.${i + 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${unanswered.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`
    }
    if (message.role === 'user') {
      const before =
        i > 0
          ? blocks(messages[i - 1])
              .filter((b) => b.type === 'tool_use')
              .map((b) => b.id)
          : []
      const stray = blocks(message)
        .filter((b) => b.type === 'tool_result' && !before.includes(b.tool_use_id))
        .map((b) => b.tool_use_id)
      if (stray.length > 0) {
        return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${stray.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
      }
    }
  }
  return undefined
}

/** format 'a': cache_control is `{type: 'ephemeral'}` (ttl '5m' or '1h'), on at most 4 blocks. */
function checkCacheControl(body: Record<string, any>): string | undefined {
  const blocks: { at: string; block: any }[] = []
  for (const [i, tool] of (Array.isArray(body.tools) ? body.tools : []).entries())
    blocks.push({ at: `tools.${i}`, block: tool })
  for (const [i, block] of (Array.isArray(body.system) ? body.system : []).entries())
    blocks.push({ at: `system.${i}`, block })
  for (const [i, message] of (Array.isArray(body.messages) ? body.messages : []).entries())
    for (const [j, block] of (Array.isArray(message?.content) ? message.content : []).entries())
      blocks.push({ at: `messages.${i}.content.${j}`, block })
  let found = 0
  for (const { at, block } of blocks) {
    const control = isObject(block) ? block.cache_control : undefined
    if (control === undefined || control === null) continue
    if (!isObject(control) || control.type !== 'ephemeral')
      return `${at}.cache_control.type: Input should be 'ephemeral'`
    if (control.ttl !== undefined && control.ttl !== '5m' && control.ttl !== '1h')
      return `${at}.cache_control.ttl: Input should be '5m' or '1h'`
    found++
  }
  if (found > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${found}.`
  return undefined
}

/** What the OpenAI Chat Completions API would answer 400 for, or undefined. */
function checkOpenAI(body: any): string | undefined {
  if (!isObject(body)) return 'the request body must be a JSON object'
  if (body.stream_options !== undefined && body.stream !== true)
    return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
  if (typeof body.model !== 'string' || body.model === '')
    return 'you must provide a model parameter'
  for (const field of ['max_tokens', 'max_completion_tokens']) {
    if (
      body[field] !== undefined &&
      body[field] !== null &&
      !(Number.isInteger(body[field]) && body[field] >= 1)
    ) {
      return `Invalid '${field}': expected a positive integer`
    }
  }
  const toolsProblem = checkTools(
    'b',
    body.tools,
    (tool) => tool.function?.name,
    (tool, i) =>
      tool.type !== 'function' || !isObject(tool.function)
        ? `Invalid value for 'tools[${i}]': expected {type: 'function', function: {name, description, parameters}}`
        : undefined,
  )
  if (toolsProblem)
    return toolsProblem.replace(/^tools\.(\d+)\.name/, "Invalid 'tools[$1].function.name'")
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) {
    return "Invalid 'messages': empty array. Expected an array with minimum length 1"
  }
  const roles = ['system', 'developer', 'user', 'assistant', 'tool']
  let pending: string[] | undefined // tool_call ids of the last assistant message still to be answered
  let answerable: string[] = []
  for (const [i, message] of messages.entries()) {
    if (!isObject(message)) return `Invalid type for 'messages[${i}]': expected an object`
    if (!roles.includes(message.role)) {
      return `Invalid value: '${String(message.role)}'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.`
    }
    if (message.role !== 'tool' && pending && pending.length > 0) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`
    }
    if (message.role === 'tool') {
      if (typeof message.tool_call_id !== 'string' || !answerable.includes(message.tool_call_id)) {
        return `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.`
      }
      if (typeof message.content !== 'string' && !Array.isArray(message.content)) {
        return `Invalid type for 'messages[${i}].content': expected one of a string or array of objects`
      }
      pending = pending?.filter((id) => id !== message.tool_call_id)
      continue
    }
    answerable = []
    pending = undefined
    if (message.role === 'assistant') {
      const calls = message.tool_calls
      if (calls !== undefined && calls !== null) {
        if (!Array.isArray(calls) || calls.length === 0) {
          return `Invalid 'messages[${i}].tool_calls': empty array. Expected an array with minimum length 1`
        }
        for (const [j, call] of calls.entries()) {
          if (
            !isObject(call) ||
            typeof call.id !== 'string' ||
            call.type !== 'function' ||
            !isObject(call.function)
          ) {
            return `Invalid 'messages[${i}].tool_calls[${j}]': expected {id, type: 'function', function: {name, arguments}}`
          }
          if (typeof call.function.arguments !== 'string') {
            return `Invalid type for 'messages[${i}].tool_calls[${j}].function.arguments': expected a string`
          }
        }
        answerable = calls.map((call: any) => call.id)
        pending = [...answerable]
      } else if (message.content === undefined || message.content === null) {
        return `Invalid value for 'messages[${i}].content': expected a string, got null.`
      }
    } else if (typeof message.content !== 'string' && !Array.isArray(message.content)) {
      return `Invalid type for 'messages[${i}].content': expected one of a string or array of objects`
    }
  }
  if (pending && pending.length > 0) {
    return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`
  }
  return undefined
}
