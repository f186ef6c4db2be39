import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { executionStatuses } from '../../../shared/values.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { deterministicTask } from '../../helpers/runs.js'

// The executions' board, counts and list on a history of 1,300 executions made in the database,
// checked against the list and against the runs read back (bench:views measures the same views on
// 500,000 runs). No engine runs in this file: nothing moves the runs made.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

/**
 * 1,300 executions of 1-3 runs each (2,600 runs) in an enterprise of its own, made in the database
 * (no engine here moves them): finished ones (the failed only among the older half; the
 * cancelled fewer than 100), about 40% of them closed, one open in 97 (some with finished runs before
 * the open one), refused starts that moved last in their execution, and four executions a time moved
 * at the same instant, on two teams (and none) and one member among others.
 */
async function manyExecutions(label: string) {
  const fresh = await t.createEnterprise(`${label} ${randomUUID().slice(0, 6)}`)
  const as = { token: fresh.token }
  const task = await deterministicTask(t, { serializeOn: ['i'] }, fresh.token)
  const seed = (await t.call('POST', `/v1/tasks/${task.id}/runs`, { ...as, body: { i: 's' } })).body
  const teamA = randomUUID()
  const teamB = randomUUID()
  const member = randomUUID()
  const tag = randomUUID()
  await t.sql`
    insert into runs
    select copy.*
      from runs seed, generate_series(0, 1299) x, generate_series(0, x % 3) i,
           lateral (select
             case when x % 50 = 7 and i = 0 then 'skipped_overlap'
                  when i < x % 3 then (case when x % 5 = 0 and i = x % 3 - 1 then 'failed' else 'succeeded' end)
                  when x % 97 = 5 then (array['running', 'queued', 'pending', 'waiting_on_gate', 'blocked', 'paused_spend'])[1 + (x / 97) % 6]
                  when x < 650 then (case when x % 10 < 4 then 'failed' when x % 10 = 4 then 'cancelled' else 'succeeded' end)
                  when x % 20 = 0 then 'cancelled' else 'succeeded' end as status,
             timestamptz '2026-01-01 00:00:00+00' + make_interval(mins => x / 4)
               - make_interval(secs => x % 3 - i)
               + case when x % 50 = 7 and i = 0 then interval '30 seconds' else interval '0' end as moved) v,
           jsonb_populate_record(null::runs, to_jsonb(seed) || jsonb_build_object(
             'id', md5(${tag} || x || ':' || i)::uuid, 'execution_id', md5(${tag} || x || ':0')::uuid,
             'lane', seed.lane || ':' || x || ':' || i, 'status', v.status,
             'team_id', (array[${teamA}, ${teamB}, null])[1 + (x + i) % 3],
             'member_id', (array[${member}, null, gen_random_uuid()::text])[1 + (x * 7 + i) % 3],
             'cost_usd_micros', x * 10 + i, 'created_at', v.moved - interval '1 minute',
             'updated_at', v.moved)) copy
     where seed.id = ${seed.id}`
  await t.sql`
    insert into execution_closures (execution_id, enterprise_id)
    select execution_id, ${fresh.id}::uuid from runs
     where enterprise_id = ${fresh.id} and status <> 'skipped_overlap'
     group by execution_id
    having bool_and(status in ('succeeded', 'failed', 'cancelled')) and abs(hashtext(execution_id::text)) % 10 < 4`
  // Closed, and then retried: its open run counts, and it stays off the board.
  await t.sql`
    insert into execution_closures (execution_id, enterprise_id)
    values (md5(${tag} || '5:0')::uuid, ${fresh.id})`
  const get = async (path: string) => {
    const res = await t.call('GET', path, as)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    return res.body
  }
  return { fresh, task, teamA, teamB, member, tag, get }
}

