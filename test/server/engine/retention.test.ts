import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSql } from '../../../server/db/sql.js'
import {
  planRetention,
  retentionPass,
  RetentionPassError,
  type Moved,
} from '../../../server/domain/retention/index.js'
import type { Engine } from '../../../server/engine/index.js'
import { RetentionLoop } from '../../../server/engine/retention.js'
import { Scheduler } from '../../../server/engine/scheduler.js'
import { writeNote } from '../../../server/domain/learning/index.js'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import { RunSteps } from '../../../shared/schemas/forks.js'
import { RunDetail } from '../../../shared/schemas/runs.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import {
  deterministicTask,
  keyedEnterprise,
  startTestEngine,
  waitForRun,
} from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The retention pass (issue 46; DESIGN 15): what it moves out of the live tables and what it never
// does, the archive it writes first, and GET /v1/runs/{id} and GET /v1/chats/{id} reading it back.
// Rows are made by the real routes and engine; only their times are moved into the past.

let t: TestApp
let model: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine
let archiveDir: string
const mcpToken = `mcp-token-${randomUUID()}`
const merge = 'vcs.merge_pull_request'

beforeAll(async () => {
  archiveDir = await mkdtemp(join(tmpdir(), 'osd-archive-'))
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  t = await createTestApp({
    archiveDir,
    providerBaseUrls: { provider_a: model.url, provider_b: model.url },
  })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await mcp?.close()
  await model?.close()
})

const pass = (enterpriseId: string, batchSize?: number) =>
  retentionPass(t.sql, { archiveDir, enterpriseId, batchSize })

/** Everything of the enterprise `days` older: runs, their events, gates, chats, deliveries. */
async function age(enterpriseId: string, days = 200) {
  const ago = `${days} days`
  await t.sql`
    update runs set created_at = created_at - ${ago}::interval, updated_at = updated_at - ${ago}::interval,
                    queued_at = queued_at - ${ago}::interval, started_at = started_at - ${ago}::interval,
                    finished_at = finished_at - ${ago}::interval
     where enterprise_id = ${enterpriseId}`
  await t.sql`
    update chats set created_at = created_at - ${ago}::interval, closed_at = closed_at - ${ago}::interval
     where enterprise_id = ${enterpriseId}`
  await t.sql`
    update webhook_deliveries set received_at = received_at - ${ago}::interval
     where enterprise_id = ${enterpriseId}`
  await t.sql`
    update schedule_fires set fire_at = fire_at - ${ago}::interval, created_at = created_at - ${ago}::interval
     where enterprise_id = ${enterpriseId}`
  await t.sql`
    update run_bulk_operations set created_at = created_at - ${ago}::interval,
                                   finished_at = finished_at - ${ago}::interval
     where enterprise_id = ${enterpriseId}`
}

const detail = async (e: TestEnterprise, runId: string) => {
  const res = await t.call('GET', `/v1/runs/${runId}`, { token: e.token })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return RunDetail.parse(res.body)
}

const rowsOf = async (table: string, column: string, ids: string[]) => {
  const [row] = await t.sql.unsafe<{ n: number }[]>(
    `select count(*)::int as n from ${table} where ${column} = any($1::uuid[])`,
    [ids as never],
  )
  return row!.n
}

/** An enterprise with a model key, a vcs tool connection, and a task whose merges wait at a gate. */
async function gatedTenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Retention')
  const [team] = (await t.call('GET', '/v1/teams', as)).body
  const connection = await t.call('POST', '/v1/tools/bindings', {
    ...as,
    body: { name: 'vcs', url: mcp.url, token: mcpToken, layer: 'team', layerId: team.id },
  })
  expect(connection.status, JSON.stringify(connection.body)).toBe(201)
  const task = await t.call('POST', '/v1/tasks', {
    ...as,
    body: {
      name: `Merger ${randomUUID().slice(0, 6)}`,
      teamId: team.id,
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
      serializeOn: ['n'],
      tools: [merge, 'os.set_gate_summary'],
      gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
    },
  })
  expect(task.status, JSON.stringify(task.body)).toBe(201)
  /** A run of the task, at its gate: the model asks to merge, then finishes once answered. */
  const atGate = async () => {
    const repo = `acme/${randomUUID().slice(0, 6)}`
    model.script(
      key,
      { toolCalls: [{ name: 'os.set_gate_summary', arguments: { summary: `Merge ${repo}#7` } }] },
      { toolCalls: [{ name: merge, arguments: { repo, number: 7 } }] },
      {
        toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'merged' } }],
      },
    )
    const started = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, {
      ...as,
      body: { n: randomUUID() },
    })
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const run = started.body as { id: string }
    await waitForRun(t, run.id, ['waiting_on_gate'], 15_000, e.token)
    const [gate] = (await t.call('GET', `/v1/gates?runId=${run.id}`, as)).body
    return { run, gate: gate as { id: string } }
  }
  const approve = async (gateId: string) => {
    const decided = await t.call('POST', `/v1/gates/${gateId}/decision`, {
      ...as,
      body: { decision: 'approve', note: 'ship it' },
    })
    expect(decided.status, JSON.stringify(decided.body)).toBe(201)
  }
  return { e, as, key, team, task: task.body as { id: string; slug: string }, atGate, approve }
}

