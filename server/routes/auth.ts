import { deleteCookie, setCookie } from 'hono/cookie'
import { z } from 'zod'
import { ApiError } from '../../shared/errors.js'
import { Uuid } from '../../shared/schemas/common.js'
import {
  ChangePassword,
  ChooseEnterprise,
  EnterpriseChosen,
  LoginAnswer,
  LoginInput,
  Me,
  MyEnterprise,
  SessionSummary,
} from '../../shared/schemas/people.js'
import {
  changePassword,
  chooseEnterprise,
  describeSession,
  enterprisesOf,
  type FoundSession,
  listSessions,
  login,
  revokeOwnSession,
  revokeSession,
  type SessionLifetime,
} from '../domain/people/index.js'
import { Notifications, NotificationsChange } from '../../shared/schemas/events.js'
import { getNotifications, setNotifications } from '../domain/events/index.js'
import { sessionCookie, unauthorized } from '../http/auth.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { requestHeader } from '../http/headers.js'
import { createRouter, route } from '../http/router.js'

// A person's sign-in and session (spec: Portal-only routes; DESIGN 8). Tokens never reach these but
// login (the auth middleware refuses them, 403 api_token_scope); login itself needs no credential.

/** The session of a portal route's caller; the middleware lets only sessions through. */
export function sessionOf(c: AppContext): FoundSession {
  const session = c.var.session
  if (!session) throw new ApiError('api_token_scope', 'This route is for signed-in people.')
  return session
}

/** Whether the request reached osd over HTTPS (directly, or through a proxy that says so). */
function overHttps(c: AppContext): boolean {
  return (
    new URL(c.req.url).protocol === 'https:' ||
    requestHeader(c, 'x-forwarded-proto')?.split(',')[0]?.trim() === 'https'
  )
}

/**
 * A new session's answer: sets its cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) and keeps the
 * answer, which holds the secret, out of every cache. Login and accepting an invite answer it.
 */
export function answerSession(
  c: AppContext,
  answer: LoginAnswer,
  lifetime: SessionLifetime,
): LoginAnswer {
  setSessionCookie(c, answer.sessionToken, lifetime.maxHours * 3600)
  return answer
}

/** The session cookie holding `secret` for `maxAge` seconds; the answer, which holds it, not cached. */
function setSessionCookie(c: AppContext, secret: string, maxAge: number): void {
  setCookie(c, sessionCookie, secret, {
    httpOnly: true,
    sameSite: 'Strict',
    secure: overHttps(c),
    path: '/',
    maxAge,
  })
  c.header('Cache-Control', 'no-store')
}

