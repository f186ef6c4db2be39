import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventually } from '../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from './model-provider.js'

let fake: FakeModelProvider
let keys = 0
/** A fresh key per test, so the tests share one fake without seeing each other's calls. */
const newKey = (prefix: string) => `${prefix}-key-${++keys}`

const anthropic = (apiKey: string, options: { maxRetries?: number } = {}) =>
  new Anthropic({ apiKey, baseURL: fake.url, ...options })
const openai = (apiKey: string, options: { maxRetries?: number } = {}) =>
  new OpenAI({ apiKey, baseURL: fake.url + '/v1', ...options })

const weatherToolA = {
  name: 'get_weather',
  description: 'Current weather of a city',
  input_schema: {
    type: 'object' as const,
    properties: { city: { type: 'string' } },
    required: ['city'],
  },
}
const weatherToolB = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}

beforeAll(async () => {
  fake = await startFakeModelProvider()
})
afterAll(async () => {
  await fake.close()
})

describe('format a (Anthropic Messages) through @anthropic-ai/sdk', () => {
  it('answers a scripted text reply and records the request', async () => {
    const key = newKey('a')
    fake.script(key, { text: 'Hello there', usage: { input: 42, output: 7 } })
    const message = await anthropic(key).messages.create({
      model: 'claude-sonnet-5-5',
      max_tokens: 256,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Hi' }],
    })
    expect(message.type).toBe('message')
    expect(message.role).toBe('assistant')
    expect(message.model).toBe('claude-sonnet-5-5')
    expect(message.stop_reason).toBe('end_turn')
    expect(message.stop_sequence).toBeNull()
    expect(message.content).toEqual([
      expect.objectContaining({ type: 'text', text: 'Hello there' }),
    ])
    expect(message.usage).toMatchObject({ input_tokens: 42, output_tokens: 7 })
    expect(message.id).toMatch(/^msg_/)

    const [call, ...rest] = fake.callsWith(key)
    expect(rest).toHaveLength(0)
    expect(call).toMatchObject({ format: 'a', key, model: 'claude-sonnet-5-5', aborted: false })
    expect(call?.invalid).toBeUndefined()
    expect(call?.body).toEqual({
      model: 'claude-sonnet-5-5',
      max_tokens: 256,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Hi' }],
    })
    expect(call?.headers['anthropic-version']).toBeTruthy()
    expect(fake.requests).toContain(call)
  })

  it('answers the default { text: "done" } once the script is used up', async () => {
    const key = newKey('a')
    const client = anthropic(key)
    const params = {
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user' as const, content: 'x' }],
    }
    const message = await client.messages.create(params)
    expect(message.content).toEqual([expect.objectContaining({ type: 'text', text: 'done' })])
    // Unscripted, the input is counted: a token per 4 characters of {"type":"text","text":"x"}.
    expect(message.usage).toMatchObject({ input_tokens: 7, output_tokens: 5 })
  })

  it('answers tool calls, then records the tool_result round trip as sent', async () => {
    const key = newKey('a')
    fake.script(
      key,
      {
        text: 'Let me look.',
        toolCalls: [
          { name: 'get_weather', arguments: { city: 'Paris' } },
          { name: 'get_weather', arguments: { city: 'Oslo' } },
        ],
      },
      { text: 'Sunny in Paris, snow in Oslo.' },
    )
    const client = anthropic(key)
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: 'Weather in Paris and Oslo?' },
    ]
    const first = await client.messages.create({
      model: 'claude-haiku-5-5',
      max_tokens: 512,
      tools: [weatherToolA],
      messages,
    })
    expect(first.stop_reason).toBe('tool_use')
    const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')
    expect(first.content[0]).toMatchObject({ type: 'text', text: 'Let me look.' })
    expect(uses.map((u) => [u.name, u.input])).toEqual([
      ['get_weather', { city: 'Paris' }],
      ['get_weather', { city: 'Oslo' }],
    ])
    for (const use of uses) expect(use.id).toMatch(/^toolu_\d+$/)
    expect(new Set(uses.map((u) => u.id)).size).toBe(2)

    messages.push({ role: 'assistant', content: first.content })
    messages.push({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: uses[0]!.id, content: '21°C, sunny' },
        { type: 'tool_result', tool_use_id: uses[1]!.id, content: 'no such city', is_error: true },
      ],
    })
    const second = await client.messages.create({
      model: 'claude-haiku-5-5',
      max_tokens: 512,
      tools: [weatherToolA],
      messages,
    })
    expect(second.stop_reason).toBe('end_turn')
    expect(second.content).toEqual([
      expect.objectContaining({ type: 'text', text: 'Sunny in Paris, snow in Oslo.' }),
    ])

    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(2)
    expect(calls[0]?.body.tools).toEqual([weatherToolA])
    const sent = calls[1]?.body.messages
    expect(sent).toHaveLength(3)
    expect(sent[1]).toMatchObject({
      role: 'assistant',
      content: [
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: uses[0]!.id, name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: uses[1]!.id, name: 'get_weather', input: { city: 'Oslo' } },
      ],
    })
    expect(sent[2]).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: uses[0]!.id, content: '21°C, sunny' },
        { type: 'tool_result', tool_use_id: uses[1]!.id, content: 'no such city', is_error: true },
      ],
    })
  })

  it('rejects a history whose tool_use is not answered, as the real API does', async () => {
    const key = newKey('a')
    fake.script(key, { text: 'never sent' })
    const error = await anthropic(key)
      .messages.create({
        model: 'm',
        max_tokens: 10,
        messages: [
          { role: 'user', content: 'go' },
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: 'toolu_x', name: 'get_weather', input: {} }],
          },
          { role: 'user', content: 'and?' },
        ],
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect((error as InstanceType<typeof Anthropic.BadRequestError>).message).toContain(
      'tool_result',
    )
    expect(fake.callsWith(key)[0]?.invalid).toMatch(/toolu_x/)
    // the scripted reply was not used up by the rejected call
    const ok = await anthropic(key).messages.create({
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(ok.content).toEqual([expect.objectContaining({ text: 'never sent' })])
  })

  it('answers an error in the Anthropic shape; the SDK retries a 429 and succeeds', async () => {
    const key = newKey('a')
    fake.script(key, { status: 429, message: 'slow down', retryAfter: 0 }, { text: 'after retry' })
    const message = await anthropic(key).messages.create({
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(message.content).toEqual([expect.objectContaining({ text: 'after retry' })])
    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(2)
    expect(calls.map((c) => c.headers['x-stainless-retry-count'])).toEqual(['0', '1'])
    expect(calls[1]?.body).toEqual(calls[0]?.body)
  })

  it('gives up after the SDK retries are spent, with the error in the Anthropic shape', async () => {
    const key = newKey('a')
    fake.script(
      key,
      { status: 529, message: 'Overloaded', retryAfter: 0 },
      { status: 529, message: 'Overloaded', retryAfter: 0 },
      { status: 529, message: 'Overloaded', retryAfter: 0 },
    )
    const error = await anthropic(key)
      .messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e)
    // The fake's retry-after-ms: 1 spares the SDK's own back-off (0.375-0.5 s, then 0.75-1 s), which
    // @anthropic-ai/sdk would fall back to on retry-after: 0 alone. Seen in the wait before the second
    // retry, as the fake heard the calls come (10-80 ms on one core beside a heavy file), not in the
    // whole call's time: that took up to 700 ms there, of a bound of 1 s.
    const [, second, third] = fake.callsWith(key)
    expect(third!.receivedAt - second!.receivedAt).toBeLessThan(750)
    expect(error).toBeInstanceOf(Anthropic.InternalServerError)
    const apiError = error as InstanceType<typeof Anthropic.APIError>
    expect(apiError.status).toBe(529)
    expect(apiError.error).toMatchObject({
      type: 'error',
      error: { type: 'overloaded_error', message: 'Overloaded' },
    })
    expect(apiError.requestID).toMatch(/^req_/)
    expect(fake.callsWith(key)).toHaveLength(3)
  })

  it('does not have a 400 retried', async () => {
    const key = newKey('a')
    fake.script(key, { status: 400, message: 'prompt is too long' })
    const error = await anthropic(key)
      .messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect((error as Error).message).toContain('prompt is too long')
    expect(fake.callsWith(key)).toHaveLength(1)
  })

  it('records an aborted call as aborted', async () => {
    const key = newKey('a')
    fake.script(key, { text: 'too late', delayMs: 5_000 })
    const controller = new AbortController()
    const pending = anthropic(key)
      .messages.create(
        { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
        { signal: controller.signal },
      )
      .catch((e: unknown) => e)
    await eventually(() => fake.callsWith(key).length === 1, 3000, 'the call to arrive')
    expect(fake.callsWith(key)[0]?.aborted).toBe(false)
    controller.abort()
    expect(await pending).toBeInstanceOf(Anthropic.APIUserAbortError)
    await eventually(() => fake.callsWith(key)[0]?.aborted === true, 3000, 'aborted to be recorded')
    expect(fake.callsWith(key)).toHaveLength(1)
  })

  it('lists models in the Anthropic shape', async () => {
    const key = newKey('a')
    const client = anthropic(key)
    const page = await client.models.list()
    expect(page.data.map((m) => m.id)).toEqual([
      'claude-sonnet-5-5',
      'claude-haiku-5-5',
      'claude-opus-5-5',
    ])
    expect(page.data[0]).toMatchObject({
      type: 'model',
      display_name: 'Claude Sonnet 5.5',
      created_at: expect.any(String),
    })
    expect(page.has_more).toBe(false)
    expect(page.first_id).toBe('claude-sonnet-5-5')
    expect(page.last_id).toBe('claude-opus-5-5')

    // pages are followed by the SDK's auto-pagination
    const many = Array.from({ length: 25 }, (_, i) => `claude-test-${i}`)
    fake.setModels('a', many)
    try {
      const all: string[] = []
      for await (const model of client.models.list({ limit: 10 })) all.push(model.id)
      expect(all).toEqual(many)
      expect((await client.models.retrieve('claude-test-3')).id).toBe('claude-test-3')
      await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(Anthropic.NotFoundError)
    } finally {
      fake.setModels('a', ['claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-opus-5-5'])
    }
    // listing models is not a model call
    expect(fake.callsWith(key)).toHaveLength(0)
  })
})

describe('format b (OpenAI Chat Completions) through openai', () => {
  it('answers a scripted text reply and records the request', async () => {
    const key = newKey('b')
    fake.script(key, { text: 'Hello there', usage: { input: 42, output: 7 } })
    const completion = await openai(key).chat.completions.create({
      model: 'gpt-5.4-mini',
      max_completion_tokens: 256,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    })
    expect(completion.object).toBe('chat.completion')
    expect(completion.model).toBe('gpt-5.4-mini')
    expect(completion.id).toMatch(/^chatcmpl-/)
    expect(typeof completion.created).toBe('number')
    expect(completion.choices).toHaveLength(1)
    expect(completion.choices[0]).toMatchObject({
      index: 0,
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'Hello there' },
    })
    expect(completion.choices[0]?.message.tool_calls).toBeUndefined()
    expect(completion.usage).toMatchObject({
      prompt_tokens: 42,
      completion_tokens: 7,
      total_tokens: 49,
    })

    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(1)
    expect(calls[0]).toMatchObject({ format: 'b', key, model: 'gpt-5.4-mini', aborted: false })
    expect(calls[0]?.body).toEqual({
      model: 'gpt-5.4-mini',
      max_completion_tokens: 256,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    })
    expect(calls[0]?.headers.authorization).toBe(`Bearer ${key}`)
  })

  it('answers tool calls, then records the role:"tool" round trip as sent', async () => {
    const key = newKey('b')
    fake.script(
      key,
      {
        toolCalls: [
          { name: 'get_weather', arguments: { city: 'Paris' } },
          { name: 'get_weather', arguments: { city: 'Oslo' } },
        ],
      },
      { text: 'Sunny in Paris, snow in Oslo.' },
    )
    const client = openai(key)
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'Weather in Paris and Oslo?' },
    ]
    const first = await client.chat.completions.create({
      model: 'gpt-5.4',
      max_tokens: 512,
      tools: [weatherToolB],
      messages,
    })
    const choice = first.choices[0]!
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.message.content).toBeNull()
    const toolCalls = (choice.message.tool_calls ?? []).filter((c) => c.type === 'function')
    expect(toolCalls).toHaveLength(2)
    expect(toolCalls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ['get_weather', { city: 'Paris' }],
      ['get_weather', { city: 'Oslo' }],
    ])
    for (const c of toolCalls) expect(c.id).toMatch(/^call_\d+$/)
    expect(new Set(toolCalls.map((c) => c.id)).size).toBe(2)

    messages.push({ role: 'assistant', content: null, tool_calls: toolCalls })
    messages.push({ role: 'tool', tool_call_id: toolCalls[0]!.id, content: '21°C, sunny' })
    messages.push({ role: 'tool', tool_call_id: toolCalls[1]!.id, content: 'snow' })
    const second = await client.chat.completions.create({
      model: 'gpt-5.4',
      max_tokens: 512,
      tools: [weatherToolB],
      messages,
    })
    expect(second.choices[0]?.message.content).toBe('Sunny in Paris, snow in Oslo.')

    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(2)
    expect(calls[0]?.body.tools).toEqual([weatherToolB])
    const sent = calls[1]?.body.messages
    expect(sent).toHaveLength(4)
    expect(sent[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: toolCalls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: 'get_weather', arguments: c.function.arguments },
      })),
    })
    expect(sent.slice(2)).toEqual([
      { role: 'tool', tool_call_id: toolCalls[0]!.id, content: '21°C, sunny' },
      { role: 'tool', tool_call_id: toolCalls[1]!.id, content: 'snow' },
    ])
  })

  it('rejects tool calls left unanswered, as the real API does', async () => {
    const key = newKey('b')
    const error = await openai(key)
      .chat.completions.create({
        model: 'gpt-5.4',
        messages: [
          { role: 'user', content: 'go' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_x', type: 'function', function: { name: 'f', arguments: '{}' } },
            ],
          },
          { role: 'user', content: 'and?' },
        ],
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as Error).message).toContain('call_x')
    expect(fake.callsWith(key)[0]?.invalid).toContain('must be followed by tool messages')
  })

  it('answers an error in the OpenAI shape; the SDK retries a 429 and succeeds', async () => {
    const key = newKey('b')
    fake.script(key, { status: 429, message: 'Rate limit reached', retryAfter: 0 }, { text: 'ok' })
    const completion = await openai(key).chat.completions.create({
      model: 'gpt-5.4',
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(completion.choices[0]?.message.content).toBe('ok')
    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(2)
    expect(calls.map((c) => c.headers['x-stainless-retry-count'])).toEqual(['0', '1'])
  })

  it('gives up after the SDK retries are spent, with the error in the OpenAI shape', async () => {
    const key = newKey('b')
    fake.script(
      key,
      { status: 500, retryAfter: 0 },
      { status: 503, retryAfter: 0 },
      { status: 429, message: 'Rate limit reached', retryAfter: 0 },
      { text: 'not reached' },
    )
    const error = await openai(key)
      .chat.completions.create({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
    const apiError = error as InstanceType<typeof OpenAI.APIError>
    expect(apiError.status).toBe(429)
    expect(apiError.message).toBe('429 Rate limit reached')
    expect(apiError.code).toBe('rate_limit_exceeded')
    expect(apiError.type).toBe('requests')
    expect(fake.callsWith(key)).toHaveLength(3)
  })

  it('records an aborted call as aborted', async () => {
    const key = newKey('b')
    fake.script(key, { text: 'too late', delayMs: 5_000 })
    const controller = new AbortController()
    const pending = openai(key)
      .chat.completions.create(
        { model: 'gpt-5.4', messages: [{ role: 'user', content: 'hi' }] },
        { signal: controller.signal },
      )
      .catch((e: unknown) => e)
    await eventually(() => fake.callsWith(key).length === 1, 3000, 'the call to arrive')
    controller.abort()
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError)
    await eventually(() => fake.callsWith(key)[0]?.aborted === true, 3000, 'aborted to be recorded')
  })

  it('lists models in the OpenAI shape', async () => {
    const key = newKey('b')
    const client = openai(key)
    const page = await client.models.list()
    expect(page.data).toEqual([
      { id: 'gpt-5.4', object: 'model', created: expect.any(Number), owned_by: 'openai' },
      { id: 'gpt-5.4-mini', object: 'model', created: expect.any(Number), owned_by: 'openai' },
      { id: 'gpt-5.4-nano', object: 'model', created: expect.any(Number), owned_by: 'openai' },
    ])
    fake.setModels('b', ['gpt-test'])
    try {
      expect((await client.models.list()).data.map((m) => m.id)).toEqual(['gpt-test'])
      expect((await client.models.retrieve('gpt-test')).id).toBe('gpt-test')
      await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError)
    } finally {
      fake.setModels('b', ['gpt-5.4', 'gpt-5.4-mini', 'gpt-5.4-nano'])
    }
  })
})

