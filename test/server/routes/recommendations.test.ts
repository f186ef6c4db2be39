import { randomUUID } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { Recommendation, RecommendationDetail } from '../../../shared/schemas/recommendations.js'
import { Run, RunDetail } from '../../../shared/schemas/runs.js'
import { TaskRead } from '../../../shared/schemas/tasks.js'
import { proposeChange } from '../../../server/domain/learning/index.js'
import { finishRun, loadRun, type RunRow, transition } from '../../../server/domain/runs/index.js'
import { openGate } from '../../../server/domain/gates/index.js'
import { retentionPass } from '../../../server/domain/retention/index.js'
import { ApiError } from '../../../shared/errors.js'
import { improveIntervalMinutes } from '../../../server/config.js'
import { transaction, type Tx } from '../../../server/db/sql.js'
import { enableMetrics } from '../../../server/metrics.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { llmTask } from '../../helpers/runs.js'

// Recommendations through the API (spec: Endpoints Recommendations, GET /v1/tasks/{id}/recommendations,
// Retry safety; DESIGN 10; issue 17): proposals stored as an os-improve run's os.propose_change stores
// them (the domain function the tool calls, on a real os-improve run that no engine executes), then
// listed, read with their diff, approved or declined as a person would.

let t: TestApp
let improveId: string

beforeAll(async () => {
  // An archive of the file's own: evidence runs past their window are moved there (issue 46).
  t = await createTestApp({ archiveDir: await mkdtemp(join(tmpdir(), 'osd-archive-')) })
  const [row] = await t.sql<{ id: string }[]>`
    select id from tasks where enterprise_id = ${t.acme.id} and slug = 'os-improve'`
  improveId = row!.id
})

const skill = '# Invoices\n\nSend the invoice.\nSign it.\n'

/** A custom llm task of acme, and one cancelled run of it (input {n}) to cite as evidence. */
async function taskWithRun(extra: Record<string, unknown> = {}) {
  const task = await llmTask(t, { skillMd: skill, ...extra })
  const started = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: { n: 7 } })
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  const runId = (started.body as { id: string }).id
  expect((await t.call('POST', `/v1/runs/${runId}/cancel`, {})).status).toBe(200)
  return { ...task, runId }
}

/**
 * What os.propose_change does for an os-improve run of `taskId`: the run is started through the API
 * (no engine runs it), the proposal stored by the tool's domain function, and the run cancelled, so the
 * next proposal for the task can start its own.
 */
async function propose(
  taskId: string,
  args: Record<string, unknown>,
  enterprise: TestEnterprise = t.acme,
): Promise<Recommendation> {
  const improve =
    enterprise === t.acme
      ? improveId
      : (
          await t.sql<{ id: string }[]>`
            select id from tasks where enterprise_id = ${enterprise.id} and slug = 'os-improve'`
        )[0]!.id
  const started = await t.call('POST', `/v1/tasks/${improve}/runs`, {
    token: enterprise.token,
    body: { taskId },
  })
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  const [run] = await t.sql<RunRow[]>`select * from runs where id = ${started.body.id}`
  try {
    return await t.sql.begin((tx) => proposeChange(tx, run!, args))
  } finally {
    await t.call('POST', `/v1/runs/${run!.id}/cancel`, { token: enterprise.token })
  }
}

const newSkill = '# Invoices\n\nSend the invoice.\nPut the PO number in the subject.\nSign it.\n'

async function proposal(extra: Record<string, unknown> = {}) {
  const task = await taskWithRun(extra)
  const rec = await propose(task.id, {
    changes: { skillMd: newSkill, guardrails: ['Never send without a PO number.'] },
    rationale: 'Two runs were refused for the missing PO number.',
    evidence: [{ runId: task.runId, why: 'refused: no PO number' }],
  })
  return { task, rec }
}

const decide = (id: string, body: unknown, token = t.acme.token) =>
  t.call('POST', `/v1/recommendations/${id}/decision`, { token, body })

async function recRow(id: string) {
  const [row] = await t.sql<{ status: string; versionId: string | null; runId: string | null }[]>`
    select status, version_id, run_id from recommendations where id = ${id}`
  return row!
}

