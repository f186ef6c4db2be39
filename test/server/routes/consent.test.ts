import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  AppConnection,
  ConsentPoll,
  ConsentRequestCreated,
  ConsentRequestView,
} from '../../../shared/schemas/consent.js'
import { MyEnterprise, User } from '../../../shared/schemas/people.js'
import { allScopes } from '../../../shared/scopes.js'
import { consentLimits } from '../../../server/domain/people/index.js'
import { anotherProcess, createTestApp, type TestApp } from '../../helpers/app.js'
import { cookieHeaders, signIn, type TestPerson } from '../../helpers/people.js'
import { eventually } from '../../helpers/wait.js'

let t: TestApp
let owner: TestPerson
let member: TestPerson
beforeAll(async () => {
  t = await createTestApp()
  owner = await signIn(t, 'owner')
  member = await signIn(t, 'member')
})

/** The app's side: asks for access, without any credential. */
async function ask(appName = 'Ledger Sync', scopes: string[] = ['tasks:read', 'runs:read']) {
  const res = await t.call('POST', '/v1/consent/requests', {
    token: null,
    body: { appName, scopes },
  })
  expect(res.status, res.text).toBe(201)
  expect(res.headers.get('cache-control')).toBe('no-store')
  return ConsentRequestCreated.parse(res.body)
}

const poll = (id: string, pollToken: string | null) =>
  t.call('GET', `/v1/consent/requests/${id}`, {
    token: null,
    headers: pollToken === null ? {} : { 'x-osd-poll-token': pollToken },
  })

const approve = (person: TestPerson, userCode: string, enterpriseId: string) =>
  t.call('POST', '/v1/consent/approve', {
    token: person.session,
    body: { userCode, enterpriseId },
  })