describe('the raw wire', () => {
  it('answers /v1/models by the key header: x-api-key the Anthropic shape, Bearer the OpenAI one', async () => {
    const a = await fetch(`${fake.url}/v1/models`, { headers: { 'x-api-key': 'k' } })
    expect(await a.json()).toMatchObject({
      data: [{ id: 'claude-sonnet-5-5', type: 'model' }, {}, {}],
      has_more: false,
      first_id: 'claude-sonnet-5-5',
      last_id: 'claude-opus-5-5',
    })
    const b = await fetch(`${fake.url}/v1/models`, { headers: { authorization: 'Bearer k' } })
    expect(await b.json()).toMatchObject({
      object: 'list',
      data: [{ id: 'gpt-5.4', object: 'model' }, {}, {}],
    })
  })

  it('takes the key from x-api-key for format a, and answers 401 without any key', async () => {
    const key = newKey('raw')
    fake.script(key, { text: 'by x-api-key' })
    const body = JSON.stringify({
      model: 'm',
      max_tokens: 5,
      messages: [{ role: 'user', content: 'x' }],
    })
    const ok = await fetch(`${fake.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body,
    })
    expect(((await ok.json()) as any).content[0].text).toBe('by x-api-key')
    const none = await fetch(`${fake.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    })
    expect(none.status).toBe(401)
    expect(await none.json()).toMatchObject({
      type: 'error',
      error: { type: 'authentication_error' },
    })
  })

  it('survives a client that disconnects while an answer is delayed', async () => {
    const key = newKey('raw')
    fake.script(key, { text: 'late', delayMs: 200 })
    const controller = new AbortController()
    const pending = fetch(`${fake.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'x' }] }),
      signal: controller.signal,
    }).catch((e: unknown) => e)
    await eventually(() => fake.callsWith(key).length === 1, 3000, 'the call to arrive')
    controller.abort()
    await pending
    await eventually(() => fake.callsWith(key)[0]?.aborted === true, 3000, 'aborted')
    await new Promise((r) => setTimeout(r, 300)) // past the delay: nothing is written, nothing throws
    const after = await openai(key).chat.completions.create({
      model: 'gpt-5.4',
      messages: [{ role: 'user', content: 'still there?' }],
    })
    expect(after.choices[0]?.message.content).toBe('done')
  })
})

describe('request checks', () => {
  it('rejects tool names a real provider rejects (e.g. a dotted MCP name)', async () => {
    const key = newKey('c')
    const schema = { type: 'object' as const, properties: {} }
    const a = await anthropic(key)
      .messages.create({
        model: 'm',
        max_tokens: 10,
        tools: [{ name: 'files.read', description: 'x', input_schema: schema }],
        messages: [{ role: 'user', content: 'hi' }],
      })
      .catch((e: unknown) => e)
    expect(a).toBeInstanceOf(Anthropic.BadRequestError)
    const b = await openai(key)
      .chat.completions.create({
        model: 'gpt-5.4',
        tools: [{ type: 'function', function: { name: 'files.read', parameters: schema } }],
        messages: [{ role: 'user', content: 'hi' }],
      })
      .catch((e: unknown) => e)
    expect(b).toBeInstanceOf(OpenAI.BadRequestError)
    expect(fake.callsWith(key).map((r) => r.invalid)).toEqual([
      expect.stringContaining('files.read'),
      expect.stringContaining('files.read'),
    ])
  })

  it('rejects a system message in the Anthropic messages; streams a streamed call', async () => {
    const key = newKey('c')
    const raw = (body: unknown) =>
      fetch(`${fake.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const system = await raw({
      model: 'm',
      max_tokens: 5,
      messages: [
        { role: 'system', content: 'x' },
        { role: 'user', content: 'y' },
      ],
    })
    expect(system.status).toBe(400)
    expect(await system.json()).toMatchObject({ error: { type: 'invalid_request_error' } })
    const streamed = await raw({
      model: 'm',
      max_tokens: 5,
      stream: true,
      messages: [{ role: 'user', content: 'y' }],
    })
    expect(streamed.status).toBe(200)
    expect(streamed.headers.get('content-type')).toBe('text/event-stream')
    const events = (await streamed.text()).match(/^event: \S+/gm)
    expect(events).toEqual([
      'event: message_start',
      'event: content_block_start',
      'event: content_block_delta',
      'event: content_block_stop',
      'event: message_delta',
      'event: message_stop',
    ])
  })
})

describe('scripts and handlers', () => {
  it('keeps scripts apart per key, also for concurrent calls', async () => {
    const k1 = newKey('s')
    const k2 = newKey('s')
    fake.script(k1, { text: 'one-1', delayMs: 100 }, { text: 'one-2' })
    fake.script(k2, { text: 'two-1' }, { text: 'two-2' })
    const params = {
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user' as const, content: 'x' }],
    }
    const textOf = (m: Anthropic.Message) => (m.content[0] as Anthropic.TextBlock).text
    const [a1, b1] = await Promise.all([
      anthropic(k1).messages.create(params).then(textOf),
      openai(k2)
        .chat.completions.create({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'x' }] })
        .then((c) => c.choices[0]?.message.content),
    ])
    expect([a1, b1]).toEqual(['one-1', 'two-1'])
    expect(textOf(await anthropic(k2).messages.create(params))).toBe('two-2')
    expect(textOf(await anthropic(k1).messages.create(params))).toBe('one-2')
    expect(textOf(await anthropic(k1).messages.create(params))).toBe('done')
    expect(fake.callsWith(k1).map((r) => r.format)).toEqual(['a', 'a', 'a'])
    expect(fake.callsWith(k2).map((r) => r.format)).toEqual(['b', 'a'])
  })

  it('lets a handler decide, falling back to the script when it returns undefined', async () => {
    const key = newKey('h')
    fake.script(key, { text: 'from the script' })
    fake.onRequest(async (request) => {
      if (request.key !== key) return undefined
      const last = request.body.messages.at(-1)
      return last.content === 'echo' ? { text: `echo from ${request.format}` } : undefined
    })
    try {
      const params = (content: string) => ({
        model: 'm',
        max_tokens: 10,
        messages: [{ role: 'user' as const, content }],
      })
      const echoed = await anthropic(key).messages.create(params('echo'))
      expect(echoed.content[0]).toMatchObject({ text: 'echo from a' })
      const scripted = await anthropic(key).messages.create(params('other'))
      expect(scripted.content[0]).toMatchObject({ text: 'from the script' })
    } finally {
      fake.onRequest(() => undefined)
    }
  })
})

