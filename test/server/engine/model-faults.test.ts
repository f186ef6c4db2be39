import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { ProviderError, type ModelRequest } from '../../../server/domain/models/index.js'
import type { Engine } from '../../../server/engine/index.js'
import { createProviders, loadModelSdks } from '../../../server/engine/models/index.js'
import { maxThrottleMs, Throttles } from '../../../server/engine/models/throttles.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'
import { eventually } from '../../helpers/wait.js'

// Faults of the model providers (issue 34): a call that never answers, a stream that stops, a provider
// that throttles. Against the fake provider, through the providers and through the engine.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine

beforeAll(async () => {
  // The SDKs load at a process's first call, which the times below must not include (osd serve's
  // engine starts loading them when it takes its first llm run: loadModelSdks).
  await loadModelSdks()
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  // A model call may take a second here (OSD_MODEL_TIMEOUT_SECONDS=1): the fake's calls take a few ms.
  engine = await startTestEngine(t, { config: { ...t.config, modelTimeoutSeconds: 1 } })
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
})

const request: Omit<ModelRequest, 'model'> = {
  system: 'You are terse.',
  messages: [{ role: 'user', text: 'Hello' }],
  tools: [],
  maxTokens: 100,
}

/** A call through the providers (as the engine makes it), with these limits; answers its failure. */
async function failure(
  provider: 'provider_a' | 'provider_b',
  limits: { timeoutMs?: number; idleMs?: number },
  streamed: boolean,
  key: string,
): Promise<{ error: ProviderError; told: string[] }> {
  const providers = createProviders({
    baseUrls: { provider_a: fake.url, provider_b: fake.url },
    ...limits,
  })
  const told: string[] = []
  const model = provider === 'provider_a' ? 'claude-sonnet-5-5' : 'gpt-5.4'
  const error = await providers[provider]
    .call(
      { ...request, model },
      { key },
      new AbortController().signal,
      streamed ? (text) => told.push(text) : undefined,
    )
    .then(
      () => undefined,
      (err: unknown) => err,
    )
  expect(error).toBeInstanceOf(ProviderError)
  return { error: error as ProviderError, told }
}

