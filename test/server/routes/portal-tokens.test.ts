import { beforeAll, describe, expect, it } from 'vitest'
import { ApiToken, ApiTokenCreated } from '../../../shared/schemas/tokens.js'
import { anotherProcess, createTestApp, type TestApp } from '../../helpers/app.js'
import { cookieHeaders, signIn, type TestPerson } from '../../helpers/people.js'
import { eventually } from '../../helpers/wait.js'

// API tokens managed by a signed-in person (spec: Authentication 6; Portal-only routes; issue 20).

let t: TestApp
let owner: TestPerson
let member: TestPerson
beforeAll(async () => {
  t = await createTestApp()
  owner = await signIn(t, 'owner')
  member = await signIn(t, 'member')
})

const tokens = '/v1/enterprise/api-tokens'
const someId = '00000000-0000-4000-8000-000000000000'

async function create(person: TestPerson, body: unknown) {
  return t.call('POST', tokens, { token: person.session, body })
}

async function made(person: TestPerson, scopes: string[], name = 'ci'): Promise<ApiTokenCreated> {
  const res = await create(person, { name, scopes })
  expect(res.status, res.text).toBe(201)
  return ApiTokenCreated.parse(res.body)
}

const list = async (person: TestPerson, query = '') => {
  const res = await t.call('GET', `${tokens}${query}`, { token: person.session })
  expect(res.status, res.text).toBe(200)
  return ApiToken.array().parse(res.body)
}

describe('refusals', () => {
  const routes = [
    ['GET', tokens],
    ['POST', tokens],
    ['DELETE', `${tokens}/${someId}`],
  ] as const
  const body = { name: 'x', scopes: ['tasks:read'] }

  it('answer no credential 401', async () => {
    for (const [method, path] of routes) {
      const res = await t.call(method, path, { token: null, body })
      expect(res.status, `${method} ${path}`).toBe(401)
      expect(res.body).toEqual({ message: 'Unauthorized', error: 'Unauthorized', statusCode: 401 })
    }
  })

  it('answer a token holding every scope 403 api_token_cannot_manage_tokens', async () => {
    for (const [method, path] of routes) {
      const res = await t.call(method, path, { body })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe('api_token_cannot_manage_tokens')
    }
  })

  it('answer a token without the enterprise scope api_token_scope first', async () => {
    const token = await t.tokenWith(['tasks:read', 'tasks:write'])
    for (const [method, path] of routes) {
      const res = await t.call(method, path, { token, body })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe('api_token_scope')
    }
  })

  it('refuse a change by cookie without the CSRF header', async () => {
    const mine = await made(member, ['tasks:read'])
    for (const [method, path] of [
      ['POST', tokens],
      ['DELETE', `${tokens}/${mine.id}`],
    ] as const) {
      const res = await t.call(method, path, {
        token: null,
        body,
        headers: cookieHeaders(member, false),
      })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe('csrf_required')
    }
    const [row] = await t.sql`select revoked_at from api_tokens where id = ${mine.id}`
    expect(row!.revokedAt).toBeNull()
    // With the header, the browser's calls go through.
    const byCookie = await t.call('POST', tokens, {
      token: null,
      body,
      headers: cookieHeaders(member),
    })
    expect(byCookie.status).toBe(201)
    const revoked = await t.call('DELETE', `${tokens}/${mine.id}`, {
      token: null,
      headers: cookieHeaders(member),
    })
    expect(revoked.status).toBe(200)
  })
})

