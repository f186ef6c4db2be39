import { randomUUID } from 'node:crypto'
import { getEventListeners } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { sealedColumns } from '../../../server/crypto.js'
import { createSql } from '../../../server/db/sql.js'
import { chooseModel, resolveKey } from '../../../server/domain/models/index.js'
import { AgentExecutor } from '../../../server/engine/runs/index.js'
import { createProviders, ToolNames } from '../../../server/engine/models/index.js'
import { toolLimits, type Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { bindTeamTools, keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The agent loop of kind llm runs, end to end through the real SDKs against a fake provider speaking
// both wire formats (spec: Models, Spend; DESIGN 6).

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

/** An enterprise of its own, with a key of its own, so tests keep to their own scripts and caps. */
async function tenant(provider: 'provider_a' | 'provider_b' = 'provider_a') {
  const { e, key, as } = await keyedEnterprise(t, 'Agent', { provider })
  const task = async (body: Record<string, unknown> = {}) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Llm ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        ...body,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string; slug: string }
  }
  const start = async (taskId: string, input: Record<string, unknown> = {}) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const wait = (runId: string, statuses: string[], ms = 15_000) =>
    waitForRun(t, runId, statuses, ms, e.token)
  return { e, key, as, task, start, wait }
}

const finish = (outcome = 'succeeded', summary = 'done', extra: Record<string, unknown> = {}) => ({
  toolCalls: [{ name: 'os.finish', arguments: { outcome, summary, ...extra } }],
})

describe('tool names', () => {
  it('are mapped both ways for providers that refuse dots', () => {
    const names = new ToolNames(['os.finish', 'vcs.merge_pull_request', 'os__finish'])
    expect(names.wire('os.finish')).toBe('os__finish')
    expect(names.wire('vcs.merge_pull_request')).toBe('vcs__merge_pull_request')
    expect(names.wire('os__finish')).not.toBe('os__finish') // no two names on one wire name
    for (const name of ['os.finish', 'vcs.merge_pull_request', 'os__finish']) {
      expect(names.original(names.wire(name))).toBe(name)
      expect(names.wire(name)).toMatch(/^[a-zA-Z0-9_-]{1,64}$/)
    }
  })
})

describe('runs through both wire formats', () => {
  it('provider_a: the Messages API with x-api-key; os.finish sets the result', async () => {
    const { key, task, start, wait } = await tenant('provider_a')
    fake.script(
      key,
      finish('succeeded', 'Summarised the inbox', { issue: 'ENG-7', output: { count: 3 } }),
    )
    const run = await start(
      (await task({ skillMd: '# Summarise', goal: 'Summarise.', guardrails: ['Be brief'] })).id,
      { box: 'inbox' },
    )
    const detail = await wait(run.id, ['succeeded'])
    expect(detail.run.result).toEqual({
      outcome: 'succeeded',
      summary: 'Summarised the inbox',
      issue: 'ENG-7',
      output: { count: 3 },
    })
    expect(detail.run.costUsdCents).toBeGreaterThan(0)
    expect(detail.cost.modelCalls).toBe(1)
    const types = detail.events.map((e: { type: string }) => e.type)
    expect(types).toEqual([
      'run.queued',
      'run.running',
      'memory.recalled', // every llm run recalls at its start (test/server/engine/memory.test.ts)
      'model.called',
      'tool.called',
      'run.succeeded',
    ])
    const [request] = fake.callsWith(key)
    expect(request!.format).toBe('a')
    expect(request!.headers['x-api-key']).toBe(key)
    expect(request!.headers.authorization).toBeUndefined()
    expect(request!.model).toBe('claude-sonnet-5-5') // the mid tier by default
    expect(request!.system).toContain('# Summarise')
    expect(request!.system).toContain('Be brief')
    expect(JSON.stringify(request!.body.messages)).toContain('inbox')
    expect(request!.body.tools.map((x: { name: string }) => x.name)).toEqual(['os__finish'])
  })

  it('provider_b: Chat Completions with a bearer key; a tool loop, then a final answer', async () => {
    const { e, key, task, start, wait } = await tenant('provider_b')
    fake.script(
      key,
      {
        toolCalls: [
          {
            name: 'os.write_plan',
            arguments: { title: 'Launch', items: [{ title: 'Write' }, { title: 'Ship' }] },
          },
        ],
      },
      { text: 'All planned.' },
    )
    const planner = await task({
      tools: ['os.write_plan', 'os.ask_ceo'],
      gates: [{ tool: 'os.ask_ceo' }],
      spend: { maxModelTier: 'economical' },
    })
    const run = await start(planner.id)
    const detail = await wait(run.id, ['succeeded'])
    expect(detail.run.result).toEqual({ outcome: 'succeeded', summary: 'All planned.' })
    const calls = fake.callsWith(key)
    expect(calls.map((c) => c.format)).toEqual(['b', 'b'])
    expect(calls[0]!.headers.authorization).toBe(`Bearer ${key}`)
    expect(calls[0]!.model).toBe('gpt-5.4-mini')
    expect(
      calls[0]!.body.tools.map((x: { function: { name: string } }) => x.function.name).sort(),
    ).toEqual(['os__ask_ceo', 'os__finish', 'os__write_plan'])
    const second = calls[1]!.body.messages
    expect(second.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('2 item'),
    })
    const plans = (await t.call('GET', `/v1/plans?producedByRunId=${run.id}`, { token: e.token }))
      .body
    expect(plans).toEqual([
      expect.objectContaining({ title: 'Launch', items: [{ title: 'Write' }, { title: 'Ship' }] }),
    ])
    const log = (await t.call('GET', `/v1/runs/${run.id}/log`, { token: e.token })).body
    expect(log.body).toContain('os.write_plan')
    expect(log.body).toContain('All planned.')
  })

  it('ends failed on os.finish with outcome failed, and keeps another outcome name', async () => {
    const { key, task, start, wait } = await tenant()
    const t1 = await task()
    fake.script(key, finish('failed', 'Could not reach the repo'))
    const failed = await wait((await start(t1.id)).id, ['failed'])
    expect(failed.run).toMatchObject({
      reason: 'Could not reach the repo',
      result: { outcome: 'failed' },
    })
    fake.script(key, finish('needs_review', 'Over to a person'))
    const reviewed = await wait((await start(t1.id, { n: 2 })).id, ['succeeded'])
    expect(reviewed.run.result.outcome).toBe('needs_review')
  })

  it('answers a call of a tool the task does not list with an error, and goes on', async () => {
    const { key, task, start, wait } = await tenant()
    fake.script(
      key,
      {
        toolCalls: [{ name: 'os.mail_send', arguments: { to: 'x@y.z', subject: 's', body: 'b' } }],
      },
      finish(),
    )
    const detail = await wait((await start((await task()).id)).id, ['succeeded'])
    expect(detail.run.status).toBe('succeeded')
    const [, second] = fake.callsWith(key)
    expect(JSON.stringify(second!.body.messages)).toContain("not one of this task's tools")
  })

  it('continues the predecessor conversation for a successor with resumeConversation', async () => {
    const { key, task, start, wait, as } = await tenant()
    const next = await task({ slug: `next-${randomUUID().slice(0, 6)}` })
    const first = await task({ successors: [{ slug: next.slug, resumeConversation: true }] })
    fake.script(
      key,
      finish('succeeded', 'first part', { successorInput: { stage: 2 } }),
      finish('succeeded', 'second part'),
    )
    const run = await start(first.id, { stage: 1, topic: 'x' })
    await wait(run.id, ['succeeded'])
    const execution = await eventually(
      async () => (await t.call('GET', `/v1/executions/${run.id}`, as)).body.runs.length === 2,
      10_000,
    ).then(() => t.call('GET', `/v1/executions/${run.id}`, as))
    const successor = execution.body.runs[1]
    expect(successor.input).toEqual({ stage: 2, topic: 'x' })
    await wait(successor.id, ['succeeded'])
    const secondCall = fake.callsWith(key)[1]!
    expect(JSON.stringify(secondCall.body.messages)).toContain('first part')
  })
})

