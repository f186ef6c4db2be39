import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSql, type Sql } from '../../../server/db/sql.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Nothing done twice at a run's end (issue 42): a transaction PostgreSQL cancels to break a deadlock
// goes again at once in the same pass, so the run's end is never left for a lease takeover (which made
// the model call again); and the journal is read from the database before each model call, so a
// worker whose journal in memory is behind never pays for a call already answered.

let t: TestApp
let model: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine
let other: Sql

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
  other = createSql(t.dbUrl, { max: 2 })
})
afterAll(async () => {
  await engine?.stop()
  await other?.end()
  await model?.close()
  await mcp?.close()
})

async function tenant(tools: string[] = []) {
  const { e, key, as } = await keyedEnterprise(t, 'Ends')
  const task = await t.call('POST', '/v1/tasks', {
    ...as,
    body: {
      name: `Ends ${randomUUID().slice(0, 8)}`,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      tools,
    },
  })
  expect(task.status, JSON.stringify(task.body)).toBe(201)
  const start = async () => {
    const res = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body.id as string
  }
  return { e, key, as, start }
}

const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }],
}

/**
 * The backend of this file's database whose statement starting with `text` waits for a lock now, if
 * one does (the files of a run share a cluster, and run the same statements).
 */
async function waiting(text: string): Promise<number | undefined> {
  const [row] = await t.sql<{ pid: number }[]>`
    select pid from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock'
       and ltrim(query, E' \n') like ${text + '%'}
       and pid <> pg_backend_pid()`
  return row?.pid
}

describe("a run's end", () => {
  it('cancelled by PostgreSQL for a deadlock goes again at once: ended once, the model called once', async () => {
    const s = await tenant()
    model.script(s.key, { ...finish, delayMs: 1_000 })
    // While the model answers, another transaction holds the enterprise's row; once the run's end
    // waits for it (the running count), that transaction asks for the run's row the end holds: a
    // circle, which PostgreSQL breaks by cancelling the end, the first to wait.
    let holding!: () => void
    const held = new Promise<void>((resolve) => (holding = resolve))
    let letGo!: () => void
    const done = new Promise<void>((resolve) => (letGo = resolve))
    const runId = await s.start()
    // Once the run is running (dispatch, which locks that row too, is over) and its call made.
    await eventually(() => model.callsWith(s.key).length === 1, 10_000)
    const blocker = other.begin(async (tx) => {
      await tx`select 1 from enterprises where id = ${s.e.id} for no key update`
      holding()
      await eventually(async () => (await waiting('update enterprises')) !== undefined, 15_000)
      await tx`select 1 from runs where id = ${runId} for no key update`
      await done
    })
    await held
    // The end, cancelled, gave up the run's row: the blocker has it now, and lets go a moment later.
    await eventually(async () => (await waiting('update enterprises')) === undefined, 15_000)
    await new Promise((r) => setTimeout(r, 300))
    letGo()
    await blocker
    const detail = await waitForRun(t, runId, ['succeeded', 'failed'], 10_000, s.e.token)
    expect(detail.run.status).toBe('succeeded')
    const types = detail.events.map((e: { type: string }) => e.type)
    expect(types.filter((type: string) => type === 'run.succeeded')).toHaveLength(1)
    expect(types).not.toContain('run.lease_taken_over')
    expect(model.callsWith(s.key)).toHaveLength(1)
  }, 60_000)

  it('reads its journal again when the database is ahead of it, and makes no call twice', async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Behind')
    const [team] = (await t.call('GET', '/v1/teams', as)).body
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'srv', url: mcp.url, layer: 'team', layerId: team.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Behind ${randomUUID().slice(0, 8)}`,
        teamId: team.id,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        tools: ['srv.echo'],
      },
    })
    expect(task.status, JSON.stringify(task.body)).toBe(201)
    const text = `behind-${randomUUID()}`
    model.script(key, { toolCalls: [{ name: 'srv.echo', arguments: { text } }] })
    mcp.delay('echo', 1_500)
    const started = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
    const runId = started.body.id as string
    // While the tool call is under way, the database gets the next model call's answer (steps 0 and 1
    // are the first call and the tool's): a settlement this worker never heard back from.
    await eventually(() => mcp.calls.some((c) => c.arguments.text === text), 10_000)
    await t.sql`
      insert into run_journal (enterprise_id, run_id, step, kind, state, request, response, finished_at)
      values (${e.id}, ${runId}, 2, 'model', 'done', ${t.sql.json({ provider: 'provider_a', model: 'm' })},
              ${t.sql.json({ text: null, toolCalls: [{ id: 'c2', ...finish.toolCalls[0]! }], usage: { input: 1, output: 1 } })},
              now())`
    const detail = await waitForRun(t, runId, ['succeeded', 'failed'], 15_000, e.token)
    expect(detail.run.status, JSON.stringify(detail.run)).toBe('succeeded')
    expect(model.callsWith(key)).toHaveLength(1)
  }, 60_000)
})
