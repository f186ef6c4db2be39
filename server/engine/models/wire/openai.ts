import type OpenAI from 'openai'
import {
  ProviderError,
  type Credentials,
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

// --- provider_b: the OpenAI Chat Completions API -------------------------------------------------------

export const openAiSdk = onFirstUse(async () => {
  const { default: OpenAI } = await import('openai')
  knowTimeoutsOf(OpenAI.APIConnectionTimeoutError)
  return OpenAI
})

export function openAiProvider({
  baseUrls,
  timeoutMs = 120_000,
  idleMs = 60_000,
  maxRetries = 2,
}: ProviderOptions): ModelProvider {
  const wire = { provider: 'provider_b' as const, baseUrl: baseUrls.provider_b, timeoutMs, idleMs }
  const client = clientsByKey(
    async (key: string) =>
      new (await openAiSdk())({
        apiKey: key,
        baseURL: `${baseUrls.provider_b.replace(/\/+$/, '')}/v1`,
        timeout: timeoutMs,
        maxRetries: 0, // retries.ts
        fetch: boundedFetch,
      }),
  )
  return {
    async call(request, credentials, signal, onText, headers) {
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
              headers: { authorization: `Bearer ${credentials.key}`, ...headers },
              signal,
              idleMs,
            },
            params,
            names,
            told.onText,
          )
        const reply = await (
          await client(credentials.key)
        ).chat.completions.create(params, { signal, headers })
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
          finishReason: reply.choices[0]?.finish_reason ?? undefined,
        }
      }
      try {
        return await withRetries(attempt, { maxRetries, signal, told: told.any })
      } catch (err) {
        throw classify(err, wire)
      }
    },
    async listModels(credentials, signal) {
      try {
        const page = await (await client(credentials.key)).models.list({ signal })
        return page.data.map((m) => m.id)
      } catch (err) {
        throw classify(err, wire)
      }
    },
  }
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
  let finishReason: string | undefined
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
      finishReason = chunk.choices?.[0]?.finish_reason ?? finishReason
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
    finishReason,
  }
}
