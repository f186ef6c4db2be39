import { createServer, type AddressInfo } from 'node:net'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  createProviders,
  ProviderError,
  type ModelProvider,
  type ModelRequest,
} from '../../../server/engine/models/index.js'
import { anthropicProvider } from '../../../server/engine/models/wire/anthropic.js'
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
    expect(streamed.usage).toEqual({ input: 120, output: 30, cacheRead: 0, cacheWrite: 0 })
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

  it('tries a failed call again as the SDK would, honouring retry-after; a throttle or a refused key is not tried again', async () => {
    const key = `k-${provider}-retry`
    fake.script(
      key,
      { status: 503, retryAfter: 0.2 },
      { status: 502, retryAfter: 0 },
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
    // A throttle is waited out by the engine, the work off its worker (issue 34: model-faults.test.ts).
    const throttled = `k-${provider}-throttled`
    fake.script(throttled, { status: 429, retryAfter: 0.2 }, { text: 'too soon' })
    const told = (await providers[provider]
      .call(request, { key: throttled }, new AbortController().signal, () => undefined)
      .catch((err: unknown) => err)) as ProviderError
    expect(told).toMatchObject({ kind: 'throttled', status: 429, retryAfterMs: 200 })
    expect(fake.callsWith(throttled)).toHaveLength(1)
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

// Prompt caching (issue 29; DESIGN 13): provider_a's breakpoints, both providers' cache counts read in
// both paths, OSD_PROMPT_CACHE=off, and a server that refuses breakpoints.

/** A conversation two steps into a run: input, an answer with a tool call, its result. */
const conversation: ModelRequest = {
  model: 'claude-sonnet-5-5',
  system: `You keep the harbour's books. ${'The tide tables in detail. '.repeat(250)}`,
  messages: [
    { role: 'user', text: 'Input: {"month": "June"}' },
    {
      role: 'assistant',
      text: null,
      toolCalls: [
        { id: 'toolu_1', name: 'os.ask_ceo', arguments: { zeta: 1, alpha: { b: 2, a: 1 } } },
      ],
    },
    { role: 'tool', results: [{ callId: 'toolu_1', content: 'June it is.' }] },
  ],
  tools: request.tools,
  maxTokens: 100,
}

/** Where a provider_a body carries cache_control: system, tools.i, messages.i (on their last block). */
function breakpointsIn(body: any): string[] {
  const at: string[] = []
  if (Array.isArray(body.system) && body.system.some((b: any) => b.cache_control)) at.push('system')
  body.tools?.forEach((t: any, i: number) => t.cache_control && at.push(`tools.${i}`))
  body.messages.forEach((m: any, i: number) => {
    if (!Array.isArray(m.content)) return
    const marked = m.content.findIndex((b: any) => b.cache_control)
    if (marked !== -1) {
      expect(marked).toBe(m.content.length - 1)
      expect(m.content[marked].cache_control).toEqual({ type: 'ephemeral' })
      at.push(`messages.${i}`)
    }
  })
  return at
}

describe('provider_a cache breakpoints', () => {
  it('marks the system, the newest message and where the previous call ended; both paths read the counts', async () => {
    const key = 'k-cache-a'
    const a = providers.provider_a
    const signal = new AbortController().signal
    const first = await a.call(conversation, { key }, signal)
    const [sent] = fake.callsWith(key)
    // The system as one text block, the same text; the tool result (newest) and the input before the
    // newest answer: 3 breakpoints of the 4 allowed.
    expect(sent!.system).toBe(conversation.system)
    expect(breakpointsIn(sent!.body)).toEqual(['system', 'messages.0', 'messages.2'])
    expect(first.usage.cacheWrite).toBeGreaterThan(1024)
    expect(first.usage.cacheRead).toBe(0)
    // The same conversation a step further, streamed then not: both read what the first call wrote,
    // and report the same counts (message_start and message_delta read as the unstreamed usage).
    const further: ModelRequest = {
      ...conversation,
      messages: [
        ...conversation.messages,
        { role: 'assistant', text: 'Noted.', toolCalls: [] },
        { role: 'user', text: 'And July?' },
      ],
    }
    const streamed = await a.call(further, { key }, signal, () => undefined)
    const plain = await a.call(further, { key }, signal)
    expect(streamed.usage.cacheRead).toBe(first.usage.cacheWrite + first.usage.cacheRead)
    expect(streamed.usage.cacheWrite).toBeGreaterThan(0)
    expect(plain.usage).toEqual({
      input: 0,
      output: streamed.usage.output,
      cacheRead: streamed.usage.cacheRead + streamed.usage.cacheWrite,
      cacheWrite: 0,
    })
    const [, second] = fake.callsWith(key)
    expect(breakpointsIn(second!.body)).toEqual(['system', 'messages.2', 'messages.4'])
    // A tool call's arguments go with their keys in one order, whatever order they came in.
    expect(JSON.stringify(second!.body.messages[1].content[0].input)).toBe(
      '{"alpha":{"a":1,"b":2},"zeta":1}',
    )
  })

  it('marks the last stable message when later ones change at the next call (a chat turn)', async () => {
    const key = 'k-cache-stable'
    await providers.provider_a.call(
      {
        ...conversation,
        messages: [
          { role: 'user', text: 'Hello' },
          { role: 'assistant', text: 'Aye', toolCalls: [] },
          {
            role: 'user',
            text: 'What of June?\n\n# What the company has learned\n- [enterprise] x',
          },
        ],
        stableMessages: 2,
      },
      { key },
      new AbortController().signal,
    )
    expect(breakpointsIn(fake.callsWith(key)[0]!.body)).toEqual([
      'system',
      'messages.0',
      'messages.1',
      'messages.2',
    ])
  })

  it('sends none with OSD_PROMPT_CACHE=off; the tools carry one when there is no system', async () => {
    const off = createProviders({
      baseUrls: { provider_a: fake.url, provider_b: fake.url },
      promptCache: false,
    })
    const key = 'k-cache-off'
    const reply = await off.provider_a.call(conversation, { key }, new AbortController().signal)
    await off.provider_a.call(conversation, { key }, new AbortController().signal, () => undefined)
    for (const sent of fake.callsWith(key)) {
      expect(JSON.stringify(sent.body)).not.toContain('cache_control')
      expect(sent.body.system).toBe(conversation.system)
    }
    expect(reply.usage.cacheRead + reply.usage.cacheWrite).toBe(0)
    const bare = 'k-cache-bare'
    await providers.provider_a.call(
      { ...conversation, system: '' },
      { key: bare },
      new AbortController().signal,
    )
    expect(breakpointsIn(fake.callsWith(bare)[0]!.body)).toEqual([
      'tools.0',
      'messages.0',
      'messages.2',
    ])
  })
})

describe('provider_b prompt caching', () => {
  it('keeps the prefix byte-stable and reads cached_tokens, streamed or not, each token once', async () => {
    const key = 'k-cache-b'
    const b = providers.provider_b
    const signal = new AbortController().signal
    const request = { ...conversation, model: 'gpt-5.4' }
    const first = await b.call(request, { key }, signal)
    expect(first.usage.cacheRead).toBe(0)
    const streamed = await b.call(request, { key }, signal, () => undefined)
    const plain = await b.call(request, { key }, signal)
    const [sent, again] = fake.callsWith(key)
    // The same bytes each time (streaming options aside): the tools first, then the system.
    const prompt = (body: any) => JSON.stringify([body.tools, body.messages])
    expect(prompt(again!.body)).toBe(prompt(sent!.body))
    expect(JSON.stringify(sent!.body)).not.toContain('cache_control')
    expect(sent!.body.messages[2].tool_calls[0].function.arguments).toBe(
      '{"alpha":{"a":1,"b":2},"zeta":1}',
    )
    // prompt_tokens include the cached ones: input is the rest, so the total stays what it was.
    expect(streamed.usage.cacheRead).toBeGreaterThanOrEqual(1024)
    expect(streamed.usage.input + streamed.usage.cacheRead).toBe(first.usage.input)
    expect(streamed.usage.cacheWrite).toBe(0)
    expect(plain.usage).toEqual(streamed.usage)
  })
})

describe('a server that refuses cache breakpoints', () => {
  it('is asked once more without them; the connection is sent none for an hour, said once', async () => {
    const lines: string[] = []
    const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
    const local = createProviders({
      baseUrls: { provider_a: fake.url, provider_b: fake.url },
      maxRetries: 0,
      log,
    })
    const key = 'k-refuses'
    const refusing = 'cache_control: Extra inputs are not permitted'
    fake.onRequest((r) =>
      r.key === key && JSON.stringify(r.body).includes('cache_control')
        ? { status: 400, message: refusing }
        : undefined,
    )
    try {
      const credentials = { key, connectionId: 'conn-refuses' }
      const signal = new AbortController().signal
      const pieces: string[] = []
      fake.script(key, { text: 'one two' }, { text: 'three' }, { text: 'four' })
      const first = await local.provider_a.call(conversation, credentials, signal, (p) =>
        pieces.push(p),
      )
      expect(first.text).toBe('one two')
      expect(pieces.join('')).toBe('one two') // the refused attempt told nothing
      await local.provider_a.call(conversation, credentials, signal)
      const withBreakpoints = (r: { body: unknown }) =>
        JSON.stringify(r.body).includes('cache_control')
      expect(fake.callsWith(key).map(withBreakpoints)).toEqual([true, false, false])
      const said = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
      expect(said).toHaveLength(1)
      expect(said[0]).toMatchObject({ connectionId: 'conn-refuses', status: 400 })
      expect(String(said[0]!.msg)).toContain('for an hour')
      expect(JSON.stringify(said)).not.toContain(key)
      // Another connection on the same server is asked with breakpoints still.
      const other = 'k-refuses-other'
      fake.onRequest(() => undefined)
      await local.provider_a.call(conversation, { key: other, connectionId: 'conn-other' }, signal)
      expect(fake.callsWith(other).map(withBreakpoints)).toEqual([true])
      // An hour on, the first is asked with breakpoints again.
      const now = Date.now()
      const later = vi.spyOn(Date, 'now').mockReturnValue(now + 60 * 60_000 + 1)
      try {
        await local.provider_a.call(conversation, credentials, signal)
      } finally {
        later.mockRestore()
      }
      expect(fake.callsWith(key).map(withBreakpoints).at(-1)).toBe(true)
    } finally {
      fake.onRequest(() => undefined)
    }
  })

  it('is forgotten once over, for connections never called again too', async () => {
    const local = anthropicProvider({
      baseUrls: { provider_a: fake.url, provider_b: fake.url },
      maxRetries: 0,
    })
    const key = 'k-refuses-many'
    fake.onRequest((r) =>
      r.key === key && JSON.stringify(r.body).includes('cache_control')
        ? { status: 400, message: 'cache_control: Extra inputs are not permitted' }
        : undefined,
    )
    const signal = new AbortController().signal
    const refusedOn = (connectionId: string) =>
      local.call(conversation, { key, connectionId }, signal).then(() => undefined)
    try {
      // Connections used once each (keys bound and unbound, enterprises come and gone).
      for (let i = 0; i < 20; i++) await refusedOn(`conn-once-${i}`)
      expect(local.cacheRefusalsKept()).toBe(20)
      // An hour on, one more refusal: those over are forgotten, though none was called again.
      const now = Date.now()
      const later = vi.spyOn(Date, 'now').mockReturnValue(now + 60 * 60_000 + 1)
      try {
        await refusedOn('conn-later')
      } finally {
        later.mockRestore()
      }
      expect(local.cacheRefusalsKept()).toBe(1)
      expect(fake.callsWith(key)).toHaveLength(42)
    } finally {
      fake.onRequest(() => undefined)
    }
  })

  it('a refusal for another cause fails as before, is not tried again, and teaches nothing', async () => {
    const local = createProviders({
      baseUrls: { provider_a: fake.url, provider_b: fake.url },
      maxRetries: 0,
    })
    const key = 'k-bad-request'
    fake.script(key, { status: 400, message: 'prompt is too long' }, { text: 'fine' })
    const credentials = { key, connectionId: 'conn-bad-request' }
    const failed = (await local.provider_a
      .call(conversation, credentials, new AbortController().signal)
      .catch((err: unknown) => err)) as ProviderError
    expect([failed.kind, failed.status]).toEqual(['bad_request', 400])
    expect(failed.message).toContain('prompt is too long')
    await local.provider_a.call(conversation, credentials, new AbortController().signal)
    const sent = fake.callsWith(key).map((r) => JSON.stringify(r.body).includes('cache_control'))
    expect(sent).toEqual([true, true])
    // Nor, without breakpoints, one that names them.
    const off = createProviders({
      baseUrls: { provider_a: fake.url, provider_b: fake.url },
      promptCache: false,
      maxRetries: 0,
    })
    const plain = 'k-bad-request-off'
    fake.script(plain, { status: 400, message: 'cache_control: Extra inputs are not permitted' })
    await off.provider_a
      .call(conversation, { key: plain }, new AbortController().signal)
      .catch(() => undefined)
    expect(fake.callsWith(plain)).toHaveLength(1)
  })
})

describe('a provider osd cannot reach (issue 51)', () => {
  it('names the provider, the address and the setting; says so in one warn line per outage', async () => {
    // A port nobody listens on: taken and let go.
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo
        server.close(() => resolve(port))
      })
    })
    const lines: string[] = []
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
    const local = createProviders({
      baseUrls: { provider_a: `http://127.0.0.1:${closed}`, provider_b: fake.url },
      maxRetries: 0,
      log,
    })
    for (const onText of [undefined, () => undefined]) {
      const failed = await local.provider_a
        .call(request, { key: 'k-unreachable' }, new AbortController().signal, onText)
        .catch((err: unknown) => err as ProviderError)
      expect(failed).toBeInstanceOf(ProviderError)
      expect(failed).toMatchObject({ kind: 'outage', unreachable: true })
      expect((failed as ProviderError).message).toBe(
        `could not connect to 127.0.0.1:${closed} (provider_a, OSD_PROVIDER_A_BASE_URL): connection refused`,
      )
    }
    // Two failed calls, one line; provider_b answering says nothing of provider_a.
    fake.script('k-b', { text: 'fine' })
    await local.provider_b.call(request, { key: 'k-b' }, new AbortController().signal)
    const said = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(said).toEqual([
      expect.objectContaining({
        msg: 'the model provider does not answer',
        provider: 'provider_a',
        address: `http://127.0.0.1:${closed}`,
        setting: 'OSD_PROVIDER_A_BASE_URL',
      }),
    ])
  })
})