/** Once a run has been held `holds` times: how long its latest hold waits (last change to next try). */
async function holdSeconds(runId: string, holds: number): Promise<number> {
  await eventually(async () => {
    const [row] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from run_events where run_id = ${runId} and type = 'run.blocked'`
    return row!.n === holds
  }, 10_000)
  const [row] = await t.sql<{ seconds: number }[]>`
    select extract(epoch from not_before - updated_at)::float as seconds from runs where id = ${runId}`
  return row!.seconds
}

describe('blocked runs (DESIGN 6)', () => {
  it('blocks with a reason when no key is bound, and runs at once when one is', async () => {
    const e = await t.createEnterprise(`No key ${randomUUID().slice(0, 6)}`)
    const task = (
      await t.call('POST', '/v1/tasks', {
        token: e.token,
        body: { name: 'Needs a key', assigneeRole: 'ceo' },
      })
    ).body
    const run = (await t.call('POST', `/v1/tasks/${task.id}/runs`, { token: e.token, body: {} }))
      .body
    const blocked = await waitForRun(t, run.id, ['blocked'], 10_000, e.token)
    expect(blocked.run.blockedReason).toContain('No model key')
    const counts = (await t.call('GET', '/v1/executions/counts', { token: e.token })).body
    expect(counts.runs.running).toBe(0) // a blocked run holds no slot
    const key = `key-${randomUUID()}`
    fake.script(key, finish())
    await t.call('POST', '/v1/llm/bindings', { token: e.token, body: { apiKey: key } })
    const done = await waitForRun(t, run.id, ['succeeded'], 10_000, e.token)
    expect(done.events.map((x: { type: string }) => x.type)).toContain('run.blocked')
  })

  it('waits longer after each hold, a hold for want of a key too', async () => {
    const e = await t.createEnterprise(`Still no key ${randomUUID().slice(0, 6)}`)
    const task = (
      await t.call('POST', '/v1/tasks', {
        token: e.token,
        body: { name: 'Waits for a key', assigneeRole: 'ceo' },
      })
    ).body
    const run = (await t.call('POST', `/v1/tasks/${task.id}/runs`, { token: e.token, body: {} }))
      .body
    const waitSeconds = (holds: number) => holdSeconds(run.id, holds)
    expect(await waitSeconds(1)).toBeCloseTo(30, 0)
    await t.sql`update runs set not_before = now() where id = ${run.id}` // as if 30 s went by
    engine.runs.wake()
    expect(await waitSeconds(2)).toBeCloseTo(60, 0)
    await t.sql`update runs set not_before = now() where id = ${run.id}`
    engine.runs.wake()
    expect(await waitSeconds(3)).toBeCloseTo(120, 0)
  })

  it('connects to no tool server while it waits for a key, and once when it has one', async () => {
    const mcp = await startFakeMcpServer()
    try {
      const e = await t.createEnterprise(`Tools, no key ${randomUUID().slice(0, 6)}`)
      const as = { token: e.token }
      const team = await bindTeamTools(t, as, mcp.url)
      const task = await t.call('POST', '/v1/tasks', {
        ...as,
        body: { name: 'Echoes', teamId: team.id, assigneeRole: 'ceo', tools: ['vcs.echo'] },
      })
      expect(task.status, JSON.stringify(task.body)).toBe(201)
      const run = (await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })).body
      // Each hold: the back-off of the hold before it, doubled (as after a model call that failed).
      const held = (holds: number) => holdSeconds(run.id, holds)
      expect(await held(1)).toBeCloseTo(30, 0)
      for (const [holds, seconds] of [
        [2, 60],
        [3, 120],
      ] as const) {
        await t.sql`update runs set not_before = now() where id = ${run.id}` // the back-off is over
        engine.runs.wake()
        expect(await held(holds)).toBeCloseTo(seconds, 0)
      }
      expect(mcp.connections).toBe(0) // three tries, none of which could call a model

      const key = `key-${randomUUID()}`
      fake.script(key, { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'hi' } }] }, finish())
      await t.call('POST', '/v1/llm/bindings', { ...as, body: { apiKey: key } })
      await waitForRun(t, run.id, ['succeeded'], 10_000, e.token)
      expect(mcp.connections).toBe(1)
      expect(mcp.callsOf('echo')).toHaveLength(1)
      expect(fake.callsWith(key)[0]!.body.tools.map((x: { name: string }) => x.name)).toContain(
        'vcs__echo',
      )
    } finally {
      await mcp.close()
    }
  })

  it('blocks on a refused key and on an outage after retries, and retries by itself', async () => {
    const { key, task, start, wait } = await tenant()
    const worker = await task({ serializeOn: ['n'] }) // a held run keeps its lane: each run in its own
    fake.script(key, { status: 401, message: 'invalid x-api-key' })
    const refused = await wait((await start(worker.id)).id, ['blocked'])
    expect(refused.run.blockedReason).toMatch(/refused the key \(401\)/)

    fake.script(
      key,
      { status: 503, retryAfter: 0 },
      { status: 503, retryAfter: 0 },
      { status: 503, retryAfter: 0 },
      finish(),
    )
    const run = await start(worker.id, { n: 2 })
    const held = await wait(run.id, ['blocked'])
    expect(held.run.blockedReason).toMatch(/did not answer \(503\)/)
    // One call for the refused key (a 401 is not retried), three for the outage (tried again twice in place, retries.ts).
    expect(fake.callsWith(key)).toHaveLength(4)
    await t.sql`update runs set not_before = now() where id = ${run.id}` // the back-off is over
    engine.runs.wake()
    await wait(run.id, ['succeeded'])
  })

  it('fails the run when the provider refuses the request itself', async () => {
    const { key, task, start, wait } = await tenant()
    fake.script(key, { status: 400, message: 'max_tokens is too large' })
    const failed = await wait((await start((await task()).id)).id, ['failed'])
    expect(failed.run.reason).toMatch(/refused the request \(400\)/)
  })
})

describe('spend (spec: Spend; DESIGN 6)', () => {
  it('pauses a run when a cap has no room, and queues it again when the cap is raised', async () => {
    const { e, key, task, start, wait, as } = await tenant()
    expect(
      (
        await t.call('PATCH', '/v1/spend/caps', {
          ...as,
          body: { layer: 'enterprise', moneyCentsDay: 0 },
        })
      ).status,
    ).toBe(200)
    fake.script(key, finish())
    const run = await start((await task()).id)
    const paused = await wait(run.id, ['paused_spend'])
    expect(paused.events.at(-1)).toMatchObject({
      type: 'run.paused_spend',
      payload: {
        layer: 'enterprise',
        // Money in the one format osctl writes it in (issue 51), not in cents.
        because: 'the enterprise daily cap of $0.00 has no room for the next model call',
      },
    })
    expect(
      (await t.call('GET', '/v1/blockers', as)).body.paused.map((r: { id: string }) => r.id),
    ).toEqual([run.id])
    await t.call('PATCH', '/v1/spend/caps', {
      ...as,
      body: { layer: 'enterprise', moneyCentsDay: 100_000 },
    })
    await wait(run.id, ['succeeded'])
    const spend = (await t.call('GET', '/v1/spend', { token: e.token })).body
    expect(spend.enabled).toBe(true)
    expect(spend.caps).toEqual([{ layer: 'enterprise', layerId: e.id, moneyCentsDay: 100_000 }])
    const enterpriseSpend = spend.today.find((s: { layer: string }) => s.layer === 'enterprise')
    expect(enterpriseSpend).toMatchObject({ layerId: e.id, runs: 1 })
    expect(enterpriseSpend.usdCents).toBeGreaterThan(0)
    for (const layer of ['task', 'member'])
      expect(spend.today.some((s: { layer: string }) => s.layer === layer)).toBe(true)
  })

  it('queues paused runs again when spend limits are turned off', async () => {
    const { key, task, start, wait, as } = await tenant()
    const worker = await task()
    await t.call('PATCH', '/v1/spend/caps', {
      ...as,
      body: { layer: 'task', layerId: worker.id, moneyCentsDay: 0 },
    })
    fake.script(key, finish())
    const run = await start(worker.id)
    await wait(run.id, ['paused_spend'])
    expect(
      (await t.call('PATCH', '/v1/spend/enabled', { ...as, body: { enabled: false } })).body
        .enabled,
    ).toBe(false)
    await wait(run.id, ['succeeded'])
  })

  it('never overshoots a cap with 20 runs at once: calls that could are not made', async () => {
    const { key, task, start, wait, as, e } = await tenant()
    // Every call answers with its full token budget, so its real cost is its worst case.
    fake.onRequest((request) =>
      request.key === key
        ? { ...finish(), usage: { input: 50, output: 4096 }, delayMs: 100 }
        : undefined,
    )
    const worker = await task({ serializeOn: ['i'] })
    const worst = 4096 * 15 + 2000 * 3 // about: output at $15/MTok plus a prompt of ~2000 tokens at $3/MTok (micros)
    const capCents = Math.floor((3.5 * worst) / 10_000)
    await t.call('PATCH', '/v1/spend/caps', {
      ...as,
      body: { layer: 'enterprise', moneyCentsDay: capCents },
    })
    await t.call('PATCH', '/v1/enterprise/concurrency', { ...as, body: { concurrentRunLimit: 25 } })
    const runs = await Promise.all(Array.from({ length: 20 }, (_, i) => start(worker.id, { i })))
    // Followed one after another, as the runs go on meanwhile: twenty long-polls at once read each
    // run again at each of its events (issue 40).
    const ends = []
    for (const r of runs) ends.push(await wait(r.id, ['succeeded', 'paused_spend'], 30_000))
    const succeeded = ends.filter((d) => d.run.status === 'succeeded').length
    expect(succeeded).toBeGreaterThan(0)
    expect(succeeded).toBeLessThan(20)
    const [day] = await t.sql<{ spent: number; reserved: number }[]>`
      select spent_usd_micros as spent, reserved_usd_micros as reserved from spend_days
       where enterprise_id = ${e.id} and layer = 'enterprise'`
    expect(day!.spent).toBeLessThanOrEqual(capCents * 10_000)
    expect(day!.reserved).toBe(0)
    expect(fake.callsWith(key).length).toBe(succeeded) // no call was made that could not be paid
    fake.onRequest(() => undefined)
  })

  it('fails a run whose next call could exceed spend.moneyUsdPerRun', async () => {
    const { key, task, start, wait } = await tenant()
    fake.script(key, finish())
    const failed = await wait(
      (await start((await task({ spend: { moneyUsdPerRun: 0.001 } })).id)).id,
      ['failed'],
    )
    expect(failed.run.reason).toContain('spend.moneyUsdPerRun')
    expect(fake.callsWith(key)).toHaveLength(0)
  })

  it('counts every earlier call against spend.moneyUsdPerRun, the last one too', async () => {
    const { key, task, start, wait } = await tenant()
    // Each call costs $0.09 (10,000 input tokens at $3/MTok, 4,000 output at $15/MTok) and asks for a
    // tool the task does not list: the refusal goes back to the model without re-reading the run, so
    // only the model calls keep its cost. A call's worst case is about $0.063: $0.20 has room for a
    // second call ($0.09 + $0.063) but not a third ($0.18 + $0.063).
    const call = {
      toolCalls: [{ name: 'os.mail_send', arguments: { to: 'x@y.z', subject: 's', body: 'b' } }],
      usage: { input: 10_000, output: 4_000 },
    }
    fake.script(key, call, call, call, call)
    const failed = await wait(
      (await start((await task({ spend: { moneyUsdPerRun: 0.2 } })).id)).id,
      ['failed'],
    )
    expect(failed.run.reason).toContain(
      'with $0.18 spent it would exceed spend.moneyUsdPerRun ($0.20)',
    )
    expect(failed.run.costUsdCents).toBe(18)
    expect(fake.callsWith(key)).toHaveLength(2)
  })

  it('refuses caps on layers of another enterprise and bad values', async () => {
    const { as } = await tenant()
    expect(
      (
        await t.call('PATCH', '/v1/spend/caps', {
          ...as,
          body: { layer: 'team', layerId: randomUUID(), moneyCentsDay: 5 },
        })
      ).body.error,
    ).toBe('team_not_found')
    expect(
      (
        await t.call('PATCH', '/v1/spend/caps', {
          ...as,
          body: { layer: 'team', moneyCentsDay: 5 },
        })
      ).status,
    ).toBe(400)
    expect(
      (
        await t.call('PATCH', '/v1/spend/caps', {
          ...as,
          body: { layer: 'planet', moneyCentsDay: 5 },
        })
      ).status,
    ).toBe(400)
    expect(
      (
        await t.call('PATCH', '/v1/spend/caps', {
          ...as,
          body: { layer: 'enterprise', moneyCentsDay: -1 },
        })
      ).status,
    ).toBe(400)
    expect(
      (await t.call('PATCH', '/v1/spend/enabled', { ...as, body: { enabled: 'yes' } })).status,
    ).toBe(400)
  })
})

describe('durable execution (DESIGN 5)', () => {
  it('resumes from the journal after a restart without a second model call, and acts once', async () => {
    const { e, key, task, start, wait } = await tenant()
    const planner = await task({
      tools: ['os.write_plan', 'os.ask_ceo'],
      gates: [{ tool: 'os.ask_ceo' }],
    })
    fake.script(
      key,
      { toolCalls: [{ name: 'os.write_plan', arguments: { title: 'Once', items: [] } }] },
      { ...finish(), delayMs: 4000 },
    )
    const run = await start(planner.id)
    await eventually(() => fake.callsWith(key).length === 2, 10_000) // the second call is in flight
    await engine.stop() // aborts it; the lease is released at once
    engine = await startTestEngine(t)
    await wait(run.id, ['succeeded'])
    const calls = fake.callsWith(key)
    const firstCalls = calls.filter((c) => c.body.messages.length === 1)
    expect(firstCalls).toHaveLength(1) // the answered call was not made again
    expect(calls.filter((c) => c.aborted)).toHaveLength(1)
    const plans = (await t.call('GET', `/v1/plans?producedByRunId=${run.id}`, { token: e.token }))
      .body
    expect(plans).toHaveLength(1) // the tool acted once
  })

  it('keeps a call answered after its worker lost the run: paid once, and the run goes on from it', async () => {
    const { e, key, task, start, wait } = await tenant()
    fake.script(key, { ...finish('succeeded', 'late but fine'), delayMs: 1500 })
    const run = await start((await task()).id)
    await eventually(() => fake.callsWith(key).length === 1, 10_000)
    // Another engine takes the run while the call is out (this one stalled past its lease, say).
    await t.sql`
      update runs set lease_owner = 'another-engine', lease_expires_at = now() + interval '1 hour'
       where id = ${run.id}`
    await eventually(
      async () =>
        (await t.sql`select 1 from run_journal where run_id = ${run.id} and state = 'done'`)
          .length === 1,
      5000,
      'the late answer to be kept',
    )
    expect((await t.call('GET', `/v1/runs/${run.id}`, { token: e.token })).body.run.status).toBe(
      'running',
    ) // the worker that lost it did not act on it
    // That other engine dies in turn: the run is taken over here and goes on from the kept answer.
    await t.sql`update runs set lease_expires_at = now() - interval '1 second' where id = ${run.id}`
    engine.runs.wake()
    const done = await wait(run.id, ['succeeded'])
    expect(done.run.result).toMatchObject({ summary: 'late but fine' })
    expect(fake.callsWith(key)).toHaveLength(1)
    const [spend] = await t.sql<{ reserved: number; spent: number }[]>`
      select sum(reserved_usd_micros)::int as reserved, sum(spent_usd_micros)::int as spent
        from spend_days where enterprise_id = ${e.id} and layer = 'enterprise'`
    expect(spend!.reserved).toBe(0)
    expect(spend!.spent).toBe(done.run.costUsdCents * 10_000)
  })

  it('aborts the in-flight call when its run is cancelled, and releases what the call had reserved', async () => {
    const { e, key, task, start, wait, as } = await tenant()
    fake.script(key, { ...finish(), delayMs: 10_000 })
    const run = await start((await task()).id)
    await eventually(() => fake.callsWith(key).length === 1, 10_000)
    const reserved = async () =>
      (
        await t.sql<{ n: number }[]>`
          select coalesce(sum(reserved_usd_micros), 0)::int as n from spend_days where enterprise_id = ${e.id}`
      )[0]!.n
    expect(await reserved()).toBeGreaterThan(0) // the call's worst case, held against the caps
    await t.call('POST', `/v1/runs/${run.id}/cancel`, as)
    await eventually(() => fake.callsWith(key)[0]!.aborted, 3000, 'the model call to be aborted')
    expect((await wait(run.id, ['cancelled'])).run.status).toBe('cancelled')
    // A cancelled run is never resumed: its call's reservation is released now, not never.
    await eventually(async () => (await reserved()) === 0, 3000, 'the reservation to be released')
    const [step] = await t.sql<{ state: string }[]>`
      select state from run_journal where run_id = ${run.id} and kind = 'model'`
    expect(step!.state).toBe('failed')
  })
})

describe('model routes (spec: Endpoints Models)', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/llm/connections' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/llm/bindings' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/llm/tiers' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/llm/models' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/spend' })

  it('never answers a key: connections, bindings, runs, logs and deliveries', async () => {
    const { e, key, task, start, wait } = await tenant()
    fake.script(key, finish('succeeded', 'ok'))
    const run = await start((await task()).id)
    await wait(run.id, ['succeeded'])
    const as = { token: e.token }
    const answers = await Promise.all([
      t.call('GET', '/v1/llm/connections', as),
      t.call('GET', '/v1/llm/bindings', as),
      t.call('GET', `/v1/runs/${run.id}`, as),
      t.call('GET', `/v1/runs/${run.id}/log`, as),
      t.call('GET', '/v1/webhooks', as),
      t.call('GET', '/v1/spend', as),
    ])
    for (const answer of answers) expect(answer.text).not.toContain(key)
    const connection = answers[0].body[0]
    expect(connection).toMatchObject({
      provider: 'provider_a',
      kind: 'api_key',
      layer: 'enterprise',
      keyHint: `…${key.slice(-4)}`,
    })
    const [stored] =
      await t.sql`select secret_ciphertext from llm_connections where id = ${connection.id}`
    expect(Buffer.from(stored!.secretCiphertext).toString('latin1')).not.toContain(key)
  })

  it('uses the nearest layer: the member key over the enterprise key', async () => {
    const { e, key, task, start, wait } = await tenant()
    const ceo = (await t.call('GET', '/v1/members', { token: e.token })).body.find(
      (m: { email: string }) => m.email.startsWith('chief-executive'),
    )
    const memberKey = `member-${randomUUID()}`
    await t.call('POST', '/v1/llm/bindings', {
      token: e.token,
      body: { apiKey: memberKey, layer: 'member', layerId: ceo.id },
    })
    fake.script(memberKey, finish())
    await wait((await start((await task()).id)).id, ['succeeded'])
    expect(fake.callsWith(memberKey)).toHaveLength(1)
    expect(fake.callsWith(key)).toHaveLength(0)
    const mine = (
      await t.call('GET', `/v1/llm/bindings?layer=member&layerId=${ceo.id}`, { token: e.token })
    ).body
    expect(mine).toEqual([
      expect.objectContaining({ layer: 'member', layerId: ceo.id, connected: true }),
    ])
    expect(
      (
        await t.call(
          'DELETE',
          `/v1/llm/bindings?provider=provider_a&layer=member&layerId=${ceo.id}`,
          { token: e.token },
        )
      ).status,
    ).toBe(204)
    expect(
      (await t.call('GET', `/v1/llm/bindings?layer=member&layerId=${ceo.id}`, { token: e.token }))
        .body,
    ).toEqual([])
  })

  it('renames and describes connections; plan only for subscription logins; usage by day and model', async () => {
    const { e, key, task, start, wait } = await tenant()
    fake.script(key, { ...finish(), usage: { input: 100, output: 20 } })
    await wait((await start((await task()).id)).id, ['succeeded'])
    const [connection] = (await t.call('GET', '/v1/llm/connections', { token: e.token })).body
    const renamed = await t.call('PATCH', `/v1/llm/connections/${connection.id}`, {
      token: e.token,
      body: { name: 'Main key', description: 'billing: ops' },
    })
    expect(renamed.body).toMatchObject({ name: 'Main key', description: 'billing: ops' })
    const plan = await t.call('PATCH', `/v1/llm/connections/${connection.id}`, {
      token: e.token,
      body: { plan: 'pro' },
    })
    expect(plan.status).toBe(400)
    const usage = (
      await t.call('GET', `/v1/llm/connections/${connection.id}/usage`, { token: e.token })
    ).body
    expect(usage.days).toEqual([
      {
        day: new Date().toISOString().slice(0, 10),
        model: 'claude-sonnet-5-5',
        calls: 1,
        inputTokens: 100,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        outputTokens: 20,
        costUsdCents: (100 * 3 + 20 * 15) / 10_000,
        unpriced: false,
      },
    ])
    expect(
      (await t.call('GET', `/v1/llm/connections/${randomUUID()}/usage`, { token: e.token })).body
        .error,
    ).toBe('connection_not_found')
  })

  it('answers the tiers with their defaults, and an override', async () => {
    const { as } = await tenant()
    const tiers = (await t.call('GET', '/v1/llm/tiers', as)).body.tiers
    expect(tiers.provider_a.mid).toEqual({ model: 'claude-sonnet-5-5', overridden: false })
    expect(tiers.provider_b.frontier).toEqual({ model: 'gpt-5.6-sol', overridden: false })
    const after = (
      await t.call('POST', '/v1/llm/tiers/override', {
        ...as,
        body: { provider: 'provider_a', tier: 'mid', model: 'claude-opus-5-5' },
      })
    ).body
    expect(after.tiers.provider_a.mid).toEqual({ model: 'claude-opus-5-5', overridden: true })
    expect(
      (
        await t.call('POST', '/v1/llm/tiers/override', {
          ...as,
          body: { provider: 'provider_c', tier: 'mid', model: 'x' },
        })
      ).status,
    ).toBe(400)
  })

  it('lists the models the connections offer, and refuses a task model nobody offers', async () => {
    const { as } = await tenant('provider_b')
    fake.setModels('b', ['gpt-5.4', 'gpt-5.4-mini', 'special-model'])
    const models = (await t.call('GET', '/v1/llm/models', as)).body.models
    expect(models).toEqual(
      expect.arrayContaining([{ provider: 'provider_b', id: 'special-model', source: 'provider' }]),
    )
    const offered = await t.call('POST', '/v1/tasks', {
      ...as,
      body: { name: 'Special', spend: { model: 'special-model' } },
    })
    expect(offered.status).toBe(201)
    const refused = await t.call('POST', '/v1/tasks', {
      ...as,
      body: { name: 'Unknown model', spend: { model: 'no-such-model' } },
    })
    expect(refused.status).toBe(400)
    expect(refused.body.error).toBe('llm_model_not_in_catalogue')
    const publish = await t.call('POST', `/v1/tasks/${offered.body.id}/versions`, {
      ...as,
      body: { spend: { model: 'no-such-model' } },
    })
    expect(publish.body.error).toBe('llm_model_not_in_catalogue')
  })

  it('falls back to the shipped catalogue when a provider cannot be asked', async () => {
    const e = await t.createEnterprise(`Offline ${randomUUID().slice(0, 6)}`)
    const offline = await createTestApp({
      providerBaseUrls: { provider_a: 'http://127.0.0.1:1', provider_b: 'http://127.0.0.1:1' },
    })
    await offline.call('POST', '/v1/llm/bindings', { body: { apiKey: 'sk-offline-key' } })
    const models = (await offline.call('GET', '/v1/llm/models')).body.models
    expect(models.every((m: { source: string }) => m.source === 'catalogue')).toBe(true)
    expect(models.map((m: { id: string }) => m.id)).toContain('claude-sonnet-5-5')
    expect(e.id).toBeDefined()
  })

  it('asks a provider whose listing failed again after 30 seconds, not 10 minutes', async () => {
    const { as } = await tenant('provider_b')
    const sources = async () =>
      new Set(
        (await t.call('GET', '/v1/llm/models', as)).body.models
          .filter((m: { provider: string }) => m.provider === 'provider_b')
          .map((m: { source: string }) => m.source),
      )
    fake.setModels('b', null)
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      expect(await sources()).toEqual(new Set(['catalogue']))
      fake.setModels('b', ['gpt-5.4', 'back-again'])
      expect(await sources()).toEqual(new Set(['catalogue'])) // the failure is kept a while
      vi.setSystemTime(Date.now() + 31_000)
      expect(await sources()).toEqual(new Set(['provider']))
    } finally {
      vi.useRealTimers()
      fake.setModels('b', ['gpt-5.4', 'gpt-5.4-mini', 'gpt-5.4-nano'])
    }
  })

  it('refuses bindings on layers it cannot find and bad providers', async () => {
    const { as } = await tenant()
    expect(
      (
        await t.call('POST', '/v1/llm/bindings', {
          ...as,
          body: { apiKey: 'sk-12345678', layer: 'team', layerId: randomUUID() },
        })
      ).body.error,
    ).toBe('team_not_found')
    expect(
      (
        await t.call('POST', '/v1/llm/bindings', {
          ...as,
          body: { apiKey: 'sk-12345678', layer: 'member' },
        })
      ).status,
    ).toBe(400)
    expect(
      (
        await t.call('POST', '/v1/llm/bindings', {
          ...as,
          body: { apiKey: 'sk-12345678', provider: 'provider_z' },
        })
      ).status,
    ).toBe(400)
  })
})

describe('long runs', () => {
  it('reads the journal when a run starts and never at a step: as often for 12 tool calls as for 2', async () => {
    // The engine's own pool tells which statements read the journal, and for which run.
    const journalReads: unknown[][] = []
    const counted = createSql(t.dbUrl, {
      onQuery: (query, parameters) => {
        // The head read before each call (journalHead, issue 42: one index entry) is not a read of
        // the journal's entries.
        if (/\bfrom run_journal\b/i.test(query) && !/max\(step\)/.test(query))
          journalReads.push([...parameters])
      },
    })
    await engine.stop()
    const counting = await startTestEngine(t, { sql: counted })
    try {
      const { key, task, start, wait, as } = await tenant()
      const next = await task({
        slug: `long-${randomUUID().slice(0, 6)}`,
        tools: ['os.set_gate_summary'],
      })
      const first = await task({ successors: [{ slug: next.slug, resumeConversation: true }] })
      /** Reads of the journals of a run and of the successor that continues its conversation. */
      const readsFor = async (toolCalls: number) => {
        const summaries = Array.from({ length: toolCalls }, (_, n) => ({
          toolCalls: [{ name: 'os.set_gate_summary', arguments: { summary: `step ${n + 1}` } }],
        }))
        fake.script(key, finish('succeeded', 'first part'), ...summaries, finish())
        const run = await start(first.id, { toolCalls })
        await wait(run.id, ['succeeded'])
        const execution = await eventually(
          async () => (await t.call('GET', `/v1/executions/${run.id}`, as)).body.runs.length === 2,
          10_000,
        ).then(() => t.call('GET', `/v1/executions/${run.id}`, as))
        const successor = execution.body.runs[1]
        const done = await wait(successor.id, ['succeeded'])
        expect(done.cost.modelCalls).toBe(toolCalls + 1)
        return journalReads.filter((p) => p.includes(run.id) || p.includes(successor.id)).length
      }
      const short = await readsFor(2)
      const long = await readsFor(12)
      // Its own journal once per run, and the predecessor's once for the successor.
      expect(short).toBe(3)
      expect(long).toBe(short)
    } finally {
      await counting.stop()
      await counted.end()
      engine = await startTestEngine(t)
    }
  })

  it("leaves nothing on the run's signal after a model or tool call, however many it makes", async () => {
    const mcp = await startFakeMcpServer()
    const signals = new Map<string, AbortSignal>()
    const agent = new AgentExecutor({
      sql: t.sql,
      sealer: t.sealer,
      providers: createProviders({ baseUrls: t.config.providerBaseUrls }),
      log: t.log,
      toolLimits: toolLimits(t.config),
    })
    await engine.stop()
    const recording = await startTestEngine(t, {
      executors: {
        llm: {
          execute(run, context) {
            signals.set(run.id, context.signal)
            return agent.execute(run, context)
          },
        },
      },
    })
    try {
      const { e, key, start, wait } = await tenant('provider_b')
      const as = { token: e.token }
      const team = await bindTeamTools(t, as, mcp.url)
      const task = await t.call('POST', '/v1/tasks', {
        ...as,
        body: { name: 'Echoes', teamId: team.id, assigneeRole: 'ceo', tools: ['vcs.echo'] },
      })
      const echoes = Array.from({ length: 12 }, (_, n) => ({
        toolCalls: [{ name: 'vcs.echo', arguments: { text: `echo ${n}` } }],
      }))
      fake.script(key, ...echoes, finish())
      const run = await start(task.body.id)
      await wait(run.id, ['succeeded'])
      expect(mcp.callsOf('echo')).toHaveLength(12)
      // Each call had a signal of its own, which whatever the clients left on it went away with.
      expect(getEventListeners(signals.get(run.id)!, 'abort')).toHaveLength(0)
    } finally {
      await recording.stop()
      await mcp.close()
      engine = await startTestEngine(t)
    }
  })
})

describe('provider_b subscription sign-in (OAuth with PKCE)', () => {
  it('starts with a PKCE challenge and state, completes by exchanging the code', async () => {
    let exchanged: URLSearchParams | undefined
    const tokens = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        exchanged = new URLSearchParams(body)
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            access_token: 'sub-access-token-1',
            refresh_token: 'sub-refresh',
            expires_in: 3600,
          }),
        )
      })
    })
    await new Promise<void>((r) => tokens.listen(0, '127.0.0.1', r))
    const port = (tokens.address() as AddressInfo).port
    const app = await createTestApp({
      providerBOAuth: {
        authorizeUrl: 'https://signin.example/authorize',
        tokenUrl: `http://127.0.0.1:${port}/token`,
        clientId: 'osd-client',
        redirectUri: 'https://osd.example/v1/llm/provider_b/oauth/callback',
        scope: 'openid offline_access',
      },
    })
    const started = (await app.call('POST', '/v1/llm/provider_b/oauth/start', { body: {} })).body
    const url = new URL(started.url)
    expect(url.origin + url.pathname).toBe('https://signin.example/authorize')
    expect(url.searchParams.get('code_challenge_method')).toBe('S256')
    expect(url.searchParams.get('state')).toBe(started.state)
    expect(url.searchParams.get('client_id')).toBe('osd-client')
    // A sign-in for a layer the enterprise does not have is refused before it starts.
    const nowhere = await app.call('POST', '/v1/llm/provider_b/oauth/start', {
      body: { layer: 'team', layerId: randomUUID() },
    })
    expect(nowhere.status).toBe(404)
    expect(nowhere.body.error).toBe('team_not_found')
    const bad = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
      body: { code: 'c', state: 'forged-state' },
    })
    expect(bad.status).toBe(400)
    const done = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
      body: { code: 'the-code', state: started.state },
    })
    expect(done.status).toBe(201)
    expect(done.body).toMatchObject({
      provider: 'provider_b',
      kind: 'subscription',
      layer: 'enterprise',
    })
    expect(exchanged?.get('grant_type')).toBe('authorization_code')
    expect(exchanged?.get('code')).toBe('the-code')
    expect(exchanged?.get('code_verifier')).toMatch(/^[A-Za-z0-9_-]{43,128}$/)
    expect(done.text).not.toContain('sub-access-token-1')
    const plan = await app.call('PATCH', `/v1/llm/connections/${done.body.id}`, {
      body: { plan: 'team plan' },
    })
    expect(plan.body.plan).toBe('team plan')
    // Removing the key binding of provider_b leaves the sign-in alone: it is not a key.
    const unbound = await app.call('DELETE', '/v1/llm/bindings?provider=provider_b')
    expect(unbound.status).toBe(204)
    const connections = (await app.call('GET', '/v1/llm/connections')).body
    expect(connections).toContainEqual(
      expect.objectContaining({ id: done.body.id, kind: 'subscription' }),
    )
    const again = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
      body: { code: 'the-code', state: started.state },
    })
    expect(again.status).toBe(400) // a state is used once
    tokens.close()
  })

  it("lists a signed-in provider's own models, refreshing an expired access token first", async () => {
    const grants: URLSearchParams[] = []
    const tokens = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        grants.push(new URLSearchParams(body))
        res.writeHead(200, { 'content-type': 'application/json' })
        // Expiring within the minute: the next use must refresh it.
        res.end(
          JSON.stringify({
            access_token: `sub-access-${grants.length}`,
            refresh_token: 'sub-refresh',
            expires_in: grants.length === 1 ? 1 : 3600,
          }),
        )
      })
    })
    await new Promise<void>((r) => tokens.listen(0, '127.0.0.1', r))
    try {
      const app = await createTestApp({
        providerBaseUrls: { provider_a: fake.url, provider_b: fake.url },
        providerBOAuth: {
          authorizeUrl: 'https://signin.example/authorize',
          tokenUrl: `http://127.0.0.1:${(tokens.address() as AddressInfo).port}/token`,
          clientId: 'osd-client',
          redirectUri: 'https://osd.example/v1/llm/provider_b/oauth/callback',
          scope: 'openid offline_access',
        },
      })
      const started = (await app.call('POST', '/v1/llm/provider_b/oauth/start', { body: {} })).body
      const done = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
        body: { code: 'the-code', state: started.state },
      })
      expect(done.status).toBe(201)
      fake.setModels('b', ['gpt-5.4', 'subscriber-model'])
      const models = (await app.call('GET', '/v1/llm/models')).body.models
      expect(models).toContainEqual({
        provider: 'provider_b',
        id: 'subscriber-model',
        source: 'provider',
      })
      expect(grants.map((g) => g.get('grant_type'))).toEqual([
        'authorization_code',
        'refresh_token',
      ])
    } finally {
      tokens.close()
    }
  })

  it('refreshes a subscription once when many runs in two daemons need it at the same moment', async () => {
    // The sign-in service rotates the refresh token, as many do: an old one exchanged again is refused.
    let current = 'refresh-0'
    let refreshes = 0
    const tokens = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        const grant = new URLSearchParams(body)
        const answer = (status: number, json: object) => {
          res.writeHead(status, { 'content-type': 'application/json' })
          res.end(JSON.stringify(json))
        }
        if (grant.get('grant_type') === 'authorization_code')
          return answer(200, { access_token: 'access-0', refresh_token: current, expires_in: 1 })
        if (grant.get('refresh_token') !== current) return answer(400, { error: 'invalid_grant' })
        refreshes++
        current = `refresh-${refreshes}`
        const n = refreshes
        // Slow enough that every caller asks while the first exchange is under way.
        setTimeout(
          () =>
            answer(200, { access_token: `access-${n}`, refresh_token: current, expires_in: 3600 }),
          150,
        )
      })
    })
    await new Promise<void>((r) => tokens.listen(0, '127.0.0.1', r))
    const oauth = {
      authorizeUrl: 'https://signin.example/authorize',
      tokenUrl: `http://127.0.0.1:${(tokens.address() as AddressInfo).port}/token`,
      clientId: 'osd-client',
      redirectUri: 'https://osd.example/v1/llm/provider_b/oauth/callback',
      scope: 'openid offline_access',
    }
    const app = await createTestApp({ providerBOAuth: oauth })
    // Each pool is a daemon's own connections to the shared database.
    const daemons = [createSql(app.dbUrl), createSql(app.dbUrl)]
    try {
      const started = (await app.call('POST', '/v1/llm/provider_b/oauth/start', { body: {} })).body
      const done = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
        body: { code: 'the-code', state: started.state },
      })
      expect(done.status).toBe(201)
      const keys = await Promise.all(
        daemons.flatMap((sql) =>
          Array.from({ length: 4 }, () =>
            resolveKey(sql, app.sealer, app.acme.id, {}, 'provider_b', oauth),
          ),
        ),
      )
      expect(keys.map((k) => k?.key)).toEqual(Array(8).fill('access-1'))
      expect(refreshes).toBe(1)
      const [row] = await app.sql<{ secretCiphertext: Buffer }[]>`
        select secret_ciphertext from llm_connections where id = ${done.body.id}`
      expect(
        JSON.parse(app.sealer.open(row!.secretCiphertext, sealedColumns.llmSecret, done.body.id)),
      ).toEqual({
        accessToken: 'access-1',
        refreshToken: 'refresh-1',
      })
    } finally {
      await Promise.all(daemons.map((sql) => sql.end()))
      tokens.close()
    }
  })

  it('holds a run whose subscription cannot be refreshed, saying why, instead of failing its engine', async () => {
    const tokens = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => (body += c))
      req.on('end', () => {
        const grant = new URLSearchParams(body)
        const ok = grant.get('grant_type') === 'authorization_code'
        res.writeHead(ok ? 200 : 400, { 'content-type': 'application/json' })
        // The first token expires at once; the sign-in service then refuses the refresh token.
        res.end(
          JSON.stringify(
            ok
              ? { access_token: 'access-0', refresh_token: 'refresh-0', expires_in: 1 }
              : { error: 'invalid_grant' },
          ),
        )
      })
    })
    await new Promise<void>((r) => tokens.listen(0, '127.0.0.1', r))
    const oauth = {
      authorizeUrl: 'https://signin.example/authorize',
      tokenUrl: `http://127.0.0.1:${(tokens.address() as AddressInfo).port}/token`,
      clientId: 'osd-client',
      redirectUri: 'https://osd.example/v1/llm/provider_b/oauth/callback',
      scope: 'openid offline_access',
    }
    try {
      const app = await createTestApp({ providerBOAuth: oauth })
      const started = (await app.call('POST', '/v1/llm/provider_b/oauth/start', { body: {} })).body
      const done = await app.call('POST', '/v1/llm/provider_b/oauth/complete', {
        body: { code: 'the-code', state: started.state },
      })
      expect(done.status).toBe(201)
      const choice = await chooseModel(app.sql, app.sealer, app.acme.id, {}, null, oauth)
      expect(choice).toEqual({ blocked: expect.stringContaining('invalid_grant') })
    } finally {
      tokens.close()
    }
  })

  it('says clearly when sign-in is not configured', async () => {
    const res = await t.call('POST', '/v1/llm/provider_b/oauth/start', { body: {} })
    expect(res.status).toBe(400)
    expect(res.body.message).toContain('OSD_PROVIDER_B_OAUTH_CLIENT_ID')
  })
})

