import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { Provider } from '../../../shared/schemas/models.js'
import {
  ProviderError,
  type Credentials,
  type Message,
  type ModelProvider,
  type ModelReply,
  type ModelRequest,
  type OnText,
  type ToolCall,
  type TokenUsage,
} from '../../domain/models/index.js'
import type { Logger } from '../../log.js'
import { baseUrlSetByOperator } from '../../config.js'
import { retryAfterOf, sdkTimedOut, statusOf, timedOut, withRetries } from './retries.js'
import { postStream, StreamError, type StreamRequest } from './stream.js'

// Model providers behind one interface (DESIGN 6; its types are the domain's: domain/models/provider.ts):
// provider_a speaks the Anthropic Messages API,
// provider_b the OpenAI Chat Completions API, through their official SDKs. Base URLs are configurable so
// a local compatible server, or the tests' fake provider, can stand in.
//
// Prompts are built so the providers' caches work (DESIGN 13; issue 29): a request is the tools, the
// system prompt and the conversation, in that order, with nothing in them that changes from one call to
// the next (tool calls' arguments are sent with their keys in one order, whether the conversation was
// kept in memory or read back from the database). provider_b caches such a prefix by itself;
// provider_a is told where with cache breakpoints. Both report the tokens read from and written to the
// cache, which are priced apart (call.ts).

export interface ProviderOptions {
  baseUrls: Record<Provider, string>
  /** Milliseconds before an unstreamed call gives up (OSD_MODEL_TIMEOUT_SECONDS; default 120 s). */
  timeoutMs?: number
  /**
   * Milliseconds a streamed call may go without a piece of its answer, its first included
   * (OSD_MODEL_IDLE_SECONDS; default 60 s): a long answer that keeps coming is not cut.
   */
  idleMs?: number
  /** Tries again in place after a blip (retries.ts); default 2. */
  maxRetries?: number
  /** Cache breakpoints on provider_a's requests (Config.promptCache, OSD_PROMPT_CACHE); on unless false. */
  promptCache?: boolean
  /** Where a provider says what it learnt of a connection (one that refuses cache breakpoints). */
  log?: Logger
}

export function createProviders(options: ProviderOptions): Record<Provider, ModelProvider> {
  const set = (provider: Provider) => ({
    baseUrlSetByOperator: baseUrlSetByOperator(options.baseUrls, provider),
  })
  return {
    provider_a: Object.assign(anthropicProvider(options), set('provider_a')),
    provider_b: Object.assign(openAiProvider(options), set('provider_b')),
  }
}

// --- tool names: providers accept [a-zA-Z0-9_-]{1,64}; ours have dots ---------------------------------

/** Maps tool names both ways for one request: `os.finish` <-> `os__finish`. */
export class ToolNames {
  private toWire = new Map<string, string>()
  private fromWire = new Map<string, string>()

  constructor(names: string[]) {
    for (const name of names) {
      let wire = name
        .replace(/\./g, '__')
        .replace(/[^a-zA-Z0-9_-]/g, '_')
        .slice(0, 60)
      for (let n = 2; this.fromWire.has(wire); n++) wire = `${wire.slice(0, 57)}_${n}`
      this.toWire.set(name, wire)
      this.fromWire.set(wire, name)
    }
  }

  wire(name: string): string {
    return this.toWire.get(name) ?? name
  }

  original(wire: string): string {
    return this.fromWire.get(wire) ?? wire
  }
}

/** How long calls may take, for the words of a timeout. */
interface Limits {
  timeoutMs: number
  idleMs: number
}