async function versionsOf(taskId: string) {
  const [row] = await t.sql<{ n: number }[]>`
    select count(*)::int as n from task_versions where task_id = ${taskId}`
  return row!.n
}

describe('os.propose_change (the domain function the tool calls)', () => {
  it('stores a waiting recommendation against the current version, with recommendation.proposed on the run', async () => {
    const { task, rec } = await proposal()
    expect(rec.status).toBe('waiting')
    expect(rec.baseVersionId).toBe(task.currentVersionId)
    expect(rec.changes).toEqual({
      skillMd: newSkill,
      guardrails: ['Never send without a PO number.'],
    })
    expect(rec.evidence).toEqual([{ runId: task.runId, why: 'refused: no PO number' }])
    const detail = RunDetail.parse((await t.call('GET', `/v1/runs/${rec.proposedByRunId}`)).body)
    const event = detail.events.find((e) => e.type === 'recommendation.proposed')
    expect(event?.payload).toMatchObject({ recommendationId: rec.id, taskId: task.id })
  })

  it('refuses, storing nothing, changes that fail the definition checks, unknown fields, no change, bad evidence', async () => {
    const task = await taskWithRun()
    const evidence = [{ runId: task.runId, why: 'x' }]
    const refusals: [Record<string, unknown>, RegExp][] = [
      // The merge tool without its gate fails the definition checks: the issues are named.
      [
        { changes: { tools: ['vcs.merge_pull_request'] }, rationale: 'r', evidence },
        /gate_required_for_tool/,
      ],
      [{ changes: { name: 'Renamed' }, rationale: 'r', evidence }, /changes/],
      [{ changes: { skillMd: skill }, rationale: 'r', evidence }, /changes nothing/],
      [{ changes: { skillMd: '  ' }, rationale: 'r', evidence }, /skill/],
      [{ changes: { goal: 'g' }, rationale: '', evidence }, /rationale/],
      [{ changes: { goal: 'g' }, rationale: 'r', evidence: [] }, /evidence/],
      [
        { changes: { goal: 'g' }, rationale: 'r', evidence: [{ runId: randomUUID(), why: 'x' }] },
        /not a run of task/,
      ],
    ]
    for (const [args, message] of refusals) {
      const err = await propose(task.id, args).catch((e: unknown) => e)
      expect(err, JSON.stringify(args)).toBeInstanceOf(ApiError)
      expect((err as ApiError).message).toMatch(message)
    }
    const listed = await t.call('GET', `/v1/tasks/${task.id}/recommendations`)
    expect(listed.status).toBe(200)
    expect(listed.body).toEqual([])
  })
})

describe('reading recommendations', () => {
  let task: Awaited<ReturnType<typeof taskWithRun>>
  let rec: Recommendation

  beforeAll(async () => {
    ;({ task, rec } = await proposal())
  })

  it('GET /v1/recommendations: a plain array of those waiting, newest first; taskId narrows', async () => {
    const later = await proposal()
    const all = await t.call('GET', '/v1/recommendations')
    expect(all.status).toBe(200)
    const ids = (all.body as unknown[]).map((r) => Recommendation.parse(r).id)
    expect(ids.indexOf(later.rec.id)).toBeLessThan(ids.indexOf(rec.id))
    const narrowed = await t.call('GET', `/v1/recommendations?taskId=${task.id}`)
    expect((narrowed.body as Recommendation[]).map((r) => r.id)).toEqual([rec.id])
    expect((await t.call('GET', '/v1/recommendations?taskId=nope')).body).toEqual([])
    // Another enterprise sees none of acme's.
    const other = await t.call('GET', '/v1/recommendations', { token: t.other.token })
    expect(other.body).toEqual([])
  })

  it('GET /v1/recommendations/{id}: the changes against the base version, field by field, and a line diff of the skill', async () => {
    const res = await t.call('GET', `/v1/recommendations/${rec.id}`)
    expect(res.status).toBe(200)
    const detail = RecommendationDetail.parse(res.body)
    expect(detail.baseIsCurrent).toBe(true)
    expect(detail.baseVersionNumber).toBe(1)
    expect(detail.fieldChanges).toEqual([
      { field: 'guardrails', before: [], after: ['Never send without a PO number.'] },
      { field: 'skillMd', before: skill, after: newSkill },
    ])
    expect(detail.skillDiff).toEqual([
      { kind: 'same', text: '# Invoices' },
      { kind: 'same', text: '' },
      { kind: 'same', text: 'Send the invoice.' },
      { kind: 'added', text: 'Put the PO number in the subject.' },
      { kind: 'same', text: 'Sign it.' },
      { kind: 'same', text: '' },
    ])
  })

  it('a foreign or malformed id is 404 recommendation_not_found', async () => {
    for (const [id, token] of [
      [rec.id, t.other.token],
      [randomUUID(), t.acme.token],
      ['nope', t.acme.token],
    ] as const) {
      const res = await t.call('GET', `/v1/recommendations/${id}`, { token })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('recommendation_not_found')
    }
    const task404 = await t.call('GET', `/v1/tasks/${randomUUID()}/recommendations`)
    expect(task404.status).toBe(404)
    expect(task404.body.error).toBe('task_not_found')
  })
})

