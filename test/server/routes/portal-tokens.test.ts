import { randomBytes } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { ApiToken, ApiTokenCreated } from '../../../shared/schemas/tokens.js'
import { apiTokenShape, newApiToken } from '../../../shared/token-format.js'
import { createSql } from '../../../server/db/sql.js'
import { createApp } from '../../../server/http/app.js'
import { TokenUses } from '../../../server/http/token-uses.js'
import { anotherProcess, createTestApp, type TestApp } from '../../helpers/app.js'
import { serveInProcess } from '../../helpers/osctl.js'
import {
  cheapPasswordHashesInFile,
  cookieHeaders,
  signIn,
  type TestPerson,
} from '../../helpers/people.js'
import { eventually } from '../../helpers/wait.js'

// API tokens managed by a signed-in person (spec: Authentication 6; Portal-only routes; issue 20).

// About tokens, not what a hash costs (test/server/routes/auth.test.ts holds the default).
cheapPasswordHashesInFile()

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
    ['PATCH', `${tokens}/${someId}`],
    ['POST', `${tokens}/${someId}/rotate`],
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
      ['PATCH', `${tokens}/${mine.id}`],
      ['POST', `${tokens}/${mine.id}/rotate`],
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
    // GitHub's format: prefix, 43 random characters, a CRC32 of them in 6 (issue 45).
    expect(created.token).toMatch(/^osd_[0-9A-Za-z]{49}$/)
    expect(apiTokenShape(created.token)).toBe('checked')
    expect(created.expiresAt).toBeNull()
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

    // Written a moment after the answers, off their path.
    await eventually(
      async () => (await list(member)).find((x) => x.id === created.id)!.lastUsedAt !== null,
      5000,
      'lastUsedAt',
    )
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
      expiresAt: null,
      rotatedAt: null,
      graceEndsAt: null,
      revokedAt: null,
      revokedReason: null,
    })
    expect(shown.at(-1)!.createdBy).toBeNull()
    const all = await list(helper, '?includeRevoked=true')
    expect(all.map((x) => x.name)).toEqual(['third', 'second', 'first', 'all'])
    expect(all[1]!.revokedAt).not.toBeNull()
    expect(all[1]!.revokedReason).toBe('revoked')
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

// Issue 45: tokens that change, rotate, expire, say when last used, and carry a checksum.

const unauthorized = { message: 'Unauthorized', error: 'Unauthorized', statusCode: 401 }

/**
 * The app on a pool of its own that records every statement it sends, as a second osd process with
 * its own caches: what a request reads and writes of api_tokens is counted. Uses of tokens are written
 * only when flush() is called.
 */
function countingProcess() {
  const sent: string[] = []
  const sql = createSql(t.dbUrl, { max: 2, onQuery: (query) => void sent.push(query) })
  const uses = new TokenUses(sql, t.log, 3_600_000)
  const app = createApp({ sql, config: t.config, log: t.log, sealer: t.sealer, tokenUses: uses })
  return {
    uses,
    /** Statements naming api_tokens since the last call. */
    tokenStatements() {
      const seen = sent.filter((q) => /api_tokens/.test(q))
      sent.length = 0
      return seen
    },
    get: (token: string, path = '/v1/tasks') =>
      app.request(path, { headers: { authorization: `Bearer ${token}` } }),
    close: () => sql.end(),
  }
}

/** Waits until the clock is past `iso` (an expiry, the end of a grace): the wait is the condition. */
async function until(iso: string): Promise<void> {
  const ms = Date.parse(iso) - Date.now() + 20
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms))
}

const unknownToken = () => newApiToken()

async function change(person: TestPerson, id: string, body: unknown) {
  return t.call('PATCH', `${tokens}/${id}`, { token: person.session, body })
}

async function rotate(person: TestPerson, id: string, body: unknown = {}) {
  return t.call('POST', `${tokens}/${id}/rotate`, { token: person.session, body })
}