function classify(err: unknown, limits: Limits): ProviderError {
  if (err instanceof ProviderError) return err
  const e = err as { name?: string; code?: string; message?: string }
  if (e?.name === 'APIUserAbortError' || e?.name === 'AbortError')
    return new ProviderError('aborted', 'aborted')
  if (timedOut(err)) {
    const failure = new ProviderError(
      'outage',
      sdkTimedOut(err)
        ? `the provider did not answer within ${seconds(limits.timeoutMs)}`
        : `the provider sent nothing for ${seconds(limits.idleMs)}`,
    )
    failure.timedOut = true
    return failure
  }
  const status = statusOf(err)
  const detail = (e?.message ?? String(err)).slice(0, 300)
  if (status === 429 || status === 529)
    return new ProviderError(
      'outage',
      `the provider asked for fewer calls (${status}${status === 429 ? ' too many requests' : ' overloaded'})`,
      status,
      retryAfterOf(err),
    )
  if (status === 401 || status === 403)
    return new ProviderError(
      'refused_key',
      `the provider refused the key (${status}): ${detail}`,
      status,
    )
  if (status === undefined || status === 408 || status === 409 || status === 429 || status >= 500) {
    return new ProviderError(
      'outage',
      `the provider did not answer${status ? ` (${status})` : ''}: ${detail}`,
      status,
    )
  }
  return new ProviderError(
    'bad_request',
    `the provider refused the request (${status}): ${detail}`,
    status,
  )
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`

/** Clients kept at most, per provider: one per key in use. */
const clientsKept = 64

/**
 * One SDK client per key, kept for the key's next calls: making one costs more than the call it makes
 * to a fast provider (the Anthropic SDK reads its credential files from disk each time one is made).
 */
function clientsByKey<C>(make: (key: string) => C): (key: string) => C {
  const clients = new Map<string, C>()
  return (key) => {
    let client = clients.get(key)
    if (client) {
      clients.delete(key) // kept in the order of use: the least recently used goes first
    } else {
      client = make(key)
      if (clients.size >= clientsKept) clients.delete(clients.keys().next().value!)
    }
    clients.set(key, client)
    return client
  }
}

// --- provider_a: the Anthropic Messages API -----------------------------------------------------------

/** How long a connection that refused cache breakpoints is sent none. */
const cacheRefusalMs = 60 * 60_000

const ephemeral = { type: 'ephemeral' } as const

/**
 * Where provider_a's cache breakpoints go (at most 4 per request, the Messages API's limit): after the
 * system prompt (the tools and the system, the prefix every call of a task or a chat shares), after the
 * newest message (so the next call reads this whole conversation from the cache), after the message the
 * previous call of the conversation ended with (the one before the newest answer: its cache entry is
 * read however many blocks came since, past the API's look-back of 20 blocks), and after the last of
 * the `stableMessages` when later ones change at the next call (a chat turn's memory). Answers the
 * messages' indexes.
 */
function breakpointsOf(request: Pick<ModelRequest, 'messages' | 'stableMessages'>): number[] {
  const { messages } = request
  const last = messages.length - 1
  if (last < 0) return []
  const at = new Set([last])
  const answered = messages.findLastIndex((m) => m.role === 'assistant')
  if (answered > 0) at.add(answered - 1)
  const stable = request.stableMessages ?? messages.length
  if (stable > 0 && stable <= last) at.add(stable - 1)
  return [...at].sort((a, b) => a - b)
}

/** The Messages API's body for a request, with cache breakpoints or without. */
function anthropicParams(
  request: ModelRequest,
  names: ToolNames,
  breakpoints: boolean,
): Anthropic.MessageCreateParamsNonStreaming {
  const marked = new Set(breakpoints ? breakpointsOf(request) : [])
  const messages: Anthropic.MessageParam[] = request.messages.map((m, i) => {
    const content = anthropicContent(m, names)
    if (!marked.has(i)) return { role: m.role === 'assistant' ? 'assistant' : 'user', content }
    // A breakpoint goes on a message's last block: a text message becomes one block to carry it (the
    // same prompt to the provider, and so the same cache entry, as the text alone).
    const blocks =
      typeof content === 'string' ? [{ type: 'text' as const, text: content }] : content
    const lastBlock = blocks.at(-1)
    if (lastBlock) blocks[blocks.length - 1] = { ...lastBlock, cache_control: ephemeral }
    return { role: m.role === 'assistant' ? 'assistant' : 'user', content: blocks }
  })
  const tools: Anthropic.Tool[] = request.tools.map((t) => ({
    name: names.wire(t.name),
    description: t.description,
    input_schema: t.parameters as Anthropic.Tool.InputSchema,
  }))
  let system: Anthropic.MessageCreateParamsNonStreaming['system'] = request.system
  if (breakpoints) {
    if (request.system) system = [{ type: 'text', text: request.system, cache_control: ephemeral }]
    else if (tools.length) tools[tools.length - 1] = { ...tools.at(-1)!, cache_control: ephemeral }
  }
  return { model: request.model, max_tokens: request.maxTokens, system, messages, tools }
}

/** The blocks our messages are made of: each may carry a cache breakpoint. */
type OurBlock =
  Anthropic.TextBlockParam | Anthropic.ToolUseBlockParam | Anthropic.ToolResultBlockParam

function anthropicContent(m: Message, names: ToolNames): string | OurBlock[] {
  if (m.role === 'user') return m.text
  if (m.role === 'tool') {
    return m.results.map((r) => ({
      type: 'tool_result' as const,
      tool_use_id: r.callId,
      content: r.content,
      is_error: r.isError,
    }))
  }
  const content: OurBlock[] = []
  if (m.text) content.push({ type: 'text', text: m.text })
  for (const call of m.toolCalls) {
    content.push({
      type: 'tool_use',
      id: call.id,
      name: names.wire(call.name),
      input: canonical(call.arguments),
    })
  }
  return content
}

/** What the Messages API reports of a call's input, each kind once (its input_tokens leave the cache's out). */
function anthropicUsage(
  usage: {
    input_tokens?: number | null
    output_tokens?: number | null
    cache_read_input_tokens?: number | null
    cache_creation_input_tokens?: number | null
  },
  into: TokenUsage,
): TokenUsage {
  // Null or absent: not reported in this event (a message_delta may leave the input's counts out).
  if (typeof usage.input_tokens === 'number') into.input = usage.input_tokens
  if (typeof usage.output_tokens === 'number') into.output = usage.output_tokens
  if (typeof usage.cache_read_input_tokens === 'number')
    into.cacheRead = usage.cache_read_input_tokens
  if (typeof usage.cache_creation_input_tokens === 'number')
    into.cacheWrite = usage.cache_creation_input_tokens
  return into
}

const noUsage = (): TokenUsage => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0 })

function anthropicProvider({
  baseUrls,
  timeoutMs = 120_000,
  idleMs = 60_000,
  maxRetries = 2,
  promptCache = true,
  log,
}: ProviderOptions): ModelProvider {
  const limits = { timeoutMs, idleMs }
  // The key goes in x-api-key, as the Messages API documents; the SDK's own credentials are cleared so
  // it sends no Authorization header and reads no key from the environment.
  const client = clientsByKey(
    (key: string) =>
      new Anthropic({
        apiKey: null,
        authToken: null,
        defaultHeaders: { 'x-api-key': key },
        baseURL: baseUrls.provider_a,
        timeout: timeoutMs,
        maxRetries: 0, // retries.ts
      }),
  )
  // Connections whose server refused cache breakpoints (a local compatible server may answer them 400),
  // until when. In this process's memory: a hint, not a record. Another process learns it with one
  // refused call of its own, and after a restart the first call asks again; nothing else depends on it.
  const refusing = new Map<string, number>()
  const refuses = (connection: string) => {
    const until = refusing.get(connection)
    if (until !== undefined && until <= Date.now()) refusing.delete(connection)
    return until !== undefined && until > Date.now()
  }

  function send(
    params: Anthropic.MessageCreateParamsNonStreaming,
    names: ToolNames,
    credentials: Credentials,
    signal: AbortSignal,
    onText: OnText | undefined,
  ): Promise<ModelReply> {
    const told = telling(onText)
    return withRetries(() => attempt(params, names, credentials, signal, told.onText), {
      maxRetries,
      signal,
      told: told.any,
    })
  }

  async function attempt(
    params: Anthropic.MessageCreateParamsNonStreaming,
    names: ToolNames,
    credentials: Credentials,
    signal: AbortSignal,
    onText: OnText | undefined,
  ): Promise<ModelReply> {
    if (onText)
      return streamAnthropic(
        {
          url: `${baseUrls.provider_a.replace(/\/+$/, '')}/v1/messages`,
          headers: { 'x-api-key': credentials.key, 'anthropic-version': anthropicVersion },
          signal,
          idleMs,
        },
        params,
        names,
        onText,
      )
    const reply = await client(credentials.key).messages.create(params, { signal })
    const text = reply.content
      .filter((b) => b.type === 'text')
      .map((b) => (b as Anthropic.TextBlock).text)
      .join('\n')
    return {
      text: text || null,
      toolCalls: reply.content
        .filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')
        .map((b) => ({
          id: b.id,
          name: names.original(b.name),
          arguments: (b.input ?? {}) as Record<string, unknown>,
        })),
      usage: anthropicUsage(reply.usage, noUsage()),
      model: reply.model,
    }
  }

  return {
    async call(request, credentials, signal, onText) {
      const names = new ToolNames(request.tools.map((t) => t.name))
      const connection = credentials.connectionId ?? credentials.key
      const breakpoints = promptCache && !refuses(connection)
      try {
        return await send(
          anthropicParams(request, names, breakpoints),
          names,
          credentials,
          signal,
          onText,
        )
      } catch (err) {
        const failure = classify(err, limits)
        // The request refused for its breakpoints (400, or 422 from a strictly validating server, that
        // names cache_control; the refusal was made before any text, so none was told): the connection
        // is sent none for an hour, which is said once, and the call is made once more without them.
        const refused =
          breakpoints &&
          failure.kind === 'bad_request' &&
          (failure.status === 400 || failure.status === 422) &&
          /cache_control/i.test(failure.message)
        if (!refused || signal.aborted) throw failure
        // Calls at once on the connection may each be refused: the first to learn it says it.
        const known = refuses(connection)
        refusing.set(connection, Date.now() + cacheRefusalMs)
        if (!known)
          log?.warn(
            {
              connectionId: credentials.connectionId,
              status: failure.status,
              refusal: failure.message,
            },
            'the model provider refused cache breakpoints: this connection is sent none for an hour',
          )
        try {
          return await send(
            anthropicParams(request, names, false),
            names,
            credentials,
            signal,
            onText,
          )
        } catch (again) {
          throw classify(again, limits)
        }
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await client(credentials.key).models.list({ limit: 100 }, { signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err, limits)
      }
    },
  }
}

/**
 * The text a streamed call tells, and whether it told any yet: a call that told some is not tried again
 * (its reader would see it twice).
 */
function telling(onText: OnText | undefined): { onText: OnText | undefined; any: () => boolean } {
  if (!onText) return { onText, any: () => false }
  let told = false
  return {
    onText: (text) => {
      told = true
      onText(text)
    },
    any: () => told,
  }
}

// --- provider_b: the OpenAI Chat Completions API -------------------------------------------------------

function openAiProvider({
  baseUrls,
  timeoutMs = 120_000,
  idleMs = 60_000,
  maxRetries = 2,
}: ProviderOptions): ModelProvider {
  const limits = { timeoutMs, idleMs }
  const client = clientsByKey(
    (key: string) =>
      new OpenAI({
        apiKey: key,
        baseURL: `${baseUrls.provider_b.replace(/\/+$/, '')}/v1`,
        timeout: timeoutMs,
        maxRetries: 0, // retries.ts
      }),
  )
  return {
    async call(request, credentials, signal, onText) {
      const names = new ToolNames(request.tools.map((t) => t.name))
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'system', content: request.system },
      ]
      for (const m of request.messages) {
        if (m.role === 'user') messages.push({ role: 'user', content: m.text })
        else if (m.role === 'tool') {
          for (const r of m.results)
            messages.push({ role: 'tool', tool_call_id: r.callId, content: r.content })
        } else {
          messages.push({
            role: 'assistant',
            content: m.text,
            ...(m.toolCalls.length
              ? {
                  tool_calls: m.toolCalls.map((c) => ({
                    id: c.id,
                    type: 'function' as const,
                    function: {
                      name: names.wire(c.name),
                      arguments: JSON.stringify(canonical(c.arguments)),
                    },
                  })),
                }
              : {}),
          })
        }
      }
      const params: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
        model: request.model,
        max_completion_tokens: request.maxTokens,
        messages,
        ...(request.tools.length
          ? {
              tools: request.tools.map((t) => ({
                type: 'function' as const,
                function: {
                  name: names.wire(t.name),
                  description: t.description,
                  parameters: t.parameters,
                },
              })),
            }
          : {}),
      }
      const told = telling(onText)
      const attempt = async (): Promise<ModelReply> => {
        if (told.onText)
          return streamOpenAi(
            {
              url: `${baseUrls.provider_b.replace(/\/+$/, '')}/v1/chat/completions`,
              headers: { authorization: `Bearer ${credentials.key}` },
              signal,
              idleMs,
            },
            params,
            names,
            told.onText,
          )
        const reply = await client(credentials.key).chat.completions.create(params, { signal })
        const message = reply.choices[0]?.message
        return {
          text: message?.content ?? null,
          toolCalls: (message?.tool_calls ?? [])
            .filter((c) => c.type === 'function')
            .map((c) => ({
              id: c.id,
              name: names.original(c.function.name),
              arguments: parseArguments(c.function.arguments),
            })),
          usage: openAiUsage(reply.usage),
          model: reply.model,
        }
      }
      try {
        return await withRetries(attempt, { maxRetries, signal, told: told.any })
      } catch (err) {
        throw classify(err, limits)
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await client(credentials.key).models.list({ signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err, limits)
      }
    },
  }
}

/**
 * A tool call's arguments with every object's keys in one order: the same call is sent as the same
 * bytes at every later call of the conversation, also once its arguments have come back from the
 * database (jsonb keeps keys in an order of its own), so the provider's cache matches the prefix.
 */
function canonical<T>(value: T): T {
  if (Array.isArray(value)) return value.map(canonical) as T
  if (value === null || typeof value !== 'object') return value
  const sorted: Record<string, unknown> = {}
  for (const key of Object.keys(value).sort())
    sorted[key] = canonical((value as Record<string, unknown>)[key])
  return sorted as T
}

/**
 * What the Chat Completions API reports of a call's input, each kind once: its prompt_tokens include
 * the cached ones, which are read at their own price; it bills no cache writes apart.
 */
function openAiUsage(usage: OpenAI.CompletionUsage | null | undefined): TokenUsage {
  const prompt = usage?.prompt_tokens ?? 0
  const cached = Math.min(prompt, usage?.prompt_tokens_details?.cached_tokens ?? 0)
  return {
    input: prompt - cached,
    output: usage?.completion_tokens ?? 0,
    cacheRead: cached,
    cacheWrite: 0,
  }
}

function parseArguments(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text || '{}') as unknown
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : { value }
  } catch {
    return { unparsed: text }
  }
}

// --- streaming: the same answer, its text told as it comes ----------------------------------------------
// Made with stream.ts rather than the SDKs (see there why); each tool call's arguments are
// parsed once, when they are complete, rather than at each piece as the SDKs' stream helpers do.

/** The Messages API version the SDK sends, sent with streamed calls too. */
const anthropicVersion = '2023-06-01'

type StreamTarget = Omit<StreamRequest, 'body' | 'onEvent'>

/** provider_a with `stream: true`: message_start, content blocks and their deltas, message_delta. */
async function streamAnthropic(
  target: StreamTarget,
  params: Anthropic.MessageCreateParamsNonStreaming,
  names: ToolNames,
  onText: OnText,
): Promise<ModelReply> {
  const texts: string[] = []
  const blocks = new Map<number, { id: string; name: string; json: string } | 'text'>()
  const calls: ToolCall[] = []
  const usage = noUsage()
  let model = params.model
  const text = (piece: string) => {
    texts.push(piece)
    onText(piece)
  }
  await postStream({
    ...target,
    body: { ...params, stream: true },
    onEvent(name, data) {
      const event = JSON.parse(data) as
        | Anthropic.RawMessageStreamEvent
        | { type: 'error'; error: { message?: string } }
        | { type: 'ping' }
      if (event.type === 'content_block_delta') {
        const block = blocks.get(event.index)
        if (event.delta.type === 'text_delta') {
          if (event.delta.text) text(event.delta.text)
        } else if (event.delta.type === 'input_json_delta' && block && block !== 'text')
          block.json += event.delta.partial_json
      } else if (event.type === 'content_block_start') {
        const block = event.content_block
        if (block.type === 'text') {
          // Blocks of text are joined by a new line, as the unstreamed answer's are.
          if (texts.length) text('\n')
          blocks.set(event.index, 'text')
          if (block.text) text(block.text)
        } else if (block.type === 'tool_use')
          blocks.set(event.index, { id: block.id, name: block.name, json: '' })
      } else if (event.type === 'content_block_stop') {
        const block = blocks.get(event.index)
        if (block && block !== 'text')
          calls.push({
            id: block.id,
            name: names.original(block.name),
            arguments: parseArguments(block.json),
          })
      } else if (event.type === 'message_start') {
        model = event.message.model
        anthropicUsage(event.message.usage, usage)
      } else if (event.type === 'message_delta') {
        // Cumulative counts: the last one is the call's (the cache's counts too, when it says them).
        anthropicUsage(event.usage, usage)
      } else if (event.type === 'error' || name === 'error') {
        // The provider gave up mid-answer (overloaded, say).
        throw new StreamError(
          `the answer stopped: ${(event as { error?: { message?: string } }).error?.message ?? data}`,
          529,
        )
      }
    },
  })
  // An abort may end the stream's reading without an error: the answer is not whole.
  if (target.signal.aborted) throw new ProviderError('aborted', 'aborted')
  const whole = texts.join('')
  return { text: whole || null, toolCalls: calls, usage, model }
}

/** provider_b with `stream: true`: chunks of deltas, the usage in a last chunk of its own. */
async function streamOpenAi(
  target: StreamTarget,
  params: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
  names: ToolNames,
  onText: OnText,
): Promise<ModelReply> {
  const texts: string[] = []
  const calls: { id: string; name: string; json: string }[] = []
  let usage = noUsage()
  let model = params.model
  await postStream({
    ...target,
    body: { ...params, stream: true, stream_options: { include_usage: true } },
    onEvent(_name, data) {
      if (data === '[DONE]') return
      const chunk = JSON.parse(data) as OpenAI.Chat.ChatCompletionChunk & {
        error?: { message?: string }
      }
      if (chunk.error)
        throw new StreamError(`the answer stopped: ${chunk.error.message ?? data}`, 500)
      model = chunk.model || model
      if (chunk.usage) usage = openAiUsage(chunk.usage)
      const delta = chunk.choices?.[0]?.delta
      if (!delta) return
      if (delta.content) {
        texts.push(delta.content)
        onText(delta.content)
      }
      for (const call of delta.tool_calls ?? []) {
        const held = (calls[call.index] ??= { id: '', name: '', json: '' })
        if (call.id) held.id = call.id
        if (call.function?.name) held.name += call.function.name
        if (call.function?.arguments) held.json += call.function.arguments
      }
    },
  })
  if (target.signal.aborted) throw new ProviderError('aborted', 'aborted')
  const whole = texts.join('')
  return {
    text: whole || null,
    toolCalls: calls
      .filter((c) => c !== undefined)
      .map((c) => ({ id: c.id, name: names.original(c.name), arguments: parseArguments(c.json) })),
    usage,
    model,
  }
}
