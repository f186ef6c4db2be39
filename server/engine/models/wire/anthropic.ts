import type Anthropic from '@anthropic-ai/sdk'
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
} from '../../../domain/models/index.js'
import { classify, knowTimeoutsOf } from '../failures.js'
import { withRetries } from '../retries.js'
import { postStream, StreamError } from '../stream.js'
import {
  canonical,
  boundedFetch,
  clientsByKey,
  onFirstUse,
  noUsage,
  parseArguments,
  telling,
  ToolNames,
  type ProviderOptions,
  type StreamTarget,
} from './shared.js'

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

export const anthropicSdk = onFirstUse(async () => {
  const { default: Anthropic } = await import('@anthropic-ai/sdk')
  knowTimeoutsOf(Anthropic.APIConnectionTimeoutError)
  return Anthropic
})

export function anthropicProvider({
  baseUrls,
  timeoutMs = 120_000,
  idleMs = 60_000,
  maxRetries = 2,
  promptCache = true,
  log,
}: ProviderOptions): ModelProvider & { cacheRefusalsKept(): number } {
  const wire = { provider: 'provider_a' as const, baseUrl: baseUrls.provider_a, timeoutMs, idleMs }
  // The key goes in x-api-key, as the Messages API documents; the SDK's own credentials are cleared so
  // it sends no Authorization header and reads no key from the environment.
  const client = clientsByKey(
    async (key: string) =>
      new (await anthropicSdk())({
        apiKey: null,
        authToken: null,
        defaultHeaders: { 'x-api-key': key },
        baseURL: baseUrls.provider_a,
        timeout: timeoutMs,
        maxRetries: 0, // retries.ts
        fetch: boundedFetch,
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
    headers: Record<string, string> | undefined,
  ): Promise<ModelReply> {
    const told = telling(onText)
    return withRetries(() => attempt(params, names, credentials, signal, told.onText, headers), {
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
    headers: Record<string, string> | undefined,
  ): Promise<ModelReply> {
    if (onText)
      return streamAnthropic(
        {
          url: `${baseUrls.provider_a.replace(/\/+$/, '')}/v1/messages`,
          headers: {
            'x-api-key': credentials.key,
            'anthropic-version': anthropicVersion,
            ...headers,
          },
          signal,
          idleMs,
        },
        params,
        names,
        onText,
      )
    // traceparent when traced (issue 49): a provider or gateway that traces joins the call's trace.
    const reply = await (
      await client(credentials.key)
    ).messages.create(params, {
      signal,
      headers,
    })
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
      finishReason: reply.stop_reason ?? undefined,
    }
  }

  return {
    async call(request, credentials, signal, onText, headers) {
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
          headers,
        )
      } catch (err) {
        const failure = classify(err, wire)
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
        const now = Date.now()
        // Those that are over go now, when one is made (a rare event), never on a call's way: one was
        // kept until its connection was called again, for good for a connection never called again
        // (a key unbound, an enterprise gone), one more for each connection a process ever used.
        for (const [other, until] of refusing) if (until <= now) refusing.delete(other)
        refusing.set(connection, now + cacheRefusalMs)
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
            headers,
          )
        } catch (again) {
          throw classify(again, wire)
        }
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await (await client(credentials.key)).models.list({ limit: 100 }, { signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err, wire)
      }
    },
    /** How many connections' refusals of cache breakpoints are kept (for tests). */
    cacheRefusalsKept: () => refusing.size,
  }
}

/** The Messages API version the SDK sends, sent with streamed calls too. */
const anthropicVersion = '2023-06-01'

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
  let finishReason: string | undefined
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
        finishReason = event.delta.stop_reason ?? finishReason
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
  return { text: whole || null, toolCalls: calls, usage, model, finishReason }
}
