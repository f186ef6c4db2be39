import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  baseUrlSetByOperator,
  defaultProviderBaseUrls,
  loadConfig,
} from '../../../server/config.js'
import { priceForCall } from '../../../server/domain/models/index.js'
import type { Engine } from '../../../server/engine/index.js'
import { createProviders } from '../../../server/engine/models/index.js'
import { LlmBinding, LlmPrice, LlmPrices, LlmUsage } from '../../../shared/schemas/models.js'
import { RunDetail } from '../../../shared/schemas/runs.js'
import { SpendView } from '../../../shared/schemas/spend.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Prices of models osd's list does not hold (issue 51; DESIGN 6, 13): a local model served from an
// address the operator set costs nothing and is answered "unpriced" until the enterprise prices it;
// spend caps stop it no more, and still stop every priced model. The fake provider stands in for the
// local server: its address is set as an operator sets OSD_PROVIDER_B_BASE_URL.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine

beforeAll(async () => {
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
})

const finish = (usage = { input: 1000, output: 500 }) => ({
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }],
  usage,
})

/** An enterprise of its own on provider_b, its mid tier the local model. */
async function localTenant(key?: string) {
  const keyed = await keyedEnterprise(t, 'Local', { provider: 'provider_b', keyless: !!key })
  const e = keyed.e
  const as = { token: e.token }
  if (key) {
    const bound = await t.call('POST', '/v1/llm/bindings', {
      ...as,
      body: { apiKey: key, provider: 'provider_b' },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
  }
  const override = await t.call('POST', '/v1/llm/tiers/override', {
    ...as,
    body: { provider: 'provider_b', tier: 'mid', model: 'llama3.2' },
  })
  expect(override.status).toBe(200)
  const task = async (body: Record<string, unknown> = {}) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Local ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        ...body,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const start = async (taskId: string) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: {} })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const wait = async (runId: string, statuses: string[]) =>
    RunDetail.parse(await waitForRun(t, runId, statuses, 20_000, e.token))
  const cap = async (moneyCentsDay: number | null) => {
    const res = await t.call('PATCH', '/v1/spend/caps', {
      ...as,
      body: { layer: 'enterprise', moneyCentsDay },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
  }
  return { e, key: key ?? keyed.key, as, task, start, wait, cap }
}

async function usageOf(e: TestEnterprise) {
  const [connection] = (await t.call('GET', '/v1/llm/connections', { token: e.token })).body
  return LlmUsage.parse(
    (await t.call('GET', `/v1/llm/connections/${connection.id}/usage`, { token: e.token })).body,
  ).days
}

describe('a model the price list does not hold, on an address the operator set', () => {
  it('runs at $0 under a cap of 0, and every answer says unpriced; a listed model is still stopped', async () => {
    const s = await localTenant()
    await s.cap(0)
    fake.script(s.key, finish())
    const local = await s.task()
    const done = await s.wait((await s.start(local.id)).id, ['succeeded', 'paused_spend'])
    expect(done.run.status).toBe('succeeded') // before issue 51: paused, priced as gpt-5.6-sol
    expect(done.run).toMatchObject({ costUsdCents: 0, costUnpriced: true })
    expect(done.cost).toMatchObject({ usdCents: 0, unpriced: true, modelCalls: 1 })
    expect(done.events.find((e) => e.type === 'model.called')!.payload).toMatchObject({
      model: 'llama3.2',
      costUsdCents: 0,
      unpriced: true,
    })
    const spend = SpendView.parse((await t.call('GET', '/v1/spend', s.as)).body)
    expect(spend.today.find((l) => l.layer === 'enterprise')).toMatchObject({
      usdCents: 0,
      runs: 1,
      unpriced: true,
    })
    expect(await usageOf(s.e)).toEqual([
      expect.objectContaining({ model: 'llama3.2', calls: 1, costUsdCents: 0, unpriced: true }),
    ])
    const [day] = await t.sql<{ reserved: number; spent: number }[]>`
      select reserved_usd_micros as reserved, spent_usd_micros as spent from spend_days
       where enterprise_id = ${s.e.id} and layer = 'enterprise'`
    expect(day).toEqual({ reserved: 0, spent: 0 })

    // A model of the list keeps its price: the cap of 0 stops it before any call.
    const listed = await s.task({ spend: { model: 'gpt-5.4-mini' } })
    const paused = await s.wait((await s.start(listed.id)).id, ['paused_spend', 'succeeded'])
    expect(paused.run.status).toBe('paused_spend')
    expect(fake.callsWith(s.key)).toHaveLength(1)
  })

  it('is priced as the enterprise sets it from the next call: reserved, capped, counted', async () => {
    const s = await localTenant()
    const set = await t.call('PUT', '/v1/llm/prices/llama3.2', {
      ...s.as,
      body: { input: 1, output: 2 },
    })
    expect(set.status, JSON.stringify(set.body)).toBe(200)
    expect(LlmPrice.parse(set.body)).toMatchObject({
      model: 'llama3.2',
      source: 'enterprise',
      input: 1,
      output: 2,
      cacheRead: null,
    })
    await s.cap(0)
    fake.script(s.key, finish())
    const local = await s.task()
    const run = await s.start(local.id)
    expect((await s.wait(run.id, ['paused_spend', 'succeeded'])).run.status).toBe('paused_spend')
    expect(fake.callsWith(s.key)).toHaveLength(0)
    await s.cap(100_000)
    const done = await s.wait(run.id, ['succeeded'])
    // 1,000 input tokens at $1 and 500 output at $2 per million: 2,000 micro-dollars, 0.2 cents.
    expect(done.run).toMatchObject({ costUsdCents: 0.2, costUnpriced: false })
    expect(done.cost.unpriced).toBe(false)
    expect(await usageOf(s.e)).toEqual([
      expect.objectContaining({ model: 'llama3.2', costUsdCents: 0.2, unpriced: false }),
    ])
  })

  it('binds a local server key of any non-empty text, and shows none of a short one', async () => {
    const key = 'ok'
    const s = await localTenant(key)
    const [binding] = (await t.call('GET', '/v1/llm/bindings', s.as)).body
    expect(LlmBinding.parse(binding).keyHint).toBe('…')
    expect(JSON.stringify((await t.call('GET', '/v1/llm/connections', s.as)).body)).not.toMatch(
      /"…?ok"/,
    )
    fake.script(key, finish())
    const done = await s.wait((await s.start((await s.task()).id)).id, ['succeeded'])
    expect(done.run.costUnpriced).toBe(true)
    expect(fake.callsWith(key).at(-1)!.headers.authorization).toBe('Bearer ok')
    for (const apiKey of ['', '   ']) {
      const blank = await t.call('POST', '/v1/llm/bindings', {
        ...s.as,
        body: { apiKey, provider: 'provider_b' },
      })
      expect(blank.status).toBe(400)
    }
  })
})

describe('how a call is priced (domain/models/prices.ts)', () => {
  it('a listed model at the list, an unlisted one as the enterprise says, else by the address', async () => {
    const e = await t.createEnterprise(`Prices ${randomUUID().slice(0, 6)}`)
    expect(await priceForCall(t.sql, e.id, 'provider_b', 'gpt-5.4', true)).toEqual({
      price: { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: 1.25 },
      unpriced: false,
    })
    // No price, a real provider's address: as its frontier model, never under-counted.
    expect(await priceForCall(t.sql, e.id, 'provider_b', 'gpt-9', false)).toEqual({
      price: { input: 15, output: 120, cacheRead: 1.5, cacheWrite: 15 },
      unpriced: false,
    })
    expect(await priceForCall(t.sql, e.id, 'provider_a', 'local-model', true)).toEqual({
      price: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      unpriced: true,
    })
    await t.call('PUT', '/v1/llm/prices/gpt-9', {
      token: e.token,
      body: { input: 2, output: 12, cacheRead: 0.5 },
    })
    expect(await priceForCall(t.sql, e.id, 'provider_b', 'gpt-9', false)).toEqual({
      price: { input: 2, output: 12, cacheRead: 0.5, cacheWrite: 2 },
      unpriced: false,
    })
    // One enterprise's price is never another's.
    expect((await priceForCall(t.sql, t.acme.id, 'provider_b', 'gpt-9', false)).price.input).toBe(
      15,
    )
  })

  it("knows an address the operator set from the provider's own", () => {
    const own = loadConfig({}, {}).providerBaseUrls
    expect(own).toEqual(defaultProviderBaseUrls)
    expect(baseUrlSetByOperator(own, 'provider_b')).toBe(false)
    const local = loadConfig({}, { OSD_PROVIDER_B_BASE_URL: 'http://127.0.0.1:11434/' })
    expect(baseUrlSetByOperator(local.providerBaseUrls, 'provider_b')).toBe(true)
    expect(baseUrlSetByOperator(local.providerBaseUrls, 'provider_a')).toBe(false)
    const providers = createProviders({ baseUrls: local.providerBaseUrls })
    expect(providers.provider_b.baseUrlSetByOperator).toBe(true)
    expect(providers.provider_a.baseUrlSetByOperator).toBe(false)
  })
})

describe('the prices routes', () => {
  it('list the list and the enterprise prices, and how a model with none is priced', async () => {
    const e = await t.createEnterprise(`List ${randomUUID().slice(0, 6)}`)
    // A model named with a slash, as vLLM names them, travels encoded.
    const model = 'meta-llama/Llama-3.1-8B-Instruct'
    const set = await t.call('PUT', `/v1/llm/prices/${encodeURIComponent(model)}`, {
      token: e.token,
      body: { input: 0, output: 0.5 },
    })
    expect(set.status, JSON.stringify(set.body)).toBe(200)
    const listed = LlmPrices.parse((await t.call('GET', '/v1/llm/prices', { token: e.token })).body)
    expect(listed.prices).toContainEqual(
      expect.objectContaining({ model: 'claude-sonnet-5-5', source: 'list', input: 3, output: 15 }),
    )
    expect(listed.prices.filter((p) => p.source === 'enterprise')).toEqual([
      expect.objectContaining({ model, provider: null, input: 0, output: 0.5 }),
    ])
    expect(listed.unlisted).toEqual([
      {
        provider: 'provider_a',
        baseUrlSetByOperator: true,
        pricedAs: 'unpriced',
        frontierModel: 'claude-opus-5-5',
      },
      {
        provider: 'provider_b',
        baseUrlSetByOperator: true,
        pricedAs: 'unpriced',
        frontierModel: 'gpt-5.6-sol',
      },
    ])
    // Another enterprise sees none of it.
    const theirs = LlmPrices.parse((await t.call('GET', '/v1/llm/prices')).body)
    expect(theirs.prices.some((p) => p.model === model)).toBe(false)

    const removed = await t.call('DELETE', `/v1/llm/prices/${encodeURIComponent(model)}`, {
      token: e.token,
    })
    expect(removed.status).toBe(204)
    const after = LlmPrices.parse((await t.call('GET', '/v1/llm/prices', { token: e.token })).body)
    expect(after.prices.some((p) => p.source === 'enterprise')).toBe(false)
  })

  it("refuse a listed model's price, negative or missing figures", async () => {
    const listed = await t.call('PUT', '/v1/llm/prices/claude-opus-5-5', {
      body: { input: 0, output: 0 },
    })
    expect(listed.status).toBe(400)
    expect(listed.body).toMatchObject({ error: 'invalid_request' })
    expect(listed.body.message).toContain("is in osd's price list")
    for (const body of [{ input: -1, output: 1 }, { input: 1 }, { input: 'free', output: 0 }]) {
      const res = await t.call('PUT', '/v1/llm/prices/llama3.2', { body })
      expect([JSON.stringify(body), res.status]).toEqual([JSON.stringify(body), 400])
    }
    const blank = await t.call('PUT', '/v1/llm/prices/%20', { body: { input: 1, output: 1 } })
    expect(blank.status).toBe(400)
  })

  it('keep an enterprise to 500 priced models, a price changed all the same', async () => {
    const e = await t.createEnterprise(`Many ${randomUUID().slice(0, 6)}`)
    await t.sql`
      insert into llm_prices (enterprise_id, model, input_usd_mtok, output_usd_mtok)
      select ${e.id}, 'local-' || n, 0, 0 from generate_series(1, 500) n`
    const more = await t.call('PUT', '/v1/llm/prices/local-501', {
      token: e.token,
      body: { input: 0, output: 0 },
    })
    expect(more.status).toBe(400)
    expect(more.body.message).toContain('at most 500 models')
    const changed = await t.call('PUT', '/v1/llm/prices/local-7', {
      token: e.token,
      body: { input: 0.1, output: 0.2 },
    })
    expect(changed.status).toBe(200)
    expect(LlmPrice.parse(changed.body)).toMatchObject({ model: 'local-7', input: 0.1 })
  })

  it('need spend:write as well as llm:write to set or remove a price: it moves what the caps hold back', async () => {
    const llmOnly = await t.tokenWith(['llm:read', 'llm:write'])
    for (const method of ['PUT', 'DELETE'] as const) {
      const refused = await t.call(method, '/v1/llm/prices/free-local-model', {
        token: llmOnly,
        body: method === 'PUT' ? { input: 0, output: 0 } : undefined,
      })
      expect([refused.status, refused.body.error, refused.body.needed]).toEqual([
        403,
        'api_token_scope',
        'spend:write',
      ])
    }
    const [row] =
      await t.sql`select count(*)::int as n from llm_prices where model = 'free-local-model'`
    expect(row!.n).toBe(0)
    const both = await t.tokenWith(['llm:write', 'spend:write'])
    const set = await t.call('PUT', '/v1/llm/prices/free-local-model', {
      token: both,
      body: { input: 0, output: 0 },
    })
    expect(set.status).toBe(200)
  })

  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/llm/prices' })
  commonRouteChecks(() => t, {
    method: 'PUT',
    path: () => '/v1/llm/prices/llama3.2',
    body: () => ({ input: 0, output: 0 }),
    alsoNeeds: ['spend:write'],
  })
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => '/v1/llm/prices/llama3.2',
    alsoNeeds: ['spend:write'],
  })
})
