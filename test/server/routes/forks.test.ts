import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RunSteps } from '../../../shared/schemas/forks.js'
import { Run, RunDetail } from '../../../shared/schemas/runs.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { bindTeamTools, keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// A run's steps and forking a run from one of them (issue 50): the steps before the fork point are
// the original's journal entries, copied and replayed as a takeover replays a run's own journal (no
// model or tool call made again, nothing counted for them), and the fork goes on live from its step.

let t: TestApp
let model: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine
/** One tenant and its three-step run, which most tests fork (a fork leaves its original as it was). */
let s: Awaited<ReturnType<typeof tenant>>
let runId: string

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
  s = await tenant()
  runId = await threeStepRun(s)
})
afterAll(async () => {
  await engine?.stop()
  await model?.close()
  await mcp?.close()
})

/** An enterprise with a model key and the fake tool server bound as vcs, and a task that may echo. */
async function tenant(extra: Record<string, unknown> = {}) {
  const { e, key, as } = await keyedEnterprise(t, 'Fork')
  const team = await bindTeamTools(t, as, mcp.url)
  const task = await t.call('POST', '/v1/tasks', {
    ...as,
    body: {
      name: `Fork ${randomUUID().slice(0, 8)}`,
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      tools: ['vcs.echo'],
      ...extra,
    },
  })
  expect(task.status, JSON.stringify(task.body)).toBe(201)
  const wait = (runId: string, statuses: string[]) =>
    waitForRun(t, runId, statuses, 20_000, e.token)
  const steps = async (runId: string) => {
    const res = await t.call('GET', `/v1/runs/${runId}/steps`, as)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return RunSteps.parse(res.body).steps
  }
  const fork = (runId: string, body: Record<string, unknown>) =>
    t.call('POST', `/v1/runs/${runId}/fork`, { ...as, body })
  /** The model calls the enterprise's key was billed for, from its usage list. */
  const usageCalls = async () => {
    const [connection] = (await t.call('GET', '/v1/llm/connections', as)).body
    const usage = await t.call('GET', `/v1/llm/connections/${connection.id}/usage`, as)
    return (usage.body.days as { calls: number }[]).reduce((n, d) => n + d.calls, 0)
  }
  /** The enterprise's spend today, as its spend cap reads it. */
  const spentToday = async () => {
    const spend = (await t.call('GET', '/v1/spend', as)).body
    const layer = spend.today.find((x: { layer: string }) => x.layer === 'enterprise')
    return { day: spend.day as string, cents: (layer?.usdCents ?? 0) as number }
  }
  return {
    e,
    key,
    as,
    task: task.body as { id: string },
    wait,
    steps,
    fork,
    usageCalls,
    spentToday,
  }
}

const echo = (text: string) => ({ toolCalls: [{ name: 'vcs.echo', arguments: { text } }] })

/** A three-step run: a model call asking for an echo, the echo, a model call that answers. */
async function threeStepRun(s: Awaited<ReturnType<typeof tenant>>) {
  model.script(s.key, echo('first'), { text: 'Original answer.' })
  const started = await t.call('POST', `/v1/tasks/${s.task.id}/runs`, {
    ...s.as,
    body: { topic: 'forks' },
  })
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  await s.wait(started.body.id, ['succeeded'])
  return started.body.id as string
}

describe('GET /v1/runs/{id}/steps', () => {
  it('numbers the journal from 1 with what each step was, cost and took', async () => {
    const steps = await s.steps(runId)
    expect(steps.map((x) => [x.step, x.kind, x.name, x.status, x.copied, x.forkable])).toEqual([
      [1, 'model', 'claude-sonnet-5-5', 'done', false, true],
      [2, 'tool', 'vcs.echo', 'done', false, true],
      [3, 'model', 'claude-sonnet-5-5', 'done', false, true],
    ])
    expect(steps[0]!.toolCalls).toEqual(['vcs.echo'])
    expect(steps[0]!.costUsdCents).toBeGreaterThan(0)
    expect(steps[1]!.costUsdCents).toBe(0)
    expect(steps.every((x) => x.finishedAt && x.finishedAt >= x.startedAt)).toBe(true)
  })
})

