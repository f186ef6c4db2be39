import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  AppConnection,
  AppConnectionQuery,
  ConsentApprove,
  ConsentCodeQuery,
  ConsentDecline,
  ConsentMembersQuery,
  ConsentPoll,
  ConsentRequestCreated,
  ConsentRequestInput,
  ConsentRequestView,
} from '../../shared/schemas/consent.js'
import { MyEnterprise, User } from '../../shared/schemas/people.js'
import { ownerCaller, sessionCaller } from '../http/caller.js'
import {
  approveConsent,
  consentEnterprises,
  consentOwners,
  consentRequestByCode,
  createConsentRequest,
  declineConsent,
  listConnections,
  pollConsentRequest,
  revokeConnection,
} from '../domain/people/index.js'
import type { RouteDeps } from '../http/context.js'
import { requestHeader } from '../http/headers.js'
import { createRouter, route } from '../http/router.js'
import { sessionOf } from './auth.js'

// Connected apps and the consent that makes them (spec: Portal-only routes; DESIGN 8; the flow is told
// in domain/people/consent.ts). The app's two routes need no credential; the others are a signed-in person's
// (the auth middleware refuses tokens: api_token_scope under /v1/consent, api_token_cannot_manage_connections
// under /v1/enterprise/connections).

export const pollTokenHeader = 'x-osd-poll-token'

/** Mounted at /v1/consent. */
export function consentRoutes({ sql, limits }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'requestConsent',
      method: 'post',
      path: '/requests',
      summary: 'An app asks for access to an enterprise (no credential)',
      description: `Answers a user code for a person to approve (an owner, in one of their enterprises) and a poll token, in this answer only, for GET /v1/consent/requests/{id}. The request can be decided for 15 minutes; at most 1,000 wait at once, and one client address may ask 20 times in 15 minutes (429 too_many_consent_requests, Retry-After).`,
      body: ConsentRequestInput,
      status: 201,
      response: ConsentRequestCreated,
      errors: ['too_many_consent_requests'],
      public: true,
    },
    async (c, { body }) => {
      c.header('Cache-Control', 'no-store')
      // One address gets a share far below the global cap of pending requests (issue 44).
      limits.consentRequest(c)
      return createConsentRequest(sql, body)
    },
  )

  route(
    app,
    {
      operationId: 'pollConsentRequest',
      method: 'get',
      path: '/requests/{id}',
      summary: "The app reads its request's status; once approved, its API token, once",
      description: `Needs the header ${pollTokenHeader} with the poll token the request answered; without it, or with another, the request is not found (404). The first answer after approval carries the API token (the scopes asked for, in the approving enterprise); later answers only the status.`,
      params: z.object({ id: Uuid }),
      notFound: 'consent_request_not_found',
      response: ConsentPoll,
      errors: ['consent_request_not_found'],
      public: true,
      credential: 'pollToken',
    },
    async (c, { params }) => {
      c.header('Cache-Control', 'no-store')
      return pollConsentRequest(sql, params.id, requestHeader(c, pollTokenHeader))
    },
  )

  route(
    app,
    {
      operationId: 'getConsentRequestByCode',
      method: 'get',
      path: '/requests',
      summary: 'What an app asks for, by the user code it shows: read before deciding',
      query: ConsentCodeQuery,
      response: ConsentRequestView,
      errors: ['consent_request_not_found'],
    },
    async (c, { query }) => {
      sessionOf(c)
      return consentRequestByCode(sql, query.userCode)
    },
  )

  route(
    app,
    {
      operationId: 'listConsentEnterprises',
      method: 'get',
      path: '/enterprises',
      summary: "The signed-in person's enterprises where they may approve an app: those they own",
      response: z.array(MyEnterprise),
    },
    async (c) => consentEnterprises(sql, sessionOf(c).userId),
  )

  route(
    app,
    {
      operationId: 'listConsentOwners',
      method: 'get',
      path: '/members',
      summary: "The owners of one of the person's enterprises: whom a member can ask to approve",
      query: ConsentMembersQuery,
      response: z.array(User),
      errors: ['enterprise_not_found'],
    },
    async (c, { query }) => consentOwners(sql, sessionOf(c).userId, query.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'approveConsent',
      method: 'post',
      path: '/approve',
      summary: "Approve an app's request into an enterprise the person owns: a connected app",
      description:
        "enterpriseId: id or slug of one of the person's enterprises (else 404 enterprise_not_found); only its owners approve (403 owner_only). A code unknown or expired: 404 consent_request_not_found; already approved or declined: 409 consent_request_decided. The app collects its token by polling.",
      body: ConsentApprove,
      status: 201,
      response: AppConnection,
      errors: [
        'enterprise_not_found',
        'owner_only',
        'consent_request_not_found',
        'consent_request_decided',
      ],
    },
    async (c, { body }) => approveConsent(sql, sessionOf(c).userId, body),
  )

  route(
    app,
    {
      operationId: 'declineConsent',
      method: 'post',
      path: '/decline',
      summary: "Decline an app's request; any signed-in person holding its code may",
      body: ConsentDecline,
      response: ConsentRequestView,
      errors: ['consent_request_not_found', 'consent_request_decided'],
    },
    async (c, { body }) => declineConsent(sql, sessionOf(c).userId, body.userCode),
  )

  return app
}

/** Mounted at /v1/enterprise/connections. */
export function appConnectionRoutes({ sql }: RouteDeps) {
  const app = createRouter()

  route(
    app,
    {
      operationId: 'listAppConnections',
      method: 'get',
      path: '/',
      summary:
        "The enterprise's connected apps, newest first; includeRevoked=true lists revoked ones too",
      query: AppConnectionQuery,
      response: z.array(AppConnection),
      errors: ['api_token_cannot_manage_connections'],
    },
    async (c, { query }) =>
      listConnections(
        sql,
        sessionCaller(c.var.caller).enterpriseId,
        query.includeRevoked === 'true',
      ),
  )

  route(
    app,
    {
      operationId: 'revokeAppConnection',
      method: 'delete',
      path: '/{id}',
      summary:
        'Revoke a connected app: its token stops working at once, in every osd process (owners)',
      params: z.object({ id: Uuid }),
      notFound: 'app_connection_not_found',
      response: AppConnection,
      errors: ['api_token_cannot_manage_connections', 'owner_only', 'app_connection_not_found'],
    },
    async (c, { params }) => {
      const owner = ownerCaller(c.var.caller)
      return revokeConnection(sql, owner.enterpriseId, params.id)
    },
  )

  return app
}