/** A deterministic task's run, started and finished. */
async function finishedRun(e: TestEnterprise, taskId: string) {
  const started = await t.call('POST', `/v1/tasks/${taskId}/runs`, {
    token: e.token,
    body: { n: randomUUID() },
  })
  expect(started.status, JSON.stringify(started.body)).toBe(201)
  await waitForRun(t, started.body.id, ['succeeded'], 15_000, e.token)
  return started.body as { id: string }
}

function totals(moves: Moved[]) {
  return moves.reduce(
    (sum, m) => ({
      runs: sum.runs + m.runs,
      chats: sum.chats + m.chats,
      deliveries: sum.deliveries + m.webhookDeliveries,
      unauthenticated: sum.unauthenticated + m.unauthenticatedDeliveries,
      fires: sum.fires + m.scheduleFires,
      bulk: sum.bulk + m.bulkOperations,
    }),
    { runs: 0, chats: 0, deliveries: 0, unauthenticated: 0, fires: 0, bulk: 0 },
  )
}

/** Every line of the enterprise's archive files, parsed. */
async function archiveLines(enterpriseId: string) {
  const dir = join(archiveDir, enterpriseId)
  const files = await readdir(dir).catch(() => [] as string[])
  const lines: { type: string; id: string }[] = []
  for (const file of files) {
    const text = gunzipSync(await readFile(join(dir, file))).toString('utf8')
    for (const line of text.split('\n').filter(Boolean)) lines.push(JSON.parse(line))
  }
  return lines
}

/**
 * Finished runs that come due while a pass works: the first `now` at once; then, once the pass has
 * moved one of those (and counted what was left), two more every 250 ms, during its rest. Answers
 * the function that stops them.
 */
/**
 * Makes `now` of the runs come due at once and two more every 250 ms from the moment a pass has
 * moved one of them. The answer stops the arrivals: it waits for one under way and makes the rest
 * come due then, so every run has come due once it resolves, however fast the pass caught up (on a
 * loaded machine it could end between two arrivals and leave the last ones never due).
 */
async function comingDue(ids: string[], now: number): Promise<() => Promise<void>> {
  const comeDue = async (some: string[]) => {
    await t.sql`
      update runs set created_at = created_at - interval '200 days',
                      finished_at = finished_at - interval '200 days'
       where id = any(${some}::uuid[])`
  }
  await comeDue(ids.slice(0, now))
  let due = now
  let started = false
  // One arrival at a time: an arrival still under way when the arrivals stop is waited for.
  let arriving = Promise.resolve()
  const ticks = setInterval(() => {
    arriving = arriving.then(async () => {
      started ||= (await rowsOf('runs', 'id', ids.slice(0, now))) < now
      if (started && due < ids.length) await comeDue(ids.slice(due, (due += 2)))
    })
  }, 250)
  return async () => {
    clearInterval(ticks)
    await arriving
    if (due < ids.length) await comeDue(ids.slice(due))
    due = ids.length
  }
}