describe('the consent flow', () => {
  it('app asks, an owner approves, the app collects its token once, uses it, and loses it on revoke', async () => {
    const asked = await ask('Ledger Sync', ['tasks:read', 'runs:read', 'tasks:read'])
    expect(asked.userCode).toMatch(/^[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}$/)
    expect(asked.pollToken).toMatch(/^osdp_/)
    const minutes = (Date.parse(asked.expiresAt) - Date.now()) / 60_000
    expect(minutes).toBeGreaterThan(14)
    expect(minutes).toBeLessThanOrEqual(15)

    const pending = await poll(asked.id, asked.pollToken)
    expect(pending.status).toBe(200)
    expect(ConsentPoll.parse(pending.body)).toEqual({
      status: 'pending',
      expiresAt: asked.expiresAt,
    })

    // The owner reads what the app asks for, by the code typed loosely, then approves it.
    const typed = asked.userCode.toLowerCase().replace('-', ' ')
    const seen = await t.call('GET', `/v1/consent/requests?userCode=${encodeURIComponent(typed)}`, {
      token: owner.session,
    })
    expect(seen.status).toBe(200)
    expect(ConsentRequestView.parse(seen.body)).toEqual({
      appName: 'Ledger Sync',
      scopes: ['tasks:read', 'runs:read'],
      status: 'pending',
      expiresAt: asked.expiresAt,
    })

    const approved = await approve(owner, typed, t.acme.id)
    expect(approved.status, approved.text).toBe(201)
    const connection = AppConnection.parse(approved.body)
    expect(connection).toMatchObject({
      appName: 'Ledger Sync',
      scopes: ['tasks:read', 'runs:read'],
      approvedBy: { userId: owner.id, email: owner.email },
      lastUsedAt: null,
      revokedAt: null,
    })
    const again = await approve(owner, asked.userCode, t.acme.id)
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('consent_request_decided')

    // The first poll after approval answers the token; later ones only the status.
    const first = ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)
    expect(first.status).toBe('approved')
    expect(first.token).toMatch(/^osd_/)
    const second = await poll(asked.id, asked.pollToken)
    expect(ConsentPoll.parse(second.body)).toEqual({
      status: 'approved',
      expiresAt: asked.expiresAt,
    })
    const token = first.token!
    const [stored] = await t.sql`
      select enterprise_id, scopes, created_by_user, app_connection_id from api_tokens
       where app_connection_id = ${connection.id}`
    expect(stored).toEqual({
      enterpriseId: t.acme.id,
      scopes: ['tasks:read', 'runs:read'],
      createdByUser: owner.id,
      appConnectionId: connection.id,
    })
    const dump = JSON.stringify(
      await t.sql`select (select json_agg(r) from consent_requests r)::text as r,
                         (select json_agg(a) from api_tokens a)::text as a`,
    )
    expect(dump).not.toContain(token)
    expect(dump).not.toContain(asked.pollToken)

    // The token acts in acme within its scopes, and nowhere else.
    expect((await t.call('GET', '/v1/tasks', { token })).status).toBe(200)
    const write = await t.call('POST', '/v1/teams', { token, body: { name: 'By App' } })
    expect(write.status).toBe(403)
    expect(write.body.error).toBe('api_token_scope')
    const own = await t.call('GET', '/v1/enterprise/connections', { token })
    expect(own.status).toBe(403)

    const connections = async () => {
      const list = await t.call('GET', '/v1/enterprise/connections', { token: member.session })
      expect(list.status).toBe(200)
      return AppConnection.array()
        .parse(list.body)
        .find((x) => x.id === connection.id)!
    }
    // A token's use is written a moment after its answer, off the request's path (issue 45).
    await eventually(async () => (await connections()).lastUsedAt !== null, 5000, 'lastUsedAt')
    const listed = await connections()
    expect(listed.revokedAt).toBeNull()
    const foreign = await t.call('GET', '/v1/enterprise/connections', {
      token: (await signIn(t, 'owner', t.other)).session,
    })
    expect(
      AppConnection.array()
        .parse(foreign.body)
        .map((x) => x.id),
    ).not.toContain(connection.id)

    // A member may not revoke; an owner may, by cookie with its CSRF header only.
    const byMember = await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, {
      token: member.session,
    })
    expect(byMember.status).toBe(403)
    expect(byMember.body.error).toBe('owner_only')
    const forged = await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, {
      token: null,
      headers: cookieHeaders(owner, false),
    })
    expect(forged.status).toBe(403)
    expect(forged.body.error).toBe('csrf_required')
    expect((await t.call('GET', '/v1/tasks', { token })).status).toBe(200)

    const revoked = await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, {
      token: null,
      headers: cookieHeaders(owner),
    })
    expect(revoked.status).toBe(200)
    expect(AppConnection.parse(revoked.body).revokedAt).not.toBeNull()
    // Refused at once where it was revoked (the route's summary), not once the NOTIFY comes back: on a
    // loaded machine osctl's next call came first (test/cli/people-daemon.test.ts).
    expect((await t.call('GET', '/v1/tasks', { token })).status).toBe(401)
    const [row] =
      await t.sql`select revoked_at from api_tokens where app_connection_id = ${connection.id}`
    expect(row!.revokedAt).toBeInstanceOf(Date)
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body).status).toBe('revoked')

    const after = await t.call('GET', '/v1/enterprise/connections', { token: owner.session })
    expect(
      AppConnection.array()
        .parse(after.body)
        .map((x) => x.id),
    ).not.toContain(connection.id)
    const all = await t.call('GET', '/v1/enterprise/connections?includeRevoked=true', {
      token: owner.session,
    })
    expect(
      AppConnection.array()
        .parse(all.body)
        .map((x) => x.id),
    ).toContain(connection.id)
  })

  it("names the app's token after the app, cut to 200 characters between characters, never inside an emoji", async () => {
    // "app: " and 194 characters, then emoji: the 200th character is the first half of one.
    const appName = 'x'.repeat(194) + '\u{1F600}'.repeat(3)
    const asked = await ask(appName, ['tasks:read'])
    expect((await approve(owner, asked.userCode, t.acme.id)).status).toBe(201)
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body).status).toBe('approved')
    const [stored] = await t.sql<{ name: string }[]>`
      select t.name from api_tokens t join consent_requests r on r.connection_id = t.app_connection_id
       where r.id = ${asked.id}`
    expect(stored!.name).toBe(`app: ${'x'.repeat(194)}…`)
  })

  it('hides a request from a poll without its poll token: 404 as for an unknown id', async () => {
    const asked = await ask()
    for (const pollToken of [null, 'osdp_wrong', (await ask()).pollToken]) {
      const res = await poll(asked.id, pollToken)
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('consent_request_not_found')
    }
    const unknown = await poll('00000000-0000-4000-8000-000000000000', asked.pollToken)
    expect(unknown.status).toBe(404)
    expect(unknown.body.error).toBe('consent_request_not_found')
  })

  it('refuses scopes outside the spec and app names out of bounds: 400, nothing stored', async () => {
    const before = await t.sql`select count(*)::int as n from consent_requests`
    for (const body of [
      { appName: 'App', scopes: ['tasks:admin'] },
      { appName: 'App', scopes: ['users:read'] },
      { appName: 'App', scopes: [] },
      { appName: '', scopes: ['tasks:read'] },
      { appName: '   ', scopes: ['tasks:read'] },
      { appName: 'x'.repeat(201), scopes: ['tasks:read'] },
      { scopes: ['tasks:read'] },
    ]) {
      const res = await t.call('POST', '/v1/consent/requests', { token: null, body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
    expect(await t.sql`select count(*)::int as n from consent_requests`).toEqual(before)
  })

  it('a decline ends the request: the app hears declined, and it can be approved no more', async () => {
    const asked = await ask('Nosy App')
    const declined = await t.call('POST', '/v1/consent/decline', {
      token: null,
      headers: cookieHeaders(member),
      body: { userCode: asked.userCode },
    })
    expect(declined.status).toBe(200)
    expect(ConsentRequestView.parse(declined.body).status).toBe('declined')
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)).toEqual({
      status: 'declined',
      expiresAt: asked.expiresAt,
    })
    const late = await approve(owner, asked.userCode, t.acme.id)
    expect(late.status).toBe(409)
    expect(late.body.error).toBe('consent_request_decided')
    const twice = await t.call('POST', '/v1/consent/decline', {
      token: member.session,
      body: { userCode: asked.userCode },
    })
    expect(twice.status).toBe(409)
    expect(await t.sql`select 1 from app_connections where app_name = 'Nosy App'`).toHaveLength(0)
  })

  it('an expired request can be neither approved nor declined, and polls as expired', async () => {
    const asked = await ask('Slow App')
    await t.sql`update consent_requests set expires_at = now() - interval '1 second' where id = ${asked.id}`
    const late = await approve(owner, asked.userCode, t.acme.id)
    expect(late.status).toBe(404)
    expect(late.body.error).toBe('consent_request_not_found')
    const decline = await t.call('POST', '/v1/consent/decline', {
      token: owner.session,
      body: { userCode: asked.userCode },
    })
    expect(decline.status).toBe(404)
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body).status).toBe('expired')
    for (const code of ['NOPE-NOPE', 'ABCD', '']) {
      const unknown = await approve(owner, code, t.acme.id)
      expect(unknown.status, code).toBe(code === '' ? 400 : 404)
    }
  })

  it('only an owner approves, and only into an enterprise of theirs', async () => {
    const asked = await ask('Wanting App')
    const byMember = await approve(member, asked.userCode, t.acme.id)
    expect(byMember.status).toBe(403)
    expect(byMember.body.error).toBe('owner_only')

    // An owner of another enterprise cannot approve into acme, by id or slug.
    const outsider = await signIn(t, 'owner', t.other)
    for (const enterpriseId of [t.acme.id, t.acme.slug]) {
      const res = await approve(outsider, asked.userCode, enterpriseId)
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('enterprise_not_found')
    }
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body).status).toBe('pending')
    expect(await t.sql`select 1 from app_connections where app_name = 'Wanting App'`).toHaveLength(
      0,
    )

    // Into their own it works, by slug; the token then acts in that enterprise.
    const own = await approve(outsider, asked.userCode, t.other.slug)
    expect(own.status).toBe(201)
    const { token } = ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)
    expect((await t.call('GET', '/v1/tasks', { token })).status).toBe(200)
    const [row] =
      await t.sql`select enterprise_id from api_tokens where app_connection_id = ${own.body.id}`
    expect(row!.enterpriseId).toBe(t.other.id)
  })

  it('answers a member whom to ask, and an owner where they may approve', async () => {
    const two = await signIn(t, 'owner')
    const owners = await t.call('GET', `/v1/consent/members?enterpriseId=${t.acme.id}`, {
      token: member.session,
    })
    expect(owners.status).toBe(200)
    const ids = User.array()
      .parse(owners.body)
      .map((u) => u.id)
    expect(ids).toEqual(expect.arrayContaining([owner.id, two.id]))
    expect(ids).not.toContain(member.id)
    for (const enterpriseId of [t.other.id, t.other.slug, 'nope']) {
      const foreign = await t.call('GET', `/v1/consent/members?enterpriseId=${enterpriseId}`, {
        token: member.session,
      })
      expect(foreign.status).toBe(404)
      expect(foreign.body.error).toBe('enterprise_not_found')
    }

    const mine = await t.call('GET', '/v1/consent/enterprises', { token: owner.session })
    expect(
      MyEnterprise.array()
        .parse(mine.body)
        .map((e) => e.id),
    ).toEqual([t.acme.id])
    const none = await t.call('GET', '/v1/consent/enterprises', { token: member.session })
    expect(none.body).toEqual([])
  })

  it('lets a person of no enterprise yet see and decline a request, not approve one', async () => {
    const loner = await signIn(t, 'member', null)
    const asked = await ask('Lonely App')
    const seen = await t.call('GET', `/v1/consent/requests?userCode=${asked.userCode}`, {
      token: loner.session,
    })
    expect(seen.status).toBe(200)
    const approved = await approve(loner, asked.userCode, t.acme.id)
    expect(approved.status).toBe(404)
    const declined = await t.call('POST', '/v1/consent/decline', {
      token: loner.session,
      body: { userCode: asked.userCode },
    })
    expect(declined.status).toBe(200)
  })

  it('caps the requests waiting at once, so the public route cannot fill the database', async () => {
    await t.sql`delete from consent_requests where status = 'pending'`
    await t.sql`
      insert into consent_requests (app_name, scopes, user_code, poll_hash, expires_at)
      select 'Flood', '{tasks:read}', 'F' || lpad(i::text, 7, '0'), '\\x00', now() + interval '10 minutes'
        from generate_series(1, ${consentLimits.pending}) i`
    const full = await t.call('POST', '/v1/consent/requests', {
      token: null,
      body: { appName: 'One Too Many', scopes: ['tasks:read'] },
    })
    expect(full.status).toBe(429)
    expect(full.body.error).toBe('too_many_consent_requests')
    expect(Number(full.headers.get('retry-after'))).toBeGreaterThan(500)
    // Expired ones no longer count.
    await t.sql`update consent_requests set expires_at = now() - interval '1 second' where app_name = 'Flood'`
    await ask('One More')
  })
})

