import pino from 'pino'
import { beforeAll, describe, expect, it } from 'vitest'
import { LoginAnswer } from '../../../shared/schemas/people.js'
import { ApiToken, ApiTokenCreated } from '../../../shared/schemas/tokens.js'
import {
  InviteCreated,
  PendingInvite,
  Person,
  PersonRemoved,
} from '../../../shared/schemas/users.js'
import { createToken, createUser, setMembership } from '../../../server/domain/people/index.js'
import { createApp } from '../../../server/http/app.js'
import {
  anotherProcess,
  createTestApp,
  type TestApp,
  type TestEnterprise,
} from '../../helpers/app.js'
import {
  cheapPasswordHashesInFile,
  cookieHeaders,
  signIn,
  type TestPerson,
} from '../../helpers/people.js'
import { eventually } from '../../helpers/wait.js'

// The people of an enterprise (spec: Portal-only routes, /v1/users owners only; issue 20): listed,
// invited and removed by an owner; invites accepted by the invited person.

// Invites accepted with new passwords, lock-outs: dozens of hashes, which at OWASP's cost took up to
// 30 s a test on a loaded machine (issue 45). The cost itself is test/server/routes/auth.test.ts's.
cheapPasswordHashesInFile()

let t: TestApp
let owner: TestPerson
let member: TestPerson
beforeAll(async () => {
  t = await createTestApp()
  owner = await signIn(t, 'owner')
  member = await signIn(t, 'member')
})

const someId = '00000000-0000-4000-8000-000000000000'
const password = 'a new password of mine'

const invite = (by: TestPerson, body: unknown) =>
  t.call('POST', '/v1/users', { token: by.session, body })

async function invited(by: TestPerson, email: string, role?: 'owner' | 'member') {
  const res = await invite(by, { email, role })
  expect(res.status, res.text).toBe(201)
  return InviteCreated.parse(res.body)
}

const accept = (body: unknown) => t.call('POST', '/v1/auth/invites/accept', { token: null, body })

async function people(by: TestPerson) {
  const res = await t.call('GET', '/v1/users', { token: by.session })
  expect(res.status, res.text).toBe(200)
  return Person.array().parse(res.body)
}

const fresh = (what: string) => `${what}-${Math.random().toString(36).slice(2, 8)}@example.com`

describe('refusals', () => {
  const routes = [
    ['GET', '/v1/users'],
    ['POST', '/v1/users'],
    ['GET', '/v1/users/invites'],
    ['DELETE', `/v1/users/invites/${someId}`],
    ['DELETE', `/v1/users/${someId}`],
    ['PATCH', `/v1/users/${someId}`],
  ] as const
  const body = { email: 'someone@example.com', role: 'owner' }

  it('answer no credential 401, a token with every scope 403 api_token_scope', async () => {
    for (const [method, path] of routes) {
      const none = await t.call(method, path, { token: null, body })
      expect(none.status, `${method} ${path}`).toBe(401)
      const token = await t.call(method, path, { body })
      expect(token.status, `${method} ${path}`).toBe(403)
      expect(token.body.error).toBe('api_token_scope')
    }
    expect(await t.sql`select 1 from invites`).toHaveLength(0)
  })

  it('answer a member’s session 403 owner_only', async () => {
    for (const [method, path] of routes) {
      const res = await t.call(method, path, { token: member.session, body })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe('owner_only')
    }
    expect(await t.sql`select 1 from invites`).toHaveLength(0)
  })

  it('refuse an owner’s change by cookie without the CSRF header', async () => {
    for (const [method, path] of routes.filter(([m]) => m !== 'GET')) {
      const res = await t.call(method, path, {
        token: null,
        body,
        headers: cookieHeaders(owner, false),
      })
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.body.error).toBe('csrf_required')
    }
    const ok = await t.call('GET', '/v1/users', {
      token: null,
      headers: cookieHeaders(owner, false),
    })
    expect(ok.status).toBe(200)
  })
})