describe('POST /v1/runs/{id}/fork', () => {
  it('from step 3: only the call of step 3 is made, only it is counted, and the fork succeeds', async () => {
    const callsBefore = model.callsWith(s.key).length
    const echoesBefore = mcp.callsOf('echo').length
    const usageBefore = await s.usageCalls()
    const spentBefore = await s.spentToday()

    model.script(s.key, { text: 'Forked answer.' })
    const res = await s.fork(runId, { fromStep: 3, reason: 'the answer was wrong' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const forked = Run.parse(res.body)
    expect(forked).toMatchObject({
      origin: 'fork',
      forkedFrom: { runId, step: 3 },
      input: { topic: 'forks' },
      previousRunId: runId,
      costUsdCents: 0,
    })
    const detail = RunDetail.parse(await s.wait(forked.id, ['succeeded', 'failed']))
    expect(detail.run.status).toBe('succeeded')
    expect(detail.run.result).toEqual({ outcome: 'succeeded', summary: 'Forked answer.' })

    // The provider saw one call, and it carried the original's conversation up to step 3.
    const calls = model.callsWith(s.key).slice(callsBefore)
    expect(calls).toHaveLength(1)
    const sent = JSON.stringify(calls[0]!.body.messages)
    expect(sent).toContain('forks')
    expect(sent).toContain('first') // the echo of step 2, as the original had it
    expect(mcp.callsOf('echo')).toHaveLength(echoesBefore) // no tool call made again
    expect(await s.usageCalls()).toBe(usageBefore + 1)

    // The fork counts the one call it made: its cost, tokens and events.
    const original = await s.steps(runId)
    const steps = await s.steps(forked.id)
    expect(steps.map((x) => [x.step, x.kind, x.copied])).toEqual([
      [1, 'model', true],
      [2, 'tool', true],
      [3, 'model', false],
    ])
    expect(steps.slice(0, 2).every((x) => x.costUsdCents === 0)).toBe(true)
    expect(detail.run.costUsdCents).toBe(steps[2]!.costUsdCents)
    expect(detail.run.costUsdCents).toBeLessThan(
      original.reduce((sum, x) => sum + x.costUsdCents, 0),
    )
    expect(detail.cost.modelCalls).toBe(1)
    expect(detail.events.filter((e) => e.type === 'model.called')).toHaveLength(1)
    expect(detail.events[0]).toMatchObject({
      type: 'run.pending',
      payload: { origin: 'fork', forkedFrom: { runId, step: 3 }, why: 'the answer was wrong' },
    })
    expect(String(detail.events[0]!.payload.by)).toMatch(/^token:/)
    // Today's spend grew by the one call, and nothing is left reserved for the copied ones.
    const spentAfter = await s.spentToday()
    if (spentAfter.day === spentBefore.day)
      expect(spentAfter.cents).toBeCloseTo(spentBefore.cents + detail.run.costUsdCents, 6)
    const reserved =
      await t.sql`select count(*)::int as n from spend_reservations where run_id = ${forked.id}`
    expect(reserved[0]!.n).toBe(0)

    // The original lists its fork, and its events say who forked it.
    const after = RunDetail.parse((await t.call('GET', `/v1/runs/${runId}`, s.as)).body)
    expect(after.forks).toContainEqual({ runId: forked.id, step: 3, status: 'succeeded' })
    expect(after.run.forkedFrom).toBeUndefined()
    expect(after.events).toContainEqual(
      expect.objectContaining({
        type: 'run.forked',
        payload: expect.objectContaining({ runId: forked.id, step: 3 }),
      }),
    )
    // In the original's execution, linked as a fork.
    const execution = await t.call('GET', `/v1/executions/${runId}`, s.as)
    expect(execution.body.links).toContainEqual({ from: runId, to: forked.id, kind: 'fork' })
  })

  it('from step 1 is a retry: every call is made again', async () => {
    const callsBefore = model.callsWith(s.key).length
    const echoesBefore = mcp.callsOf('echo').length
    model.script(s.key, echo('again'), { text: 'Answer again.' })
    const usageBefore = await s.usageCalls()
    const res = await s.fork(runId, { fromStep: 1 })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const detail = await s.wait(res.body.id, ['succeeded', 'failed'])
    expect(detail.run.status).toBe('succeeded')
    expect(model.callsWith(s.key).length - callsBefore).toBe(2)
    expect(mcp.callsOf('echo').length - echoesBefore).toBe(1)
    expect(await s.usageCalls()).toBe(usageBefore + 2)
    expect((await s.steps(res.body.id)).map((x) => x.copied)).toEqual([false, false, false])
    expect(detail.cost.modelCalls).toBe(2)
  })

  it('on another tier and version of the task', async () => {
    const published = await t.call('POST', `/v1/tasks/${s.task.id}/versions`, {
      ...s.as,
      body: { goal: 'Answer better.' },
    })
    expect(published.status, JSON.stringify(published.body)).toBe(201)
    const versionId = published.body.id as string
    model.script(s.key, { text: 'Frontier answer.' })
    const res = await s.fork(runId, { fromStep: 3, versionId, modelTier: 'frontier' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(res.body.taskVersionId).toBe(versionId)
    await s.wait(res.body.id, ['succeeded'])
    const last = model.callsWith(s.key).at(-1)!
    expect(last.model).toBe('claude-opus-5-5')
    expect(last.system).toContain('Answer better.')

    // A version of another task is none of this run's.
    const other = await t.call('POST', '/v1/tasks', {
      ...s.as,
      body: { name: `Other ${randomUUID().slice(0, 8)}`, assigneeRole: 'ceo' },
    })
    const refused = await s.fork(runId, { fromStep: 3, versionId: other.body.currentVersionId })
    expect(refused.status).toBe(404)
    expect(refused.body.error).toBe('version_not_found')
  })

  it("a version other than the task's current one also needs tasks:write, as a new version does", async () => {
    const v = await tenant()
    model.script(v.key, echo('one'), { text: 'Old answer.' })
    const started = await t.call('POST', `/v1/tasks/${v.task.id}/runs`, { ...v.as, body: {} })
    const oldRun = started.body.id as string
    await v.wait(oldRun, ['succeeded'])
    const oldVersion = started.body.taskVersionId as string
    const operator = await t.tokenWith(['runs:read', 'runs:write'], v.e)
    const fork = (body: Record<string, unknown>, token = operator) =>
      t.call('POST', `/v1/runs/${oldRun}/fork`, { token, body: { fromStep: 3, ...body } })
    // The run's version is the task's current one: runs:write is enough, as for a retry.
    model.script(v.key, { text: 'Fork.' }, { text: 'Fork.' }, { text: 'Fork.' })
    expect((await fork({})).status).toBe(201)

    // A new version, a gate on the tool say: the old one is no longer what the task runs.
    const published = await t.call('POST', `/v1/tasks/${v.task.id}/versions`, {
      ...v.as,
      body: { goal: 'Gated now.', gates: [{ tool: 'vcs.echo' }] },
    })
    expect(published.status, JSON.stringify(published.body)).toBe(201)
    const forksBefore = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where forked_from_run_id = ${oldRun}`
    for (const body of [{}, { versionId: oldVersion }]) {
      const refused = await fork(body)
      expect(refused.status, JSON.stringify(refused.body)).toBe(403)
      expect(refused.body).toMatchObject({ error: 'api_token_scope', needed: 'tasks:write' })
      expect(refused.body.message).toContain("not the task's current one")
    }
    const forksAfter = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where forked_from_run_id = ${oldRun}`
    expect(forksAfter[0]!.n).toBe(forksBefore[0]!.n)
    // On the current version it may; and a token that may change the task may run the old one.
    const current = await fork({ versionId: published.body.id })
    expect(current.status, JSON.stringify(current.body)).toBe(201)
    expect(current.body.taskVersionId).toBe(published.body.id)
    const author = await t.tokenWith(['runs:write', 'tasks:write'], v.e)
    const old = await fork({}, author)
    expect(old.status, JSON.stringify(old.body)).toBe(201)
    expect(old.body.taskVersionId).toBe(oldVersion)
  })

  it("a successor's fork and retry go on with the conversation it resumed, as it did", async () => {
    const r = await tenant()
    const [team] = (await t.call('GET', '/v1/teams', r.as)).body
    const next = await t.call('POST', '/v1/tasks', {
      ...r.as,
      body: {
        name: `Next ${randomUUID().slice(0, 8)}`,
        teamId: team.id,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        tools: ['vcs.echo'],
      },
    })
    const first = await t.call('POST', '/v1/tasks', {
      ...r.as,
      body: {
        name: `First ${randomUUID().slice(0, 8)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        successors: [{ slug: next.body.slug, resumeConversation: true }],
      },
    })
    expect(first.status, JSON.stringify(first.body)).toBe(201)
    const finish = {
      toolCalls: [
        {
          name: 'os.finish',
          arguments: {
            outcome: 'succeeded',
            summary: 'the predecessor found 42',
            successorInput: { stage: 2 },
          },
        },
      ],
    }
    model.script(r.key, finish, echo('two'), { text: 'Second part.' })
    const started = await t.call('POST', `/v1/tasks/${first.body.id}/runs`, {
      ...r.as,
      body: { stage: 1 },
    })
    await r.wait(started.body.id, ['succeeded'])
    let successorId = ''
    await eventually(async () => {
      const execution = await t.call('GET', `/v1/executions/${started.body.id}`, r.as)
      successorId = execution.body.runs[1]?.id ?? ''
      return successorId !== ''
    }, 10_000)
    await r.wait(successorId, ['succeeded'])
    const sentFrom = (from: number) =>
      model
        .callsWith(r.key)
        .slice(from)
        .map((call) => JSON.stringify(call.body.messages))
    // The successor's own two calls carried its predecessor's conversation.
    expect(sentFrom(1)).toHaveLength(2)
    for (const messages of sentFrom(1)) expect(messages).toContain('the predecessor found 42')

    // Its fork from its last step (the steps before copied) and its retry: so do theirs.
    const calls = model.callsWith(r.key).length
    model.script(r.key, { text: 'Forked.' }, echo('again'), { text: 'Retried.' })
    const fork = await r.fork(successorId, { fromStep: 3 })
    expect(fork.status, JSON.stringify(fork.body)).toBe(201)
    await r.wait(fork.body.id, ['succeeded'])
    const retry = await t.call('POST', `/v1/runs/${successorId}/retry`, r.as)
    expect(retry.status, JSON.stringify(retry.body)).toBe(201)
    await r.wait(retry.body.id, ['succeeded'])
    const sent = sentFrom(calls)
    expect(sent).toHaveLength(3)
    for (const messages of sent) expect(messages).toContain('the predecessor found 42')
  })

  it('refuses a step out of range, naming the range', async () => {
    const forksSoFar = await forkCount()
    for (const fromStep of [0, 4, -1]) {
      const res = await s.fork(runId, { fromStep })
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('fork_step_invalid')
      expect(res.body.message).toContain('steps 1 to 3')
    }
    expect(await forkCount()).toBe(forksSoFar)
  })

  it('a gated call is no fork point before its decision; after it, the fork takes the answer as it was', async () => {
    const g = await tenant({ gates: [{ tool: 'vcs.echo' }] })
    model.script(g.key, echo('gated'))
    const started = await t.call('POST', `/v1/tasks/${g.task.id}/runs`, { ...g.as, body: {} })
    const runId = started.body.id as string
    const waiting = await g.wait(runId, ['waiting_on_gate'])
    const steps = await g.steps(runId)
    expect(steps.map((x) => [x.kind, x.status, x.gate?.status, x.forkable])).toEqual([
      ['model', 'done', undefined, true],
      ['gate', 'started', 'waiting', false],
    ])
    const atGate = await g.fork(runId, { fromStep: 2 })
    expect(atGate.status).toBe(400)
    expect(atGate.body.error).toBe('fork_step_invalid')
    expect(atGate.body.message).toMatch(
      /step 2 is a gated call of vcs\.echo waiting for its decision/,
    )

    const gateId = waiting.gates[0].id as string
    model.script(g.key, { text: 'Echoed.' })
    const decided = await t.call('POST', `/v1/gates/${gateId}/decision`, {
      ...g.as,
      body: { decision: 'approve' },
    })
    expect(decided.status, JSON.stringify(decided.body)).toBe(201)
    await g.wait(runId, ['succeeded'])
    const echoes = mcp.callsOf('echo').length
    model.script(g.key, { text: 'Echoed in the fork.' })
    const res = await g.fork(runId, { fromStep: 3 })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const detail = await g.wait(res.body.id, ['succeeded', 'failed'])
    expect(detail.run.status).toBe('succeeded')
    // No second gate, no second call of the tool.
    expect(detail.gates).toEqual([])
    expect(mcp.callsOf('echo')).toHaveLength(echoes)
    const forkSteps = await g.steps(res.body.id)
    expect(forkSteps[1]).toMatchObject({
      kind: 'gate',
      copied: true,
      gate: { id: gateId, status: 'decided', decision: 'approve' },
    })
  })

  // Each route's 401s, its scope, and another enterprise's run (this file's runs are another
  // enterprise's to acme, whose tokens the checks use): as a missing one.
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/runs/${runId}/steps`,
    foreign: () => ({ path: `/v1/runs/${runId}/steps` }),
    notFoundCode: 'run_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => `/v1/runs/${runId}/fork`,
    body: () => ({ fromStep: 1 }),
    foreign: () => ({ path: `/v1/runs/${runId}/fork`, body: { fromStep: 1 } }),
    notFoundCode: 'run_not_found',
  })

  it('refuses a body that is no fork request: 400, no run made', async () => {
    const forksSoFar = await forkCount()
    for (const body of [
      {},
      { fromStep: '3' },
      { fromStep: 1.5 },
      { fromStep: 1, modelTier: 'huge' },
    ]) {
      const res = await t.call('POST', `/v1/runs/${runId}/fork`, { ...s.as, body })
      expect(res.status, JSON.stringify(body)).toBe(400)
    }
    expect(await forkCount()).toBe(forksSoFar)
  })

  it('another enterprise, and a token without runs:write, are refused', async () => {
    const forksSoFar = await forkCount()
    const other = await t.createEnterprise(`Other ${randomUUID().slice(0, 8)}`)
    const steps = await t.call('GET', `/v1/runs/${runId}/steps`, { token: other.token })
    expect(steps.status).toBe(404)
    expect(steps.body.error).toBe('run_not_found')
    const fork = await t.call('POST', `/v1/runs/${runId}/fork`, {
      token: other.token,
      body: { fromStep: 1 },
    })
    expect(fork.status).toBe(404)
    expect(fork.body.error).toBe('run_not_found')

    const reader = await t.tokenWith(['runs:read'], s.e)
    expect((await t.call('GET', `/v1/runs/${runId}/steps`, { token: reader })).status).toBe(200)
    const refused = await t.call('POST', `/v1/runs/${runId}/fork`, {
      token: reader,
      body: { fromStep: 1 },
    })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('api_token_scope')
    expect(await forkCount()).toBe(forksSoFar)
  })
})

async function forkCount() {
  const [row] = await t.sql<{ n: number }[]>`
    select count(*)::int as n from runs where previous_run_id = ${runId}`
  return row!.n
}
