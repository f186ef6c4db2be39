import { randomBytes } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { Chat } from '../../../shared/schemas/chats.js'
import { ErrorBody } from '../../../shared/schemas/common.js'
import { ExecutionPage } from '../../../shared/schemas/executions.js'
import { Gate } from '../../../shared/schemas/gates.js'
import { RunPage } from '../../../shared/schemas/runs.js'
import { ApiToken } from '../../../shared/schemas/tokens.js'
import { createMember } from '../../../server/domain/org/index.js'
import { createToken } from '../../../server/domain/people/index.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { signIn, type TestPerson } from '../../helpers/people.js'
import { apiStart, deterministicTask } from '../../helpers/runs.js'

// idPrefix on the lists of runs, gates, chats, executions and API tokens (issue 51 item 8): at least 8
// hex characters name the ids that start with them, as git names an object, within the caller's
// enterprise and every filter of the list; the same prefix in another enterprise reveals nothing.

let t: TestApp
/** Two enterprises, each with ids that start with the same 8 characters. */
let mine: TestEnterprise
let theirs: TestEnterprise
let owners: { mine: TestPerson; theirs: TestPerson }
const prefix = randomBytes(4).toString('hex')
/** The n-th id that starts with the prefix: 1 and 2 are mine, 3 is theirs. */
const idOf = (n: number) => `${prefix}-0000-4000-8000-${String(n).padStart(12, '0')}`

/** Copies a row of `table` with these columns changed (a run made by the API, with a chosen id). */
async function copyRow(table: string, id: string, changes: Record<string, unknown>) {
  await t.sql`
    insert into ${t.sql(table)}
    select copy.* from ${t.sql(table)} r,
           jsonb_populate_record(null::${t.sql(table)}, to_jsonb(r) || ${t.sql.json(changes as never)}) copy
     where r.id = ${id}`
}

async function seed(e: TestEnterprise, owner: TestPerson, ids: number[]) {
  // Runs, and so executions (an execution's id is its first run's).
  const task = await deterministicTask(t, {}, e.token)
  const { run } = await apiStart(t.sql, e.id, task.id, { n: 1 })
  for (const n of ids)
    await copyRow('runs', run.id, {
      id: idOf(n),
      execution_id: idOf(n),
      status: 'succeeded',
      lane: `prefix-${n}`,
    })
  const member = await createMember(t.sql, e.id, { name: `Prefix ${ids[0]}` }, 'osd.local')
  for (const n of ids) {
    await t.sql`insert into gates (id, enterprise_id, kind, tool, summary)
                values (${idOf(n)}, ${e.id}, 'question', 'os.ask_ceo', 'Ship it?')`
    await t.sql`insert into chats (id, enterprise_id, member_id, last_message_at)
                values (${idOf(n)}, ${e.id}, ${member.id}, now())`
    const { id } = await createToken(t.sql, e.id, {
      name: `prefix ${n}`,
      scopes: ['runs:read'],
      createdBy: owner.id,
    })
    await t.sql`update api_tokens set id = ${idOf(n)} where id = ${id}`
  }
}

beforeAll(async () => {
  t = await createTestApp()
  mine = await t.createEnterprise(`Prefix mine ${prefix}`)
  theirs = await t.createEnterprise(`Prefix theirs ${prefix}`)
  owners = { mine: await signIn(t, 'owner', mine), theirs: await signIn(t, 'owner', theirs) }
  await seed(mine, owners.mine, [1, 2])
  await seed(theirs, owners.theirs, [3])
})

/** The lists by path: how each reads the ids of an answer, and whose credential calls it. */
const lists = {
  runs: { path: '/v1/runs', ids: (body: unknown) => RunPage.parse(body).data.map((r) => r.id) },
  executions: {
    path: '/v1/executions',
    ids: (body: unknown) => ExecutionPage.parse(body).data.map((x) => x.id),
  },
  gates: {
    path: '/v1/gates',
    ids: (body: unknown) =>
      Gate.array()
        .parse(body)
        .map((g) => g.id),
  },
  chats: {
    path: '/v1/chats',
    ids: (body: unknown) =>
      Chat.array()
        .parse(body)
        .map((c) => c.id),
  },
  tokens: {
    path: '/v1/enterprise/api-tokens',
    ids: (body: unknown) =>
      ApiToken.array()
        .parse(body)
        .map((k) => k.id),
  },
} as const

