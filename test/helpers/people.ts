import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, onTestFinished } from 'vitest'
import type { PersonRole } from '../../shared/schemas/people.js'
import {
  createUserWithHash,
  hashPassword,
  openSession,
  passwordCost,
  setMembership,
} from '../../server/domain/people/index.js'
import { sessionCookie } from '../../server/http/auth.js'
import type { TestApp, TestEnterprise } from './app.js'

/**
 * The password of every person signIn makes, hashed once per test file's process: a hash at OWASP's
 * cost takes a few hundred ms (issue 45), and the suite signs in many people. Tests of the sign-in
 * itself (test/server/routes/auth.test.ts) sign in through POST /v1/auth/login.
 */
export const testPassword = 'the password of every test person'
// By cost (cheapPasswordHashes), so a person made in a cheap test is no weaker hash in another.
const testHashes = new Map<number, Promise<string>>()
const hashedTestPassword = () => {
  let hash = testHashes.get(passwordCost.log2N)
  if (!hash) testHashes.set(passwordCost.log2N, (hash = hashPassword(testPassword)))
  return hash
}

/**
 * For the rest of the test, new password hashes (and the one an unknown email is checked against) at
 * scrypt's N = 2^log2N (2^10 unless told) instead of OWASP's 2^17: for tests that check many
 * passwords and are not about the cost of one (lock-outs, the queue, sessions). 2^17 costs a few
 * hundred ms of a core, several seconds on a loaded machine (issue 45).
 */
export function cheapPasswordHashes(log2N = 10): void {
  const before = passwordCost.log2N
  passwordCost.log2N = log2N
  onTestFinished(() => {
    passwordCost.log2N = before
  })
}

/**
 * cheapPasswordHashes for every test of the file, and back after it (the next file of its worker keeps
 * its modules), for files of people brought in and signed in whose tests are not about the cost of a
 * hash.
 */
export function cheapPasswordHashesInFile(): void {
  let before = passwordCost.log2N
  beforeAll(() => {
    before = passwordCost.log2N
    passwordCost.log2N = 10
  })
  afterAll(() => {
    passwordCost.log2N = before
  })
}

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
 * A person of `enterprise` with `role`, signed in: the session a login opens (POST /v1/auth/login after
 * its password check), opened without checking the password again. `enterprise: null` makes a person
 * who belongs to no enterprise. Their password is testPassword.
 */
export async function signIn(
  t: TestApp,
  role: PersonRole,
  enterprise: TestEnterprise | null = t.acme,
  email = `${role}-${randomBytes(4).toString('hex')}@example.com`,
): Promise<TestPerson> {
  const passwordHash = await hashedTestPassword()
  const user = await createUserWithHash(t.sql, { email, passwordHash, name: `A ${role}` })
  if (enterprise) await setMembership(t.sql, enterprise.id, user.id, role)
  const answer = await openSession(t.sql, user, enterprise?.slug, t.config.session)
  return {
    id: user.id,
    email,
    password: testPassword,
    session: answer.sessionToken,
    csrf: answer.csrfToken,
    // As the login answers it (routes/auth.ts answerSession).
    cookie: `${sessionCookie}=${answer.sessionToken}; Max-Age=${t.config.session.maxHours * 3600}; Path=/; HttpOnly; SameSite=Strict`,
  }
}

/** Headers that call with the person's cookie, as a browser would (with the CSRF header, or not). */
export function cookieHeaders(person: TestPerson, csrf = true): Record<string, string> {
  const cookie = person.cookie.split(';')[0]!
  return csrf ? { cookie, 'x-osd-csrf': person.csrf } : { cookie }
}
