import { z } from 'zod'
import { IdParam } from '../../shared/schemas/common.js'
import { LoginAnswer } from '../../shared/schemas/people.js'
import {
  AcceptInviteInput,
  InviteCreated,
  InviteInput,
  PendingInvite,
  Person,
  PersonRemoved,
  RoleChange,
} from '../../shared/schemas/users.js'
import {
  acceptInvite,
  changeRole,
  createInvite,
  listInvites,
  listPeople,
  removeMembership,
  withdrawInvite,
} from '../domain/people/index.js'
import { ownerCaller } from '../http/caller.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'
import { answerSession } from './auth.js'

// The people of an enterprise (spec: Portal-only routes, /v1/users, owners only): listed, invited and
// removed by an owner's session. Tokens never reach these (the auth middleware answers 403
// api_token_scope); a member's session gets 403 owner_only.

export function userRoutes({ sql }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'listUsers',
      method: 'get',
      path: '/',
      summary: 'The people of the enterprise, with their roles (owners only)',
      response: z.array(Person),
      errors: ['owner_only'],
    },
    async (c) => listPeople(sql, ownerCaller(c.var.caller).enterpriseId),
  )

  route(
    app,
    {
      operationId: 'inviteUser',
      method: 'post',
      path: '/',
      summary: 'Invite a person by email (owners only); the invite token is in this answer only',
      description:
        'No mail is sent: hand the inviteToken to the person, who accepts with POST /v1/auth/invites/accept within 7 days. Only its SHA-256 is stored. A new invite of an email replaces its pending one; an email already of a person of the enterprise is refused 409 already_member.',
      body: InviteInput,
      status: 201,
      response: InviteCreated,
      errors: ['owner_only', 'already_member'],
    },
    async (c, { body }) => {
      const owner = ownerCaller(c.var.caller)
      c.header('Cache-Control', 'no-store')
      return createInvite(sql, owner.enterpriseId, owner.userId, body)
    },
  )

  route(
    app,
    {
      operationId: 'listInvites',
      method: 'get',
      path: '/invites',
      summary: 'The invites that may still be accepted, newest first (owners only)',
      response: z.array(PendingInvite),
      errors: ['owner_only'],
    },
    async (c) => listInvites(sql, ownerCaller(c.var.caller).enterpriseId),
  )

  route(
    app,
    {
      operationId: 'withdrawInvite',
      method: 'delete',
      path: '/invites/{id}',
      summary: 'Withdraw an invite not yet accepted (owners only)',
      params: IdParam,
      notFound: 'invite_not_found',
      status: 204,
      errors: ['owner_only'],
    },
    async (c, { params }) => {
      await withdrawInvite(sql, ownerCaller(c.var.caller).enterpriseId, params.id)
    },
  )

  route(
    app,
    {
      operationId: 'changeUserRole',
      method: 'patch',
      path: '/{id}',
      summary:
        'Make a person of the enterprise an owner or a member (owners only); their sessions in the enterprise end at once',
      description:
        'A change of role ends every session of the person acting in this enterprise, in every osd process (OWASP ASVS 3.2: a session whose rights change does not keep its secret): they sign in again and act with the new role; their sessions in other enterprises go on. An owner who changes their own role is signed out of it too. The same role again changes nothing. The last owner cannot be made a member (409 last_owner): an enterprise always has a chief executive.',
      params: IdParam,
      notFound: 'user_not_found',
      body: RoleChange,
      response: Person,
      errors: ['owner_only', 'last_owner'],
    },
    async (c, { params, body }) => {
      const person = await changeRole(
        sql,
        ownerCaller(c.var.caller).enterpriseId,
        params.id,
        body.role,
      )
      return person
    },
  )

  route(
    app,
    {
      operationId: 'removeUser',
      method: 'delete',
      path: '/{id}',
      summary:
        'Take a person out of the enterprise (owners only): their sessions there and the API tokens they made there end at once, in every osd process',
      description:
        "The API tokens the person made in the enterprise are revoked (revokedReason creator_removed) and the answer says how many; tokens made on the server host (osd admin) and connected apps' tokens stay. The last owner cannot be removed (409 last_owner): an enterprise always has a chief executive. Invites the person made as an owner can no longer be accepted.",
      params: IdParam,
      notFound: 'user_not_found',
      response: PersonRemoved,
      errors: ['owner_only', 'last_owner'],
    },
    async (c, { params }) => {
      const { removed, revokedTokens } = await removeMembership(
        sql,
        ownerCaller(c.var.caller).enterpriseId,
        params.id,
      )
      return { removed, revokedTokens: revokedTokens.length }
    },
  )

  return app
}

/** Accepting an invite: public, since the person may have no session (nor even an account) yet. */
export function inviteAcceptRoutes({ sql, config, limits }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'acceptInvite',
      method: 'post',
      path: '/accept',
      summary: 'Accept an invite and sign in, acting in the enterprise of the invite',
      description:
        'A person new to osd is made with the password (and name) given; a person who has the invited email gives their own password (401 invalid_credentials otherwise, counted by the lockout of login). An invite is used once; used, withdrawn, expired or unknown invites answer the same 404 invite_not_found. Answers as login does, setting the session cookie.',
      body: AcceptInviteInput,
      response: LoginAnswer,
      errors: [
        'invite_not_found',
        'invalid_credentials',
        'login_locked',
        'sign_in_busy',
        'email_taken',
      ],
      public: true,
    },
    async (c, { body }) =>
      answerSession(
        c,
        await acceptInvite(sql, body, config.session, limits.clientKeyOf(c)),
        config.session,
      ),
  )

  return app
}