describe('who may call the consent and connection routes', () => {
  it('answers 401 without credentials, except the app’s two routes', async () => {
    for (const [method, path] of [
      ['GET', '/v1/consent/enterprises'],
      ['GET', `/v1/consent/members?enterpriseId=${t.acme.id}`],
      ['GET', '/v1/consent/requests?userCode=ABCD-EFGH'],
      ['POST', '/v1/consent/approve'],
      ['POST', '/v1/consent/decline'],
      ['GET', '/v1/enterprise/connections'],
      ['DELETE', '/v1/enterprise/connections/00000000-0000-4000-8000-000000000000'],
    ] as const) {
      const res = await t.call(method, path, { token: null, body: {} })
      expect(res.status, `${method} ${path}`).toBe(401)
    }
  })

  it('refuses a token holding every scope, even one of a connected app', async () => {
    const token = await t.tokenWith(allScopes)
    for (const [method, path, code] of [
      ['GET', '/v1/consent/enterprises', 'api_token_scope'],
      ['GET', `/v1/consent/members?enterpriseId=${t.acme.id}`, 'api_token_scope'],
      ['GET', '/v1/consent/requests?userCode=ABCD-EFGH', 'api_token_scope'],
      ['POST', '/v1/consent/approve', 'api_token_scope'],
      ['POST', '/v1/consent/decline', 'api_token_scope'],
      ['GET', '/v1/enterprise/connections', 'api_token_cannot_manage_connections'],
      [
        'DELETE',
        '/v1/enterprise/connections/00000000-0000-4000-8000-000000000000',
        'api_token_cannot_manage_connections',
      ],
    ] as const) {
      const res = await t.call(method, path, {
        token,
        body: { userCode: 'ABCD-EFGH', enterpriseId: t.acme.id },
      })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe(code)
    }
  })

  it('refuses a change by cookie without the CSRF header', async () => {
    const asked = await ask('Cookie App')
    for (const [path, body] of [
      ['/v1/consent/approve', { userCode: asked.userCode, enterpriseId: t.acme.id }],
      ['/v1/consent/decline', { userCode: asked.userCode }],
    ] as const) {
      const res = await t.call('POST', path, {
        token: null,
        headers: cookieHeaders(owner, false),
        body,
      })
      expect(res.status).toBe(403)
      expect(res.body.error).toBe('csrf_required')
    }
    expect(ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body).status).toBe('pending')
    const byCookie = await t.call('POST', '/v1/consent/approve', {
      token: null,
      headers: cookieHeaders(owner),
      body: { userCode: asked.userCode, enterpriseId: t.acme.slug },
    })
    expect(byCookie.status).toBe(201)
  })

  it('answers a foreign or unknown connection 404 app_connection_not_found', async () => {
    const asked = await ask('Foreign App')
    const outsider = await signIn(t, 'owner', t.other)
    const { body } = await approve(outsider, asked.userCode, t.other.id)
    for (const id of [body.id, '00000000-0000-4000-8000-000000000000', 'x']) {
      const res = await t.call('DELETE', `/v1/enterprise/connections/${id}`, {
        token: owner.session,
      })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('app_connection_not_found')
    }
    const [row] = await t.sql`select revoked_at from app_connections where id = ${body.id}`
    expect(row!.revokedAt).toBeNull()
  })
})