describe.each(['provider_a', 'provider_b'] as const)('a call to %s', (provider) => {
  it('that never answers ends as an outage after OSD_MODEL_TIMEOUT_SECONDS, not tried again in place', async () => {
    const key = `key-${randomUUID()}`
    fake.script(key, { text: 'late', delayMs: 5_000 })
    const started = Date.now()
    const { error } = await failure(provider, { timeoutMs: 300 }, false, key)
    expect(Date.now() - started).toBeLessThan(2_000)
    expect(error.kind).toBe('outage')
    expect(error.message).toBe('the provider did not answer within 0.3 s')
    expect(fake.callsWith(key)).toHaveLength(1)
  })

  it('streamed, that sends nothing, or stops midway, ends after OSD_MODEL_IDLE_SECONDS of silence', async () => {
    const silent = `key-${randomUUID()}`
    fake.script(silent, { text: 'late', delayMs: 5_000 })
    const before = await failure(provider, { idleMs: 300 }, true, silent)
    expect(before.error.kind).toBe('outage')
    expect(before.error.message).toBe('the provider sent nothing for 0.3 s')
    expect(fake.callsWith(silent)).toHaveLength(1)

    // Two pieces, then a pause longer than the idle limit: what was told is not told again.
    const stalled = `key-${randomUUID()}`
    fake.script(stalled, {
      text: 'one two three',
      tokens: ['one ', 'two ', 'three'],
      tokenMs: 3_000,
    })
    const midway = await failure(provider, { idleMs: 1_000 }, true, stalled)
    expect(midway.error.kind).toBe('outage')
    expect(midway.error.message).toBe('the provider sent nothing for 1 s')
    expect(midway.told).toEqual(['one '])
    expect(fake.callsWith(stalled)).toHaveLength(1)
  })

  it.each(['streamed', 'unstreamed'] as const)(
    '%s, reads no further than its caps of a body that never ends, refusal or answer',
    async (how) => {
      // A server that sends without end (no provider: a gateway gone wrong, a wrong address): a refusal's
      // body, or an answer (an event that never closes, or a JSON body). Each connection's bytes sent
      // until osd hung up.
      const streamed = how === 'streamed'
      const sent: number[] = []
      const endless = createServer((req, res) => {
        req.resume()
        const refusal =
          req.headers['x-api-key'] === 'refusal' || /refusal/.test(req.headers.authorization ?? '')
        res.writeHead(refusal ? 500 : 200, {
          'content-type': refusal || !streamed ? 'application/json' : 'text/event-stream',
        })
        const at = sent.push(0) - 1
        const chunk = Buffer.alloc(64 * 1024, 'x')
        if (!refusal) res.write(streamed ? 'data: ' : '{"text": "')
        const pump = () => {
          // 64 MB at most: osd reading it all fails the test without it running for ever.
          while (sent[at]! < 64 * 1024 * 1024 && !res.destroyed) {
            sent[at]! += chunk.length
            if (!res.write(chunk)) return void res.once('drain', pump)
          }
          res.end()
        }
        pump()
      })
      await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve))
      onTestFinished(() => new Promise<void>((resolve) => endless.close(() => resolve())))
      const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}`
      const providers = createProviders({
        baseUrls: { provider_a: url, provider_b: url },
        maxRetries: 0,
      })
      const model = provider === 'provider_a' ? 'claude-sonnet-5-5' : 'gpt-5.4'
      const call = (key: string) =>
        providers[provider]
          .call(
            { ...request, model },
            { key },
            new AbortController().signal,
            streamed ? () => undefined : undefined,
          )
          .then(
            () => undefined,
            (err: unknown) => err as ProviderError,
          )

      const refused = await call('refusal')
      expect(refused).toMatchObject({ kind: 'outage', status: 500 })
      expect(refused!.message.length).toBeLessThan(400)
      const answered = await call('answer')
      expect(answered).toMatchObject({ kind: 'outage' })
      expect(answered!.message).toMatch(
        streamed
          ? /an event of the answer is longer than 4194304 characters/
          : /the answer is longer than 16777216 bytes/,
      )
      // What was sent before osd hung up: its cap and what was in flight, far from the 64 MB offered.
      await eventually(() => sent.length === 2)
      expect(sent[0]).toBeLessThan(16 * 1024 * 1024)
      expect(sent[1]).toBeLessThan((streamed ? 24 : 40) * 1024 * 1024)
    },
  )

  it.each([429, 529])(
    'answered %i is not tried again in place, and carries the provider retry-after',
    async (status) => {
      for (const streamed of [false, true]) {
        const key = `key-${randomUUID()}`
        fake.script(key, { status, retryAfter: 2 }, { text: 'fine' })
        const { error } = await failure(provider, {}, streamed, key)
        expect(error).toMatchObject({
          kind: 'throttled',
          status,
          retryAfterMs: 2_000,
          throttled: true,
        })
        expect(error.message).toMatch(/^the provider asked for fewer calls/)
        expect(fake.callsWith(key)).toHaveLength(1)
      }
    },
  )

  it('answered 503 is still tried again twice in place, after the retry-after it asks', async () => {
    const key = `key-${randomUUID()}`
    fake.script(key, { status: 503, retryAfter: 0.2 }, { status: 503, retryAfter: 0.2 })
    const providers = createProviders({ baseUrls: { provider_a: fake.url, provider_b: fake.url } })
    const reply = await providers[provider].call(
      { ...request, model: provider === 'provider_a' ? 'claude-sonnet-5-5' : 'gpt-5.4' },
      { key },
      new AbortController().signal,
    )
    expect(reply.text).toBe('done')
    const calls = fake.callsWith(key)
    expect(calls).toHaveLength(3)
    expect(calls[1]!.receivedAt - calls[0]!.receivedAt).toBeGreaterThanOrEqual(190)
  })
})

describe('throttles (one connection, in one process)', () => {
  let now = 0
  const clock = () => now
  const half = () => 0.5

  it('waits the provider retry-after and up to half again; the first back goes alone', () => {
    const throttles = new Throttles(clock, half)
    expect(throttles.admit('c')).toBeUndefined()
    // Three calls made at once, all throttled: each waits 2 s plus a quarter of it (random 0.5).
    expect(throttles.throttled('c', 2_000)).toBe(2_500)
    expect(throttles.throttled('c', 2_000)).toBe(2_500)
    now = 1_000
    expect(throttles.admit('c')).toBe(1_500) // still in the wait
    now = 2_100
    expect(throttles.admit('c')).toBeUndefined() // the probe
    expect(throttles.admit('c')).toBe(1_500) // the others wait for it: 1 s and a quarter of the wait
    // The probe throttled too: the wait doubles.
    expect(throttles.throttled('c', 2_000)).toBe(5_000)
    now = 6_200
    expect(throttles.admit('c')).toBeUndefined()
    throttles.answered('c')
    expect(throttles.admit('c')).toBeUndefined()
    expect(throttles.admit('c')).toBeUndefined()
  })

  it('caps a wait at 5 minutes, takes 1 s without a retry-after, and lets another go when a probe is lost', () => {
    const throttles = new Throttles(clock, () => 0)
    now = 0
    expect(throttles.throttled('c', 3_600_000)).toBe(maxThrottleMs)
    expect(throttles.throttled('d', undefined)).toBe(1_000)
    now = 1_000
    expect(throttles.admit('d')).toBeUndefined()
    throttles.abandoned('d')
    expect(throttles.admit('d')).toBeUndefined()
    expect(new Throttles(clock, () => 0.999).throttled('e', 290_000)).toBe(maxThrottleMs)
  })

  it('forgets the throttles of connections never called again (a key unbound, an enterprise gone)', () => {
    const throttles = new Throttles(clock, () => 0)
    now = 0
    for (let i = 0; i < 1_000; i++) throttles.throttled(`gone-${i}`, 60_000)
    // A day on, another connection is throttled: of the thousand, none was called again.
    now = 86_400_000
    expect(throttles.throttled('c', 1_000)).toBe(1_000)
    expect(throttles.size).toBe(1)
    // One throttled a moment ago is not forgotten: its next call still goes first alone.
    now += 61_000
    throttles.throttled('d', 1_000)
    expect(throttles.size).toBe(2)
    expect(throttles.admit('c')).toBeUndefined()
    expect(throttles.admit('c')).toBe(1_000)
  })
})

/** An enterprise of its own with a provider_a key, room for 50 runs at once, and a task of runs in lanes. */
async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Faults')
  await t.call('PATCH', '/v1/enterprise/concurrency', { ...as, body: { concurrentRunLimit: 60 } })
  const res = await t.call('POST', '/v1/tasks', {
    ...as,
    body: {
      name: `Llm ${randomUUID().slice(0, 8)}`,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['i'],
    },
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  const start = async (i: number) => {
    const run = await t.call('POST', `/v1/tasks/${res.body.id}/runs`, { ...as, body: { i } })
    expect(run.status, JSON.stringify(run.body)).toBe(201)
    return run.body as { id: string }
  }
  const wait = (runId: string, statuses: string[], ms = 15_000) =>
    waitForRun(t, runId, statuses, ms, e.token)
  return { e, key, start, wait }
}

const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }],
  usage: { input: 1_000, output: 50 },
}

describe('a run whose model call never answers', () => {
  it('is blocked with the reason, its reservation released once, the attempt journaled; then retried and charged once', async () => {
    const { e, key, start, wait } = await tenant()
    fake.script(key, { ...finish, delayMs: 10_000 }, finish)
    const run = await start(1)
    const held = await wait(run.id, ['blocked'])
    expect(held.run.blockedReason).toBe('the provider did not answer within 1 s')
    expect(fake.callsWith(key)).toHaveLength(1)
    const steps = await t.sql<{ state: string; response: { error?: string } }[]>`
      select state, response from run_journal where run_id = ${run.id} and kind = 'model' order by step`
    expect(steps).toEqual([
      { state: 'failed', response: { error: 'the provider did not answer within 1 s' } },
    ])
    const spend = () => t.sql<{ spent: number; reserved: number }[]>`
      select spent_usd_micros as spent, reserved_usd_micros as reserved from spend_days
       where enterprise_id = ${e.id} and layer = 'enterprise'`
    expect(await spend()).toEqual([{ spent: 0, reserved: 0 }])

    await t.sql`update runs set not_before = now() where id = ${run.id}` // its back-off is over
    engine.runs.wake()
    const done = await wait(run.id, ['succeeded'])
    // One call paid: 1,000 input tokens at $3/MTok and 50 output at $15/MTok.
    expect(await spend()).toEqual([{ spent: 3_750, reserved: 0 }])
    expect(done.run.costUsdCents).toBe(0.375)
    expect(fake.callsWith(key)).toHaveLength(2)
  })
})

describe('runs against a provider that throttles', () => {
  // The measure is 50 runs, retry-after 2 s, for 10 s; OSD_TEST_THROTTLE_SECONDS=10 runs it
  // so (npm test keeps it to 5 s, retry-after 1 s).
  const windowMs = Number(process.env.OSD_TEST_THROTTLE_SECONDS ?? 5) * 1000
  const retryAfter = windowMs / 5_000

  it(
    `${50} at once wait the retry-after, spread, make about one call each meanwhile, and all succeed after`,
    async () => {
      const { key, start, wait } = await tenant()
      const from = Date.now()
      const until = from + windowMs
      fake.onRequest((r) =>
        r.key !== key ? undefined : Date.now() < until ? { status: 429, retryAfter } : finish,
      )
      try {
        const runs = await Promise.all(Array.from({ length: 50 }, (_, i) => start(i)))
        // Followed one after another: the runs go on meanwhile, and a run already ended answers at
        // once. Fifty long-polls at once read each run again at each of its events, some 900 reads
        // of a run's detail, most of the test's CPU (issue 40).
        const ends = []
        for (const r of runs)
          ends.push(await wait(r.id, ['succeeded', 'failed'], windowMs + 60_000))
        expect(ends.map((d) => d.run.status)).toEqual(runs.map(() => 'succeeded'))
        const calls = fake.callsWith(key)
        const inWindow = calls.filter((c) => c.receivedAt < until)
        const byRun = new Map<string, number>()
        for (const c of inWindow) {
          const run = /\\?"i\\?":\s*(\d+)/.exec(JSON.stringify(c.body.messages))?.[1] ?? '?'
          byRun.set(run, (byRun.get(run) ?? 0) + 1)
        }
        const most = Math.max(...byRun.values())
        const lastEnd = Math.max(...ends.map((d) => Date.parse(d.run.finishedAt)))
        console.log(
          `throttled ${windowMs / 1000} s (retry-after ${retryAfter} s): ${inWindow.length} calls in the window ` +
            `by 50 runs (at most ${most} by one), ${calls.length - inWindow.length} after; all succeeded ` +
            `${((lastEnd - until) / 1000).toFixed(1)} s after the throttle ended`,
        )
        expect(most).toBeLessThanOrEqual(3)
        expect(inWindow.length).toBeLessThanOrEqual(50 * 2)
        // Each throttled run says so, and when it tries again. (Only the runs the engine's slots let
        // call in the window are throttled; on a loaded machine the first started need not be one.)
        const blockedEvents = ends.flatMap((d) =>
          d.events.filter((ev: { type: string }) => ev.type === 'run.blocked'),
        )
        expect(blockedEvents.length).toBeGreaterThan(0)
        const blocked = blockedEvents[0]!
        expect(blocked.payload).toMatchObject({ throttled: true })
        expect(blocked.payload.blockedReason).toMatch(/asked for fewer calls/)
        expect(Date.parse(blocked.payload.retryAt)).toBeGreaterThan(from)
      } finally {
        fake.onRequest(() => undefined)
      }
    },
    windowMs + 90_000,
  )
})