/** The credential a list takes: the tokens list is a person's (portal-only), the others a token's. */
const credential = (list: keyof typeof lists, whose: 'mine' | 'theirs') =>
  list === 'tokens' ? owners[whose].session : whose === 'mine' ? mine.token : theirs.token

describe.each(Object.keys(lists) as (keyof typeof lists)[])('GET %s?idPrefix=', (list) => {
  const { path, ids } = lists[list]
  const get = async (idPrefix: string, whose: 'mine' | 'theirs' = 'mine') => {
    const res = await t.call('GET', `${path}?idPrefix=${encodeURIComponent(idPrefix)}`, {
      token: credential(list, whose),
    })
    return res
  }
  const found = async (idPrefix: string, whose: 'mine' | 'theirs' = 'mine') => {
    const res = await get(idPrefix, whose)
    expect(res.status, res.text).toBe(200)
    return ids(res.body).sort()
  }

  it('names the ids that start with it, as the id prints, dashes where they fall or none', async () => {
    expect(await found(prefix)).toEqual([idOf(1), idOf(2)])
    expect(await found(prefix.toUpperCase())).toEqual([idOf(1), idOf(2)])
    expect(await found(idOf(2))).toEqual([idOf(2)])
    expect(await found(`${prefix}-0000-4000-8000-00000000000`)).toEqual([idOf(1), idOf(2)])
    expect(await found(`${prefix}000040008000000000000001`)).toEqual([idOf(1)])
    expect(await found(`${prefix}-0000-4000-8000-0000000000`)).toHaveLength(2)
    expect(await found(`${prefix}-ffff`)).toEqual([])
  })

  it('never names another enterprise’s id with the same prefix', async () => {
    expect(await found(prefix, 'theirs')).toEqual([idOf(3)])
    expect(await found(idOf(3))).toEqual([])
    expect(await found(idOf(1), 'theirs')).toEqual([])
  })

  it('refuses fewer than 8 hex characters, or anything not hex or a dash where one falls, 400', async () => {
    for (const bad of [
      prefix.slice(0, 7),
      `${prefix.slice(0, 4)}-${prefix.slice(4)}`,
      'zzzzzzzz',
      `${prefix}--0`,
      `${idOf(1)}0`,
    ]) {
      const res = await get(bad)
      expect(res.status, `${bad}: ${res.text}`).toBe(400)
      const body = ErrorBody.parse(res.body)
      expect(body.error).toBe('invalid_request')
      expect(body.message).toMatch(/^idPrefix: at least 8 hex characters/)
    }
  })
})

it('keeps every other filter of the list: a decided gate is not among the waiting ones', async () => {
  await t.sql`update gates set status = 'decided', decided_at = now() where id = ${idOf(2)}`
  const waiting = await t.call('GET', `/v1/gates?idPrefix=${prefix}`, { token: mine.token })
  expect(
    Gate.array()
      .parse(waiting.body)
      .map((g) => g.id),
  ).toEqual([idOf(1)])
  const decided = await t.call('GET', `/v1/gates?idPrefix=${prefix}&status=decided`, {
    token: mine.token,
  })
  expect(
    Gate.array()
      .parse(decided.body)
      .map((g) => g.id),
  ).toEqual([idOf(2)])
  await t.sql`update gates set status = 'waiting', decided_at = null where id = ${idOf(2)}`
  const runs = await t.call('GET', `/v1/runs?idPrefix=${prefix}&status=failed`, {
    token: mine.token,
  })
  expect(RunPage.parse(runs.body)).toMatchObject({ data: [], total: 0 })
})