describe('finished runs (issue 46)', () => {
  it('moves a finished execution with its events, journal, log and gates, and reads it back as before', async () => {
    const s = await gatedTenant()
    const { run, gate } = await s.atGate()
    await s.approve(gate.id)
    await waitForRun(t, run.id, ['succeeded'], 15_000, s.e.token)
    // A lesson a training run wrote, with the run as its evidence.
    const note = await writeNote(t.sql, s.e.id, {
      layer: 'task',
      taskId: s.task.id,
      text: `Merges of acme need a green build ${randomUUID()}`,
      source: 'training',
      evidence: [{ runId: run.id, excerpt: 'merged' }],
    })
    // A traced start's context (issue 49): the archive keeps it, and the run its traceId.
    const traceId = randomBytes(16).toString('hex')
    await t.sql`
      update runs set trace_parent = ${`00-${traceId}-${randomBytes(8).toString('hex')}-01`}
       where id = ${run.id}`
    await age(s.e.id)
    const before = await detail(s.e, run.id)
    expect(before.run.traceId).toBe(traceId)
    const logBefore = await t.call('GET', `/v1/runs/${run.id}/log`, s.as)
    expect(logBefore.status).toBe(200)
    expect(before.archived).toBe(false)
    expect(before.gates).toHaveLength(1)
    expect(before.cost.modelCalls).toBe(3)
    const spendBefore =
      await t.sql`select * from spend_days where enterprise_id = ${s.e.id} order by layer, layer_id`
    const usageBefore = await t.sql`select * from llm_usage where enterprise_id = ${s.e.id}`
    expect(usageBefore.length).toBeGreaterThan(0)

    const moved = await pass(s.e.id)
    expect(totals(moved)).toMatchObject({ runs: 1 })
    expect(moved[0]).toMatchObject({ archive: true, executions: 1, busy: false })

    // Gone from every live table...
    for (const [table, column] of [
      ['runs', 'id'],
      ['run_events', 'run_id'],
      ['run_journal', 'run_id'],
      ['gates', 'run_id'],
    ])
      expect(await rowsOf(table!, column!, [run.id]), table).toBe(0)
    const list = await t.call('GET', '/v1/runs?limit=200', s.as)
    expect(list.body.data.map((r: { id: string }) => r.id)).not.toContain(run.id)
    // ...and answered from the archive as it was, with archived: true.
    const started = performance.now()
    const after = await detail(s.e, run.id)
    const ms = performance.now() - started
    console.log(`archived run read back in ${ms.toFixed(1)} ms`)
    expect(after.archived).toBe(true)
    expect({ ...after, archived: false }).toEqual(before)
    const logAfter = await t.call('GET', `/v1/runs/${run.id}/log`, s.as)
    expect(logAfter.body).toEqual(logBefore.body)
    const gateRead = await t.call(
      'GET',
      `/v1/runs/${run.id}?afterEventId=${before.events[1]!.id}`,
      s.as,
    )
    expect(gateRead.body.events).toEqual(before.events.slice(2))
    // Another enterprise cannot read it.
    expect((await t.call('GET', `/v1/runs/${run.id}`, { token: t.other.token })).status).toBe(404)
    // Nor find it by its first characters (osctl's short ids), which find it here; no chat has them.
    const prefix = run.id.slice(0, 8)
    const found = await t.call('GET', `/v1/runs/archived?idPrefix=${prefix}`, s.as)
    expect(found.body.map((r: { id: string }) => r.id)).toContain(run.id)
    const strangers = await t.call('GET', `/v1/runs/archived?idPrefix=${prefix}`, {
      token: t.other.token,
    })
    expect([strangers.status, strangers.body]).toEqual([200, []])
    const asChat = await t.call('GET', `/v1/chats/archived?idPrefix=${prefix}`, s.as)
    expect(asChat.body.map((c: { id: string }) => c.id)).not.toContain(run.id)
    const short = await t.call('GET', `/v1/runs/archived?idPrefix=${run.id.slice(0, 4)}`, s.as)
    expect([short.status, short.body.error]).toEqual([400, 'invalid_request'])

    // Spend and usage totals, and the memory note naming the run, stay as they were.
    expect(
      await t.sql`select * from spend_days where enterprise_id = ${s.e.id} order by layer, layer_id`,
    ).toEqual(spendBefore)
    expect(await t.sql`select * from llm_usage where enterprise_id = ${s.e.id}`).toEqual(
      usageBefore,
    )
    const noteNow = await t.call('GET', `/v1/memory/${note.id}`, s.as)
    expect(noteNow.status).toBe(200)
    expect(noteNow.body.evidence).toEqual([{ runId: run.id, excerpt: 'merged' }])
    // 22 to 41 s on the loaded shared machine (a gated llm run): about three times that.
  }, 120_000)

  it('reads a forked run and its fork back as before: the forks listed, copied steps not counted, the steps', async () => {
    const { e, key, as } = await keyedEnterprise(t, 'Forked')
    const [team] = (await t.call('GET', '/v1/teams', as)).body
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...as,
      body: { name: 'vcs', url: mcp.url, token: mcpToken, layer: 'team', layerId: team.id },
    })
    expect(bound.status, JSON.stringify(bound.body)).toBe(201)
    const task = await t.call('POST', '/v1/tasks', {
      ...as,
      body: {
        name: `Echo ${randomUUID().slice(0, 6)}`,
        teamId: team.id,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
        tools: ['vcs.echo'],
      },
    })
    expect(task.status, JSON.stringify(task.body)).toBe(201)
    // Three steps: a model call asking for an echo, the echo, a model call that answers.
    model.script(
      key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'first' } }] },
      { text: 'Original answer.' },
    )
    const started = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, {
      ...as,
      body: { topic: 'forks' },
    })
    expect(started.status, JSON.stringify(started.body)).toBe(201)
    const original = started.body.id as string
    await waitForRun(t, original, ['succeeded'], 15_000, e.token)
    // Forked from step 3: steps 1 and 2 are copies (the model call of step 1 is the original's).
    model.script(key, { text: 'Forked answer.' })
    const forked = await t.call('POST', `/v1/runs/${original}/fork`, {
      ...as,
      body: { fromStep: 3 },
    })
    expect(forked.status, JSON.stringify(forked.body)).toBe(201)
    const fork = forked.body.id as string
    await waitForRun(t, fork, ['succeeded'], 15_000, e.token)
    await age(e.id)
    const steps = async (runId: string) => {
      const res = await t.call('GET', `/v1/runs/${runId}/steps`, as)
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      return RunSteps.parse(res.body).steps
    }
    const before = {
      original: await detail(e, original),
      fork: await detail(e, fork),
      originalSteps: await steps(original),
      forkSteps: await steps(fork),
    }
    expect(before.original.forks).toEqual([{ runId: fork, step: 3, status: 'succeeded' }])
    expect(before.fork.cost.modelCalls).toBe(1)
    expect(before.forkSteps.map((x) => [x.step, x.kind, x.copied])).toEqual([
      [1, 'model', true],
      [2, 'tool', true],
      [3, 'model', false],
    ])

    expect(totals(await pass(e.id)).runs).toBe(2)
    const after = { original: await detail(e, original), fork: await detail(e, fork) }
    expect(after.original.archived).toBe(true)
    expect(after.fork.archived).toBe(true)
    expect({ ...after.original, archived: false }).toEqual(before.original)
    expect({ ...after.fork, archived: false }).toEqual(before.fork)
    // The steps read back as they were, none a fork point: a fork of an archived run is not found.
    const unforkable = (list: typeof before.forkSteps) =>
      list.map((x) => ({ ...x, forkable: false }))
    expect(await steps(original)).toEqual(unforkable(before.originalSteps))
    expect(await steps(fork)).toEqual(unforkable(before.forkSteps))
    const refork = await t.call('POST', `/v1/runs/${original}/fork`, {
      ...as,
      body: { fromStep: 3 },
    })
    expect(refork.status).toBe(404)
    expect(refork.body.error).toBe('run_not_found')
    const stranger = await t.call('GET', `/v1/runs/${original}/steps`, { token: t.other.token })
    expect(stranger.status).toBe(404)
    // 7 to 20 s on the loaded shared machine (two llm runs): about three times the most.
  }, 60_000)

  it('reads an archived execution back as it was: its runs, links and task graph, by any run id', async () => {
    const e = await t.createEnterprise(`Execution ${randomUUID().slice(0, 6)}`)
    const as = { token: e.token }
    const b = await deterministicTask(t, {}, e.token)
    const a = await deterministicTask(t, { successors: [{ slug: b.slug }] }, e.token)
    const first = await finishedRun(e, a.id)
    // The successor, then a retry of it: links of both kinds.
    const succeeded = () => t.sql<{ id: string }[]>`
      select id from runs where previous_run_id = ${first.id} and status = 'succeeded'`
    await eventually(
      async () => (await succeeded()).length === 1,
      15_000,
      'the successor succeeded',
    )
    const [successor] = await succeeded()
    const retry = await t.call('POST', `/v1/runs/${successor!.id}/retry`, as)
    expect(retry.status, JSON.stringify(retry.body)).toBe(201)
    await waitForRun(t, retry.body.id, ['succeeded'], 15_000, e.token)
    const closed = await t.call('POST', `/v1/executions/${first.id}/close`, as)
    expect(closed.status, JSON.stringify(closed.body)).toBe(200)
    await age(e.id)
    const read = (id: string, token = e.token) => t.call('GET', `/v1/executions/${id}`, { token })
    const before = (await read(first.id)).body
    expect(before.archived).toBe(false)
    expect(before.execution).toMatchObject({ status: 'complete', closed: true, runCount: 3 })
    expect(before.links.map((l: { kind: string }) => l.kind)).toEqual(['successor', 'retry'])

    expect(totals(await pass(e.id)).runs).toBe(3)
    expect(await rowsOf('runs', 'execution_id', [first.id])).toBe(0)
    const list = await t.call('GET', '/v1/executions?closed=true', as)
    expect(list.body.data.map((x: { id: string }) => x.id)).not.toContain(first.id)
    // Any of its runs finds it, answered as before with archived: true.
    for (const id of [first.id, successor!.id, retry.body.id]) {
      const after = await read(id)
      expect(after.status, JSON.stringify(after.body)).toBe(200)
      expect({ ...after.body, archived: false }).toEqual(before)
    }
    // Another enterprise does not find it; an id no run had is still not found.
    const other = await read(first.id, t.other.token)
    expect([other.status, other.body.error]).toEqual([404, 'execution_not_found'])
    const none = await read(randomUUID())
    expect([none.status, none.body.error]).toEqual([404, 'execution_not_found'])
    // It is read only: nothing of it is live to reopen or cancel.
    const reopened = await t.call('POST', `/v1/executions/${first.id}/reopen`, as)
    expect([reopened.status, reopened.body.error]).toEqual([404, 'execution_not_found'])
  }, 60_000)

  it('waits with archived runs: a long-poll on one answers at once', async () => {
    const e = await t.createEnterprise(`Poll ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, {}, e.token)
    const run = await finishedRun(e, task.id)
    const events = (await detail(e, run.id)).events
    await age(e.id)
    await pass(e.id)
    const started = Date.now()
    const res = await t.call(
      'GET',
      `/v1/runs/${run.id}?afterEventId=${events.at(-1)!.id}&waitSeconds=20`,
      { token: e.token },
    )
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ archived: true, events: [] })
    expect(Date.now() - started).toBeLessThan(10_000)
  })

  it('never moves a run under way, at a gate, of an open execution, or inside its window', async () => {
    const s = await gatedTenant()
    // At a gate (waiting_on_gate): not finished.
    const { run: atGate } = await s.atGate()
    // An execution still open: its first run finished, its successor waits (pending, delayed) and
    // resumes its conversation.
    const next = await deterministicTask(t, {}, s.e.token)
    const first = await deterministicTask(
      t,
      { successors: [{ slug: next.slug, delayMinutes: 60, resumeConversation: true }] },
      s.e.token,
    )
    const predecessor = await finishedRun(s.e, first.id)
    let successor: string | undefined
    await eventually(
      async () => {
        const [row] = await t.sql<{ id: string }[]>`
          select id from runs where previous_run_id = ${predecessor.id} and status = 'pending'`
        successor = row?.id
        return successor !== undefined
      },
      10_000,
      'the delayed successor',
    )
    const lone = await deterministicTask(t, {}, s.e.token)
    const old = await finishedRun(s.e, lone.id)
    await age(s.e.id)
    // Inside the window: finished now.
    const recent = await finishedRun(s.e, lone.id)

    const moved = await pass(s.e.id)
    expect(totals(moved).runs).toBe(1)
    const live = async (id: string) =>
      (await t.sql`select 1 from runs where id = ${id}`).length === 1
    expect(await live(old.id)).toBe(false)
    expect(await live(atGate.id)).toBe(true)
    expect(await live(predecessor.id)).toBe(true)
    expect(await live(successor!)).toBe(true)
    expect(await live(recent.id)).toBe(true)
    expect((await detail(s.e, atGate.id)).archived).toBe(false)

    // Once the gate is decided and the run ends, its execution leaves with the next pass.
    await s.approve((await t.call('GET', `/v1/gates?runId=${atGate.id}`, s.as)).body[0].id)
    await waitForRun(t, atGate.id, ['succeeded'], 15_000, s.e.token)
    await age(s.e.id)
    await pass(s.e.id)
    expect(await live(atGate.id)).toBe(false)
    expect(await live(predecessor.id)).toBe(true)
  })

  it('with archive off deletes: nothing is kept or read back', async () => {
    const e = await t.createEnterprise(`Off ${randomUUID().slice(0, 6)}`)
    expect(
      (
        await t.call('PATCH', '/v1/enterprise/retention', {
          token: e.token,
          body: { archive: false },
        })
      ).status,
    ).toBe(200)
    const task = await deterministicTask(t, {}, e.token)
    const run = await finishedRun(e, task.id)
    await age(e.id)
    expect(totals(await pass(e.id)).runs).toBe(1)
    expect(await rowsOf('runs', 'id', [run.id])).toBe(0)
    expect(await rowsOf('archive_index', 'id', [run.id])).toBe(0)
    expect(await archiveLines(e.id)).toEqual([])
    const res = await t.call('GET', `/v1/runs/${run.id}`, { token: e.token })
    expect(res.status).toBe(404)
    expect(res.body.error).toBe('run_not_found')
  })

  it('keeps runs for ever with finishedRuns null', async () => {
    const e = await t.createEnterprise(`Ever ${randomUUID().slice(0, 6)}`)
    await t.call('PATCH', '/v1/enterprise/retention', {
      token: e.token,
      body: { finishedRuns: null },
    })
    const task = await deterministicTask(t, {}, e.token)
    const run = await finishedRun(e, task.id)
    await age(e.id, 5000)
    expect(await pass(e.id)).toEqual([])
    expect(await rowsOf('runs', 'id', [run.id])).toBe(1)
  })

  it('leaves an enterprise whose batch fails for the next pass, and does the others', async () => {
    // The pass takes enterprises in id order: the first of these two fails, the second comes after.
    const [failing, fine] = [
      await t.createEnterprise(`Fails ${randomUUID().slice(0, 6)}`),
      await t.createEnterprise(`Fine ${randomUUID().slice(0, 6)}`),
    ].sort((a, b) => (a.id < b.id ? -1 : 1))
    const runOf = async (e: TestEnterprise) =>
      finishedRun(e, (await deterministicTask(t, {}, e.token)).id)
    const [stuck, moving] = [await runOf(failing!), await runOf(fine!)]
    await age(failing!.id)
    await age(fine!.id)
    // Its archive cannot be written: a file where its directory goes.
    const blocker = join(archiveDir, failing!.id)
    await writeFile(blocker, 'not a directory')

    const error = await retentionPass(t.sql, { archiveDir }).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(await rowsOf('runs', 'id', [moving.id])).toBe(0)
    expect(await rowsOf('runs', 'id', [stuck.id])).toBe(1)
    expect(error).toBeInstanceOf(RetentionPassError)
    const failed = error as RetentionPassError
    expect(failed.message).toContain(failing!.slug)
    expect(failed.failures.map((f) => f.enterpriseId)).toEqual([failing!.id])
    expect(failed.moved.find((m) => m.enterpriseId === fine!.id)).toMatchObject({ runs: 1 })
    expect((await detail(fine!, moving.id)).archived).toBe(true)

    // Once its archive can be written, the next pass moves it.
    await rm(blocker)
    expect(totals(await pass(failing!.id)).runs).toBe(1)
    expect((await detail(failing!, stuck.id)).archived).toBe(true)
  })

  it('rests between batches as its duty says, and stops resting when the engine stops', async () => {
    const e = await t.createEnterprise(`Paced ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
    const ids: string[] = []
    for (let i = 0; i < 3; i++) ids.push((await finishedRun(e, task.id)).id)
    await age(e.id)
    // A 1% duty rests 99 times a batch's time after each: the stop comes during the first rest.
    const stopping = new AbortController()
    const began = performance.now()
    const paced = retentionPass(t.sql, {
      archiveDir,
      enterpriseId: e.id,
      batchSize: 1,
      duty: 0.01,
      signal: stopping.signal,
    })
    await eventually(async () => (await rowsOf('runs', 'id', ids)) < ids.length, 10_000, 'a batch')
    stopping.abort()
    // One batch moved, then the rest ended on the stop, long before the 99 batch-times it asked.
    expect(totals(await paced).runs).toBe(1)
    expect(performance.now() - began).toBeLessThan(10_000)
    // Flat out (the default, osd admin prune's) moves the others in one pass without a rest.
    expect(totals(await pass(e.id, 1)).runs).toBe(2)
  })

  it('catches up when runs come due faster than it moves them: its duty doubles', async () => {
    const e = await t.createEnterprise(`Catching up ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
    // Started together: one after another, the 16 took most of the 30 s a full run gave the test on a
    // loaded machine (load average 10), before the pass began.
    const ids = (await Promise.all(Array.from({ length: 16 }, () => finishedRun(e, task.id)))).map(
      (run) => run.id,
    )
    // Four past the window at the start; while the pass works, two more come due every 250 ms (a
    // batch moves one, then rests 99 times as long): the backlog grows, and the duty doubles.
    const arrived = await comingDue(ids, 4)
    const duties: number[] = []
    try {
      const moved = await retentionPass(t.sql, {
        archiveDir,
        enterpriseId: e.id,
        batchSize: 1,
        duty: 0.01,
        catchUpMs: 50,
        onDuty: (duty) => duties.push(duty),
      })
      expect(totals(moved).runs).toBeGreaterThanOrEqual(4)
    } finally {
      await arrived()
    }
    // Doubled for every catchUpMs of its long rests at 1% once the count grew (how often depends on
    // how long the rests were), never lowered within the pass.
    expect(duties.length).toBeGreaterThan(0)
    expect(duties).toEqual([...duties].sort((a, b) => a - b))
    expect(duties.at(-1)).toBeGreaterThanOrEqual(0.02)
    // 5-6.5 s on two cores, 7 on one; its rests are 99 times its batches, which a loaded machine
    // slows.
  }, 90_000)

  it('keeps its duty through a backlog that shrinks: months of runs, moved a share of the time', async () => {
    const e = await t.createEnterprise(`Backlog ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
    for (let i = 0; i < 6; i++) await finishedRun(e, task.id)
    await age(e.id)
    const duties: number[] = []
    // Each batch moves one of six, and the count falls at every catchUpMs: nothing doubles.
    const moved = await retentionPass(t.sql, {
      archiveDir,
      enterpriseId: e.id,
      batchSize: 1,
      duty: 0.5,
      catchUpMs: 1,
      onDuty: (duty) => duties.push(duty),
    })
    expect(totals(moved).runs).toBe(6)
    expect(duties).toEqual([])
  }, 30_000)

  it('two passes at once never move a row twice, and say what a dry run said', async () => {
    const tenants = [
      await t.createEnterprise(`Twice ${randomUUID().slice(0, 6)}`),
      await t.createEnterprise(`Twice ${randomUUID().slice(0, 6)}`),
    ]
    const ids: string[] = []
    for (const e of tenants) {
      const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
      const started = await Promise.all(
        Array.from({ length: 60 }, () =>
          t.call('POST', `/v1/tasks/${task.id}/runs`, {
            token: e.token,
            body: { n: randomUUID() },
          }),
        ),
      )
      ids.push(...started.map((s) => s.body.id as string))
    }
    await eventually(
      async () =>
        (await rowsOf('runs', 'id', ids)) === ids.length &&
        (
          await t.sql`select 1 from runs where id = any(${t.sql.array(ids)}::uuid[]) and status <> 'succeeded'`
        ).length === 0,
      20_000,
      'every run finished',
    )
    for (const e of tenants) await age(e.id)
    const planned = await Promise.all(
      tenants.map((e) => planRetention(t.sql, { enterpriseId: e.id })),
    )
    expect(planned.map((p) => p[0]!.runs)).toEqual([60, 60])

    // Three processes' passes at once, over both enterprises, in small batches.
    const pools = [0, 1, 2].map(() => createSql(t.dbUrl, { max: 2 }))
    try {
      const reports = await Promise.all(
        pools.map((sql) => retentionPass(sql, { archiveDir, batchSize: 7 })),
      )
      // A pass that found an enterprise busy left it; one more pass finishes what is left.
      const last = await retentionPass(t.sql, { archiveDir, batchSize: 7 })
      const moved = [...reports.flat(), ...last].filter((m) =>
        tenants.some((e) => e.id === m.enterpriseId),
      )
      expect(moved.reduce((n, m) => n + m.runs, 0)).toBe(ids.length)
    } finally {
      await Promise.all(pools.map((sql) => sql.end()))
    }
    expect(await rowsOf('runs', 'id', ids)).toBe(0)
    expect(await rowsOf('archive_index', 'id', ids)).toBe(ids.length)
    const lines = (await Promise.all(tenants.map((e) => archiveLines(e.id)))).flat()
    const archived = lines.filter((l) => l.type === 'run').map((l) => l.id)
    expect(archived.sort()).toEqual([...ids].sort())
  })
})