export function authRoutes({ sql, config, limits }: RouteDeps) {
  const app = createRouter()
  const lifetime = config.session

  route(
    app,
    {
      operationId: 'login',
      method: 'post',
      path: '/auth/login',
      summary: 'Sign a person in with email and password',
      description:
        'Sets the session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) and answers the session secret once, for command-line use as a bearer credential. A state-changing call made with the cookie needs the header x-osd-csrf with the answered csrfToken. Failed sign-ins are counted per email and client address: after five within an hour, that address waits 1 s, then 2, 4 ... up to 15 minutes before its next try at that email (429 login_locked, Retry-After), while other addresses are not held back; the answers never tell whether an email exists.',
      body: LoginInput,
      response: LoginAnswer,
      errors: ['invalid_credentials', 'login_locked', 'sign_in_busy', 'enterprise_not_found'],
      public: true,
    },
    async (c, { body }) => {
      return answerSession(c, await login(sql, body, lifetime, limits.clientKeyOf(c)), lifetime)
    },
  )

  route(
    app,
    {
      operationId: 'logout',
      method: 'post',
      path: '/auth/logout',
      summary: 'End the session, at once in every osd process',
      status: 204,
    },
    async (c) => {
      const { sessionId } = sessionOf(c)
      await revokeSession(sql, sessionId)
      deleteCookie(c, sessionCookie, { path: '/' })
    },
  )

  route(
    app,
    {
      operationId: 'getMe',
      method: 'get',
      path: '/auth/me',
      summary:
        'The signed-in person, the enterprise the session acts in, and when the session ends',
      response: Me,
    },
    async (c) => describeSession(sql, sessionOf(c), lifetime),
  )

  route(
    app,
    {
      operationId: 'chooseEnterprise',
      method: 'post',
      path: '/auth/enterprise',
      summary:
        "Move the session to another of the person's enterprises, with a new session secret and CSRF token",
      description:
        'Answers as GET /v1/auth/me does, with sessionToken and csrfToken added, and sets the session cookie to the new secret, as login does. The secret the call was made with stops working at once, in every osd process (OWASP ASVS 3.2: a session whose rights change gets a new secret); the session keeps its id and its absolute expiry.',
      body: ChooseEnterprise,
      response: EnterpriseChosen,
      errors: ['enterprise_not_found'],
    },
    async (c, { body }) => {
      const session = sessionOf(c)
      const chosen = await chooseEnterprise(sql, session, body.enterprise, lifetime)
      // Ended between its check and the move (a logout, a revocation): as the check would have said.
      if (!chosen) return unauthorized(c)
      // The cookie lasts as long as the session still does: a switch does not lengthen it.
      const left = Math.floor((Date.parse(chosen.session.expiresAt) - Date.now()) / 1000)
      setSessionCookie(c, chosen.sessionToken, Math.max(0, left))
      return chosen
    },
  )

  route(
    app,
    {
      operationId: 'listMySessions',
      method: 'get',
      path: '/auth/sessions',
      summary: "The person's open sessions, newest first; current marks this one",
      response: z.array(SessionSummary),
    },
    async (c) => listSessions(sql, sessionOf(c), lifetime),
  )

  route(
    app,
    {
      operationId: 'revokeMySession',
      method: 'delete',
      path: '/auth/sessions/{id}',
      summary: "End one of the person's sessions, at once in every osd process",
      params: z.object({ id: Uuid }),
      notFound: 'session_not_found',
      status: 204,
      errors: ['session_not_found'],
    },
    async (c, { params }) => {
      await revokeOwnSession(sql, sessionOf(c).userId, params.id)
    },
  )

  route(
    app,
    {
      operationId: 'changePassword',
      method: 'post',
      path: '/auth/password',
      summary: "Change the person's password; every other session of theirs ends at once",
      description:
        'The current password is checked as a sign-in is (a wrong one counts toward the delay of its address). The new one: 12 to 1,024 characters.',
      body: ChangePassword,
      status: 204,
      errors: ['invalid_credentials', 'login_locked', 'sign_in_busy'],
    },
    async (c, { body }) => {
      const session = sessionOf(c)
      await changePassword(sql, session, body, limits.clientKeyOf(c))
    },
  )

  // Mail to the person (issue 47): in the enterprise the session acts in, each kind on or off.
  const mailConfigured = Boolean(config.smtpUrl && config.mailFrom)
  /** The session's person in the enterprise it acts in (a session in none has nothing to set). */
  const personIn = (c: AppContext) => {
    const session = sessionOf(c)
    if (!session.enterpriseId)
      throw new ApiError('enterprise_not_found', 'This session acts in no enterprise.')
    return session
  }

  route(
    app,
    {
      operationId: 'getMyNotifications',
      method: 'get',
      path: '/auth/me/notifications',
      summary: 'What osd mails the signed-in person about, in the enterprise the session acts in',
      description:
        'gates: a gate waits that the person may decide; runFailures: a run they started failed. Owners have both on unless they turned them off, members the gates only. At most one mail a minute; what comes meanwhile is folded into the next. mailConfigured says whether this osd sends mail at all.',
      response: Notifications,
      errors: ['enterprise_not_found'],
    },
    async (c) => {
      const { enterpriseId, userId } = personIn(c)
      return getNotifications(sql, enterpriseId, userId, mailConfigured)
    },
  )

  route(
    app,
    {
      operationId: 'setMyNotifications',
      method: 'patch',
      path: '/auth/me/notifications',
      summary:
        'Turn a kind of mail on or off for the signed-in person, in the session’s enterprise',
      description: 'A field left out keeps its value; answers as GET does.',
      body: NotificationsChange,
      response: Notifications,
      errors: ['enterprise_not_found'],
    },
    async (c, { body }) => {
      const { enterpriseId, userId } = personIn(c)
      return setNotifications(sql, enterpriseId, userId, body, mailConfigured)
    },
  )

  route(
    app,
    {
      operationId: 'listMyEnterprises',
      method: 'get',
      path: '/enterprises',
      summary: "The signed-in person's enterprises, with their role in each",
      response: z.array(MyEnterprise),
    },
    async (c) => enterprisesOf(sql, sessionOf(c).userId),
  )

  return app
}
