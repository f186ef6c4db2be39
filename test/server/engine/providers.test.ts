import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createProviders,
  ProviderError,
  type ModelProvider,
  type ModelRequest,
} from '../../../server/engine/models/index.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The providers' streaming (issue 26; DESIGN 13): with onText the call is made with `stream: true` in
// the format's own wire shape, its text is told as it comes, and its answer is the same as unstreamed.

let fake: FakeModelProvider
let providers: Record<'provider_a' | 'provider_b', ModelProvider>

beforeAll(async () => {
  fake = await startFakeModelProvider()
  providers = createProviders({
    baseUrls: { provider_a: fake.url, provider_b: fake.url },
    maxRetries: 2,
  })
})
afterAll(async () => fake?.close())

const request: ModelRequest = {
  model: 'm-1',
  system: 'Be brief.',
  messages: [{ role: 'user', text: 'Plan the week' }],
  tools: [
    { name: 'os.ask_ceo', description: 'ask', parameters: { type: 'object', properties: {} } },
  ],
  maxTokens: 100,
}

const text = '# Plan\n\n- **Monday**: the invoices\n- `Tuesday`: the café ☕ review'

describe.each(['provider_a', 'provider_b'] as const)('%s streaming', (provider) => {
  const format = provider === 'provider_a' ? 'a' : 'b'

  it('tells the text as it comes; the answer equals the unstreamed one', async () => {
    const key = `k-${provider}-text`
    const reply = { text, usage: { input: 120, output: 30 } }
    fake.script(key, reply, reply)
    const plain = await providers[provider].call(request, { key }, new AbortController().signal)
    const pieces: string[] = []
    const streamed = await providers[provider].call(
      request,
      { key },
      new AbortController().signal,
      (piece) => pieces.push(piece),
    )
    expect(streamed).toEqual(plain)
    expect(streamed.text).toBe(text)
    expect(streamed.usage).toEqual({ input: 120, output: 30 })
    expect(pieces.length).toBeGreaterThan(5)
    expect(pieces.join('')).toBe(text)
    const [first, second] = fake.callsWith(key)
    expect(first!.format).toBe(format)
    expect(first!.body.stream ?? false).toBe(false)
    expect(second!.body.stream).toBe(true)
    if (provider === 'provider_b')
      expect(second!.body.stream_options).toEqual({ include_usage: true })
  })

  it('assembles tool calls from their pieces, with the text before them', async () => {
    const key = `k-${provider}-tools`
    fake.script(key, {
      text: 'Let me ask.',
      toolCalls: [
        { name: 'os__ask_ceo', arguments: { questions: ['Which day?'], choices: [{ key: 'm' }] } },
      ],
    })
    const pieces: string[] = []
    const reply = await providers[provider].call(
      request,
      { key },
      new AbortController().signal,
      (piece) => pieces.push(piece),
    )
    expect(reply.text).toBe('Let me ask.')
    expect(pieces.join('')).toBe('Let me ask.')
    expect(reply.toolCalls).toEqual([
      {
        id: expect.any(String),
        name: 'os.ask_ceo',
        arguments: { questions: ['Which day?'], choices: [{ key: 'm' }] },
      },
    ])
  })

  it('a provider that drops the stream mid-answer is an outage, and what came was told', async () => {
    const key = `k-${provider}-drop`
    fake.script(key, { text: 'one two three four five', failAfterTokens: 2 })
    const pieces: string[] = []
    const failed = await providers[provider]
      .call(request, { key }, new AbortController().signal, (piece) => pieces.push(piece))
      .catch((err: unknown) => err)
    expect(failed).toBeInstanceOf(ProviderError)
    expect((failed as ProviderError).kind).toBe('outage')
    expect(pieces.join('')).toBe('one two ')
  })

  it('tries a throttled call again as the SDK would, honouring retry-after; a refused key is not tried again', async () => {
    const key = `k-${provider}-retry`
    fake.script(
      key,
      { status: 429, retryAfter: 0.2 },
      { status: 503, retryAfter: 0 },
      { text: 'at last' },
    )
    const started = Date.now()
    const reply = await providers[provider].call(
      request,
      { key },
      new AbortController().signal,
      () => undefined,
    )
    expect(reply.text).toBe('at last')
    expect(Date.now() - started).toBeGreaterThanOrEqual(200)
    expect(fake.callsWith(key)).toHaveLength(3)
    const refused = `k-${provider}-refused`
    fake.script(refused, { status: 401, message: 'invalid x-api-key' })
    const failed = (await providers[provider]
      .call(request, { key: refused }, new AbortController().signal, () => undefined)
      .catch((err: unknown) => err)) as ProviderError
    expect(failed.kind).toBe('refused_key')
    expect(failed.status).toBe(401)
    expect(fake.callsWith(refused)).toHaveLength(1)
  })

  it('an abort while streaming ends the call as aborted', async () => {
    const key = `k-${provider}-abort`
    fake.script(key, { text: 'a b c d e f g h', tokenMs: 50 })
    const controller = new AbortController()
    const pieces: string[] = []
    const failed = await providers[provider]
      .call(request, { key }, controller.signal, (piece) => {
        pieces.push(piece)
        if (pieces.length === 2) controller.abort()
      })
      .catch((err: unknown) => err)
    expect((failed as ProviderError).kind).toBe('aborted')
    expect(pieces).toHaveLength(2)
  })
})