describe('prompt caching (issue 29; DESIGN 13)', () => {
  /** A skill long enough that the tools and system pass the providers' 1,024-token cache minimum. */
  const skillMd = `# Keep the books\n\n${'Reconcile each ledger line against the bank statement. '.repeat(90)}`
  /** Three refused tool calls (os.mail_send is not the task's), then os.finish: four model calls. */
  const steps = [
    ...[1, 2, 3].map((n) => ({
      toolCalls: [
        { name: 'os.mail_send', arguments: { to: 'a@b.c', subject: `s${n}`, body: 'b' } },
      ],
    })),
    finish('succeeded', 'reconciled'),
  ]
  interface Called {
    inputTokens: number
    cacheReadTokens: number
    cacheWriteTokens: number
    outputTokens: number
    costUsdCents: number
  }
  const called = (detail: RunDetailBody) =>
    detail.events
      .filter((e: { type: string }) => e.type === 'model.called')
      .map((e: { payload: Called }) => e.payload) as Called[]
  type RunDetailBody = Awaited<ReturnType<Awaited<ReturnType<typeof tenant>>['wait']>>
  const sum = (calls: Called[], of: keyof Called) => calls.reduce((n, c) => n + c[of], 0)
  /** claude-sonnet-5-5 per million tokens: input $3, cache read $0.30, cache write $3.75, output $15. */
  const sonnetMicros = (c: Called) =>
    Math.ceil(
      (c.inputTokens * 300 +
        c.cacheReadTokens * 30 +
        c.cacheWriteTokens * 375 +
        c.outputTokens * 1500) /
        100,
    )
  /** The input's cost of a run, in micro-dollars, at claude-sonnet-5-5's prices. */
  const inputMicros = (calls: Called[]) =>
    calls.reduce(
      (n, c) => n + (c.inputTokens * 300 + c.cacheReadTokens * 30 + c.cacheWriteTokens * 375) / 100,
      0,
    )

  it('provider_a: each call reads the conversation so far from the cache; usage, cost and spend price each kind', async () => {
    const { e, key, task, start, wait } = await tenant('provider_a')
    fake.script(key, ...steps)
    const detail = await wait((await start((await task({ skillMd })).id, { month: 'June' })).id, [
      'succeeded',
    ])
    // The requests: the system and the newest message marked, at most 4 breakpoints each.
    const requests = fake.callsWith(key)
    expect(requests).toHaveLength(4)
    for (const request of requests) {
      const body = JSON.stringify(request.body)
      expect(body.split('"cache_control"').length - 1).toBeLessThanOrEqual(4)
      expect(request.body.system[0].cache_control).toEqual({ type: 'ephemeral' })
      expect(request.body.messages.at(-1).content.at(-1).cache_control).toEqual({
        type: 'ephemeral',
      })
    }
    // What each call was billed for, as its event tells: the first writes its prompt to the cache,
    // each later one reads all the one before it wrote and read, and writes only what is new.
    const calls = called(detail)
    expect(calls).toHaveLength(4)
    expect(calls[0]).toMatchObject({ cacheReadTokens: 0, inputTokens: 0 })
    expect(calls[0]!.cacheWriteTokens).toBeGreaterThan(1024)
    for (let n = 1; n < calls.length; n++) {
      expect(calls[n]!.cacheReadTokens).toBe(
        calls[n - 1]!.cacheReadTokens + calls[n - 1]!.cacheWriteTokens,
      )
      expect(calls[n]!.cacheWriteTokens).toBeGreaterThan(0)
      expect(calls[n]!.cacheWriteTokens).toBeLessThan(calls[0]!.cacheWriteTokens / 4)
    }
    // Each call's cost at its kinds' prices; the run's cost is their sum, and so is the day's spend.
    for (const call of calls)
      expect(Math.round(call.costUsdCents * 10_000)).toBe(sonnetMicros(call))
    const micros = calls.reduce((n, c) => n + sonnetMicros(c), 0)
    expect(Math.round(detail.run.costUsdCents * 10_000)).toBe(micros)
    expect(detail.cost).toEqual({
      usdCents: micros / 10_000,
      unpriced: false,
      modelCalls: 4,
      inputTokens: sum(calls, 'inputTokens'),
      cacheReadTokens: sum(calls, 'cacheReadTokens'),
      cacheWriteTokens: sum(calls, 'cacheWriteTokens'),
      outputTokens: sum(calls, 'outputTokens'),
    })
    const spent = await t.sql<{ layer: string; spent: number }[]>`
      select layer, spent_usd_micros as spent from spend_days where enterprise_id = ${e.id}`
    expect(spent.length).toBeGreaterThan(0)
    for (const day of spent) expect(day.spent).toBe(micros)
    const [connection] = (await t.call('GET', '/v1/llm/connections', { token: e.token })).body
    const usage = await t.call('GET', `/v1/llm/connections/${connection.id}/usage`, {
      token: e.token,
    })
    expect(usage.body.days).toEqual([
      {
        day: new Date().toISOString().slice(0, 10),
        model: 'claude-sonnet-5-5',
        calls: 4,
        inputTokens: sum(calls, 'inputTokens'),
        cacheReadTokens: sum(calls, 'cacheReadTokens'),
        cacheWriteTokens: sum(calls, 'cacheWriteTokens'),
        outputTokens: sum(calls, 'outputTokens'),
        costUsdCents: micros / 10_000,
        unpriced: false,
      },
    ])
    // The reservation before each call kept the uncached worst case: more than the call would have
    // cost with every input token at the full price, whatever the cache then read.
    const journal = await t.sql<
      {
        reserved: number
        cost: number
        usage: { input: number; cacheRead: number; cacheWrite: number; output: number }
      }[]
    >`select reserved_usd_micros as reserved, cost_usd_micros as cost, response -> 'usage' as usage
        from run_journal where run_id = ${detail.run.id} and kind = 'model' order by step`
    expect(journal).toHaveLength(4)
    for (const step of journal) {
      const { input, cacheRead, cacheWrite, output } = step.usage
      expect(step.reserved).toBeGreaterThan((input + cacheRead + cacheWrite) * 3 + output * 15)
      expect(step.cost).toBeLessThan(step.reserved)
    }
  })

  it('OSD_PROMPT_CACHE=off sends no breakpoints and pays every input token in full: the cached run costs far less', async () => {
    const cachedRun = await tenant('provider_a')
    fake.script(cachedRun.key, ...steps)
    const cached = called(
      await cachedRun.wait(
        (await cachedRun.start((await cachedRun.task({ skillMd })).id, { month: 'July' })).id,
        ['succeeded'],
      ),
    )
    await engine.stop()
    const off = await startTestEngine(t, { config: { ...t.config, promptCache: false } })
    try {
      const plain = await tenant('provider_a')
      fake.script(plain.key, ...steps)
      const uncached = called(
        await plain.wait(
          (await plain.start((await plain.task({ skillMd })).id, { month: 'July' })).id,
          ['succeeded'],
        ),
      )
      for (const request of fake.callsWith(plain.key))
        expect(JSON.stringify(request.body)).not.toContain('cache_control')
      expect(sum(uncached, 'cacheReadTokens') + sum(uncached, 'cacheWriteTokens')).toBe(0)
      // The first call pays 1.25x for writing; four calls in, the cached run's input costs under half.
      expect(inputMicros(cached.slice(0, 1))).toBeGreaterThan(inputMicros(uncached.slice(0, 1)))
      expect(inputMicros(cached)).toBeLessThan(inputMicros(uncached) * 0.5)
    } finally {
      await off.stop()
      engine = await startTestEngine(t)
    }
  })

  it('a run resumed after a gate sends its conversation as the same bytes: the cache still reads all of it', async () => {
    const { key, task, start, wait, as } = await tenant('provider_a')
    // A refused call whose arguments' keys come in an order the database keeps otherwise (jsonb puts
    // shorter keys first), then a gated question: the run waits, and comes back reading its journal.
    fake.script(
      key,
      {
        toolCalls: [{ name: 'os.mail_send', arguments: { subject: 's', to: 'a@b.c', body: 'b' } }],
      },
      { toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Which month?'] } }] },
      finish('succeeded', 'asked'),
    )
    const asker = await task({ skillMd, tools: ['os.ask_ceo'], gates: [{ tool: 'os.ask_ceo' }] })
    const run = (await start(asker.id)).id
    await wait(run, ['waiting_on_gate'])
    const [gate] = (await t.call('GET', `/v1/gates?runId=${run}`, as)).body
    await t.call('POST', `/v1/gates/${gate.id}/decision`, {
      ...as,
      body: { decision: 'approve', answers: ['June'] },
    })
    const calls = called(await wait(run, ['succeeded']))
    expect(calls).toHaveLength(3)
    // The call after the gate reads everything the call before it wrote: the refused call's arguments
    // read back from the database are the bytes that were sent before.
    expect(calls[2]!.cacheReadTokens).toBe(calls[1]!.cacheReadTokens + calls[1]!.cacheWriteTokens)
    const [, before, after] = fake.callsWith(key)
    expect(JSON.stringify(after!.body.messages[1])).toBe(JSON.stringify(before!.body.messages[1]))
  })

  it("provider_b: the provider's own cache is read from cached_tokens and priced at its cached rate", async () => {
    const { key, task, start, wait } = await tenant('provider_b')
    fake.script(key, ...steps)
    const detail = await wait((await start((await task({ skillMd })).id, { month: 'June' })).id, [
      'succeeded',
    ])
    const calls = called(detail)
    expect(calls).toHaveLength(4)
    expect(calls[0]!.cacheReadTokens).toBe(0)
    for (const call of calls.slice(1)) expect(call.cacheReadTokens).toBeGreaterThanOrEqual(1024)
    for (const call of calls) expect(call.cacheWriteTokens).toBe(0)
    // The prompt grows by each step: the cached part and the rest together are the whole of it.
    const prompts = calls.map((c) => c.inputTokens + c.cacheReadTokens)
    for (let n = 1; n < prompts.length; n++) expect(prompts[n]!).toBeGreaterThan(prompts[n - 1]!)
    // gpt-5.4 per million tokens: input $1.25, cached input $0.125, output $10.
    for (const c of calls)
      expect(Math.round(c.costUsdCents * 10_000)).toBe(
        Math.ceil(
          (c.inputTokens * 1250 + c.cacheReadTokens * 125 + c.outputTokens * 10_000) / 1000,
        ),
      )
    expect(detail.cost.cacheReadTokens).toBe(sum(calls, 'cacheReadTokens'))
  })
})