describe('the token format', () => {
  it('refuses a mistyped, cut or foreign token 401 without a database look-up', async () => {
    const p = countingProcess()
    try {
      const good = (await made(member, ['tasks:read'])).token
      const other = (c: string) => (c === 'a' ? 'b' : 'a')
      const typo = (i: number) => good.slice(0, i) + other(good[i]!) + good.slice(i + 1)
      const wrong = [
        typo(10), // the random part
        typo(good.length - 1), // the checksum
        good.slice(0, -1),
        good + 'x',
        'ghp_' + good.slice(4),
        'osd_' + 'x'.repeat(10),
      ]
      expect((await p.get(good)).status).toBe(200)
      p.tokenStatements()
      for (const token of wrong) {
        expect(apiTokenShape(token), token).toBe('malformed')
        const res = await p.get(token)
        expect(res.status).toBe(401)
        expect(await res.json()).toEqual(unauthorized)
      }
      expect(p.tokenStatements()).toEqual([])

      // A token of the right form that osd never made is looked up, and refused alike.
      const unknown = await p.get(unknownToken())
      expect(unknown.status).toBe(401)
      expect(await unknown.json()).toEqual(unauthorized)
      expect(p.tokenStatements()).toHaveLength(1)
    } finally {
      await p.close()
    }
  })

  it('keeps a token made before checksums working, through the look-up, until revoked', async () => {
    const legacy = `osd_${randomBytes(32).toString('base64url')}`
    expect(apiTokenShape(legacy)).toBe('legacy')
    const [row] = await t.sql<{ id: string }[]>`
      insert into api_tokens (enterprise_id, name, scopes, token_hash, last_chars)
      values (${t.acme.id}, 'from before', ${['tasks:read']}, sha256(${Buffer.from(legacy)}), ${legacy.slice(-4)})
      returning id`
    expect((await t.call('GET', '/v1/tasks', { token: legacy })).status).toBe(200)
    expect((await t.call('DELETE', `${tokens}/${row!.id}`, { token: owner.session })).status).toBe(
      200,
    )
    expect((await t.call('GET', '/v1/tasks', { token: legacy })).status).toBe(401)
  })
})