describe('GET /v1/users', () => {
  it('lists the enterprise’s people with their roles, and only theirs', async () => {
    const e = await t.createEnterprise('People Corp')
    const boss = await signIn(t, 'owner', e)
    const helper = await signIn(t, 'member', e)
    const listed = await people(boss)
    expect(listed.map((p) => [p.id, p.email, p.role])).toEqual([
      [boss.id, boss.email, 'owner'],
      [helper.id, helper.email, 'member'],
    ])
    expect(listed[0]!.name).toBe('A owner')
    expect(JSON.stringify(listed)).not.toMatch(/password|scrypt/)
    const acme = (await people(owner)).map((p) => p.id)
    expect(acme).toContain(member.id)
    expect(acme).not.toContain(boss.id)
  })
})

describe('invites', () => {
  it('bring a new person in: the token once, stored hashed, accepted once, signed in', async () => {
    const email = fresh('new')
    const res = await invite(owner, { email })
    expect(res.status).toBe(201)
    expect(res.headers.get('cache-control')).toBe('no-store')
    const made = InviteCreated.parse(res.body)
    expect(made.invite).toMatchObject({ email, role: 'member' })
    const days = (Date.parse(made.invite.expiresAt) - Date.now()) / 86_400_000
    expect(days).toBeGreaterThan(6.99)
    expect(days).toBeLessThanOrEqual(7)
    const [row] =
      await t.sql`select row_to_json(i)::text as row from invites i where id = ${made.invite.id}`
    expect(row!.row).not.toContain(made.inviteToken)

    const pending = await t.call('GET', '/v1/users/invites', { token: owner.session })
    const listed = PendingInvite.array().parse(pending.body)
    expect(listed.find((i) => i.id === made.invite.id)).toMatchObject({
      email,
      role: 'member',
      invitedBy: { userId: owner.id, email: owner.email },
    })
    expect(pending.text).not.toContain(made.inviteToken)

    const accepted = await accept({ inviteToken: made.inviteToken, password, name: 'Newton' })
    expect(accepted.status, accepted.text).toBe(200)
    const answer = LoginAnswer.parse(accepted.body)
    expect(answer.user).toMatchObject({ email, name: 'Newton' })
    expect(answer.enterprise).toMatchObject({ id: t.acme.id, role: 'member' })
    expect(accepted.headers.get('set-cookie')).toContain(`osd_session=${answer.sessionToken}`)
    expect(accepted.headers.get('set-cookie')).toMatch(
      /HttpOnly.*SameSite=Strict|SameSite=Strict.*HttpOnly/,
    )
    expect(accepted.headers.get('cache-control')).toBe('no-store')
    expect((await t.call('GET', '/v1/tasks', { token: answer.sessionToken })).status).toBe(200)
    expect((await people(owner)).find((p) => p.email === email)?.role).toBe('member')
    const [user] = await t.sql`select password_hash from users where id = ${answer.user.id}`
    expect(user!.passwordHash).toMatch(/^scrypt\$/)
    // And the password signs in.
    const login = await t.call('POST', '/v1/auth/login', { token: null, body: { email, password } })
    expect(login.status).toBe(200)

    const again = await accept({ inviteToken: made.inviteToken, password })
    expect(again.status).toBe(404)
    expect(again.body.error).toBe('invite_not_found')
    const after = PendingInvite.array().parse(
      (await t.call('GET', '/v1/users/invites', { token: owner.session })).body,
    )
    expect(after.map((i) => i.id)).not.toContain(made.invite.id)
  })

  it('make an owner when asked', async () => {
    const made = await invited(owner, fresh('boss'), 'owner')
    expect(made.invite.role).toBe('owner')
    const answer = LoginAnswer.parse(
      (await accept({ inviteToken: made.inviteToken, password })).body,
    )
    expect(answer.enterprise?.role).toBe('owner')
    expect((await t.call('GET', '/v1/users', { token: answer.sessionToken })).status).toBe(200)
  })

  it('bring in a person who exists with their own password only, counted by the login lockout', async () => {
    const e = await t.createEnterprise('Elsewhere Corp')
    const existing = await signIn(t, 'member', e)
    const made = await invited(owner, existing.email.toUpperCase())

    const wrong = await accept({ inviteToken: made.inviteToken, password: 'not their password' })
    expect(wrong.status).toBe(401)
    expect(wrong.body.error).toBe('invalid_credentials')
    expect((await people(owner)).map((p) => p.id)).not.toContain(existing.id)

    const accepted = await accept({
      inviteToken: made.inviteToken,
      password: existing.password,
      name: 'X',
    })
    expect(accepted.status, accepted.text).toBe(200)
    const answer = LoginAnswer.parse(accepted.body)
    expect(answer.user).toEqual({ id: existing.id, email: existing.email, name: 'A member' })
    expect(answer.enterprise).toMatchObject({ id: t.acme.id, role: 'member' })
    // Still of the other enterprise, password unchanged.
    const login = await t.call('POST', '/v1/auth/login', {
      token: null,
      body: { email: existing.email, password: existing.password, enterprise: e.slug },
    })
    expect(login.status).toBe(200)

    // Five wrong passwords on invites hold the email back from this address for sign-in too.
    const locked = await signIn(t, 'member', e)
    const next = await invited(owner, locked.email)
    for (let i = 0; i < 5; i++) {
      const res = await accept({ inviteToken: next.inviteToken, password: `guess number ${i}` })
      expect(res.status).toBe(401)
    }
    // Counted from before each check: made recent, as the hashes took their time.
    await t.sql`update login_failures set at = now()`
    const last = await accept({ inviteToken: next.inviteToken, password: locked.password })
    expect(last.status).toBe(429)
    expect(last.body.error).toBe('login_locked')
    await t.sql`update login_failures set at = now()`
    const login2 = await t.call('POST', '/v1/auth/login', {
      token: null,
      body: { email: locked.email, password: locked.password },
    })
    expect(login2.status).toBe(429)
  })

  it('refuse an email of a person already in the enterprise, and a bad one', async () => {
    const res = await invite(owner, { email: `  ${member.email.toUpperCase()} ` })
    expect(res.status).toBe(409)
    expect(res.body.error).toBe('already_member')
    for (const body of [{ email: 'no-at-sign' }, {}, { email: fresh('x'), role: 'admin' }]) {
      const bad = await invite(owner, body)
      expect(bad.status, JSON.stringify(body)).toBe(400)
      expect(bad.body.error).toBe('invalid_request')
    }
  })

  it('answer the same 404 when unknown, expired, withdrawn, replaced or of an owner removed', async () => {
    const expired = await invited(owner, fresh('late'))
    await t.sql`update invites set expires_at = now() - interval '1 second' where id = ${expired.invite.id}`

    const withdrawn = await invited(owner, fresh('withdrawn'))
    const gone = await t.call('DELETE', `/v1/users/invites/${withdrawn.invite.id}`, {
      token: owner.session,
    })
    expect(gone.status).toBe(204)
    const twice = await t.call('DELETE', `/v1/users/invites/${withdrawn.invite.id}`, {
      token: owner.session,
    })
    expect(twice.status).toBe(404)
    expect(twice.body.error).toBe('invite_not_found')

    const email = fresh('twice')
    const replaced = await invited(owner, email)
    const replacing = await invited(owner, email)

    const e = await t.createEnterprise('Rogue Corp')
    const keeper = await signIn(t, 'owner', e)
    const rogue = await signIn(t, 'owner', e)
    const fromRogue = await invited(rogue, fresh('friend'), 'owner')
    const removed = await t.call('DELETE', `/v1/users/${rogue.id}`, { token: keeper.session })
    expect(removed.status).toBe(200)

    for (const inviteToken of [
      'osdi_unknown',
      expired.inviteToken,
      withdrawn.inviteToken,
      replaced.inviteToken,
      fromRogue.inviteToken,
    ]) {
      const res = await accept({ inviteToken, password })
      expect(res.status, inviteToken).toBe(404)
      expect(res.body).toEqual({
        error: 'invite_not_found',
        message:
          'No such invite: it may have been used, withdrawn or have expired; ask for a new one.',
      })
    }
    expect((await accept({ inviteToken: replacing.inviteToken, password })).status).toBe(200)
    expect(await t.sql`select 1 from users where lower(email) like 'friend-%'`).toHaveLength(0)
  })

  it('leave the invite pending when a new person’s password is refused', async () => {
    const made = await invited(owner, fresh('short'))
    const short = await accept({ inviteToken: made.inviteToken, password: 'short' })
    expect(short.status).toBe(400)
    expect(short.body.error).toBe('invalid_request')
    expect((await accept({ inviteToken: made.inviteToken, password })).status).toBe(200)
  })

  it('are used once when accepted twice at once', async () => {
    const made = await invited(owner, fresh('race'))
    const answers = await Promise.all(
      [1, 2, 3].map(() => accept({ inviteToken: made.inviteToken, password })),
    )
    expect(answers.map((a) => a.status).sort()).toEqual([200, 404, 404])
    expect(await t.sql`select 1 from users where email = ${made.invite.email}`).toHaveLength(1)
  })

  it('of another enterprise cannot be withdrawn', async () => {
    const e = await t.createEnterprise('Foreign Invites')
    const boss = await signIn(t, 'owner', e)
    const theirs = await invited(boss, fresh('theirs'))
    for (const id of [theirs.invite.id, 'nope']) {
      const res = await t.call('DELETE', `/v1/users/invites/${id}`, { token: owner.session })
      expect(res.status).toBe(404)
      expect(res.body.error).toBe('invite_not_found')
    }
    const listed = PendingInvite.array().parse(
      (await t.call('GET', '/v1/users/invites', { token: owner.session })).body,
    )
    expect(listed.map((i) => i.id)).not.toContain(theirs.invite.id)
    expect((await accept({ inviteToken: theirs.inviteToken, password })).status).toBe(200)
  })
})

