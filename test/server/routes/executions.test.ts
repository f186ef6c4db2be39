import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { issueKey, outcomeMatches, whenMatches } from '../../../server/domain/runs/index.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { deterministicTask, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

process.env.OSD_MAX_EXECUTION_RUNS = '6'

let t: TestApp
let engine: Engine | undefined
let foreignRun: string

beforeAll(async () => {
  t = await createTestApp()
  const theirs = await deterministicTask(t, {}, t.other.token)
  foreignRun = (
    await t.call('POST', `/v1/tasks/${theirs.id}/runs`, { token: t.other.token, body: {} })
  ).body.id
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
})

const slug = (name: string) => `${name}-${randomUUID().slice(0, 6)}`
const start = async (taskId: string, input: unknown = {}) => {
  const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { body: input })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body as { id: string; executionId: string }
}
const execution = async (id: string) => (await t.call('GET', `/v1/executions/${id}`)).body
/** Waits until the execution has no open run, and answers it. */
async function settled(id: string) {
  await eventually(
    async () => !['running', 'queued', 'waiting'].includes((await execution(id)).execution.status),
    10_000,
  )
  return execution(id)
}
const eventTypes = async (runId: string) =>
  (await t.call('GET', `/v1/runs/${runId}`)).body.events.map(
    (e: { type: string; payload: Record<string, unknown> }) => e,
  )