describe('deciding', () => {
  it('approve: a new version on the base version and a pending run on it with the newest evidence run’s input; 201 with versionId and runId', async () => {
    const { task, rec } = await proposal()
    const res = await decide(rec.id, { decision: 'approve' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const decided = Recommendation.parse(res.body)
    expect(decided).toMatchObject({ status: 'approved', decision: 'approve' })
    expect(decided.decidedBy).toMatch(/^token:/)
    const read = TaskRead.parse((await t.call('GET', `/v1/tasks/${task.id}`)).body)
    expect(read.currentVersionId).toBe(decided.versionId)
    expect(read.skillMd).toBe(newSkill)
    expect(read.currentVersion.definition.guardrails).toEqual(['Never send without a PO number.'])
    const run = Run.parse((await t.call('GET', `/v1/runs/${decided.runId}`)).body.run)
    expect(run).toMatchObject({
      origin: 'recommendation',
      taskVersionId: decided.versionId,
      input: { n: 7 },
    })
    // Decided: listed under view=decided, no longer waiting.
    const waiting = (await t.call('GET', '/v1/recommendations')).body as Recommendation[]
    expect(waiting.map((r) => r.id)).not.toContain(rec.id)
    const decidedList = (await t.call('GET', '/v1/recommendations?view=decided'))
      .body as Recommendation[]
    expect(decidedList.map((r) => r.id)).toContain(rec.id)
    // Once decided, another decision is 409 already_decided.
    const again = await decide(rec.id, { decision: 'decline', reason: 'changed my mind' })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('already_decided')
  })

  it('approve after the evidence run was archived: the run it starts has that run’s input, read from the archive (issue 46)', async () => {
    const { task, rec } = await proposal()
    // Past the finished-runs window (90 days), moved out by the retention pass.
    await t.sql`
      update runs set created_at = created_at - interval '200 days',
                      finished_at = finished_at - interval '200 days'
       where id = ${task.runId}`
    await retentionPass(t.sql, { archiveDir: t.config.archiveDir, enterpriseId: t.acme.id })
    const [left] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where id = ${task.runId}`
    expect(left!.n).toBe(0)

    const res = await decide(rec.id, { decision: 'approve' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const decided = Recommendation.parse(res.body)
    const run = Run.parse((await t.call('GET', `/v1/runs/${decided.runId}`)).body.run)
    expect(run).toMatchObject({ origin: 'recommendation', input: { n: 7 } })
  })

  it('the approved run waits for its lane instead of being refused for overlap', async () => {
    const { task, rec } = await proposal()
    // A run under way in the task's one lane: an API start would be refused 409 overlap.
    const busy = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: {} })
    expect(busy.status).toBe(201)
    const res = await decide(rec.id, { decision: 'approve' })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const run = Run.parse((await t.call('GET', `/v1/runs/${res.body.runId}`)).body.run)
    expect(run.status).toBe('pending')
  })

  it('twenty concurrent approvals publish one version and start one run', async () => {
    const { task, rec } = await proposal()
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => decide(rec.id, { decision: 'approve' })),
    )
    const statuses = answers.map((a) => a.status).sort()
    expect(statuses.filter((s) => s === 201)).toHaveLength(1)
    expect(statuses.filter((s) => s === 409)).toHaveLength(19)
    expect(
      answers.filter((a) => a.status === 409).every((a) => a.body.error === 'already_decided'),
    ).toBe(true)
    expect(await versionsOf(task.id)).toBe(2)
    const [runs] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where task_id = ${task.id} and origin = 'recommendation'`
    expect(runs!.n).toBe(1)
  })

  it('idempotencyKey: the same caller repeating it is answered the first decision and starts nothing; another caller or key is 409', async () => {
    const { task, rec } = await proposal()
    const key = `k-${randomUUID()}`
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => decide(rec.id, { decision: 'approve', idempotencyKey: key })),
    )
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201, 201])
    const first = Recommendation.parse(answers[0]!.body)
    for (const a of answers) expect(Recommendation.parse(a.body)).toEqual(first)
    expect(await versionsOf(task.id)).toBe(2)
    const [runs] = await t.sql<{ n: number }[]>`
      select count(*)::int as n from runs where task_id = ${task.id} and origin = 'recommendation'`
    expect(runs!.n).toBe(1)
    // The same key with another decision still answers the first.
    const repeat = await decide(rec.id, { decision: 'decline', reason: 'no', idempotencyKey: key })
    expect(repeat.status).toBe(201)
    expect(Recommendation.parse(repeat.body)).toEqual(first)
    // Another key, or no key: already decided.
    const otherKey = await decide(rec.id, { decision: 'approve', idempotencyKey: 'other' })
    expect([otherKey.status, otherKey.body.error]).toEqual([409, 'already_decided'])
    const noKey = await decide(rec.id, { decision: 'approve' })
    expect([noKey.status, noKey.body.error]).toEqual([409, 'already_decided'])
    // The same key from another caller (another token of acme).
    const token = await t.tokenWith(['recommendations:write', 'recommendations:read'])
    const otherCaller = await decide(rec.id, { decision: 'approve', idempotencyKey: key }, token)
    expect([otherCaller.status, otherCaller.body.error]).toEqual([409, 'already_decided'])
  })

  it('decline records the reason; nothing is published', async () => {
    const { task, rec } = await proposal()
    const res = await decide(rec.id, {
      decision: 'decline',
      reason: '  The PO rule is going away.  ',
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    expect(Recommendation.parse(res.body)).toMatchObject({
      status: 'declined',
      decision: 'decline',
      reason: 'The PO rule is going away.',
      versionId: null,
      runId: null,
    })
    expect(await versionsOf(task.id)).toBe(1)
  })

  it('bad input: unknown decision, decline without reason, reason over 2,000, key over 80 or empty: 400, nothing decided; a foreign id: 404', async () => {
    const { rec } = await proposal()
    for (const body of [
      { decision: 'maybe' },
      {},
      { decision: 'decline' },
      { decision: 'decline', reason: '   ' },
      { decision: 'decline', reason: 'x'.repeat(2001) },
      { decision: 'approve', idempotencyKey: 'k'.repeat(81) },
      { decision: 'approve', idempotencyKey: '' },
      { decision: 'approve', reason: 42 },
    ]) {
      const res = await decide(rec.id, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    for (const [id, token] of [
      [rec.id, t.other.token],
      [randomUUID(), t.acme.token],
      ['not-an-id', t.acme.token],
    ] as const) {
      const res = await decide(id, { decision: 'approve' }, token)
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('recommendation_not_found')
    }
    expect((await recRow(rec.id)).status).toBe('waiting')
    // The limits themselves are accepted.
    const ok = await decide(rec.id, {
      decision: 'decline',
      reason: 'x'.repeat(2000),
      idempotencyKey: 'k'.repeat(80),
    })
    expect(ok.status).toBe(201)
  })

  it('saving a version of the task declines its waiting recommendations, with that reason', async () => {
    const { task, rec } = await proposal()
    const saved = await t.call('POST', `/v1/tasks/${task.id}/versions`, {
      body: { goal: 'A new goal', baseVersionId: task.currentVersionId },
    })
    expect(saved.status, JSON.stringify(saved.body)).toBe(201)
    const res = await t.call('GET', `/v1/recommendations/${rec.id}`)
    const detail = RecommendationDetail.parse(res.body)
    expect(detail.status).toBe('declined')
    expect(detail.reason).toMatch(/Version 2 of the task was saved/)
    expect(detail.decidedBy).toMatch(/^token:/)
    expect(detail.baseIsCurrent).toBe(false)
    const approve = await decide(rec.id, { decision: 'approve' })
    expect([approve.status, approve.body.error]).toEqual([409, 'already_decided'])
  })

  it('approving one declines the other waiting ones of the task', async () => {
    const task = await taskWithRun()
    const args = (goal: string) => ({
      changes: { goal },
      rationale: 'r',
      evidence: [{ runId: task.runId, why: 'w' }],
    })
    const a = await propose(task.id, args('Goal A'))
    const b = await propose(task.id, args('Goal B'))
    expect((await decide(a.id, { decision: 'approve' })).status).toBe(201)
    const other = RecommendationDetail.parse(
      (await t.call('GET', `/v1/recommendations/${b.id}`)).body,
    )
    expect(other.status).toBe('declined')
    expect(other.reason).toMatch(new RegExp(`Recommendation ${a.id} was approved`))
  })

  it('a deleted task: 404 task_not_found; a deprecated one: 409; nothing published', async () => {
    const deleted = await proposal()
    expect((await t.call('DELETE', `/v1/tasks/${deleted.task.id}`)).status).toBe(204)
    const gone = await decide(deleted.rec.id, { decision: 'approve' })
    expect([gone.status, gone.body.error]).toEqual([404, 'task_not_found'])
    expect((await recRow(deleted.rec.id)).status).toBe('waiting')

    const deprecated = await proposal()
    await t.sql`update tasks set status = 'deprecated' where id = ${deprecated.task.id}`
    const refused = await decide(deprecated.rec.id, { decision: 'approve' })
    expect([refused.status, refused.body.error]).toEqual([409, 'recommendation_not_applicable'])
    expect(await versionsOf(deprecated.task.id)).toBe(1)
    expect(await recRow(deprecated.rec.id)).toMatchObject({ status: 'waiting', versionId: null })
    // Declining still works.
    expect(
      (await decide(deprecated.rec.id, { decision: 'decline', reason: 'retired' })).status,
    ).toBe(201)
  })

  it("a clone's definition is its original owner's: 409, nothing published", async () => {
    const { task, rec } = await proposal()
    await t.sql`update tasks set origin = 'clone' where id = ${task.id}`
    const refused = await decide(rec.id, { decision: 'approve' })
    expect([refused.status, refused.body.error]).toEqual([409, 'recommendation_not_applicable'])
    expect(refused.body.message).toMatch(/clone/)
    expect(await versionsOf(task.id)).toBe(1)
  })

  it('a base version that is no longer current: 409 task_version_conflict, nothing published', async () => {
    const { task, rec } = await proposal()
    // A version published past the rule that declines (as a race would leave it).
    await t.sql`update recommendations set base_version_id = ${randomUUID()} where id = ${rec.id}`
    const refused = await decide(rec.id, { decision: 'approve' })
    expect([refused.status, refused.body.error]).toEqual([409, 'task_version_conflict'])
    expect(await versionsOf(task.id)).toBe(1)
    expect((await recRow(rec.id)).status).toBe('waiting')
  })
})

describe('the automatic trigger (DESIGN 10)', () => {
  /** Ends a run failed, in a transaction of its own, as an engine does. */
  const fail = (runId: string) =>
    t.sql.begin(async (tx) => {
      const run = await loadRun(tx, t.acme.id, runId, true)
      return finishRun(tx, run, 'failed', { reason: 'The customer refused it.' })
    })
  const improvementsOf = (taskId: string) =>
    t.sql<{ id: string; status: string; origin: string; input: Record<string, unknown> }[]>`
      select id, status, origin, input from runs
       where enterprise_id = ${t.acme.id} and task_slug = 'os-improve' and input ->> 'taskId' = ${taskId}
         and origin = 'learning'
       order by created_at`
  const start = async (taskId: string, input: Record<string, unknown> = {}) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return (res.body as { id: string }).id
  }
  const withInterval = async (minutes: string, fn: () => Promise<void>) => {
    const before = process.env.OSD_IMPROVE_INTERVAL_MINUTES
    process.env.OSD_IMPROVE_INTERVAL_MINUTES = minutes
    try {
      await fn()
    } finally {
      if (before === undefined) delete process.env.OSD_IMPROVE_INTERVAL_MINUTES
      else process.env.OSD_IMPROVE_INTERVAL_MINUTES = before
    }
  }

  it('a failed run of a custom task starts one os-improve run; not while one is under way; at most once per interval', async () => {
    await withInterval('60', async () => {
      const task = await llmTask(t, { serializeOn: ['n'] })
      const first = await start(task.id, { n: 1 })
      await fail(first)
      const [improve, ...more] = await improvementsOf(task.id)
      expect(more).toEqual([])
      expect(improve).toMatchObject({ origin: 'learning', input: { taskId: task.id } })
      expect(['pending', 'queued']).toContain(improve!.status)
      const events = RunDetail.parse((await t.call('GET', `/v1/runs/${first}`)).body).events
      expect(events.find((e) => e.type === 'improvement.started')?.payload).toMatchObject({
        runId: improve!.id,
        because: 'run failed',
      })
      // Under way: a second failure starts none.
      await fail(await start(task.id, { n: 2 }))
      expect(await improvementsOf(task.id)).toHaveLength(1)
      // Finished, but within OSD_IMPROVE_INTERVAL_MINUTES (default 60): none.
      expect((await t.call('POST', `/v1/runs/${improve!.id}/cancel`, {})).status).toBe(200)
      await fail(await start(task.id, { n: 3 }))
      expect(await improvementsOf(task.id)).toHaveLength(1)
      // With an interval that has passed: one more.
      await withInterval('0', async () => {
        await fail(await start(task.id, { n: 4 }))
        expect(await improvementsOf(task.id)).toHaveLength(2)
      })
    })
  })
  it('OSD_IMPROVE_INTERVAL_MINUTES: 60 unless set; minutes; off; anything else stops osd at start', () => {
    expect(improveIntervalMinutes({})).toBe(60)
    expect(improveIntervalMinutes({ OSD_IMPROVE_INTERVAL_MINUTES: '15' })).toBe(15)
    expect(improveIntervalMinutes({ OSD_IMPROVE_INTERVAL_MINUTES: '0' })).toBe(0)
    expect(improveIntervalMinutes({ OSD_IMPROVE_INTERVAL_MINUTES: 'OFF' })).toBeUndefined()
    expect(() => improveIntervalMinutes({ OSD_IMPROVE_INTERVAL_MINUTES: '-3' })).toThrow(
      /OSD_IMPROVE_INTERVAL_MINUTES must be a number of minutes/,
    )
  })

  it('OSD_IMPROVE_INTERVAL_MINUTES=off: none starts by itself', async () => {
    await withInterval('off', async () => {
      const task = await llmTask(t)
      await fail(await start(task.id))
      expect(await improvementsOf(task.id)).toEqual([])
    })
  })

  it('not while a recommendation of the task waits', async () => {
    await withInterval('0', async () => {
      const { task } = await proposal()
      await fail(await start(task.id))
      expect(await improvementsOf(task.id)).toEqual([])
    })
  })

  it('never for a built-in task, a clone or a deprecated task', async () => {
    await withInterval('0', async () => {
      const training = await t.call('POST', '/v1/memory/train', { body: { layer: 'enterprise' } })
      expect(training.status, JSON.stringify(training.body)).toBe(202)
      await fail(training.body.id)
      expect(await improvementsOf(training.body.taskId)).toEqual([])

      const clone = await llmTask(t)
      const cloneRun = await start(clone.id)
      await t.sql`update tasks set origin = 'clone' where id = ${clone.id}`
      await fail(cloneRun)
      expect(await improvementsOf(clone.id)).toEqual([])

      const deprecated = await llmTask(t)
      const deprecatedRun = await start(deprecated.id)
      await t.sql`update tasks set status = 'deprecated' where id = ${deprecated.id}`
      await fail(deprecatedRun)
      expect(await improvementsOf(deprecated.id)).toEqual([])
    })
  })

  it('ten failures of one task at once start one os-improve run', async () => {
    await withInterval('0', async () => {
      const task = await llmTask(t, { serializeOn: ['n'] })
      const runs = await Promise.all(Array.from({ length: 10 }, (_, n) => start(task.id, { n })))
      await Promise.all(runs.map(fail))
      expect(await improvementsOf(task.id)).toHaveLength(1)
    })
  })

  it("is part of the run's end: counted at its commit, not on a rollback; the end waits for its flush", async () => {
    // The start happens in a savepoint of the end's transaction (improve.ts), whose onCommit hooks
    // (the started count, here) and batched NOTIFY belong to that transaction.
    const registry = await enableMetrics('all')
    const started = async () =>
      (await registry.getSingleMetric('osd_runs_started_total')!.get()).values
        .filter((v) => v.labels.origin === 'learning')
        .reduce((sum, v) => sum + v.value, 0)
    await withInterval('0', async () => {
      const task = await llmTask(t)
      const runId = await start(task.id)
      const before = await started()
      const endFailed = (tx: Tx) =>
        loadRun(tx, t.acme.id, runId, true).then((run) =>
          finishRun(tx, run, 'failed', { reason: 'The customer refused it.' }),
        )

      const err = await transaction(t.sql, async (tx) => {
        await endFailed(tx)
        throw new Error('rolled back')
      }).catch((e: unknown) => e)
      expect((err as Error).message).toBe('rolled back')
      expect(await improvementsOf(task.id)).toEqual([])
      expect(await started()).toBe(before)

      const during = await transaction(t.sql, async (tx) => {
        await endFailed(tx)
        // The batched NOTIFY goes a tick after the start asked for it: by now it has been sent.
        await new Promise((r) => setImmediate(r))
        const [row] = await tx<{ setting: string }[]>`
          select current_setting('synchronous_commit') as setting`
        return { setting: row!.setting, counted: await started() }
      })
      expect(during).toEqual({ setting: 'on', counted: before })
      expect(await improvementsOf(task.id)).toHaveLength(1)
      expect(await started()).toBe(before + 1)
    })
  })

  it('a rejected gate starts one; an approved gate does not', async () => {
    await withInterval('0', async () => {
      const gateOn = async (taskId: string) => {
        const runId = await start(taskId)
        return t.sql.begin(async (tx) => {
          const queued = await loadRun(tx, t.acme.id, runId, true)
          const running = await transition(tx, queued, 'running')
          return openGate(tx, running, { kind: 'tool', tool: 'os.mail_send', journalStep: 1 })
        })
      }
      const approvedTask = await llmTask(t)
      const approved = await gateOn(approvedTask.id)
      const yes = await t.call('POST', `/v1/gates/${approved.id}/decision`, {
        body: { decision: 'approve' },
      })
      expect(yes.status).toBe(201)
      expect(await improvementsOf(approvedTask.id)).toEqual([])

      const rejectedTask = await llmTask(t)
      const rejected = await gateOn(rejectedTask.id)
      const no = await t.call('POST', `/v1/gates/${rejected.id}/decision`, {
        body: { decision: 'reject', note: 'Not to that customer.' },
      })
      expect(no.status).toBe(201)
      expect(await improvementsOf(rejectedTask.id)).toHaveLength(1)
    })
  })
})