describe('DELETE /v1/users/{id}', () => {
  async function enterpriseWithOwner(name: string): Promise<[TestEnterprise, TestPerson]> {
    const e = await t.createEnterprise(name)
    return [e, await signIn(t, 'owner', e)]
  }

  it('takes a person out: their sessions there end at once', async () => {
    const [e, boss] = await enterpriseWithOwner('Removal Corp')
    const leaving = await signIn(t, 'member', e)
    expect((await t.call('GET', '/v1/tasks', { token: leaving.session })).status).toBe(200)
    const res = await t.call('DELETE', `/v1/users/${leaving.id}`, {
      token: null,
      headers: cookieHeaders(boss),
    })
    expect(res.status).toBe(200)
    expect(PersonRemoved.parse(res.body)).toEqual({
      removed: {
        id: leaving.id,
        email: leaving.email,
        name: 'A member',
        role: 'member',
        joinedAt: expect.any(String),
      },
      revokedTokens: 0,
    })
    expect((await t.call('GET', '/v1/tasks', { token: leaving.session })).status).toBe(401)
    expect((await people(boss)).map((p) => p.id)).toEqual([boss.id])
    const again = await t.call('DELETE', `/v1/users/${leaving.id}`, { token: boss.session })
    expect(again.status).toBe(404)
    expect(again.body.error).toBe('user_not_found')
    // The person remains, and may be invited back.
    expect(await t.sql`select 1 from users where id = ${leaving.id}`).toHaveLength(1)
  })

  it('revokes the API tokens the person made there and says how many: a removed member’s token acts no more (issue 45)', async () => {
    const [e, boss] = await enterpriseWithOwner('Departure Corp')
    const leaving = await signIn(t, 'member', e)
    const made = async (name: string) => {
      const res = await t.call('POST', '/v1/enterprise/api-tokens', {
        token: leaving.session,
        body: { name, scopes: ['enterprise:read', 'enterprise:write', 'tasks:read'] },
      })
      expect(res.status, res.text).toBe(201)
      return ApiTokenCreated.parse(res.body)
    }
    const deploy = await made('deploy')
    const spare = await made('spare')
    // Theirs in another enterprise, the enterprise's own from the server host, and an owner's stay.
    await setMembership(t.sql, t.other.id, leaving.id, 'member')
    const elsewhere = await createToken(t.sql, t.other.id, {
      name: 'elsewhere',
      scopes: ['tasks:read'],
      createdBy: leaving.id,
    })
    const bosses = await t.call('POST', '/v1/enterprise/api-tokens', {
      token: boss.session,
      body: { name: 'boss', scopes: ['tasks:read'] },
    })
    const rotate = (token: string) =>
      t.call('POST', '/v1/enterprise/webhook-secret/rotate', { token })

    // The example: the member's token rotates the webhook secret, in two processes.
    const other = anotherProcess(t)
    try {
      expect((await rotate(deploy.token)).status).toBe(200)
      expect(await other.status(deploy.token)).toBe(200) // cached there now

      const res = await t.call('DELETE', `/v1/users/${leaving.id}`, { token: boss.session })
      expect(res.status, res.text).toBe(200)
      const removal = PersonRemoved.parse(res.body)
      expect(removal.revokedTokens).toBe(2)
      expect(removal.removed.id).toBe(leaving.id)

      const refused = await rotate(deploy.token)
      expect(refused.status).toBe(401)
      expect(refused.body).toEqual({
        message: 'Unauthorized',
        error: 'Unauthorized',
        statusCode: 401,
      })
      expect((await t.call('GET', '/v1/tasks', { token: spare.token })).status).toBe(401)
      await eventually(
        async () => (await other.status(deploy.token)) === 401,
        3000,
        'the other process to refuse the removed member’s token',
      )
    } finally {
      await other.close()
    }
    expect((await t.call('GET', '/v1/tasks', { token: e.token })).status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: elsewhere.token })).status).toBe(200)
    expect((await t.call('GET', '/v1/tasks', { token: bosses.body.token })).status).toBe(200)

    const listed = await t.call('GET', '/v1/enterprise/api-tokens?includeRevoked=true', {
      token: boss.session,
    })
    const tokens = ApiToken.array().parse(listed.body)
    for (const id of [deploy.id, spare.id])
      expect(tokens.find((x) => x.id === id)).toMatchObject({
        revokedReason: 'creator_removed',
        revokedAt: expect.any(String),
      })
    expect(tokens.find((x) => x.id === bosses.body.id)!.revokedAt).toBeNull()
  })

  it('makes no token for a person removed while their request was on its way', async () => {
    // Their session let the request in; the removal commits before it makes the token. The token must
    // not be made: revokeTokensOfMaker has run already, and nothing would revoke it afterwards.
    const leaving = await signIn(t, 'member')
    const removed = await t.call('DELETE', `/v1/users/${leaving.id}`, { token: owner.session })
    expect(removed.status).toBe(200)
    await expect(
      createToken(t.sql, t.acme.id, {
        name: 'late',
        scopes: ['tasks:read'],
        createdBy: leaving.id,
      }),
    ).rejects.toMatchObject({ code: 'enterprise_not_chosen' })
    const [live] = await t.sql<{ count: number }[]>`
      select count(*)::int as count from api_tokens
       where created_by_user = ${leaving.id} and revoked_at is null`
    expect(live!.count).toBe(0)
  })

  it('keeps the last owner; a second owner may go', async () => {
    const [, boss] = await enterpriseWithOwner('Last Owner Corp')
    const self = await t.call('DELETE', `/v1/users/${boss.id}`, { token: boss.session })
    expect(self.status).toBe(409)
    expect(self.body.error).toBe('last_owner')
    const made = await invited(boss, fresh('second'), 'owner')
    const second = LoginAnswer.parse(
      (await accept({ inviteToken: made.inviteToken, password })).body,
    )
    const res = await t.call('DELETE', `/v1/users/${boss.id}`, { token: second.sessionToken })
    expect(res.status).toBe(200)
    expect((await t.call('GET', '/v1/users', { token: boss.session })).status).toBe(401)
  })

  it('answers a person of another enterprise, or a malformed id, 404 user_not_found', async () => {
    const outsider = await signIn(t, 'member', t.other)
    const stranger = await createUser(t.sql, { email: fresh('stranger'), password })
    for (const id of [outsider.id, stranger.id, someId, 'not-a-uuid']) {
      const res = await t.call('DELETE', `/v1/users/${id}`, { token: owner.session })
      expect(res.status, id).toBe(404)
      expect(res.body.error).toBe('user_not_found')
    }
    expect((await t.call('GET', '/v1/tasks', { token: outsider.session })).status).toBe(200)
  })
})