describe('closed chats (issue 46)', () => {
  async function chatTenant() {
    const { e, key, as } = await keyedEnterprise(t, 'Chats')
    const member = await t.call('POST', '/v1/members', {
      ...as,
      body: { name: `Grace ${randomUUID().slice(0, 6)}` },
    })
    expect(member.status).toBe(201)
    const talk = async () => {
      const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
      expect(chat.status).toBe(201)
      model.script(key, { text: 'Aye, captain.' })
      const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
        ...as,
        body: { content: 'Hello there' },
      })
      expect(sent.status).toBe(201)
      await eventually(
        async () =>
          (await t.call('GET', `/v1/chats/${chat.body.id}`, as)).body.messages.length === 2,
        15_000,
        'the reply',
      )
      return chat.body.id as string
    }
    return { e, as, talk }
  }

  it('moves a closed chat with its messages and reads it back as before; an open one stays', async () => {
    const s = await chatTenant()
    const closed = await s.talk()
    const open = await s.talk()
    expect((await t.call('POST', `/v1/chats/${closed}/close`, s.as)).status).toBe(200)
    await age(s.e.id)
    const before = ChatDetail.parse((await t.call('GET', `/v1/chats/${closed}`, s.as)).body)
    expect(before.archived).toBe(false)
    expect(before.status).toBe('closed')
    const moved = await pass(s.e.id)
    expect(totals(moved).chats).toBe(1)
    expect(await rowsOf('chats', 'id', [closed])).toBe(0)
    expect(await rowsOf('chat_messages', 'chat_id', [closed])).toBe(0)
    expect(await rowsOf('chat_turns', 'chat_id', [closed])).toBe(0)
    expect(await rowsOf('chats', 'id', [open])).toBe(1)

    const res = await t.call('GET', `/v1/chats/${closed}`, s.as)
    expect(res.status).toBe(200)
    const after = ChatDetail.parse(res.body)
    expect(after.archived).toBe(true)
    expect({ ...after, archived: false }).toEqual(before)
    const newest = await t.call('GET', `/v1/chats/${closed}?limit=1`, s.as)
    expect(newest.body.messages).toEqual(before.messages.slice(-1))
    const list = await t.call('GET', '/v1/chats', s.as)
    expect(list.body.map((c: { id: string }) => c.id)).toEqual([open])
    expect((await t.call('GET', `/v1/chats/${closed}`, { token: t.other.token })).status).toBe(404)
    const found = await t.call('GET', `/v1/chats/archived?idPrefix=${closed.slice(0, 8)}`, s.as)
    expect(found.body.map((c: { id: string }) => c.id)).toEqual([closed])
    const strangers = await t.call('GET', `/v1/chats/archived?idPrefix=${closed.slice(0, 8)}`, {
      token: t.other.token,
    })
    expect(strangers.body).toEqual([])
  })
})

