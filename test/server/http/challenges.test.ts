import { beforeAll, describe, expect, it } from 'vitest'
import { createToken } from '../../../server/domain/people/index.js'
import { allScopes } from '../../../shared/scopes.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { cheapPasswordHashesInFile, cookieHeaders, signIn } from '../../helpers/people.js'

// Issue 51 item 14: every 401 says how to authenticate (RFC 9110 11.6.1, RFC 6750 3), whoever answers
// it: the auth middleware, a route's own refusal, the inbound webhooks. The document declares the
// header on every 401, so the test app's contract check holds each answer to it too.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})
cheapPasswordHashesInFile()

/** A token of acme refused from its first use: revoked, or expired. */
async function refusedToken(how: 'revoked' | 'expired'): Promise<string> {
  const { token, id } = await createToken(t.sql, t.acme.id, { name: how, scopes: allScopes })
  if (how === 'revoked') await t.sql`update api_tokens set revoked_at = now() where id = ${id}`
  else await t.sql`update api_tokens set expires_at = now() - interval '1 minute' where id = ${id}`
  return token
}

const routes: [string, string, unknown?][] = [
  ['GET', '/v1/tasks'],
  ['GET', '/v1/runs/00000000-0000-4000-8000-000000000000'],
  ['POST', '/v1/gates/00000000-0000-4000-8000-000000000000/decision', { decision: 'approve' }],
  ['GET', '/v1/events'],
  ['GET', '/v1/no-such-path'],
]

describe('WWW-Authenticate on every 401', () => {
  it.each(routes)('%s %s: Bearer without a credential', async (method, path, body) => {
    const res = await t.call(method, path, { token: null, body })
    expect(res.status).toBe(401)
    expect(res.body).toMatchObject({ message: 'Unauthorized', statusCode: 401 })
    expect(res.headers.get('www-authenticate')).toBe('Bearer')
  })

  it.each(routes)(
    '%s %s: error="invalid_token" for a wrong, malformed, revoked or expired token',
    async (method, path, body) => {
      const tokens = [
        'osd_' + 'x'.repeat(49),
        'not-a-token',
        'x'.repeat(300),
        await refusedToken('revoked'),
        await refusedToken('expired'),
      ]
      for (const token of tokens) {
        const res = await t.call(method, path, { token, body })
        expect(res.status, token.slice(0, 12)).toBe(401)
        expect(res.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"')
      }
    },
  )

  it('an ended session: invalid_token as a bearer credential, the plain challenge as a cookie', async () => {
    const person = await signIn(t, 'member')
    await t.sql`update sessions set expires_at = now() - interval '1 second' where user_id = ${person.id}`
    const bearer = await t.call('GET', '/v1/tasks', { token: person.session })
    expect(bearer.status).toBe(401)
    expect(bearer.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"')
    const cookie = await t.call('GET', '/v1/tasks', { token: null, headers: cookieHeaders(person) })
    expect(cookie.status).toBe(401)
    expect(cookie.headers.get('www-authenticate')).toBe('Bearer')
  })

  it("a route's own 401 (a wrong password at login) carries it too", async () => {
    const person = await signIn(t, 'member')
    const res = await t.call('POST', '/v1/auth/login', {
      token: null,
      body: { email: person.email, password: 'not the password at all' },
    })
    expect(res.status).toBe(401)
    expect(res.body.error).toBe('invalid_credentials')
    expect(res.headers.get('www-authenticate')).toBe('Bearer')
  })

  it('the inbound webhooks name their own credential, the secret header', async () => {
    for (const headers of [{}, { 'x-os-webhook-secret': 'wrong' }] as Record<string, string>[]) {
      const res = await t.call('POST', `/v1/webhooks/${t.acme.slug}/tasks/anything`, {
        token: null,
        body: {},
        headers,
      })
      expect(res.status).toBe(401)
      expect(res.headers.get('www-authenticate')).toBe('WebhookSecret header="x-os-webhook-secret"')
    }
  })

  it('no answer but a 401 carries it', async () => {
    for (const [method, path, token] of [
      ['GET', '/v1/tasks', t.acme.token],
      ['GET', '/v1/health', null],
      ['GET', '/v1/tasks', await t.tokenWith(['runs:read'])],
    ] as const) {
      const res = await t.call(method, path, { token })
      expect(res.status).not.toBe(401)
      expect(res.headers.has('www-authenticate')).toBe(false)
    }
  })

  it('the document declares the header on every 401 it lists', async () => {
    const doc = (await t.call('GET', '/v1/openapi.json', { token: null })).body as {
      paths: Record<string, Record<string, { responses: Record<string, { headers?: object }> }>>
    }
    let count = 0
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const refusal = op.responses['401']
        if (!refusal) continue
        count++
        expect(refusal.headers, `${method} ${path}`).toHaveProperty('WWW-Authenticate')
      }
    expect(count).toBeGreaterThan(100)
  })
})