describe('PATCH /v1/users/{id}', () => {
  it('makes a member an owner and back; each change ends their sessions there, and a new one acts with the role', async () => {
    const e = await t.createEnterprise('Promotion Corp')
    const boss = await signIn(t, 'owner', e)
    let grace = await signIn(t, 'member', e)
    const asGrace = () => t.call('GET', '/v1/users', { token: grace.session })
    expect((await asGrace()).body.error).toBe('owner_only')
    const again = async () => {
      const answer = await t.call('POST', '/v1/auth/login', {
        token: null,
        body: { email: grace.email, password: grace.password, enterprise: e.slug },
      })
      expect(answer.status).toBe(200)
      grace = { ...grace, session: answer.body.sessionToken }
    }

    const promoted = await t.call('PATCH', `/v1/users/${grace.id}`, {
      token: boss.session,
      body: { role: 'owner' },
    })
    expect(promoted.status).toBe(200)
    expect(Person.parse(promoted.body)).toMatchObject({ id: grace.id, role: 'owner' })
    // Her session ended with the change (issue 41): she signs in again, as an owner.
    expect((await asGrace()).status).toBe(401)
    await again()
    expect((await asGrace()).status).toBe(200)

    const demoted = await t.call('PATCH', `/v1/users/${grace.id}`, {
      token: null,
      body: { role: 'member' },
      headers: cookieHeaders(boss),
    })
    expect(demoted.body.role).toBe('member')
    expect((await asGrace()).status).toBe(401)
    await again()
    expect((await asGrace()).body.error).toBe('owner_only')
    // The boss, whose role did not change, is still signed in.
    expect((await t.call('GET', '/v1/users', { token: boss.session })).status).toBe(200)
  })

  it('keeps the last owner an owner; refuses a member, another enterprise and a bad role', async () => {
    const e = await t.createEnterprise('Sole Owner Corp')
    const boss = await signIn(t, 'owner', e)
    const member = await signIn(t, 'member', e)
    const self = await t.call('PATCH', `/v1/users/${boss.id}`, {
      token: boss.session,
      body: { role: 'member' },
    })
    expect(self.status).toBe(409)
    expect(self.body.error).toBe('last_owner')
    const same = await t.call('PATCH', `/v1/users/${boss.id}`, {
      token: boss.session,
      body: { role: 'owner' },
    })
    expect(same.status).toBe(200)
    const byMember = await t.call('PATCH', `/v1/users/${member.id}`, {
      token: member.session,
      body: { role: 'owner' },
    })
    expect(byMember.body.error).toBe('owner_only')
    const outsider = await signIn(t, 'member', t.other)
    const foreign = await t.call('PATCH', `/v1/users/${outsider.id}`, {
      token: boss.session,
      body: { role: 'owner' },
    })
    expect(foreign.status).toBe(404)
    const bad = await t.call('PATCH', `/v1/users/${member.id}`, {
      token: boss.session,
      body: { role: 'admin' },
    })
    expect(bad.status).toBe(400)
    const roles =
      await t.sql`select role from enterprise_people where enterprise_id = ${e.id} order by role`
    expect(roles.map((r) => r.role)).toEqual(['member', 'owner'])
  })
})