describe('revoking a connection, seen by another osd process at once', () => {
  let other: ReturnType<typeof anotherProcess>
  beforeAll(() => {
    other = anotherProcess(t)
  })
  afterAll(() => other.close())

  it('the app’s token is refused there as soon as the revocation commits', async () => {
    const asked = await ask('Two Process App')
    const { body: connection } = await approve(owner, asked.userCode, t.acme.id)
    const { token } = ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)
    expect(await other.status(token!)).toBe(200) // now in the other process's cache
    const res = await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, {
      token: owner.session,
    })
    expect(res.status).toBe(200)
    await eventually(async () => (await other.status(token!)) === 401, 2000)
  })

  it('the app’s token is refused at once where the revocation was made, before its NOTIFY comes back', async () => {
    // Each time: the token's caller in this process's cache, then the revocation and the next call. A
    // NOTIFY that came back first hid it, so several in turn (five: the file asks 19 of the 20 times an
    // address may in 15 minutes).
    for (let i = 0; i < 5; i++) {
      const asked = await ask(`Same Process App ${i}`)
      const { body: connection } = await approve(owner, asked.userCode, t.acme.id)
      const { token } = ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)
      expect((await t.call('GET', '/v1/tasks', { token })).status).toBe(200)
      const res = await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, {
        token: owner.session,
      })
      expect(res.status).toBe(200)
      expect((await t.call('GET', '/v1/tasks', { token })).status, `connection ${i}`).toBe(401)
    }
  })

  it('a connection revoked before its app collected the token hands out none', async () => {
    const asked = await ask('Too Late App')
    const { body: connection } = await approve(owner, asked.userCode, t.acme.id)
    await t.call('DELETE', `/v1/enterprise/connections/${connection.id}`, { token: owner.session })
    const polled = ConsentPoll.parse((await poll(asked.id, asked.pollToken)).body)
    expect(polled).toEqual({ status: 'revoked', expiresAt: asked.expiresAt })
    expect(
      await t.sql`select 1 from api_tokens where app_connection_id = ${connection.id}`,
    ).toHaveLength(0)
  })

  it('two polls at once collect one token between them', async () => {
    const asked = await ask('Racing App')
    const { body: connection } = await approve(owner, asked.userCode, t.acme.id)
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => poll(asked.id, asked.pollToken)),
    )
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200))
    expect(answers.filter((a) => a.body.token)).toHaveLength(1)
    expect(
      await t.sql`select 1 from api_tokens where app_connection_id = ${connection.id}`,
    ).toHaveLength(1)
  })
})
