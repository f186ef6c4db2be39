import { randomBytes } from 'node:crypto'
import type { PersonRole } from '../../shared/schemas/people.js'
import { createUser, setMembership } from '../../server/domain/people/index.js'
import type { TestApp, TestEnterprise } from './app.js'

export interface TestPerson {
  id: string
  email: string
  password: string
  /** The session secret, sent as a bearer credential (no CSRF header needed). */
  session: string
  csrf: string
  /** The Set-Cookie header the login answered. */
  cookie: string
}

/**
 * A person of `enterprise` with `role`, signed in (POST /v1/auth/login). `enterprise: null` makes a
 * person who belongs to no enterprise.
 */
export async function signIn(
  t: TestApp,
  role: PersonRole,
  enterprise: TestEnterprise | null = t.acme,
  email = `${role}-${randomBytes(4).toString('hex')}@example.com`,
): Promise<TestPerson> {
  const password = `pw-${randomBytes(9).toString('base64url')}`
  const user = await createUser(t.sql, { email, password, name: `A ${role}` })
  if (enterprise) await setMembership(t.sql, enterprise.id, user.id, role)
  const answer = await t.call('POST', '/v1/auth/login', {
    token: null,
    body: { email, password, enterprise: enterprise?.slug },
  })
  if (answer.status !== 200) throw new Error(`login: ${answer.status} ${answer.text}`)
  return {
    id: user.id,
    email,
    password,
    session: answer.body.sessionToken,
    csrf: answer.body.csrfToken,
    cookie: answer.headers.get('set-cookie') ?? '',
  }
}

/** Headers that call with the person's cookie, as a browser would (with the CSRF header, or not). */
export function cookieHeaders(person: TestPerson, csrf = true): Record<string, string> {
  const cookie = person.cookie.split(';')[0]!
  return csrf ? { cookie, 'x-osd-csrf': person.csrf } : { cookie }
}
