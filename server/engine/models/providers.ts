import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { Provider } from '../../../shared/schemas/models.js'
import {
  ProviderError,
  type Message,
  type ModelProvider,
  type ModelReply,
  type OnText,
  type ToolCall,
} from '../../domain/models/index.js'
import { postStream, StreamError, type StreamRequest } from './stream.js'

// Model providers behind one interface (DESIGN 6; its types are the domain's: domain/models/provider.ts):
// provider_a speaks the Anthropic Messages API,
// provider_b the OpenAI Chat Completions API, through their official SDKs. Base URLs are configurable so
// a local compatible server, or the tests' fake provider, can stand in.

export interface ProviderOptions {
  baseUrls: Record<Provider, string>
  /** Milliseconds before a call gives up (each attempt). */
  timeoutMs?: number
  /** Retries with backoff on 429 and 5xx, by the SDKs. */
  maxRetries?: number
}

export function createProviders(options: ProviderOptions): Record<Provider, ModelProvider> {
  return { provider_a: anthropicProvider(options), provider_b: openAiProvider(options) }
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

function classify(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err
  const e = err as { name?: string; status?: number; message?: string }
  if (e?.name === 'APIUserAbortError' || e?.name === 'AbortError')
    return new ProviderError('aborted', 'aborted')
  const status = typeof e?.status === 'number' ? e.status : undefined
  const detail = (e?.message ?? String(err)).slice(0, 300)
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

function anthropicProvider({
  baseUrls,
  timeoutMs = 120_000,
  maxRetries = 2,
}: ProviderOptions): ModelProvider {
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
        maxRetries,
      }),
  )
  return {
    async call(request, credentials, signal, onText) {
      const names = new ToolNames(request.tools.map((t) => t.name))
      const messages: Anthropic.MessageParam[] = request.messages.map((m) => {
        if (m.role === 'user') return { role: 'user', content: m.text }
        if (m.role === 'tool') {
          return {
            role: 'user',
            content: m.results.map((r) => ({
              type: 'tool_result' as const,
              tool_use_id: r.callId,
              content: r.content,
              is_error: r.isError,
            })),
          }
        }
        const content: Anthropic.ContentBlockParam[] = []
        if (m.text) content.push({ type: 'text', text: m.text })
        for (const call of m.toolCalls) {
          content.push({
            type: 'tool_use',
            id: call.id,
            name: names.wire(call.name),
            input: call.arguments,
          })
        }
        return { role: 'assistant', content }
      })
      const params: Anthropic.MessageCreateParamsNonStreaming = {
        model: request.model,
        max_tokens: request.maxTokens,
        system: request.system,
        messages,
        tools: request.tools.map((t) => ({
          name: names.wire(t.name),
          description: t.description,
          input_schema: t.parameters as Anthropic.Tool.InputSchema,
        })),
      }
      try {
        if (onText)
          return await streamAnthropic(
            {
              url: `${baseUrls.provider_a.replace(/\/+$/, '')}/v1/messages`,
              headers: { 'x-api-key': credentials.key, 'anthropic-version': anthropicVersion },
              signal,
              timeoutMs,
              maxRetries,
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
          usage: { input: reply.usage.input_tokens, output: reply.usage.output_tokens },
          model: reply.model,
        }
      } catch (err) {
        throw classify(err)
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await client(credentials.key).models.list({ limit: 100 }, { signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err)
      }
    },
  }
}

// --- provider_b: the OpenAI Chat Completions API -------------------------------------------------------

function openAiProvider({
  baseUrls,
  timeoutMs = 120_000,
  maxRetries = 2,
}: ProviderOptions): ModelProvider {
  const client = clientsByKey(
    (key: string) =>
      new OpenAI({
        apiKey: key,
        baseURL: `${baseUrls.provider_b.replace(/\/+$/, '')}/v1`,
        timeout: timeoutMs,
        maxRetries,
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
                    function: { name: names.wire(c.name), arguments: JSON.stringify(c.arguments) },
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
      try {
        if (onText)
          return await streamOpenAi(
            {
              url: `${baseUrls.provider_b.replace(/\/+$/, '')}/v1/chat/completions`,
              headers: { authorization: `Bearer ${credentials.key}` },
              signal,
              timeoutMs,
              maxRetries,
            },
            params,
            names,
            onText,
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
          usage: {
            input: reply.usage?.prompt_tokens ?? 0,
            output: reply.usage?.completion_tokens ?? 0,
          },
          model: reply.model,
        }
      } catch (err) {
        throw classify(err)
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await client(credentials.key).models.list({ signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err)
      }
    },
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
  const usage = { input: 0, output: 0 }
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
        usage.input = event.message.usage.input_tokens
        usage.output = event.message.usage.output_tokens
      } else if (event.type === 'message_delta') {
        // Cumulative counts: the last one is the call's.
        usage.output = event.usage.output_tokens
        if (event.usage.input_tokens !== null && event.usage.input_tokens !== undefined)
          usage.input = event.usage.input_tokens
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
  const usage = { input: 0, output: 0 }
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
      if (chunk.usage) {
        usage.input = chunk.usage.prompt_tokens
        usage.output = chunk.usage.completion_tokens
      }
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