describe('webhook deliveries (issue 46)', () => {
  it('moves deliveries past the window; unauthenticated ones after three days whatever the setting, never archived', async () => {
    const e = await t.createEnterprise(`Hooks ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, {}, e.token)
    const secret = (
      await t.call('POST', '/v1/enterprise/webhook-secret/rotate', { token: e.token })
    ).body.secret
    const deliver = (key: string) =>
      t.call('POST', `/v1/webhooks/${e.slug}/tasks/${task.slug}`, {
        token: null,
        body: { n: randomUUID() },
        headers: { 'x-os-webhook-secret': key },
      })
    // A refused call is kept after its 401 has gone, not awaited (keepRefused): wait for its row.
    const refusedKept = (n: number) =>
      eventually(
        async () => {
          const [row] = await t.sql<{ n: number }[]>`
            select count(*)::int as n from webhook_deliveries
             where enterprise_id = ${e.id} and not authenticated`
          return row!.n === n
        },
        10_000,
        `${n} refused call(s) kept`,
      )
    expect((await deliver(secret)).status).toBe(202)
    expect((await deliver('wrong')).status).toBe(401)
    await refusedKept(1)
    await t.call('PATCH', '/v1/enterprise/retention', {
      token: e.token,
      body: { webhookDeliveries: null, finishedRuns: null },
    })
    await age(e.id, 4)
    // A stranger's call made just now stays for its three days.
    expect((await deliver('wrong again')).status).toBe(401)
    await refusedKept(2)
    expect(totals(await pass(e.id))).toMatchObject({ deliveries: 0, unauthenticated: 1 })
    const left = await t.sql<{ authenticated: boolean }[]>`
      select authenticated from webhook_deliveries where enterprise_id = ${e.id} order by received_at`
    expect(left.map((d) => d.authenticated)).toEqual([true, false])

    await t.call('PATCH', '/v1/enterprise/retention', {
      token: e.token,
      body: { webhookDeliveries: 'P1D' },
    })
    expect(totals(await pass(e.id))).toMatchObject({ deliveries: 1, unauthenticated: 0 })
    const lines = await archiveLines(e.id)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ type: 'delivery', data: { authenticated: true } })
    expect(JSON.stringify(lines[0])).not.toContain('sealed_body')
  })
})

describe('what runs leave behind (issue 46)', () => {
  it('moves schedule fires and finished bulk operations with the finished-runs window', async () => {
    const e = await t.createEnterprise(`Leftovers ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, {}, e.token)
    // Daily at 03:00 UTC: the engine's own scheduler fires it only should the test run at 03:00.
    const scheduled = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, {
      token: e.token,
      body: { cron: '0 3 * * *' },
    })
    expect(scheduled.status, JSON.stringify(scheduled.body)).toBe(200)
    const day = 86_400_000
    const at3 = (daysAgo: number) =>
      new Date(Math.floor((Date.now() - daysAgo * day) / day) * day + 3 * 3_600_000)
    // Two fires, as the engines' schedulers make them, 300 and 299 days ago.
    const scheduler = new Scheduler(t.sql, t.log)
    await scheduler.fireMinute(at3(300))
    await scheduler.fireMinute(at3(299))
    const fired = await t.sql<{ runId: string }[]>`
      select run_id from schedule_fires where enterprise_id = ${e.id} order by fire_at`
    expect(fired).toHaveLength(2)
    for (const f of fired) await waitForRun(t, f.runId, ['succeeded'], 15_000, e.token)
    // A bulk retry of the task's runs, carried out by the engine.
    const bulk = await t.call('POST', '/v1/runs/bulk', {
      token: e.token,
      body: { action: 'retry', filter: { taskId: task.id }, idempotencyKey: randomUUID() },
    })
    expect(bulk.status, JSON.stringify(bulk.body)).toBe(202)
    await eventually(
      async () =>
        (await t.call('GET', `/v1/runs/bulk/${bulk.body.id}`, { token: e.token })).body.status ===
        'completed',
      15_000,
      'the bulk retry completed',
    )
    await eventually(
      async () =>
        (
          await t.sql`select 1 from runs where enterprise_id = ${e.id}
                        and status not in ('succeeded', 'failed', 'cancelled')`
        ).length === 0,
      15_000,
      'the retries ended',
    )
    await age(e.id)
    // A fire inside the window stays.
    await scheduler.fireMinute(at3(2))

    const [plan] = await planRetention(t.sql, { enterpriseId: e.id })
    expect(plan).toMatchObject({ scheduleFires: 2, bulkOperations: 1 })
    expect(totals(await pass(e.id))).toMatchObject({ fires: 2, bulk: 1 })
    const fires = await t.sql<{ fireAt: Date }[]>`
      select fire_at from schedule_fires where enterprise_id = ${e.id} order by fire_at`
    expect(fires[0]!.fireAt).toEqual(at3(2)) // and today's, should the engine have fired it meanwhile
    expect(fires.length).toBeLessThanOrEqual(2)
    expect(await rowsOf('run_bulk_operations', 'id', [bulk.body.id])).toBe(0)
    expect(await rowsOf('run_bulk_items', 'operation_id', [bulk.body.id])).toBe(0)
    const gone = await t.call('GET', `/v1/runs/bulk/${bulk.body.id}`, { token: e.token })
    expect([gone.status, gone.body.error]).toEqual([404, 'bulk_operation_not_found'])
    // Archived first, the operation with its items.
    const lines = (await archiveLines(e.id)) as { type: string; id: string; data: any }[]
    const fireLines = lines.filter((l) => l.type === 'scheduleFire')
    expect(fireLines.map((l) => l.data.run_id).sort()).toEqual(fired.map((f) => f.runId).sort())
    const [operation] = lines.filter((l) => l.type === 'bulkOperation')
    expect(operation).toMatchObject({
      id: bulk.body.id,
      data: { operation: { id: bulk.body.id, action: 'retry', matched: 2 } },
    })
    expect(operation!.data.items.map((i: { run_id: string }) => i.run_id).sort()).toEqual(
      fired.map((f) => f.runId).sort(),
    )
    // And nothing more on the next pass.
    expect(await pass(e.id)).toEqual([])
    // Whatever the window, a fire stays an hour: a process that stalled finds by it that the minute
    // was fired (the scheduler fires up to ten minutes it missed).
    await t.call('PATCH', '/v1/enterprise/retention', {
      token: e.token,
      body: { finishedRuns: 'PT1M' },
    })
    const moveFire = (ago: string) =>
      t.sql`update schedule_fires set fire_at = now() - ${ago}::interval where enterprise_id = ${e.id}`
    await t.sql`delete from schedule_fires where enterprise_id = ${e.id} and fire_at <> ${at3(2)}`
    await moveFire('10 minutes')
    expect(totals(await pass(e.id)).fires).toBe(0)
    await moveFire('61 minutes')
    expect(totals(await pass(e.id)).fires).toBe(1)
  })
})