describe('executions on a long history', () => {
  it('answers the board and the counts from the open executions and the latest moves, as the list orders them', async () => {
    // manyExecutions: the board's lanes are what the list answers for their status, most recently
    // moved first (the list reads every execution for a status): 100 at most. The failed lane is
    // found deep in the history, the cancelled holds fewer than 100.
    const { fresh, task, teamA, teamB, member, tag, get } = await manyExecutions('Big board')
    const as = { token: fresh.token }
    type Lane = { lane: string; executions: { id: string; paused?: unknown }[] }
    for (const filter of [
      {},
      { teamId: teamA },
      { memberId: member },
      { teamId: teamB, memberId: member },
      { status: 'failed' },
      { status: 'running' },
      { teamId: teamA, status: 'complete' },
      { teamId: randomUUID() },
    ] as Record<string, string>[]) {
      const board = await get(`/v1/executions/board?${new URLSearchParams(filter)}`)
      for (const { lane, executions } of board.lanes as Lane[]) {
        if (filter.status && filter.status !== lane) {
          expect(executions, `${lane} ${JSON.stringify(filter)}`).toEqual([])
          continue
        }
        const query = new URLSearchParams({ ...filter, status: lane, limit: '100' })
        const list = await get(`/v1/executions?${query}`)
        expect(executions, `${lane} ${JSON.stringify(filter)}`).toEqual(list.data)
      }
    }
    const board = await get('/v1/executions/board')
    const sizes = Object.fromEntries(
      (board.lanes as Lane[]).map((l) => [l.lane, l.executions.length]),
    )
    // The finished lanes past 100 are cut, and the closed execution with an open run is not on it.
    expect(sizes).toMatchObject({ complete: 100, failed: 100 })
    expect(sizes.cancelled).toBeLessThan(100)
    const onBoard = (board.lanes as Lane[]).flatMap((l) => l.executions.map((e) => e.id))
    expect(onBoard).not.toContain((await t.sql`select md5(${tag} || '5:0')::uuid as id`)[0]!.id)

    // Counts: every execution with an open run, closed or not; its runs.
    const total = async (query: string) =>
      (await get(`/v1/executions?${query}&limit=1`)).total +
      (await get(`/v1/executions?${query}&closed=true&limit=1`)).total
    const runs = async (status: string) =>
      (await get(`/v1/runs?taskId=${task.id}&status=${status}&limit=1`)).total
    expect(await get('/v1/executions/counts')).toEqual({
      executions: {
        running: await total('status=running'),
        queued: await total('status=queued'),
        waiting: await total('status=waiting'),
      },
      runs: {
        running: await runs('running'),
        queued: (await runs('queued')) + (await runs('pending')),
        waiting: await runs('waiting_on_gate'),
      },
    })

    // A paused task: its open executions say why they wait, the finished ones nothing.
    const paused = await t.call('POST', `/v1/tasks/${task.id}/pause`, {
      ...as,
      body: { reason: 'board' },
    })
    expect(paused.status, JSON.stringify(paused.body)).toBe(200)
    for (const { lane, executions } of (await get('/v1/executions/board')).lanes as Lane[]) {
      const finished = ['failed', 'cancelled', 'complete'].includes(lane)
      for (const e of executions)
        expect(e.paused, lane).toEqual(
          finished ? undefined : expect.objectContaining({ scope: 'task', reason: 'board' }),
        )
    }
  }, 20_000)

  it('pages the executions by each order and filter as their runs say, the total counting every match', async () => {
    // manyExecutions, read back whole and ordered here: what the list's keys (each execution's runs
    // grouped, its first and last runs read for the page's only) must answer.
    const { fresh, teamA, member, get } = await manyExecutions('Many executions')
    const runs = await t.sql<
      {
        id: string
        executionId: string
        status: string
        createdAt: Date
        updatedAt: Date
        costUsdMicros: string
        teamId: string | null
        memberId: string | null
      }[]
    >`select id, execution_id, status, created_at, updated_at, cost_usd_micros, team_id, member_id
        from runs where enterprise_id = ${fresh.id} and status <> 'skipped_overlap'`
    const closed = new Set(
      (
        await t.sql<{ id: string }[]>`
          select execution_id as id from execution_closures where enterprise_id = ${fresh.id}`
      ).map((r) => r.id),
    )
    const byId = new Map<string, (typeof runs)[number][]>()
    for (const r of runs) byId.set(r.executionId, [...(byId.get(r.executionId) ?? []), r])
    // The spec's order: any running, any at a gate, any held, any waiting to run, else how the
    // latest run ended.
    const statusOf = (of: (typeof runs)[number][]) => {
      const any = (...statuses: string[]) => of.some((r) => statuses.includes(r.status))
      if (any('running')) return 'running'
      if (any('waiting_on_gate')) return 'waiting'
      if (any('blocked', 'paused_spend')) return 'blocked'
      if (any('pending', 'queued')) return 'queued'
      const last = [...of].sort(
        (a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1),
      )[0]!
      return last.status === 'failed' || last.status === 'cancelled' ? last.status : 'complete'
    }
    const keys = [...byId].map(([id, of]) => ({
      id,
      status: statusOf(of),
      startedAt: Math.min(...of.map((r) => r.createdAt.getTime())),
      updatedAt: Math.max(...of.map((r) => r.updatedAt.getTime())),
      runCount: of.length,
      costUsdCents: of.reduce((sum, r) => sum + Number(r.costUsdMicros), 0),
      teams: of.map((r) => r.teamId),
      members: of.map((r) => r.memberId),
    }))
    // Each status once, on its first page: an open one is read through the open runs only.
    expect(new Set(keys.map((k) => k.status))).toEqual(new Set(executionStatuses))
    for (const filter of [
      {},
      { teamId: teamA },
      { memberId: member },
      { closed: 'true' },
      { teamId: 'not-an-id' },
      ...executionStatuses.map((status) => ({ status })),
      { status: 'running', closed: 'true' },
      { status: 'complete', teamId: teamA },
    ] as Record<string, string>[]) {
      const matches = keys.filter(
        (k) =>
          closed.has(k.id) === (filter.closed === 'true') &&
          (!filter.teamId || k.teams.includes(filter.teamId)) &&
          (!filter.memberId || k.members.includes(filter.memberId)) &&
          (!filter.status || k.status === filter.status),
      )
      const sorts = filter.status
        ? (['updatedAt'] as const)
        : (['updatedAt', 'startedAt', 'runCount', 'costUsdCents'] as const)
      const pageNumber = filter.status ? 1 : 3
      for (const sort of sorts) {
        for (const order of ['desc', 'asc']) {
          const sign = order === 'asc' ? 1 : -1
          const expected = [...matches]
            .sort((a, b) => sign * (a[sort] - b[sort] || (a.id < b.id ? -1 : 1)))
            .slice((pageNumber - 1) * 20, pageNumber * 20)
            .map((k) => k.id)
          const query = new URLSearchParams({
            ...filter,
            sort,
            order,
            limit: '20',
            page: String(pageNumber),
          })
          const page = await get(`/v1/executions?${query}`)
          expect(page.total, `${query}`).toBe(matches.length)
          expect(
            page.data.map((e: { id: string }) => e.id),
            `${query}`,
          ).toEqual(expected)
        }
      }
    }
  }, 20_000)
})