describe('POST /v1/enterprise/api-tokens', () => {
  it('makes a token with the chosen scopes, shown once, which works as a bearer within them', async () => {
    const res = await create(member, {
      name: '  deploy bot ',
      scopes: ['tasks:read', 'runs:write', 'tasks:read'],
    })
    expect(res.status).toBe(201)
    expect(res.headers.get('cache-control')).toBe('no-store')
    const created = ApiTokenCreated.parse(res.body)
    expect(created).toMatchObject({
      name: 'deploy bot',
      scopes: ['tasks:read', 'runs:write'],
      lastUsedAt: null,
      revokedAt: null,
      createdBy: { userId: member.id, email: member.email },
    })
    expect(created.token).toMatch(/^osd_/)
    expect(created.lastChars).toBe(created.token.slice(-4))

    const allowed = await t.call('GET', '/v1/tasks', { token: created.token })
    expect(allowed.status).toBe(200)
    const refused = await t.call('POST', '/v1/teams', {
      token: created.token,
      body: { name: 'Not allowed' },
    })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('api_token_scope')
    // Tokens it makes cannot make tokens either.
    const again = await t.call('POST', tokens, {
      token: created.token,
      body: { name: 'x', scopes: ['tasks:read'] },
    })
    expect(again.body.error).toBe('api_token_scope')

    const listed = (await list(member)).find((x) => x.id === created.id)!
    expect(listed.lastUsedAt).not.toBeNull()
    expect(JSON.stringify(await list(member, '?includeRevoked=true'))).not.toContain(created.token)

    // At rest: only the hash.
    const dump =
      await t.sql`select row_to_json(a)::text as row from api_tokens a where id = ${created.id}`
    expect(dump[0]!.row).not.toContain(created.token)
    expect(dump[0]!.row).not.toContain(created.token.slice(4))
  })

  it('refuses unknown scopes, naming them, no scope, and a bad name', async () => {
    const unknown = await create(owner, {
      name: 'typo',
      scopes: ['tasks:read', 'tasks:admin', 'users:read', 'tasks:admin'],
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body.error).toBe('invalid_request')
    expect(unknown.body.message).toContain('tasks:admin, users:read')
    expect(unknown.body.unknown).toEqual(['tasks:admin', 'users:read'])
    for (const scopes of [[], undefined, 'tasks:read', ['*']]) {
      const res = await create(owner, { name: 'none', scopes })
      expect(res.status, JSON.stringify(scopes)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    for (const name of ['   ', 'x'.repeat(201)]) {
      const res = await create(owner, { name, scopes: ['tasks:read'] })
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('invalid_name')
    }
    expect(await t.sql`select 1 from api_tokens where name in ('typo', 'none')`).toHaveLength(0)
  })
})

describe('GET /v1/enterprise/api-tokens', () => {
  it('lists the enterprise’s tokens newest first, by whom; revoked ones when asked', async () => {
    const e = await t.createEnterprise('Listing Corp')
    const boss = await signIn(t, 'owner', e)
    const helper = await signIn(t, 'member', e)
    const first = await made(boss, ['tasks:read'], 'first')
    const second = await made(helper, ['runs:read'], 'second')
    const third = await made(boss, ['gates:write'], 'third')
    await t.call('DELETE', `${tokens}/${second.id}`, { token: helper.session })

    // The token made with the enterprise (osd admin): made by nobody.
    const shown = await list(helper)
    expect(shown.map((x) => x.name)).toEqual(['third', 'first', 'all'])
    expect(shown[0]).toEqual({
      id: third.id,
      name: 'third',
      scopes: ['gates:write'],
      lastChars: third.lastChars,
      lastUsedAt: null,
      createdAt: third.createdAt,
      createdBy: { userId: boss.id, email: boss.email },
      revokedAt: null,
    })
    expect(shown.at(-1)!.createdBy).toBeNull()
    const all = await list(helper, '?includeRevoked=true')
    expect(all.map((x) => x.name)).toEqual(['third', 'second', 'first', 'all'])
    expect(all[1]!.revokedAt).not.toBeNull()
    expect(first.id).toBe(all[2]!.id)
    expect(
      (await t.call('GET', `${tokens}?includeRevoked=yes`, { token: helper.session })).status,
    ).toBe(400)
  })

  it('never shows another enterprise’s tokens', async () => {
    const names = (await list(owner, '?includeRevoked=true')).map((x) => x.id)
    const others = await t.sql`select id from api_tokens where enterprise_id = ${t.other.id}`
    expect(others.length).toBeGreaterThan(0)
    for (const o of others) expect(names).not.toContain(o.id)
  })
})

describe('DELETE /v1/enterprise/api-tokens/{id}', () => {
  it('revokes at once for the person who made it; again changes nothing', async () => {
    const mine = await made(member, ['tasks:read'])
    expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(200) // now cached
    const res = await t.call('DELETE', `${tokens}/${mine.id}`, { token: member.session })
    expect(res.status).toBe(200)
    const revoked = ApiToken.parse(res.body)
    expect(revoked.id).toBe(mine.id)
    expect(revoked.revokedAt).not.toBeNull()
    expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(401)
    const again = await t.call('DELETE', `${tokens}/${mine.id}`, { token: member.session })
    expect(again.status).toBe(200)
    expect(again.body.revokedAt).toBe(revoked.revokedAt)
  })

  it('lets a member revoke only their own; an owner revokes any', async () => {
    const owners = await made(owner, ['tasks:read'])
    const refused = await t.call('DELETE', `${tokens}/${owners.id}`, { token: member.session })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('owner_only')
    expect((await t.call('GET', '/v1/tasks', { token: owners.token })).status).toBe(200)

    // Nor one made on the server host, by nobody.
    const [admin] =
      await t.sql`select id from api_tokens where enterprise_id = ${t.acme.id} and name = 'all'`
    const host = await t.call('DELETE', `${tokens}/${admin!.id}`, { token: member.session })
    expect(host.body.error).toBe('owner_only')

    const members = await made(member, ['tasks:read'])
    const byOwner = await t.call('DELETE', `${tokens}/${members.id}`, { token: owner.session })
    expect(byOwner.status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: members.token })).status).toBe(401)
  })

  it('answers a foreign or malformed id 404 token_not_found, and the foreign token still works', async () => {
    const [foreign] =
      await t.sql`select id from api_tokens where enterprise_id = ${t.other.id} limit 1`
    for (const id of [foreign!.id, someId, 'not-a-uuid']) {
      const res = await t.call('DELETE', `${tokens}/${id}`, { token: owner.session })
      expect(res.status, id).toBe(404)
      expect(res.body.error).toBe('token_not_found')
    }
    expect((await t.call('GET', '/v1/tasks', { token: t.other.token })).status).toBe(200)
  })

  it('is seen by another osd process on the same database at once', async () => {
    const other = anotherProcess(t)
    try {
      const mine = await made(member, ['tasks:read'])
      expect(await other.status(mine.token)).toBe(200) // in the other process's cache now
      await t.call('DELETE', `${tokens}/${mine.id}`, { token: member.session })
      await eventually(
        async () => (await other.status(mine.token)) === 401,
        1000,
        'the other process to refuse it',
      )
    } finally {
      await other.close()
    }
  })
})