describe('the engine (issue 46)', () => {
  it('runs the pass by itself every interval', async () => {
    const e = await t.createEnterprise(`Loop ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, {}, e.token)
    const run = await finishedRun(e, task.id)
    await age(e.id)
    const own = await startTestEngine(t, { retention: { archiveDir, intervalSeconds: 0.2 } })
    try {
      await eventually(async () => (await rowsOf('runs', 'id', [run.id])) === 0, 10_000, 'the pass')
    } finally {
      await own.stop()
    }
    expect((await detail(e, run.id)).archived).toBe(true)
  })

  it('starts each pass at the share the last one caught up to, and comes back down once it keeps up', async () => {
    const e = await t.createEnterprise(`Carry ${randomUUID().slice(0, 6)}`)
    const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
    const ids: string[] = []
    for (let i = 0; i < 12; i++) ids.push((await finishedRun(e, task.id)).id)
    // The loop's passes cover every enterprise: what the file's other tests left due is moved first.
    await retentionPass(t.sql, { archiveDir })
    // A catch-up period of 50 ms; runs come due two at a time while the first pass moves one a batch.
    const loop = new RetentionLoop(t.sql, t.log, {
      archiveDir,
      intervalSeconds: 0.05,
      batchSize: 1,
      duty: 0.01,
    })
    const arrived = await comingDue(ids, 3)
    try {
      await loop.runOnce()
    } finally {
      await arrived()
    }
    // Raised while they came due (by how much depends on how long its rests were), and kept for the
    // next pass; passes that find nothing left halve it, down to the share asked and no lower.
    const caughtUp = loop.share
    expect(caughtUp).toBeGreaterThan(0.01)
    await loop.runOnce()
    expect(loop.share).toBe(Math.max(0.01, caughtUp / 2))
    for (let i = 0; i < 10; i++) await loop.runOnce()
    expect(loop.share).toBe(0.01)
    expect(await rowsOf('runs', 'id', ids)).toBe(0)
    // 7.5-9 s here on two cores, most of it the first pass's rests at 1%; 25 s on one core under the
    // whole suite (taskset -c 0 npm test, issue 40): about five times that.
  }, 120_000)
})
