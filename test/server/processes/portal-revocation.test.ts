import { afterAll, beforeAll, expect, it } from 'vitest'
import { LoginAnswer } from '../../../shared/schemas/people.js'
import { ApiTokenCreated } from '../../../shared/schemas/tokens.js'
import { createTestEnterprise, type TestEnterprise } from '../../helpers/app.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { osd } from '../../helpers/osd.js'
import { startOsd, type OsdProcess } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'

// A token revoked and a session ended through one `osd serve` are refused at once by another serving the
// same database, though it had them in its cache (issue 20: "in every osd process").

let db: TestDatabase
let enterprise: TestEnterprise
let a: OsdProcess
let b: OsdProcess
const password = 'a password for two processes'

beforeAll(async () => {
  db = await createTestDatabase()
  enterprise = await createTestEnterprise(db.sql, 'Two Processes', { mailDomain: 'osd.local' })
  ;[a, b] = await Promise.all([
    startOsd({ DATABASE_URL: db.url }),
    startOsd({ DATABASE_URL: db.url }),
  ])
  const made = await osd(
    [
      'admin',
      'user',
      'create',
      '--email',
      'owner@example.com',
      '--password-stdin',
      '--enterprise',
      enterprise.slug,
      '--owner',
      '--json',
    ],
    { DATABASE_URL: db.url },
    password,
  )
  expect(made.exitCode, made.stderr).toBe(0)
}, 120_000)

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()])
})

async function call(on: OsdProcess, method: string, path: string, secret: string, body?: unknown) {
  const res = await fetch(`${on.url}${path.replace(/^\/v1/, '')}`, {
    method,
    headers: {
      authorization: `Bearer ${secret}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, body: await res.json().catch(() => undefined) }
}

async function signIn(on: OsdProcess): Promise<LoginAnswer> {
  const res = await fetch(`${on.url}/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'owner@example.com', password }),
  })
  const body = await res.json()
  expect(res.status, JSON.stringify(body)).toBe(200)
  return LoginAnswer.parse(body)
}

/** How long until `b` answers `secret` 401, polled every 20 ms; fails after 1 s. */
async function refusedWithin(secret: string): Promise<number> {
  const started = Date.now()
  await eventually(
    async () => (await call(b, 'GET', '/v1/tasks', secret)).status === 401,
    1000,
    'the other process to refuse it',
  )
  return Date.now() - started
}

it('a token made and revoked through one process is refused by the other at once', async () => {
  const session = await signIn(a)
  const made = await call(a, 'POST', '/v1/enterprise/api-tokens', session.sessionToken, {
    name: 'two processes',
    scopes: ['tasks:read'],
  })
  expect(made.status).toBe(201)
  const token = ApiTokenCreated.parse(made.body)
  // B has it in its cache now, for seconds unless told.
  for (let i = 0; i < 3; i++)
    expect((await call(b, 'GET', '/v1/tasks', token.token)).status).toBe(200)

  const revoked = await call(
    a,
    'DELETE',
    `/v1/enterprise/api-tokens/${token.id}`,
    session.sessionToken,
  )
  expect(revoked.status).toBe(200)
  expect(await refusedWithin(token.token)).toBeLessThan(1000)
  expect((await call(a, 'GET', '/v1/tasks', token.token)).status).toBe(401)
  // The enterprise's other tokens still work there.
  expect((await call(b, 'GET', '/v1/tasks', enterprise.token)).status).toBe(200)
})

it('a session ended through one process is refused by the other at once', async () => {
  const session = await signIn(a)
  for (let i = 0; i < 3; i++)
    expect((await call(b, 'GET', '/v1/tasks', session.sessionToken)).status).toBe(200)
  const out = await call(a, 'POST', '/v1/auth/logout', session.sessionToken)
  expect(out.status).toBe(204)
  expect(await refusedWithin(session.sessionToken)).toBeLessThan(1000)
})