describe('secrets', () => {
  it('of invites, new passwords and tokens never reach a log line', async () => {
    const lines: string[] = []
    const log = pino({ level: 'trace' }, { write: (line: string) => lines.push(line) })
    const app = createApp({ sql: t.sql, config: t.config, log, sealer: t.sealer })
    const send = async (path: string, body: unknown, secret?: string) => {
      const res = await app.request(path, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(secret ? { authorization: `Bearer ${secret}` } : {}),
        },
        body: JSON.stringify(body),
      })
      return res.json()
    }
    const made = InviteCreated.parse(
      await send('/v1/users', { email: fresh('quiet') }, owner.session),
    )
    const secretPassword = 'nobody reads this password'
    const answer = LoginAnswer.parse(
      await send('/v1/auth/invites/accept', {
        inviteToken: made.inviteToken,
        password: secretPassword,
      }),
    )
    const token = ApiTokenCreated.parse(
      await send(
        '/v1/enterprise/api-tokens',
        { name: 'quiet', scopes: ['tasks:read'] },
        answer.sessionToken,
      ),
    )
    const logged = lines.join('\n')
    expect(lines.length).toBeGreaterThanOrEqual(3)
    for (const secret of [
      made.inviteToken,
      secretPassword,
      answer.sessionToken,
      answer.csrfToken,
      token.token,
    ])
      expect(logged).not.toContain(secret)
  })
})
