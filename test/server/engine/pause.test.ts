import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EnterpriseOverview } from '../../../shared/schemas/enterprise.js'
import { Board } from '../../../shared/schemas/executions.js'
import { EnterprisePause } from '../../../shared/schemas/pauses.js'
import { Run, RunDetail, RunPage } from '../../../shared/schemas/runs.js'
import { TaskRead } from '../../../shared/schemas/tasks.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { transaction } from '../../../server/db/sql.js'
import { pauseEnterprise, startRunsIn } from '../../../server/domain/runs/index.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Pause of a task or of the enterprise (issue 50; docs/usage.md#pause), through the API and a real
// engine in this process: starts of every origin wait pending with the reason, a run under way stops
// after its current step without paying for any step twice, a chat's reply waits, and resume lets all
// of it go; every action is recorded with who and why, and told in the event feed.

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

/** An enterprise of its own (its own key, its own ceo), so pausing it touches no other test. */
async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Pause')
  const task = async (body: Record<string, unknown> = {}) => {
    const res = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Paused ${randomUUID().slice(0, 8)}`,
        kind: 'deterministic',
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        ...body,
      },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return TaskRead.parse(res.body)
  }
  const start = async (taskId: string, input: Record<string, unknown> = {}) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return Run.parse(res.body)
  }
  const run = async (id: string) => {
    const res = await t.call('GET', `/v1/runs/${id}`, as)
    expect(res.status).toBe(200)
    return RunDetail.parse(res.body)
  }
  const post = (path: string, body: unknown = {}) => t.call('POST', path, { ...as, body })
  const wait = (runId: string, statuses: string[], ms = 15_000) =>
    waitForRun(t, runId, statuses, ms, e.token)
  return { e, key, as, task, start, run, post, wait }
}

/** The token's own actor, as a pause records who took it. */
async function actorOf(e: TestEnterprise): Promise<string> {
  const overview = EnterpriseOverview.parse(
    (await t.call('GET', '/v1/enterprise', { token: e.token })).body,
  )
  return `token:${overview.token!.id}`
}

/** The feed's events of these types, once `count` of them are there (the sequencer runs in the engine). */
async function feedEvents(e: TestEnterprise, types: string, count: number) {
  let data: { type: string; subject: Record<string, unknown>; payload: Record<string, unknown> }[] =
    []
  await eventually(
    async () => {
      const res = await t.call('GET', `/v1/events?after=0&limit=200&types=${types}`, {
        token: e.token,
      })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      data = res.body.data
      return data.length >= count
    },
    10_000,
    `${count} ${types} events`,
  )
  return data
}

describe('a paused task', () => {
  it('accepts API starts, which wait pending with the reason until the resume', async () => {
    const s = await tenant()
    const task = await s.task()
    const by = await actorOf(s.e)

    const paused = await s.post(`/v1/tasks/${task.id}/pause`, { reason: 'sends wrong mail' })
    expect(paused.status, JSON.stringify(paused.body)).toBe(200)
    const pause = TaskRead.parse(paused.body).paused!
    expect(pause).toEqual({ at: expect.any(String), by, reason: 'sends wrong mail' })
    // Idempotent: the first pause stands, reason and all.
    const again = await s.post(`/v1/tasks/${task.id}/pause`, { reason: 'another reason' })
    expect(again.status).toBe(200)
    expect(TaskRead.parse(again.body).paused).toEqual(pause)
    expect(TaskRead.parse((await t.call('GET', `/v1/tasks/${task.id}`, s.as)).body).paused).toEqual(
      pause,
    )

    const first = await s.start(task.id, { n: 1 })
    const second = await s.start(task.id, { n: 2 })
    const why = { scope: 'task', ...pause }
    expect(first).toMatchObject({ status: 'pending', paused: why })
    // Read back: the run, the list and the board say why they wait.
    expect((await s.run(first.id)).run).toMatchObject({ status: 'pending', paused: why })
    const list = RunPage.parse((await t.call('GET', `/v1/runs?taskId=${task.id}`, s.as)).body)
    expect(list.data.map((r) => r.paused)).toEqual([why, why])
    const board = Board.parse((await t.call('GET', '/v1/executions/board', s.as)).body)
    const queuedLane = board.lanes.find((l) => l.lane === 'queued')!
    expect(queuedLane.executions.find((x) => x.id === first.id)?.paused).toEqual(why)
    // The engine passes them over: still pending once it has had its turn (a run of another task of
    // the same enterprise, started after them, goes through).
    const other = await s.task()
    await s.wait((await s.start(other.id)).id, ['succeeded'])
    expect((await s.run(first.id)).run.status).toBe('pending')

    const resumed = await s.post(`/v1/tasks/${task.id}/resume`)
    expect(resumed.status).toBe(200)
    expect(TaskRead.parse(resumed.body).paused).toBeNull()
    const [a, b] = await Promise.all([
      s.wait(first.id, ['succeeded']),
      s.wait(second.id, ['succeeded']),
    ])
    expect(a.run.paused).toBeUndefined()
    // In order: the first start went first.
    expect(Date.parse(a.run.startedAt!)).toBeLessThanOrEqual(Date.parse(b.run.startedAt!))
    // Idempotent too: a resume of a task not paused changes nothing.
    expect((await s.post(`/v1/tasks/${task.id}/resume`)).status).toBe(200)

    // Each action in the event feed, once, with who and why.
    const events = await feedEvents(s.e, 'task.*', 2)
    expect(events.map((x) => x.type)).toEqual(['task.paused', 'task.resumed'])
    expect(events[0]!.subject).toMatchObject({ taskId: task.id, taskSlug: task.slug })
    expect(events[0]!.payload).toEqual({ by, reason: 'sends wrong mail' })
    expect(events[1]!.payload).toMatchObject({ by, pausedReason: 'sends wrong mail' })
  }, 40_000) // 6 s alone, 13 s on two loaded cores (five runs, the feed's sequencer): room for one core

  it('holds webhook and successor starts pending likewise', async () => {
    const s = await tenant()
    const secret = (await s.post('/v1/enterprise/webhook-secret/rotate')).body.secret as string
    const held = await s.task()
    const before = await s.task({ successors: [{ slug: held.slug }] })
    await s.post(`/v1/tasks/${held.id}/pause`, { reason: 'bad version' })

    const hooked = await t.call(
      'POST',
      `/v1/webhooks/${(await enterpriseSlug(s.e)).slug}/tasks/${held.slug}`,
      {
        token: null,
        body: { from: 'ci' },
        headers: { 'x-os-webhook-secret': secret },
      },
    )
    expect(hooked.status, JSON.stringify(hooked.body)).toBe(202)
    expect(hooked.body.status).toBe('pending')
    const predecessor = await s.start(before.id)
    await s.wait(predecessor.id, ['succeeded'])
    const successor = await eventually(
      async () => (await s.run(predecessor.id)).next.length === 1,
      10_000,
    ).then(async () => (await s.run(predecessor.id)).next[0]!)
    for (const id of [hooked.body.runId as string, successor.id]) {
      const detail = await s.run(id)
      expect(detail.run).toMatchObject({
        status: 'pending',
        paused: { scope: 'task', reason: 'bad version' },
      })
    }
    await s.post(`/v1/tasks/${held.id}/resume`)
    await s.wait(hooked.body.runId, ['succeeded'])
    await s.wait(successor.id, ['succeeded'])
  })

  it('answers a retry and a fork of its run pending with why they wait, as a start', async () => {
    const s = await tenant()
    const task = await s.task({ kind: 'llm' })
    fake.script(s.key, { text: 'Done.' })
    const run = await s.start(task.id)
    await s.wait(run.id, ['succeeded'])
    const pause = TaskRead.parse(
      (await s.post(`/v1/tasks/${task.id}/pause`, { reason: 'hold it' })).body,
    ).paused!
    const why = { scope: 'task', ...pause }
    const retry = await s.post(`/v1/runs/${run.id}/retry`)
    expect(retry.status, JSON.stringify(retry.body)).toBe(201)
    expect(Run.parse(retry.body)).toMatchObject({ status: 'pending', paused: why })
    const fork = await s.post(`/v1/runs/${run.id}/fork`, { fromStep: 1 })
    expect(fork.status, JSON.stringify(fork.body)).toBe(201)
    expect(Run.parse(fork.body)).toMatchObject({ status: 'pending', paused: why })
    // The retry asked again while it waits: the same run, and still why.
    const again = await s.post(`/v1/runs/${run.id}/retry`)
    expect(again.status).toBe(200)
    expect(Run.parse(again.body)).toMatchObject({ id: retry.body.id, paused: why })
    fake.script(s.key, { text: 'Again.' }, { text: 'Again.' })
    await s.post(`/v1/tasks/${task.id}/resume`)
    await s.wait(retry.body.id, ['succeeded'])
    await s.wait(fork.body.id, ['succeeded'])
  })

  it('answers 404 for a task of another enterprise, and a missing one', async () => {
    const s = await tenant()
    const theirs = await s.task()
    for (const path of [`/v1/tasks/${theirs.id}/pause`, `/v1/tasks/${randomUUID()}/pause`]) {
      const res = await t.call('POST', path, { body: { reason: 'not mine' } })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('task_not_found')
    }
    expect((await t.call('POST', `/v1/tasks/${theirs.id}/resume`, { body: {} })).status).toBe(404)
    expect(TaskRead.parse((await t.call('GET', `/v1/tasks/${theirs.id}`, s.as)).body).paused).toBe(
      null,
    )
  })

  it('needs a reason', async () => {
    const s = await tenant()
    const task = await s.task()
    const res = await s.post(`/v1/tasks/${task.id}/pause`, {})
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid_request')
  })
})

async function enterpriseSlug(e: TestEnterprise) {
  return EnterpriseOverview.parse((await t.call('GET', '/v1/enterprise', { token: e.token })).body)
    .enterprise
}

describe('a run under way', () => {
  it('stops after its current step when paused and finishes on resume, each call paid once', async () => {
    const s = await tenant()
    const plan = (title: string) => ({
      toolCalls: [{ name: 'os.write_plan', arguments: { title, items: [{ title: 'x' }] } }],
    })
    fake.script(s.key, plan('one'), plan('two'), {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'three' } }],
    })
    // The second call is held until the task is paused: the pause comes in the middle of that step.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    fake.onRequest(async (request) => {
      if (request.key === s.key && fake.callsWith(s.key).length === 2) await released
      return undefined
    })
    try {
      const task = await s.task({
        kind: 'llm',
        tools: ['os.write_plan', 'os.ask_ceo'],
        gates: [{ tool: 'os.ask_ceo' }],
      })
      const run = await s.start(task.id)
      await eventually(() => fake.callsWith(s.key).length === 2, 15_000, 'the second call')
      const paused = await s.post(`/v1/tasks/${task.id}/pause`, { reason: 'halfway' })
      expect(paused.status).toBe(200)
      release()
      // The step under way ends, and the run waits: pending, no lease, no slot.
      await eventually(
        async () => (await s.run(run.id)).run.status === 'pending',
        15_000,
        'the run waiting',
      )
      const waiting = await s.run(run.id)
      expect(waiting.run.paused).toMatchObject({ scope: 'task', reason: 'halfway' })
      expect(waiting.cost.modelCalls).toBe(2)
      const [row] = await t.sql<{ leaseOwner: string | null; running: number }[]>`
        select r.lease_owner, e.running_count as running
          from runs r join enterprises e on e.id = r.enterprise_id where r.id = ${run.id}`
      expect(row).toEqual({ leaseOwner: null, running: 0 })
      const types = waiting.events.map((x) => x.type)
      expect(types.filter((x) => x === 'model.called')).toHaveLength(2)
      expect(waiting.events.at(-1)).toMatchObject({
        type: 'run.pending',
        payload: { because: 'its task was paused', paused: { reason: 'halfway' } },
      })
      expect(fake.callsWith(s.key)).toHaveLength(2)

      await s.post(`/v1/tasks/${task.id}/resume`)
      const done = RunDetail.parse(await s.wait(run.id, ['succeeded', 'failed']))
      expect(done.run.status).toBe('succeeded')
      expect(done.run.result?.summary).toBe('three')
      // Nothing paid twice: one provider call per step, three steps, three model.called events.
      expect(fake.callsWith(s.key)).toHaveLength(3)
      expect(done.cost.modelCalls).toBe(3)
      expect(done.events.filter((x) => x.type === 'model.called')).toHaveLength(3)
      expect(done.events.filter((x) => x.type === 'tool.called')).toHaveLength(3)
    } finally {
      release()
      fake.onRequest(() => undefined)
    }
  })
})

describe('a paused enterprise', () => {
  it('holds every task and the chats: a message gets its reply after the resume', async () => {
    const s = await tenant()
    const by = await actorOf(s.e)
    const task = await s.task()
    const member = await t.call('POST', '/v1/members', {
      ...s.as,
      body: { name: `Grace ${randomUUID().slice(0, 6)}`, persona: 'Brief.' },
    })
    expect(member.status).toBe(201)
    const chat = await s.post('/v1/chats', { memberId: member.body.id })
    expect(chat.status).toBe(201)

    const res = await s.post('/v1/enterprise/pause', { reason: 'provider outage' })
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    const pause = EnterprisePause.parse(res.body).paused!
    expect(pause).toEqual({ at: expect.any(String), by, reason: 'provider outage' })
    expect(
      EnterprisePause.parse((await s.post('/v1/enterprise/pause', { reason: 'x' })).body),
    ).toEqual({
      paused: pause,
    })
    expect(
      EnterpriseOverview.parse((await t.call('GET', '/v1/enterprise', s.as)).body).paused,
    ).toEqual(pause)

    const run = await s.start(task.id)
    expect(run).toMatchObject({ status: 'pending', paused: { scope: 'enterprise', ...pause } })
    fake.script(s.key, { text: 'Back again.' })
    const sent = await s.post(`/v1/chats/${chat.body.id}/messages`, { content: 'Anyone there?' })
    expect(sent.status).toBe(201)
    // A wait for what must not come: the reply is not made while the enterprise is paused.
    await t.call(
      'GET',
      `/v1/chats/${chat.body.id}?afterMessageId=${sent.body.id}&waitSeconds=1`,
      s.as,
    )
    expect(fake.callsWith(s.key)).toHaveLength(0)
    expect((await s.run(run.id)).run.status).toBe('pending')

    const resumed = await s.post('/v1/enterprise/resume', { reason: 'provider back' })
    expect(EnterprisePause.parse(resumed.body)).toEqual({ paused: null })
    await s.wait(run.id, ['succeeded'])
    await eventually(
      async () => {
        const detail = await t.call('GET', `/v1/chats/${chat.body.id}`, s.as)
        return detail.body.messages.at(-1)?.content === 'Back again.'
      },
      15_000,
      'the reply',
    )
    expect(fake.callsWith(s.key)).toHaveLength(1)

    const events = await feedEvents(s.e, 'enterprise.*', 2)
    expect(events.map((x) => x.type)).toEqual(['enterprise.paused', 'enterprise.resumed'])
    expect(events[0]!.payload).toEqual({ by, reason: 'provider outage' })
    expect(events[1]!.payload).toMatchObject({ by, reason: 'provider back' })
    // Read back from the record: who paused, who resumed, and why.
    const [row] = await t.sql`
      select paused_by, reason, resumed_by, resume_reason from pauses
       where enterprise_id = ${s.e.id} and task_id is null`
    expect(row).toEqual({
      pausedBy: by,
      reason: 'provider outage',
      resumedBy: by,
      resumeReason: 'provider back',
    })
  })

  it('a start that decided before the enterprise pause committed still waits pending, not queued', async () => {
    const s = await tenant()
    // An llm run: one that an engine dispatched meanwhile goes back to pending before its first
    // step (a deterministic one ends in its dispatch, acting on nothing).
    const task = await s.task({ kind: 'llm' })
    fake.script(s.key, { text: 'Done.' })
    // A start that has decided (queued: nothing was paused when it looked) and not yet committed.
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let decided!: () => void
    const hasDecided = new Promise<void>((resolve) => (decided = resolve))
    const start = transaction(t.sql, async (tx) => {
      const [outcome] = await startRunsIn(tx, [
        { enterpriseId: s.e.id, task: { id: task.id }, input: {}, origin: 'api' },
      ])
      decided()
      await held
      return outcome
    })
    let pauseDone = false
    try {
      await hasDecided
      const pausing = pauseEnterprise(t.sql, s.e.id, { by: 'test', reason: 'at once' }).then(
        () => (pauseDone = true),
      )
      await new Promise((resolve) => setTimeout(resolve, 300))
      // The pause waits for the start that decided without it, as a task's pause does.
      expect(pauseDone).toBe(false)
      release()
      await pausing
    } finally {
      release()
    }
    const outcome = await start
    if (!outcome || outcome instanceof Error) throw outcome
    // Not left queued under the pause, however the engine's dispatch fell between the two.
    await eventually(
      async () => (await s.run(outcome.run.id)).run.status === 'pending',
      10_000,
      'the run pending',
    )
    expect((await s.run(outcome.run.id)).run.paused).toMatchObject({ scope: 'enterprise' })
    await s.post('/v1/enterprise/resume')
    await s.wait(outcome.run.id, ['succeeded'])
  })

  it('a task paused on its own stays paused after the enterprise resumes', async () => {
    const s = await tenant()
    const task = await s.task()
    await s.post(`/v1/tasks/${task.id}/pause`, { reason: 'own' })
    await s.post('/v1/enterprise/pause', { reason: 'all' })
    const run = await s.start(task.id)
    expect(run.paused).toMatchObject({ scope: 'enterprise', reason: 'all' })
    await s.post('/v1/enterprise/resume')
    expect((await s.run(run.id)).run).toMatchObject({
      status: 'pending',
      paused: { scope: 'task', reason: 'own' },
    })
  })
})

describe('scopes', () => {
  let taskId = ''
  let foreignId = ''
  beforeAll(async () => {
    const res = await t.call('POST', '/v1/tasks', {
      body: { name: 'Scoped pause', kind: 'deterministic', assigneeRole: 'ceo' },
    })
    taskId = res.body.id
  })
  const theirs = async () =>
    (
      await t.call('POST', '/v1/tasks', {
        token: t.other.token,
        body: { name: `Theirs ${randomUUID().slice(0, 6)}`, assigneeRole: 'ceo' },
      })
    ).body.id as string
  for (const verb of ['pause', 'resume'])
    commonRouteChecks(() => t, {
      method: 'POST',
      path: () => `/v1/tasks/${taskId}/${verb}`,
      body: () => ({ reason: 'scope check' }),
      notFoundCode: 'task_not_found',
      foreign: () => ({ path: `/v1/tasks/${foreignId}/${verb}`, body: { reason: 'x' } }),
    })
  beforeAll(async () => {
    foreignId = await theirs()
  })

  // acme's own enterprise: no other test of this file uses it.
  for (const verb of ['pause', 'resume'])
    commonRouteChecks(() => t, {
      method: 'POST',
      path: () => `/v1/enterprise/${verb}`,
      body: () => ({ reason: 'scope check' }),
    })

  it('a token with tasks:read only cannot pause, nor one without enterprise:write the enterprise', async () => {
    const reader = await t.tokenWith(['tasks:read'])
    const res = await t.call('POST', `/v1/tasks/${taskId}/pause`, {
      token: reader,
      body: { reason: 'no' },
    })
    expect(res.status).toBe(403)
    expect(res.body.error).toBe('api_token_scope')
    const tasksWriter = await t.tokenWith(['tasks:write'])
    const refused = await t.call('POST', '/v1/enterprise/pause', {
      token: tasksWriter,
      body: { reason: 'no' },
    })
    expect(refused.status).toBe(403)
    expect(refused.body.message).toContain('enterprise:write')
  })
})
