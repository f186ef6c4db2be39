import { beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { ErrorBody } from '../../../shared/schemas/common.js'
import { Gate } from '../../../shared/schemas/gates.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

// GET /v1/gates?status=decided (issue 51 item 14): the decided gates, for audits, newest decision
// first and paged; the waiting list (the default) stays as the spec has it. The gates are written
// as their decisions leave them: the order is what is tested, not how a gate is decided.

let t: TestApp
let e: TestEnterprise
const ids: string[] = []
beforeAll(async () => {
  t = await createTestApp()
  e = await t.createEnterprise('Audited')
  // Five decided gates, decided a minute apart in an order other than their creation's; one waiting.
  for (const [i, minutesAgo] of [10, 30, 20, 50, 40].entries()) {
    const [row] = await t.sql<{ id: string }[]>`
      insert into gates (enterprise_id, kind, tool, status, decision, decided_by, decided_at, created_at)
      values (${e.id}, ${i % 2 ? 'question' : 'tool'}, 'vcs.merge_pull_request', 'decided', 'approve',
              'webhook', now() - make_interval(mins => ${minutesAgo}), now() - interval '2 hours')
      returning id`
    ids.push(row!.id)
  }
  await t.sql`insert into gates (enterprise_id, kind, tool) values (${e.id}, 'tool', 'vcs.merge_pull_request')`
  // Another enterprise's decided gate, decided last of all.
  await t.sql`
    insert into gates (enterprise_id, kind, status, decision, decided_by, decided_at)
    values (${t.other.id}, 'tool', 'decided', 'reject', 'webhook', now())`
})

const list = async (query: string) => {
  const res = await t.call('GET', `/v1/gates${query}`, { token: e.token })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return z.array(Gate).parse(res.body)
}
// Newest decision first: 10, 20, 30, 40, 50 minutes ago.
const newestFirst = () => [ids[0], ids[2], ids[1], ids[4], ids[3]]

describe('GET /v1/gates', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/gates?status=decided' })

  it('lists the waiting gates by default, as before', async () => {
    const waiting = await list('')
    expect(waiting).toHaveLength(1)
    expect(waiting[0]!.status).toBe('waiting')
    expect(await list('?status=waiting')).toEqual(waiting)
  })

  it('lists the decided gates with status=decided, newest decision first, this enterprise only', async () => {
    const decided = await list('?status=decided')
    expect(decided.map((g) => g.id)).toEqual(newestFirst())
    expect(decided.every((g) => g.status === 'decided' && g.decidedAt)).toBe(true)
    const other = await t.call('GET', '/v1/gates?status=decided', { token: t.other.token })
    expect(other.body.map((g: Gate) => g.decision)).toEqual(['reject'])
  })

  it('pages the decided gates; a page past the last is empty', async () => {
    expect((await list('?status=decided&limit=2')).map((g) => g.id)).toEqual(
      newestFirst().slice(0, 2),
    )
    expect((await list('?status=decided&limit=2&page=2')).map((g) => g.id)).toEqual(
      newestFirst().slice(2, 4),
    )
    expect((await list('?status=decided&limit=2&page=3')).map((g) => g.id)).toEqual(
      newestFirst().slice(4),
    )
    expect(await list('?status=decided&limit=2&page=4')).toEqual([])
    // The filters hold as on the waiting list.
    expect((await list('?status=decided&kind=question')).map((g) => g.id)).toEqual([ids[1], ids[3]])
  })

  it('pages the decided gates by 25 unless told: they grow without end', async () => {
    await t.sql`
      insert into gates (enterprise_id, kind, status, decision, decided_by, decided_at)
      select ${e.id}, 'tool', 'decided', 'approve', 'webhook', now() - interval '1 day'
        from generate_series(1, 30)`
    expect(await list('?status=decided')).toHaveLength(25)
    expect(await list('?status=decided&page=2')).toHaveLength(10)
  })

  it('refuses a status that is neither waiting nor decided', async () => {
    const res = await t.call('GET', '/v1/gates?status=pending', { token: e.token })
    expect(res.status).toBe(400)
    expect(ErrorBody.parse(res.body).error).toBe('invalid_request')
    expect(res.body.message).toContain('status')
  })
})
