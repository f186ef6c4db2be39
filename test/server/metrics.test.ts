import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Engine } from '../../server/engine/index.js'
import { enableMetrics, scrape, setScrapeSources } from '../../server/metrics.js'
import { metricsSources } from '../../server/serve.js'
import { createTestApp, type TestApp } from '../helpers/app.js'
import { observations, parseScrape, sampleValue, type Scrape } from '../helpers/metrics.js'
import { deterministicTask, keyedEnterprise, startTestEngine, waitForRun } from '../helpers/runs.js'
import { eventually } from '../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'

// The metrics of issue 33 (DESIGN 13), in process: after a known workload a scrape, parsed as
// Prometheus parses it, shows what the workload did. Metrics are turned on before the app is made, as
// serve.ts does; the label values staying bounded under hostile requests is in http/hostile.test.ts,
// and the listener, the role and the embedded server's restart in processes/database-restart.test.ts.

let t: TestApp
let fake: FakeModelProvider
let engine: Engine

beforeAll(async () => {
  await enableMetrics('all')
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  setScrapeSources(metricsSources(t.sql, { main: t.sql }))
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
})

async function scraped(): Promise<Scrape> {
  const { contentType, body } = await scrape()
  expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/)
  return parseScrape(body)
}

describe('a scrape after a known workload', () => {
  it('counts runs started and ended, their times, and an HTTP route by its template', async () => {
    const before = await scraped()
    const task = await deterministicTask(t)
    for (let i = 0; i < 2; i++) {
      const run = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: {} })
      expect(run.status).toBe(201)
      await waitForRun(t, run.body.id, ['succeeded'])
    }
    for (let i = 0; i < 3; i++)
      expect((await t.call('GET', `/v1/tasks/${task.id}`)).status).toBe(200)
    expect((await t.call('GET', `/v1/tasks/${randomUUID()}`)).status).toBe(404)
    expect((await t.call('GET', `/v1/no-such-thing/${randomUUID()}`)).status).toBe(404)
    expect((await t.call('GET', `/v1/tasks/${task.id}`, { token: null })).status).toBe(401)

    const after = await scraped()
    const grew = (name: string, labels: Record<string, string>) =>
      (sampleValue(after, name, labels) ?? 0) - (sampleValue(before, name, labels) ?? 0)
    expect(grew('osd_runs_started_total', { origin: 'api', kind: 'deterministic' })).toBe(2)
    expect(grew('osd_runs_ended_total', { status: 'succeeded' })).toBe(2)
    expect(observations(after, 'osd_run_wait_seconds')).toBeGreaterThanOrEqual(2)
    expect(
      observations(after, 'osd_run_duration_seconds', { status: 'succeeded' }),
    ).toBeGreaterThanOrEqual(2)
    expect(sampleValue(after, 'osd_admission_passes_total')).toBeGreaterThan(0)
    expect(sampleValue(after, 'osd_engine_passes_total', { kind: 'run' })).toBeGreaterThan(0)

    // The route's template, never the id the path carried; refusals before the route (401) are
    // labelled with the route that would have answered; a path no route has is `unmatched`.
    const route = { method: 'GET', route: '/v1/tasks/{id}' }
    const http = 'osd_http_request_duration_seconds'
    const requests = (labels: Record<string, string>) =>
      observations(after, http, labels) - observations(before, http, labels)
    expect(requests({ ...route, status_class: '2xx' })).toBe(3)
    expect(requests({ ...route, status_class: '4xx' })).toBe(2)
    expect(requests({ route: 'unmatched', status_class: '4xx' })).toBe(1)
    expect(requests({ method: 'POST', route: '/v1/tasks' })).toBe(1)
    expect(requests({ method: 'POST', route: '/v1/tasks/{id}/runs', status_class: '2xx' })).toBe(2)
    const routes = (after[http]!.data as { labels: Record<string, string> }[]).map(
      (s) => s.labels.route!,
    )
    expect(routes.filter((r) => r.includes(task.id))).toEqual([])

    // Read from the database at the scrape: nothing is under way once both runs ended.
    expect(sampleValue(after, 'osd_database_up')).toBe(1)
    expect(sampleValue(after, 'osd_runs_under_way', { status: 'queued' })).toBe(0)
    expect(sampleValue(after, 'osd_gates_waiting')).toBe(0)
    // The pool's connections as they are at the scrape: none in use once the engine's pass is over
    // (one may be, at the moment of a scrape on a loaded machine; issue 40).
    await eventually(async () => {
      const now = await scraped()
      return sampleValue(now, 'osd_db_pool_connections', { pool: 'main', state: 'in_use' }) === 0
    }, 10_000)
    // Every series is labelled with the process's role; prom-client's process and Node.js metrics are
    // there under their standard names, which stock dashboards and alerts read (issue 51).
    expect(sampleValue(after, 'osd_runs_started_total', { role: 'all' })).toBeGreaterThan(0)
    expect(sampleValue(after, 'process_cpu_user_seconds_total')).toBeGreaterThan(0)
    expect(after.nodejs_eventloop_lag_seconds).toBeDefined()
    expect(Object.keys(after).filter((name) => /^osd_(process|nodejs)_/.test(name))).toEqual([])
  })

  it("counts a model call's tokens and cost by provider and tier, as the provider reported them", async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Metrics')
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: { name: 'Metered', assigneeRole: 'ceo', overlapPolicy: 'os' },
    })
    expect(task.status, JSON.stringify(task.body)).toBe(201)
    fake.script(key, {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'done' } }],
      usage: { output: 42 },
    })
    const before = await scraped()
    const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    expect(run.status).toBe(201)
    await waitForRun(t, run.body.id, ['succeeded'], 15_000, e.token)

    const [call] = fake.callsWith(key)
    const reported = call!.usage!
    const after = await scraped()
    const labels = { provider: 'provider_a', tier: 'mid' }
    const grew = (name: string, more: Record<string, string> = {}) =>
      (sampleValue(after, name, { ...labels, ...more }) ?? 0) -
      (sampleValue(before, name, { ...labels, ...more }) ?? 0)
    expect(grew('osd_model_tokens_total', { type: 'input' })).toBe(reported.input)
    expect(grew('osd_model_tokens_total', { type: 'cache_read' })).toBe(reported.cacheRead)
    expect(grew('osd_model_tokens_total', { type: 'cache_write' })).toBe(reported.cacheWrite)
    expect(grew('osd_model_tokens_total', { type: 'output' })).toBe(42)
    const detail = await t.call('GET', `/v1/runs/${run.body.id}`, as)
    // Cents with their fraction: the run's own cost is rounded up to whole cents.
    expect(grew('osd_model_cost_cents_total')).toBeGreaterThan(0)
    // What grew is a difference of two float sums: the counter holds the earlier files' costs too.
    expect(grew('osd_model_cost_cents_total')).toBeLessThanOrEqual(
      detail.body.run.costUsdCents + 1e-9,
    )
    expect(
      observations(after, 'osd_model_call_duration_seconds', { ...labels, outcome: 'answered' }) -
        observations(before, 'osd_model_call_duration_seconds', { ...labels, outcome: 'answered' }),
    ).toBe(1)
    expect(
      (sampleValue(after, 'osd_runs_started_total', { origin: 'api', kind: 'llm' }) ?? 0) -
        (sampleValue(before, 'osd_runs_started_total', { origin: 'api', kind: 'llm' }) ?? 0),
    ).toBe(1)
  })

  it('counts a chat reply the model answered, once (issue 43: it was not counted at all)', async () => {
    const { key, as } = await keyedEnterprise(t, 'Chatty')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Ada' } })
    expect(member.status, JSON.stringify(member.body)).toBe(201)
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    expect(chat.status, JSON.stringify(chat.body)).toBe(201)
    fake.script(key, { text: 'Hello.' })
    const before = await scraped()
    const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      ...as,
      body: { content: 'Hi' },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    // Counted once the reply's transaction committed, which a read of the turn may see first.
    let after = await scraped()
    const grew = (outcome: string) =>
      (sampleValue(after, 'osd_chat_replies_total', { outcome }) ?? 0) -
      (sampleValue(before, 'osd_chat_replies_total', { outcome }) ?? 0)
    await eventually(
      async () => ((after = await scraped()), grew('answered') > 0),
      15_000,
      'the reply counted',
    )
    const [turn] = await t.sql`select status from chat_turns where chat_id = ${chat.body.id}`
    expect(turn!.status).toBe('done')
    expect(grew('answered')).toBe(1)
    expect(grew('blocked') + grew('done') + grew('paused_spend')).toBe(0)
  })

  it('counts a failed model call by its kind', async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Refused', { provider: 'provider_b' })
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: { name: 'Refused', assigneeRole: 'ceo', overlapPolicy: 'os' },
    })
    fake.script(key, { status: 401, message: 'bad key' })
    const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    await waitForRun(t, run.body.id, ['blocked'], 15_000, e.token)
    const after = await scraped()
    expect(
      sampleValue(after, 'osd_model_errors_total', { provider: 'provider_b', kind: 'refused_key' }),
    ).toBe(1)
    expect(sampleValue(after, 'osd_runs_under_way', { status: 'blocked' })).toBeGreaterThanOrEqual(
      1,
    )
  })
})
