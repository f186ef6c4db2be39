import { randomUUID } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrationsDir } from '../../../server/db/migrate.js'
import {
  builtinTasks,
  checkContext,
  checkDefinition,
  createTask,
} from '../../../server/domain/tasks/index.js'
import type { Engine } from '../../../server/engine/index.js'
import { Run, RunDetail } from '../../../shared/schemas/runs.js'
import { TaskPage, TaskRead } from '../../../shared/schemas/tasks.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { startTestEngine, waitForRun } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The service's own tasks, os-improve and os-train-memory (DESIGN 10): in every enterprise, new and
// migrated alike; never changed nor deleted (409 os_task_immutable), copied freely; run by the ordinary
// engine.

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

const unique = () => randomUUID().slice(0, 8)
const slugs = builtinTasks.map((b) => b.slug)

/** The enterprise's built-in tasks, by slug, as GET /v1/tasks?origin=builtin and GET /v1/tasks/{id} answer. */
async function builtins(e: TestEnterprise): Promise<Map<string, TaskRead>> {
  const res = await t.call('GET', '/v1/tasks?origin=builtin&order=asc', { token: e.token })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  const page = TaskPage.parse(res.body)
  const reads = new Map<string, TaskRead>()
  for (const summary of page.data) {
    const read = await t.call('GET', `/v1/tasks/${summary.id}`, { token: e.token })
    expect(read.status).toBe(200)
    reads.set(summary.slug, TaskRead.parse(read.body))
  }
  return reads
}