describe('expiry', () => {
  it('is set at creation by expiresInDays or expiresAt, and shown in lists and answers', async () => {
    const before = Date.now()
    const month = await create(member, {
      name: 'month',
      scopes: ['tasks:read'],
      expiresInDays: 30,
    })
    expect(month.status, month.text).toBe(201)
    const days = (Date.parse(month.body.expiresAt) - before) / 86_400_000
    expect(days).toBeGreaterThanOrEqual(30)
    expect(days).toBeLessThan(30.01)
    const dated = await create(member, {
      name: 'dated',
      scopes: ['tasks:read'],
      expiresAt: '2099-01-31',
    })
    expect(dated.body.expiresAt).toBe('2099-01-31T00:00:00.000Z')
    const offset = await create(member, {
      name: 'offset',
      scopes: ['tasks:read'],
      expiresAt: '2099-01-31T12:00:00+02:00',
    })
    expect(offset.body.expiresAt).toBe('2099-01-31T10:00:00.000Z')
    const listed = await list(member)
    expect(listed.find((x) => x.id === month.body.id)!.expiresAt).toBe(month.body.expiresAt)
    expect(listed.find((x) => x.id === dated.body.id)!.expiresAt).toBe('2099-01-31T00:00:00.000Z')

    for (const extra of [
      { expiresInDays: 30, expiresAt: '2099-01-31' },
      { expiresAt: '2001-01-01' },
      { expiresAt: 'tomorrow' },
      { expiresAt: '2099-02-30' },
      { expiresInDays: 0 },
      { expiresInDays: 3651 },
      { expiresInDays: 1.5 },
    ]) {
      const res = await create(member, { name: 'refused', scopes: ['tasks:read'], ...extra })
      expect(res.status, JSON.stringify(extra)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    expect(await t.sql`select 1 from api_tokens where name = 'refused'`).toHaveLength(0)
  })

  it('answers an expired token 401 exactly as an unknown one, through the same look-up, in every process', async () => {
    const p = countingProcess()
    const other = anotherProcess(t)
    try {
      const soon = new Date(Date.now() + 3000).toISOString()
      const res = await create(member, { name: 'brief', scopes: ['tasks:read'], expiresAt: soon })
      const brief = ApiTokenCreated.parse(res.body)
      expect(brief.expiresAt).toBe(soon)
      // Before it expires it works: asserted of each answer that came back before then, since on a
      // loaded machine the expiry may come first (which the rest of the test is about anyway).
      const live = (status: number) => {
        if (Date.now() < Date.parse(soon)) expect(status).toBe(200)
      }
      const used = await t.call('GET', '/v1/tasks', { token: brief.token })
      live(used.status)
      // Every answer to it says when it expires (osctl warns from it).
      if (used.status === 200) expect(used.headers.get('x-osd-token-expires-at')).toBe(soon)
      live((await p.get(brief.token)).status)
      live(await other.status(brief.token)) // cached in both

      await until(soon)
      const expired = await t.call('GET', '/v1/tasks', { token: brief.token })
      const unknown = await t.call('GET', '/v1/tasks', { token: unknownToken() })
      expect(expired.status).toBe(401)
      expect(expired.text).toBe(unknown.text)
      expect(expired.headers.get('x-osd-token-expires-at')).toBeNull()
      expect(await other.status(brief.token)).toBe(401)
      p.tokenStatements()
      expect((await p.get(brief.token)).status).toBe(401)
      const expiredLookups = p.tokenStatements()
      expect((await p.get(unknownToken())).status).toBe(401)
      expect(expiredLookups).toEqual(p.tokenStatements())
      expect(expiredLookups).toHaveLength(1)
      // Still listed, with its expiry; a token without one says nothing of it.
      expect((await list(member)).find((x) => x.id === brief.id)!.expiresAt).toBe(soon)
      const lasting = await made(member, ['tasks:read'])
      const plain = await t.call('GET', '/v1/tasks', { token: lasting.token })
      expect(plain.headers.get('x-osd-token-expires-at')).toBeNull()
    } finally {
      await p.close()
      await other.close()
    }
  })
})

describe('lastUsedAt', () => {
  it('is written after the answers, at most once a minute per token, in every process', async () => {
    const p = countingProcess()
    const q = countingProcess()
    try {
      const mine = await made(member, ['tasks:read'])
      p.tokenStatements()
      for (let i = 0; i < 5; i++) expect((await p.get(mine.token)).status).toBe(200)
      // The requests looked it up (then kept it: a second look-up when the new process's listener
      // starts and empties its cache) and wrote nothing.
      const read = p.tokenStatements()
      expect(read.length).toBeGreaterThanOrEqual(1)
      for (const statement of read) expect(statement).not.toMatch(/update/i)
      await p.uses.flush()
      const writes = p.tokenStatements()
      expect(writes).toHaveLength(1)
      expect(writes[0]).toMatch(/update api_tokens set last_used_at/)
      const [first] = await t.sql`select last_used_at from api_tokens where id = ${mine.id}`
      expect(first!.lastUsedAt).not.toBeNull()

      // Used again within the minute: this process writes nothing more. (It may read the token again:
      // on a loaded machine its cached caller's 5 s can run out between the two rounds.)
      for (let i = 0; i < 5; i++) expect((await p.get(mine.token)).status).toBe(200)
      await p.uses.flush()
      expect(p.tokenStatements().filter((q) => /update/i.test(q))).toEqual([])
      // Another process writes once, and its statement leaves a row written within the minute alone.
      expect((await q.get(mine.token)).status).toBe(200)
      await q.uses.flush()
      const [second] = await t.sql`select last_used_at from api_tokens where id = ${mine.id}`
      expect(second!.lastUsedAt).toEqual(first!.lastUsedAt)
      // A minute later (moved back here), the next use moves it.
      await t.sql`update api_tokens set last_used_at = now() - interval '2 minutes' where id = ${mine.id}`
      const fresh = countingProcess()
      try {
        expect((await fresh.get(mine.token)).status).toBe(200)
        await fresh.uses.flush()
      } finally {
        await fresh.close()
      }
      const [third] = await t.sql`select last_used_at from api_tokens where id = ${mine.id}`
      expect(third!.lastUsedAt.getTime()).toBeGreaterThan(Date.now() - 60_000)
      expect((await list(member)).find((x) => x.id === mine.id)!.lastUsedAt).toBe(
        third!.lastUsedAt.toISOString(),
      )
    } finally {
      await p.close()
      await q.close()
    }
  })
})

describe('lastUsedAt when osd stops', () => {
  it('is written for the uses of its last second before the database closes', async () => {
    // An api process stops in milliseconds, well before the batch's second is up: without the flush
    // at stop, that batch would find the database closed and the use would be lost.
    const daemon = await serveInProcess({ url: t.dbUrl }, { OSD_ROLE: 'api' })
    const mine = await made(member, ['tasks:read'])
    try {
      const res = await fetch(`${daemon.url}/tasks`, {
        headers: { authorization: `Bearer ${mine.token}` },
      })
      expect(res.status).toBe(200)
    } finally {
      await daemon.stop()
    }
    const [row] = await t.sql`select last_used_at from api_tokens where id = ${mine.id}`
    expect(row!.lastUsedAt).not.toBeNull()
  })
})

describe('PATCH /v1/enterprise/api-tokens/{id}', () => {
  it('changes name, scopes and expiry; the next request acts on it, in every process', async () => {
    const other = anotherProcess(t)
    try {
      const mine = await made(member, ['tasks:read', 'teams:read'], 'before')
      expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(200)
      expect(await other.status(mine.token)).toBe(200) // cached in both

      const res = await change(member, mine.id, {
        name: ' after ',
        scopes: ['teams:read'],
        expiresAt: '2099-06-30',
      })
      expect(res.status, res.text).toBe(200)
      const changed = ApiToken.parse(res.body)
      expect(changed).toMatchObject({
        id: mine.id,
        name: 'after',
        scopes: ['teams:read'],
        expiresAt: '2099-06-30T00:00:00.000Z',
        lastChars: mine.lastChars,
      })
      const refused = await t.call('GET', '/v1/tasks', { token: mine.token })
      expect(refused.status).toBe(403)
      expect(refused.body.error).toBe('api_token_scope')
      await eventually(async () => (await other.status(mine.token)) === 403, 3000, 'the change')
      const teams = await t.call('GET', '/v1/teams', { token: mine.token })
      expect(teams.status).toBe(200)
      expect(teams.headers.get('x-osd-token-expires-at')).toBe('2099-06-30T00:00:00.000Z')

      // What is not sent stays; null: it never expires.
      const never = await change(member, mine.id, { expiresAt: null })
      expect(ApiToken.parse(never.body)).toMatchObject({
        name: 'after',
        scopes: ['teams:read'],
        expiresAt: null,
      })
      expect((await list(member)).find((x) => x.id === mine.id)).toEqual(never.body)
    } finally {
      await other.close()
    }
  })

  it('is for the maker or an owner, of a live token of the enterprise, with valid values', async () => {
    const owners = await made(owner, ['tasks:read'])
    const refused = await change(member, owners.id, { name: 'mine now' })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('owner_only')
    const members = await made(member, ['tasks:read'])
    expect((await change(owner, members.id, { name: 'by the owner' })).status).toBe(200)

    const revoked = await made(member, ['tasks:read'])
    await t.call('DELETE', `${tokens}/${revoked.id}`, { token: member.session })
    const gone = await change(member, revoked.id, { name: 'back?' })
    expect(gone.status).toBe(409)
    expect(gone.body.error).toBe('token_revoked')

    const app = await appToken()
    const apps = await change(owner, app, { scopes: ['tasks:write'] })
    expect(apps.status).toBe(409)
    expect(apps.body.error).toBe('token_of_connected_app')
    const appRotated = await rotate(owner, app)
    expect(appRotated.body.error).toBe('token_of_connected_app')

    const [foreign] =
      await t.sql`select id from api_tokens where enterprise_id = ${t.other.id} limit 1`
    for (const id of [foreign!.id, someId, 'not-a-uuid']) {
      const res = await change(owner, id, { name: 'x' })
      expect(res.status, id).toBe(404)
      expect(res.body.error).toBe('token_not_found')
    }
    const name = await change(member, members.id, { name: '   ' })
    expect(name.body.error).toBe('invalid_name')
    for (const body of [
      { scopes: [] },
      { scopes: ['tasks:admin'] },
      { expiresAt: '2001-01-01' },
      { expiresAt: 'soon' },
    ]) {
      const res = await change(member, members.id, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    expect((await list(member)).find((x) => x.id === members.id)!.name).toBe('by the owner')
  })
})

/** A connected app's token (as an approved consent request makes it), by its id. */
async function appToken(): Promise<string> {
  const [app] = await t.sql<{ id: string }[]>`
    insert into app_connections (enterprise_id, app_name, scopes, approved_by)
    values (${t.acme.id}, 'an app', ${['tasks:read']}, ${owner.id}) returning id`
  const [row] = await t.sql<{ id: string }[]>`
    insert into api_tokens (enterprise_id, name, scopes, token_hash, last_chars, created_by_user, app_connection_id)
    values (${t.acme.id}, 'app: an app', ${['tasks:read']}, ${randomBytes(32)}, 'abcd', ${owner.id}, ${app!.id})
    returning id`
  return row!.id
}

describe('POST /v1/enterprise/api-tokens/{id}/rotate', () => {
  it('answers a new secret once; the old one stops at once, in every process', async () => {
    const other = anotherProcess(t)
    try {
      const mine = await made(member, ['tasks:read'], 'rolling')
      expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(200)
      expect(await other.status(mine.token)).toBe(200) // cached in both

      const res = await rotate(member, mine.id)
      expect(res.status, res.text).toBe(200)
      expect(res.headers.get('cache-control')).toBe('no-store')
      const rotated = ApiTokenCreated.parse(res.body)
      expect(rotated).toMatchObject({
        id: mine.id,
        name: 'rolling',
        scopes: ['tasks:read'],
        graceEndsAt: null,
        revokedAt: null,
      })
      expect(rotated.rotatedAt).not.toBeNull()
      expect(apiTokenShape(rotated.token)).toBe('checked')
      expect(rotated.token).not.toBe(mine.token)
      expect(rotated.lastChars).toBe(rotated.token.slice(-4))

      const old = await t.call('GET', '/v1/tasks', { token: mine.token })
      expect(old.status).toBe(401)
      expect(old.body).toEqual(unauthorized)
      expect((await t.call('GET', '/v1/tasks', { token: rotated.token })).status).toBe(200)
      await eventually(async () => (await other.status(mine.token)) === 401, 3000, 'the rotation')
      expect(await other.status(rotated.token)).toBe(200)
      // Only the new secret's hash is kept.
      const [row] =
        await t.sql`select row_to_json(a)::text as row from api_tokens a where id = ${mine.id}`
      expect(row!.row).not.toContain(rotated.token.slice(4))
    } finally {
      await other.close()
    }
  })

  it('keeps the old secret working for graceSeconds, then answers it 401 as an unknown one', async () => {
    const other = anotherProcess(t)
    try {
      const mine = await made(member, ['tasks:read'])
      expect(await other.status(mine.token)).toBe(200)
      const rotated = ApiTokenCreated.parse(
        (await rotate(member, mine.id, { graceSeconds: 2 })).body,
      )
      const ends = Date.parse(rotated.graceEndsAt!)
      expect(ends - Date.parse(rotated.rotatedAt!)).toBe(2000)
      expect((await list(member)).find((x) => x.id === mine.id)!.graceEndsAt).toBe(
        rotated.graceEndsAt,
      )
      // The old secret works while the grace lasts: asserted of each answer that came back before it
      // ended, since on a loaded machine the end may come first.
      const live = (status: number) => {
        if (Date.now() < ends) expect(status).toBe(200)
      }
      live((await t.call('GET', '/v1/tasks', { token: mine.token })).status)
      live(await other.status(mine.token))
      expect((await t.call('GET', '/v1/tasks', { token: rotated.token })).status).toBe(200)
      expect(await other.status(rotated.token)).toBe(200)

      await until(rotated.graceEndsAt!)
      const old = await t.call('GET', '/v1/tasks', { token: mine.token })
      const unknown = await t.call('GET', '/v1/tasks', { token: unknownToken() })
      expect(old.status).toBe(401)
      expect(old.text).toBe(unknown.text)
      expect(await other.status(mine.token)).toBe(401)
      expect((await t.call('GET', '/v1/tasks', { token: rotated.token })).status).toBe(200)
      expect((await list(member)).find((x) => x.id === mine.id)!.graceEndsAt).toBeNull()
    } finally {
      await other.close()
    }
  })

  it('gives only the secret it replaces a grace: a second rotation ends the first one’s', async () => {
    const mine = await made(member, ['tasks:read'])
    const first = ApiTokenCreated.parse(
      (await rotate(member, mine.id, { graceSeconds: 3600 })).body,
    )
    expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(200)
    const second = ApiTokenCreated.parse((await rotate(owner, mine.id, { graceSeconds: 600 })).body)
    expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(401)
    expect((await t.call('GET', '/v1/tasks', { token: first.token })).status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: second.token })).status).toBe(200)
  })

  it('refuses a grace beyond 7 days, a revoked or expired token, and another person’s', async () => {
    const mine = await made(member, ['tasks:read'])
    for (const graceSeconds of [604_801, -1, 1.5, '60']) {
      const res = await rotate(member, mine.id, { graceSeconds })
      expect(res.status, String(graceSeconds)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    const week = await rotate(member, mine.id, { graceSeconds: 604_800 })
    expect(week.status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: mine.token })).status).toBe(200)

    const owners = await made(owner, ['tasks:read'])
    const refused = await rotate(member, owners.id)
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('owner_only')
    expect((await t.call('GET', '/v1/tasks', { token: owners.token })).status).toBe(200)

    // Expired at once, in the database (no process holds it): no wait for an expiry to come.
    const brief = ApiTokenCreated.parse(
      (await create(member, { name: 'brief', scopes: ['tasks:read'], expiresInDays: 1 })).body,
    )
    await t.sql`update api_tokens set expires_at = now() - interval '1 second' where id = ${brief.id}`
    const expired = await rotate(member, brief.id)
    expect(expired.status).toBe(409)
    expect(expired.body.error).toBe('token_expired')
    // Given a new expiry, it may be rotated again.
    expect((await change(member, brief.id, { expiresAt: '2099-01-01' })).status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: brief.token })).status).toBe(200)
    expect((await rotate(member, brief.id)).status).toBe(200)

    await t.call('DELETE', `${tokens}/${mine.id}`, { token: member.session })
    const revoked = await rotate(member, mine.id)
    expect(revoked.status).toBe(409)
    expect(revoked.body.error).toBe('token_revoked')
    const [foreign] =
      await t.sql`select id from api_tokens where enterprise_id = ${t.other.id} limit 1`
    expect((await rotate(owner, foreign!.id)).body.error).toBe('token_not_found')
  })
})