describe('prompt caches, as the providers document them', () => {
  /** The fake's count: a token per 4 characters of a block's JSON. */
  const tokens = (block: unknown) => Math.max(1, Math.ceil(JSON.stringify(block).length / 4))
  const text = (t: string) => ({ type: 'text', text: t })
  const ephemeral = { type: 'ephemeral' as const }
  const long = 'The tide tables of the northern harbour, in detail. '.repeat(100)
  let clock = 1_000_000
  let cached: FakeModelProvider
  beforeAll(async () => {
    cached = await startFakeModelProvider({ now: () => clock })
  })
  afterAll(async () => cached?.close())

  it('format a: reads the longest prefix an earlier breakpoint wrote, writes up to the last one, for 5 minutes', async () => {
    const client = new Anthropic({ apiKey: 'cache-a', baseURL: cached.url })
    const system = [{ type: 'text' as const, text: long, cache_control: ephemeral }]
    const ask = (messages: Anthropic.MessageParam[], stream = false) =>
      stream
        ? client.messages
            .stream({ model: 'claude-sonnet-5-5', max_tokens: 10, system, messages })
            .finalMessage()
        : client.messages.create({ model: 'claude-sonnet-5-5', max_tokens: 10, system, messages })
    const cache = (m: Anthropic.Message) => [
      m.usage.cache_read_input_tokens,
      m.usage.cache_creation_input_tokens,
      m.usage.input_tokens,
    ]

    // The system is past 1,024 tokens: written; the message after the last breakpoint is plain input.
    const first = await ask([{ role: 'user', content: 'Hello' }])
    expect(cache(first)).toEqual([0, tokens(text(long)), tokens(text('Hello'))])

    // The conversation grows, its breakpoint on its newest message: the system is read, the rest
    // written (a text message and the one block carrying it are the same prefix).
    const grown: Anthropic.MessageParam[] = [
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi there' },
      { role: 'user', content: [{ type: 'text', text: 'Next', cache_control: ephemeral }] },
    ]
    const second = await ask(grown)
    const rest = tokens(text('Hello')) + tokens(text('Hi there')) + tokens(text('Next'))
    expect(cache(second)).toEqual([tokens(text(long)), rest, 0])

    // The next call reads all of that, also streamed (message_start and message_delta say the same).
    const third = await ask(
      [
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi there' },
        { role: 'user', content: 'Next' },
        { role: 'assistant', content: 'Aye' },
        { role: 'user', content: [{ type: 'text', text: 'Last', cache_control: ephemeral }] },
      ],
      true,
    )
    expect(cache(third)).toEqual([
      tokens(text(long)) + rest,
      tokens(text('Aye')) + tokens(text('Last')),
      0,
    ])

    // Five minutes after its last use an entry is gone: all of it is written again.
    clock += 5 * 60_000 + 1
    const later = await ask(grown)
    expect(cache(later)).toEqual([0, tokens(text(long)) + rest, 0])

    // Another key (another organisation) reads nothing of it.
    const other = await new Anthropic({
      apiKey: 'cache-a-other',
      baseURL: cached.url,
    }).messages.create({
      model: 'claude-sonnet-5-5',
      max_tokens: 10,
      system,
      messages: grown,
    })
    expect(cache(other)).toEqual([0, tokens(text(long)) + rest, 0])
  })

  it('format a: writes nothing under 1,024 tokens; a scripted input is reported as is', async () => {
    const client = new Anthropic({ apiKey: 'cache-a-small', baseURL: cached.url })
    const params = {
      model: 'claude-sonnet-5-5',
      max_tokens: 10,
      system: [{ type: 'text' as const, text: 'Be brief.', cache_control: ephemeral }],
      messages: [{ role: 'user' as const, content: 'Hi' }],
    }
    for (let n = 0; n < 2; n++) {
      const small = await client.messages.create(params)
      expect(small.usage).toMatchObject({
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      })
      expect(small.usage.input_tokens).toBe(tokens(text('Be brief.')) + tokens(text('Hi')))
    }
    cached.script('cache-a-small', { text: 'x', usage: { input: 42 } })
    const scripted = await client.messages.create(params)
    expect(scripted.usage).toMatchObject({
      input_tokens: 42,
      cache_read_input_tokens: 0,
      output_tokens: 5,
    })
  })

  it('format a: refuses more than 4 breakpoints, and a cache_control of another type', async () => {
    const raw = (body: unknown) =>
      fetch(`${cached.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': 'cache-a-bad', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const block = (t: string) => ({ type: 'text', text: t, cache_control: ephemeral })
    const five = await raw({
      model: 'm',
      max_tokens: 5,
      system: [block('a'), block('b')],
      messages: [{ role: 'user', content: [block('c'), block('d'), block('e')] }],
    })
    expect(five.status).toBe(400)
    expect(((await five.json()) as { error: { message: string } }).error.message).toBe(
      'A maximum of 4 blocks with cache_control may be provided. Found 5.',
    )
    const other = await raw({
      model: 'm',
      max_tokens: 5,
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'x', cache_control: { type: 'forever' } }],
        },
      ],
    })
    expect(other.status).toBe(400)
    expect(cached.callsWith('cache-a-bad').map((r) => r.invalid)).toEqual([
      expect.stringContaining('maximum of 4'),
      expect.stringContaining("should be 'ephemeral'"),
    ])
  })

  it('format b: caches a prefix from 1,024 tokens by itself, in steps of 128, within prompt_tokens', async () => {
    const client = new OpenAI({ apiKey: 'cache-b', baseURL: `${cached.url}/v1` })
    const ask = (system: string, question: string, stream = false) => {
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'system', content: system },
        { role: 'user', content: question },
      ]
      return stream
        ? client.chat.completions
            .create({
              model: 'gpt-5.4',
              messages,
              stream: true,
              stream_options: { include_usage: true },
            })
            .then(async (chunks) => {
              let usage: OpenAI.CompletionUsage | undefined
              for await (const chunk of chunks) usage = chunk.usage ?? usage
              return usage!
            })
        : client.chat.completions.create({ model: 'gpt-5.4', messages }).then((c) => c.usage!)
    }
    const systemTokens = tokens({ role: 'system', content: long })
    const prompt = systemTokens + tokens({ role: 'user', content: 'Hello' })
    const first = await ask(long, 'Hello')
    expect([first.prompt_tokens, first.prompt_tokens_details?.cached_tokens]).toEqual([prompt, 0])
    // The same prompt again: its whole length, counted in steps of 128 from 1,024.
    const steps = (n: number) => 1024 + Math.floor((n - 1024) / 128) * 128
    const again = await ask(long, 'Hello', true)
    expect([again.prompt_tokens, again.prompt_tokens_details?.cached_tokens]).toEqual([
      prompt,
      steps(prompt),
    ])
    // Another question after the same system: the system is read.
    const next = await ask(long, 'Something else')
    expect(next.prompt_tokens_details?.cached_tokens).toBe(steps(systemTokens))
    // A prompt that differs from its first byte reads nothing; nor does a short one, twice.
    expect((await ask(`!${long}`, 'Hello')).prompt_tokens_details?.cached_tokens).toBe(0)
    await ask('Be brief.', 'Hello')
    expect((await ask('Be brief.', 'Hello')).prompt_tokens_details?.cached_tokens).toBe(0)
    // Five minutes unused, and it is gone.
    clock += 5 * 60_000 + 1
    expect((await ask(long, 'Hello')).prompt_tokens_details?.cached_tokens).toBe(0)
  })

  it('records the system prompt as text in both formats', async () => {
    await new Anthropic({ apiKey: 'cache-sys', baseURL: cached.url }).messages.create({
      model: 'm',
      max_tokens: 5,
      system: [
        { type: 'text', text: 'Be ', cache_control: ephemeral },
        { type: 'text', text: 'brief.' },
      ],
      messages: [{ role: 'user', content: 'x' }],
    })
    await new OpenAI({ apiKey: 'cache-sys', baseURL: `${cached.url}/v1` }).chat.completions.create({
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'x' },
      ],
    })
    expect(cached.callsWith('cache-sys').map((r) => r.system)).toEqual(['Be brief.', 'Be brief.'])
  })
})