describe('route checks', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/executions' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/executions/board' })
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/executions/counts' })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/executions/close-completed',
    body: () => ({}),
  })
  for (const [method, suffix] of [
    ['GET', ''],
    ['POST', '/cancel'],
    ['POST', '/close'],
    ['POST', '/reopen'],
  ] as const) {
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/executions/${foreignRun}${suffix}`,
      foreign: () => ({ path: `/v1/executions/${foreignRun}${suffix}` }),
      notFoundCode: 'execution_not_found',
    })
  }
})

describe('successors (spec: Task definition, successors)', () => {
  it('match on the outcome (default succeeded, terminal any end) and on when', () => {
    expect(outcomeMatches({}, 'succeeded')).toBe(true)
    expect(outcomeMatches({}, 'failed')).toBe(false)
    expect(outcomeMatches({ on: 'failed' }, 'failed')).toBe(true)
    expect(outcomeMatches({ on: 'terminal' }, 'cancelled')).toBe(true)
    expect(outcomeMatches({ on: 'reviewed' }, 'reviewed')).toBe(true)
    expect(whenMatches({ when: 'has_issue' }, { outcome: 's', issue: 12 })).toBe(true)
    expect(whenMatches({ when: 'has_issue' }, { outcome: 's' })).toBe(false)
    expect(whenMatches({ when: 'has_pr' }, { outcome: 's', pr: { number: 3 } })).toBe(true)
    expect(whenMatches({ when: 'no_pr' }, { outcome: 's', pr: null })).toBe(true)
    expect(whenMatches({ when: 'no_pr' }, { outcome: 's', pr: 'x' })).toBe(false)
    expect(issueKey({ number: 7, title: 't' })).toBe('7')
    expect(issueKey('ABC-1')).toBe('ABC-1')
    expect(issueKey(undefined)).toBeNull()
  })

  it('run a chain in one execution, passing the input on, with links and the task graph', async () => {
    const c = await deterministicTask(t, { slug: slug('c') })
    const b = await deterministicTask(t, { slug: slug('b'), successors: [{ slug: c.slug }] })
    const a = await deterministicTask(t, { slug: slug('a'), successors: [{ slug: b.slug }] })
    const first = await start(a.id, { ticket: 42 })
    const detail = await settled(first.id)
    expect(detail.execution).toMatchObject({
      id: first.id,
      status: 'complete',
      runCount: 3,
      taskId: a.id,
      taskSlug: a.slug,
      closed: false,
    })
    expect(
      detail.runs.map((r: { taskId: string; status: string; origin: string }) => [
        r.taskId,
        r.status,
        r.origin,
      ]),
    ).toEqual([
      [a.id, 'succeeded', 'api'],
      [b.id, 'succeeded', 'successor'],
      [c.id, 'succeeded', 'successor'],
    ])
    expect(
      detail.runs.every((r: { input: unknown; executionId: string }) => r.executionId === first.id),
    ).toBe(true)
    expect(detail.runs[2].input).toEqual({ ticket: 42 })
    expect(detail.links).toEqual([
      { from: detail.runs[0].id, to: detail.runs[1].id, kind: 'successor' },
      { from: detail.runs[1].id, to: detail.runs[2].id, kind: 'successor' },
    ])
    expect(detail.graph.edges).toEqual(
      expect.arrayContaining([
        { from: a.slug, to: b.slug, on: 'succeeded', when: null, delayMinutes: null },
        { from: b.slug, to: c.slug, on: 'succeeded', when: null, delayMinutes: null },
      ]),
    )
    expect(detail.graph.tasks.map((x: { slug: string }) => x.slug).sort()).toEqual(
      [a.slug, b.slug, c.slug].sort(),
    )
    // Any of its runs finds the execution.
    expect((await execution(detail.runs[2].id)).execution.id).toBe(first.id)
    const started = (await eventTypes(first.id)).find(
      (e: { type: string }) => e.type === 'successor.started',
    )
    expect(started.payload).toMatchObject({ slug: b.slug, runId: detail.runs[1].id })
    const runDetail = (await t.call('GET', `/v1/runs/${detail.runs[1].id}`)).body
    expect(runDetail.previous.id).toBe(first.id)
    expect(runDetail.next.map((r: { id: string }) => r.id)).toEqual([detail.runs[2].id])
  })

  it('route on when: has_issue, has_pr and no_pr look at the result', async () => {
    const onIssue = await deterministicTask(t, { slug: slug('on-issue') })
    const onPr = await deterministicTask(t, { slug: slug('on-pr') })
    const noPr = await deterministicTask(t, { slug: slug('no-pr') })
    const router = await deterministicTask(t, {
      successors: [
        { slug: onIssue.slug, when: 'has_issue' },
        { slug: onPr.slug, when: 'has_pr' },
        { slug: noPr.slug, when: 'no_pr' },
      ],
    })
    const run = await start(router.id, { issue: 'ENG-1' })
    const detail = await settled(run.id)
    expect(detail.runs.map((r: { taskId: string }) => r.taskId).sort()).toEqual(
      [router.id, onIssue.id, noPr.id].sort(),
    )
    const skipped = (await eventTypes(run.id)).filter(
      (e: { type: string }) => e.type === 'successor.skipped',
    )
    expect(
      skipped.map((e: { payload: { slug: string; because: string } }) => [
        e.payload.slug,
        e.payload.because,
      ]),
    ).toEqual([[onPr.slug, 'when has_pr']])
  })

  it('start terminal successors on any end, a cancel included; others only on their outcome', async () => {
    const always = await deterministicTask(t, { slug: slug('always') })
    const onSuccess = await deterministicTask(t, { slug: slug('on-success') })
    await engine!.stop()
    const task = await deterministicTask(t, {
      successors: [{ slug: always.slug, on: 'terminal' }, { slug: onSuccess.slug }],
    })
    const run = await start(task.id)
    await t.call('POST', `/v1/runs/${run.id}/cancel`)
    engine = await startTestEngine(t)
    const detail = await settled(run.id)
    expect(
      detail.runs.map((r: { taskId: string; status: string }) => [r.taskId, r.status]),
    ).toEqual([
      [task.id, 'cancelled'],
      [always.id, 'succeeded'],
    ])
    expect(detail.execution.status).toBe('complete')
  })

  it('record an unknown slug and a deprecated successor as events, starting nothing', async () => {
    const retired = await deterministicTask(t, { slug: slug('retired') })
    await t.call('POST', `/v1/tasks/${retired.id}/versions`, { body: { status: 'deprecated' } })
    const task = await deterministicTask(t, {
      successors: [{ slug: 'vanished-task' }, { slug: retired.slug }],
    })
    const run = await start(task.id)
    const detail = await settled(run.id)
    expect(detail.runs).toHaveLength(1)
    const types = (await eventTypes(run.id)).map((e: { type: string }) => e.type)
    expect(types).toEqual(
      expect.arrayContaining(['successor.unknown_slug', 'successor.not_runnable']),
    )
  })

  it('cap the runs one successor edge starts for one issue: a loop bounded at run time', async () => {
    const name = slug('loop')
    const task = await deterministicTask(t, {
      slug: name,
      successors: [{ slug: name, when: 'has_issue', maxRunsPerIssue: 2 }],
    })
    const run = await start(task.id, { issue: { number: 9 } })
    const detail = await settled(run.id)
    expect(detail.runs).toHaveLength(3)
    const last = detail.runs[2].id
    const capped = (await eventTypes(last)).find(
      (e: { type: string }) => e.type === 'successor.capped',
    )
    expect(capped.payload).toMatchObject({ slug: name, issue: '9', maxRunsPerIssue: 2 })
    // Another issue has its own count.
    const other = await start(task.id, { issue: { number: 10 } })
    expect((await settled(other.id)).runs).toHaveLength(3)
  })

  it('bound a loop the definition checks could not see by the runs an execution may hold', async () => {
    const name = slug('forever')
    const task = await deterministicTask(t, { slug: name, successors: [{ slug: name }] }) // on succeeded: allowed
    const run = await start(task.id)
    const detail = await settled(run.id)
    expect(detail.runs).toHaveLength(6) // OSD_MAX_EXECUTION_RUNS
    const limited = (await eventTypes(detail.runs[5].id)).find(
      (e: { type: string }) => e.type === 'successor.execution_limit',
    )
    expect(limited.payload.maxRunsPerExecution).toBe(6)
  })

  it('delay a successor with a timer in the database; cancelling the execution stops it', async () => {
    const later = await deterministicTask(t, { slug: slug('later') })
    const after = await deterministicTask(t, { slug: slug('after-later') })
    await t.call('POST', `/v1/tasks/${later.id}/versions`, {
      body: { successors: [{ slug: after.slug }] },
    })
    const task = await deterministicTask(t, {
      successors: [{ slug: later.slug, delayMinutes: 30 }],
    })
    const run = await start(task.id)
    await eventually(async () => (await execution(run.id)).runs.length === 2, 10_000)
    const detail = await execution(run.id)
    const delayed = detail.runs[1]
    expect(delayed.status).toBe('pending')
    const [row] = await t.sql<
      { notBefore: Date }[]
    >`select not_before from runs where id = ${delayed.id}`
    expect(row!.notBefore.getTime() - Date.now()).toBeGreaterThan(29 * 60_000)
    expect(detail.execution.status).toBe('queued')

    const cancelled = await t.call('POST', `/v1/executions/${run.id}/cancel`)
    expect(cancelled.body.status).toBe('cancelled')
    const after1 = await execution(run.id)
    expect(after1.runs.map((r: { status: string }) => r.status)).toEqual(['succeeded', 'cancelled'])
    expect(
      (await eventTypes(delayed.id)).some((e: { type: string }) => e.type.startsWith('successor.')),
    ).toBe(false)
  })

  it('start a due delayed successor once its time comes', async () => {
    const soon = await deterministicTask(t, { slug: slug('soon') })
    const task = await deterministicTask(t, {
      successors: [{ slug: soon.slug, delayMinutes: 0.02 }],
    }) // ~1 s
    const run = await start(task.id)
    await eventually(async () => (await execution(run.id)).runs.length === 2, 10_000)
    const detail = await settled(run.id)
    expect(detail.runs.map((r: { status: string }) => r.status)).toEqual(['succeeded', 'succeeded'])
  })

  it('show a failed run whose successors never started as a stopped pipeline on Blockers', async () => {
    const next = await deterministicTask(t, { slug: slug('never') })
    const role = (await t.call('POST', '/v1/roles', { body: { name: slug('vanishing') } })).body
    const ceo = (await t.call('GET', '/v1/members')).body.find((m: { email: string }) =>
      m.email.startsWith('chief-executive'),
    )
    await t.call('POST', `/v1/roles/${role.id}/members`, { body: { memberId: ceo.id } })
    const task = await deterministicTask(t, {
      assigneeRole: role.slug,
      successors: [{ slug: next.slug }],
    })
    await engine!.stop()
    const secret = (await t.call('POST', '/v1/enterprise/webhook-secret/rotate')).body.secret
    const hook = () =>
      t.call('POST', `/v1/webhooks/acme/tasks/${task.slug}`, {
        token: null,
        body: {},
        headers: { 'x-os-webhook-secret': secret },
      })
    expect((await hook()).body.status).toBe('queued') // holds the lane
    const hooked = await hook()
    expect(hooked.body.status).toBe('pending')
    await t.call('DELETE', `/v1/roles/${role.id}`) // nobody can take it any more: admission fails it
    engine = await startTestEngine(t)
    const failed = await waitForRun(t, hooked.body.runId, ['failed'])
    expect(failed.run.reason).toContain('role')
    const blockers = (await t.call('GET', '/v1/blockers')).body
    const stopped = blockers.stoppedPipelines.find(
      (p: { run: { id: string } }) => p.run.id === hooked.body.runId,
    )
    expect(stopped).toMatchObject({
      executionId: hooked.body.runId,
      successorsNotStarted: [next.slug],
    })
    expect(blockers.failed.data.map((r: { id: string }) => r.id)).not.toContain(hooked.body.runId)
    expect((await execution(hooked.body.runId)).execution.status).toBe('failed')
    await t.call('POST', `/v1/runs/${hooked.body.runId}/clear`)
    const after = (await t.call('GET', '/v1/blockers')).body
    expect(after.stoppedPipelines.map((p: { run: { id: string } }) => p.run.id)).not.toContain(
      hooked.body.runId,
    )
  })
})

describe('executions: board, counts, close and reopen', () => {
  it('puts executions in their lanes and counts them', async () => {
    const fresh = await t.createEnterprise(`Board ${randomUUID().slice(0, 6)}`)
    const as = { token: fresh.token }
    const task = await deterministicTask(t, { serializeOn: ['i'] }, fresh.token)
    const statuses = [
      'running',
      'waiting_on_gate',
      'blocked',
      'pending',
      'failed',
      'cancelled',
      'succeeded',
    ]
    const ids: string[] = []
    await engine!.stop()
    for (let i = 0; i < statuses.length; i++) {
      const run = (await t.call('POST', `/v1/tasks/${task.id}/runs`, { ...as, body: { i } })).body
      await t.sql`update runs set status = ${statuses[i]!} where id = ${run.id}`
      ids.push(run.id)
    }
    const board = (await t.call('GET', '/v1/executions/board', as)).body
    const lane = (name: string) =>
      board.lanes
        .find((l: { lane: string }) => l.lane === name)
        .executions.map((e: { id: string }) => e.id)
    expect(board.lanes.map((l: { lane: string }) => l.lane)).toEqual([
      'queued',
      'running',
      'waiting',
      'blocked',
      'failed',
      'cancelled',
      'complete',
    ])
    expect(lane('running')).toEqual([ids[0]])
    expect(lane('waiting')).toEqual([ids[1]])
    expect(lane('blocked')).toEqual([ids[2]])
    expect(lane('queued')).toEqual([ids[3]])
    expect(lane('failed')).toEqual([ids[4]])
    expect(lane('cancelled')).toEqual([ids[5]])
    expect(lane('complete')).toEqual([ids[6]])
    const counts = (await t.call('GET', '/v1/executions/counts', as)).body
    expect(counts).toEqual({
      executions: { running: 1, queued: 1, waiting: 1 },
      runs: { running: 1, queued: 1, waiting: 1 },
    })
    await t.sql`update runs set status = 'cancelled' where id = any(${t.sql.array(ids.slice(0, 4))}::uuid[])`
    engine = await startTestEngine(t)
  })

  it('closes finished executions (repeats change nothing), refuses a running one, and reopens', async () => {
    const task = await deterministicTask(t)
    const run = await start(task.id)
    await settled(run.id)
    const closed = await t.call('POST', `/v1/executions/${run.id}/close`)
    expect(closed.status).toBe(200)
    expect(closed.body).toMatchObject({ id: run.id, closed: true, status: 'complete' })
    expect((await t.call('POST', `/v1/executions/${run.id}/close`)).body.closedAt).toBe(
      closed.body.closedAt,
    )
    const board = (await t.call('GET', '/v1/executions/board')).body
    expect(
      board.lanes.flatMap((l: { executions: { id: string }[] }) => l.executions.map((e) => e.id)),
    ).not.toContain(run.id)
    expect(
      (await t.call('GET', '/v1/executions?closed=true')).body.data.map(
        (e: { id: string }) => e.id,
      ),
    ).toContain(run.id)
    expect(
      (await t.call('GET', '/v1/executions')).body.data.map((e: { id: string }) => e.id),
    ).not.toContain(run.id)
    for (let i = 0; i < 2; i++) {
      const reopened = await t.call('POST', `/v1/executions/${run.id}/reopen`)
      expect(reopened.body).toMatchObject({ closed: false, closedAt: null })
    }

    await engine!.stop()
    const open = await start(task.id)
    const refused = await t.call('POST', `/v1/executions/${open.id}/close`)
    expect(refused.status).toBe(409)
    expect(refused.body).toMatchObject({ error: 'illegal_transition', status: 'queued' })
    engine = await startTestEngine(t)
    await settled(open.id)
  })

  it('is found, cancelled, closed and reopened by its id when its first run was a refused start', async () => {
    await engine!.stop()
    const task = await deterministicTask(t)
    const first = await start(task.id)
    const refused = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: {} })
    expect(refused.body.error).toBe('overlap')
    const skippedId: string = refused.body.runId
    // A retry of the refused start carries on its execution, whose id is the refused run's.
    const retry = (await t.call('POST', `/v1/runs/${skippedId}/retry`)).body
    expect(retry).toMatchObject({ status: 'pending', executionId: skippedId })
    const found = await t.call('GET', `/v1/executions/${skippedId}`)
    expect(found.status).toBe(200)
    expect(found.body.runs.map((r: { id: string }) => r.id)).toEqual([retry.id])
    const cancelled = await t.call('POST', `/v1/executions/${skippedId}/cancel`)
    expect(cancelled.status).toBe(200)
    expect(cancelled.body).toMatchObject({ id: skippedId, status: 'cancelled' })
    const closed = await t.call('POST', `/v1/executions/${skippedId}/close`)
    expect(closed.body).toMatchObject({ id: skippedId, closed: true })
    const reopened = await t.call('POST', `/v1/executions/${skippedId}/reopen`)
    expect(reopened.body).toMatchObject({ id: skippedId, closed: false })
    await t.call('POST', `/v1/runs/${first.id}/cancel`)
    engine = await startTestEngine(t)
  })

  it('closes every execution of the Complete lane under the filters, answering how many', async () => {
    const fresh = await t.createEnterprise(`Close all ${randomUUID().slice(0, 6)}`)
    const as = { token: fresh.token }
    const task = await deterministicTask(t, { serializeOn: ['i'] }, fresh.token)
    const runs = []
    for (let i = 0; i < 3; i++)
      runs.push((await t.call('POST', `/v1/tasks/${task.id}/runs`, { ...as, body: { i } })).body)
    for (const run of runs) await waitForRun(t, run.id, ['succeeded'], 10_000, fresh.token)
    await t.sql`update runs set status = 'failed' where id = ${runs[0].id}`
    const other = (await t.call('POST', '/v1/teams', { ...as, body: { name: 'Elsewhere' } })).body
    expect(
      (
        await t.call('POST', '/v1/executions/close-completed', {
          ...as,
          body: { teamId: other.id },
        })
      ).body,
    ).toEqual({ closed: 0 })
    expect(
      (await t.call('POST', '/v1/executions/close-completed', { ...as, body: {} })).body,
    ).toEqual({ closed: 2 })
    expect(
      (await t.call('POST', '/v1/executions/close-completed', { ...as, body: {} })).body,
    ).toEqual({ closed: 0 })
    expect(
      (await t.call('GET', '/v1/executions', as)).body.data.map(
        (e: { status: string }) => e.status,
      ),
    ).toEqual(['failed'])
  })

  it('lists executions paged, sorted and filtered by member and status', async () => {
    const list = (await t.call('GET', '/v1/executions?limit=200')).body
    expect(list.total).toBeGreaterThan(3)
    const updated = list.data.map((e: { updatedAt: string }) => e.updatedAt)
    expect(updated).toEqual([...updated].sort().reverse())
    const byRuns = (await t.call('GET', '/v1/executions?sort=runCount&order=desc&limit=1')).body
    expect(byRuns.data[0].runCount).toBe(
      Math.max(...list.data.map((e: { runCount: number }) => e.runCount)),
    )
    const member = list.data[0].memberIds[0]
    const mine = (await t.call('GET', `/v1/executions?memberId=${member}&limit=200`)).body
    expect(mine.data.every((e: { memberIds: string[] }) => e.memberIds.includes(member))).toBe(true)
    const complete = (await t.call('GET', '/v1/executions?status=complete&limit=200')).body
    expect(complete.data.every((e: { status: string }) => e.status === 'complete')).toBe(true)
    for (const sort of ['startedAt', 'costUsdCents', 'status']) {
      expect((await t.call('GET', `/v1/executions?sort=${sort}`)).status).toBe(200)
    }
  })
})