/** A task read without what names this row and this moment: what two enterprises' copies share. */
function shape(read: TaskRead) {
  const {
    id: _id,
    currentVersionId: _current,
    createdAt: _created,
    updatedAt: _updated,
    webhook,
    currentVersion,
    versions,
    ...rest
  } = read
  return {
    ...rest,
    webhookPath: webhook.url.replace(/\/webhooks\/[^/]+\//, '/webhooks/ENTERPRISE/'),
    secretHeader: webhook.secretHeader,
    currentVersion: { number: currentVersion.number, definition: currentVersion.definition },
    versions: versions.map((v) => ({ number: v.number, runCount: v.runCount, current: v.current })),
  }
}

describe('every enterprise has them', () => {
  it('a new enterprise: both, listed by origin=builtin, as builtin-tasks.ts defines them', async () => {
    const acme = await builtins(t.acme)
    expect([...acme.keys()]).toEqual(slugs)
    for (const builtin of builtinTasks) {
      const read = acme.get(builtin.slug)!
      expect(read).toMatchObject({
        slug: builtin.slug,
        name: builtin.name,
        origin: 'builtin',
        canEditDefinition: false,
        kind: 'llm',
        status: 'active',
        teamId: null,
        assigneeRole: 'coo',
        serializeOn: builtin.serializeOn,
        definitionIssues: [],
        schedule: null,
      })
      expect(read.currentVersion.definition).toEqual(builtin.definition)
      expect(read.currentVersion.definition.overlapPolicy).toBe('os')
      expect(read.skillMd).toBe(builtin.definition.skillMd)
      expect(read.versions).toHaveLength(1)
    }
    expect(acme.get('os-improve')!.serializeOn).toEqual(['taskId'])
    expect(acme.get('os-train-memory')!.serializeOn).toEqual(['layer', 'teamId'])
    expect(acme.get('os-train-memory')!.currentVersion.definition.tools).toEqual(['os.remember'])
    expect(acme.get('os-improve')!.currentVersion.definition.tools).toEqual(['os.propose_change'])
  })

  it('each enterprise its own: ids differ, and one never lists the other', async () => {
    const acme = await builtins(t.acme)
    const other = await builtins(t.other)
    const acmeIds = [...acme.values()].map((r) => r.id)
    for (const read of other.values()) expect(acmeIds).not.toContain(read.id)
    const foreign = await t.call('GET', `/v1/tasks/${[...other.values()][0]!.id}`)
    expect(foreign.status).toBe(404)
    expect(foreign.body.error).toBe('task_not_found')
  })

  it('origin=custom leaves them out; the unfiltered list counts them', async () => {
    const e = await t.createEnterprise(`Counts ${unique()}`)
    await t.call('POST', '/v1/tasks', { token: e.token, body: { name: 'Mine' } })
    const all = TaskPage.parse((await t.call('GET', '/v1/tasks', { token: e.token })).body)
    const custom = TaskPage.parse(
      (await t.call('GET', '/v1/tasks?origin=custom', { token: e.token })).body,
    )
    expect(all.total).toBe(3)
    expect(custom.data.map((x) => x.slug)).toEqual(['mine'])
  })

  it('their definitions pass every definition check, with no warning', async () => {
    const context = await checkContext(t.sql, t.acme.id)
    for (const builtin of builtinTasks) {
      expect(
        checkDefinition({ ...builtin.definition, slug: builtin.slug, kind: builtin.kind }, context),
      ).toEqual([])
    }
  })

  it('enterprise setup writes the rows createTask writes for the same definition', async () => {
    const e = await t.createEnterprise(`By hand ${unique()}`)
    const made = await builtins(e)
    await t.sql`delete from tasks where enterprise_id = ${e.id} and origin = 'builtin'`
    for (const builtin of builtinTasks) {
      await createTask(
        t.sql,
        e.id,
        {
          ...builtin.definition,
          name: builtin.name,
          slug: builtin.slug,
          kind: builtin.kind,
          assigneeRole: builtin.assigneeRole,
          serializeOn: builtin.serializeOn,
        },
        { origin: 'builtin' },
      )
    }
    const created = await builtins(e)
    for (const slug of slugs) expect(shape(created.get(slug)!)).toEqual(shape(made.get(slug)!))
  })
})

describe('the migration (0012_builtin_tasks.sql)', () => {
  it('gives an enterprise made before them the same tasks a new enterprise gets, field by field', async () => {
    // An enterprise as the service made them before: no built-in tasks, and a task of its own that took
    // one of their slugs.
    const old = await t.createEnterprise(`Before ${unique()}`)
    await t.sql`delete from tasks where enterprise_id = ${old.id} and origin = 'builtin'`
    const taken = await t.call('POST', '/v1/tasks', {
      token: old.token,
      body: { name: 'Our own improver', slug: 'os-improve' },
    })
    expect(taken.status, JSON.stringify(taken.body)).toBe(201)
    expect((await builtins(old)).size).toBe(0)
    const acmeBefore = await builtins(t.acme)

    const migration = await readFile(join(migrationsDir, '0012_builtin_tasks.sql'), 'utf8')
    await t.sql.begin((tx) => tx.unsafe(migration))

    const migrated = await builtins(old)
    const fresh = await builtins(t.acme)
    expect([...migrated.keys()]).toEqual(slugs)
    for (const slug of slugs) expect(shape(migrated.get(slug)!)).toEqual(shape(fresh.get(slug)!))

    // The task that had the slug keeps its id and everything else, under a slug of its own.
    const own = await t.call('GET', `/v1/tasks/${taken.body.id}`, { token: old.token })
    expect(own.body.origin).toBe('custom')
    expect(own.body.name).toBe('Our own improver')
    expect(own.body.slug).toBe(`os-improve-${taken.body.id.slice(0, 8)}`)

    // Enterprises that had them keep theirs, untouched: no second pair.
    expect(fresh).toEqual(acmeBefore)
  })
})

describe('nobody changes or deletes them: 409 os_task_immutable', () => {
  let e: TestEnterprise
  let task: TaskRead
  let roles: { id: string; slug: string }[]
  beforeAll(async () => {
    e = await t.createEnterprise(`Immutable ${unique()}`)
    task = (await builtins(e)).get('os-train-memory')!
    roles = (await t.call('GET', '/v1/roles', { token: e.token })).body
  })
  const role = (slug: string) => roles.find((r) => r.slug === slug)!.id

  const changes: [string, string, () => string, (() => unknown)?][] = [
    [
      'publish a version',
      'POST',
      () => `/v1/tasks/${task.id}/versions`,
      () => ({ goal: 'Something else' }),
    ],
    ['publish an empty version', 'POST', () => `/v1/tasks/${task.id}/versions`, () => ({})],
    ['rename', 'POST', () => `/v1/tasks/${task.id}/versions`, () => ({ name: 'Renamed' })],
    ['deprecate', 'POST', () => `/v1/tasks/${task.id}/versions`, () => ({ status: 'deprecated' })],
    ['delete', 'DELETE', () => `/v1/tasks/${task.id}`],
    ['set a schedule', 'PUT', () => `/v1/tasks/${task.id}/schedule`, () => ({ cron: '0 3 * * *' })],
    ['remove the schedule', 'DELETE', () => `/v1/tasks/${task.id}/schedule`],
    [
      'give it to another role',
      'POST',
      () => `/v1/roles/${role('ceo')}/tasks`,
      () => ({ taskId: task.id }),
    ],
    [
      'give it to its own role',
      'POST',
      () => `/v1/roles/${role('coo')}/tasks`,
      () => ({ taskId: task.id }),
    ],
    ['take it from its role', 'DELETE', () => `/v1/roles/${role('coo')}/tasks/${task.id}`],
  ]
  for (const [what, method, path, body] of changes) {
    it(`${what}: ${method} refused, nothing changed`, async () => {
      const res = await t.call(method, path(), { token: e.token, body: body?.() })
      expect(res.status, JSON.stringify(res.body)).toBe(409)
      expect(res.body.error).toBe('os_task_immutable')
      expect(res.body.message).toContain('os-train-memory')
      const after = await t.call('GET', `/v1/tasks/${task.id}`, { token: e.token })
      expect(TaskRead.parse(after.body)).toEqual(task)
    })
  }

  it('there is no PATCH route for a task to slip through', async () => {
    const res = await t.call('PATCH', `/v1/tasks/${task.id}`, {
      token: e.token,
      body: { name: 'x' },
    })
    // The path has no PATCH at all (DESIGN 4: 405 with Allow), built-in task or not.
    expect(res.status).toBe(405)
    expect(res.headers.get('allow')).not.toContain('PATCH')
  })
})

describe('copy', () => {
  it('is allowed and yields an editable task of origin copy; the original stays', async () => {
    const e = await t.createEnterprise(`Copier ${unique()}`)
    const original = (await builtins(e)).get('os-train-memory')!
    const team = (await t.call('GET', '/v1/teams', { token: e.token })).body[0].id
    const res = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      token: e.token,
      body: { teamId: team, name: 'Our memory training' },
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const copy = TaskRead.parse(res.body)
    expect(copy).toMatchObject({
      origin: 'copy',
      canEditDefinition: true,
      slug: 'our-memory-training',
      teamId: team,
      assigneeRole: 'coo',
      serializeOn: ['layer', 'teamId'],
      definitionIssues: [],
    })
    expect(copy.currentVersion.definition).toEqual(original.currentVersion.definition)

    const published = await t.call('POST', `/v1/tasks/${copy.id}/versions`, {
      token: e.token,
      body: { goal: 'Our own lessons', baseVersionId: copy.currentVersionId },
    })
    expect(published.status, JSON.stringify(published.body)).toBe(201)
    expect(published.body.number).toBe(2)
    expect((await t.call('DELETE', `/v1/tasks/${copy.id}`, { token: e.token })).status).toBe(204)

    const after = TaskRead.parse(
      (await t.call('GET', `/v1/tasks/${original.id}`, { token: e.token })).body,
    )
    expect(after).toEqual(original)
    const list = TaskPage.parse(
      (await t.call('GET', '/v1/tasks?origin=builtin&order=asc', { token: e.token })).body,
    )
    expect(list.data.map((x) => x.slug)).toEqual(slugs)
  })
})

describe('they run through the ordinary engine', () => {
  const finish = {
    toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'No lessons' } }],
  }
  async function trainMemory(e: TestEnterprise) {
    return (await builtins(e)).get('os-train-memory')!
  }
  async function start(e: TestEnterprise, taskId: string, input: Record<string, unknown>) {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { token: e.token, body: input })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return Run.parse(res.body)
  }

  it('without a key: blocked, one lane per layer, listed, and cancellable', async () => {
    const e = await t.createEnterprise(`No key ${unique()}`)
    const task = await trainMemory(e)
    const run = await start(e, task.id, { layer: 'enterprise' })
    expect(run.status).toBe('queued')
    const blocked = RunDetail.parse(await waitForRun(t, run.id, ['blocked'], 10_000, e.token))
    expect(blocked.run.blockedReason).toContain('No model key')

    // The lane is the layer (and team): a second training of the enterprise waits its turn...
    const again = await t.call('POST', `/v1/tasks/${task.id}/runs`, {
      token: e.token,
      body: { layer: 'enterprise' },
    })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('overlap')
    // ...while a team's training runs beside it.
    const team = (await t.call('GET', '/v1/teams', { token: e.token })).body[0].id
    const teamRun = await start(e, task.id, { layer: 'team', teamId: team })

    const listed = await t.call('GET', `/v1/runs?taskId=${task.id}&status=blocked`, {
      token: e.token,
    })
    expect(listed.status).toBe(200)
    expect(listed.body.data.map((r: { id: string }) => r.id)).toContain(run.id)

    for (const id of [run.id, teamRun.id]) {
      const cancelled = await t.call('POST', `/v1/runs/${id}/cancel`, { token: e.token })
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200)
      expect(cancelled.body.status).toBe('cancelled')
    }
  })

  it('with a key: the model is called, the call journaled and priced, and the run succeeds', async () => {
    const e = await t.createEnterprise(`Keyed ${unique()}`)
    const key = `key-${randomUUID()}`
    fake.script(key, finish)
    const bound = await t.call('POST', '/v1/llm/bindings', {
      token: e.token,
      body: { apiKey: key, provider: 'provider_a' },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    const task = await trainMemory(e)
    const run = await start(e, task.id, { layer: 'enterprise' })
    const done = RunDetail.parse(await waitForRun(t, run.id, ['succeeded'], 15_000, e.token))
    expect(done.run.result).toMatchObject({ outcome: 'succeeded', summary: 'No lessons' })
    expect(done.run.costUsdCents).toBeGreaterThan(0)
    expect(done.cost.modelCalls).toBe(1)
    const [request] = fake.callsWith(key)
    expect(request!.system).toContain('# Train memory')
    const journal = await t.sql<{ kind: string; state: string }[]>`
      select kind, state from run_journal where run_id = ${run.id} order by kind`
    expect(journal).toContainEqual({ kind: 'model', state: 'done' })
    const spend = (await t.call('GET', '/v1/spend', { token: e.token })).body
    expect(
      spend.today.find(
        (s: { layer: string; layerId: string }) => s.layer === 'task' && s.layerId === task.id,
      ),
    ).toMatchObject({ runs: 1 })
  })

  it('a spend cap on the task holds its runs (paused_spend)', async () => {
    const e = await t.createEnterprise(`Capped ${unique()}`)
    const key = `key-${randomUUID()}`
    fake.script(key, finish)
    await t.call('POST', '/v1/llm/bindings', { token: e.token, body: { apiKey: key } })
    const task = await trainMemory(e)
    const capped = await t.call('PATCH', '/v1/spend/caps', {
      token: e.token,
      body: { layer: 'task', layerId: task.id, moneyCentsDay: 0 },
    })
    expect(capped.status, JSON.stringify(capped.body)).toBe(200)
    const run = await start(e, task.id, { layer: 'enterprise' })
    const paused = RunDetail.parse(await waitForRun(t, run.id, ['paused_spend'], 10_000, e.token))
    expect(paused.events.at(-1)).toMatchObject({
      type: 'run.paused_spend',
      payload: { layer: 'task' },
    })
    expect(fake.callsWith(key)).toHaveLength(0)
    expect((await t.call('POST', `/v1/runs/${run.id}/cancel`, { token: e.token })).status).toBe(200)
  })
})
