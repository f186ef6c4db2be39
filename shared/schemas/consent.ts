import { z } from 'zod'
import { allScopes, type Scope } from '../scopes.js'
import { IsoTime, Uuid } from './common.js'

// Connected apps and the consent that makes them (spec: Portal-only routes; DESIGN 8). A device-style
// flow: the app asks (public), a person reads its user code, an owner approves it in one of their
// enterprises, and the app collects its API token once by polling. Bodies beyond the spec's words are
// this service's own ("Response bodies of routes not described above: not shown").

const SpecScope = z.enum(allScopes as [Scope, ...Scope[]])

/** Slug or id of one of the signed-in person's enterprises. */
const EnterpriseRef = z.string().min(1).max(200).meta({ description: 'enterprise id or slug' })

const UserCode = z
  .string()
  .min(1)
  .max(40)
  .meta({ description: 'the code the app shows, as ABCD-EFGH (case, spaces and hyphens ignored)' })

export const ConsentRequestInput = z
  .object({
    appName: z.string().trim().min(1).max(200).meta({ description: 'shown to the approver' }),
    scopes: z.array(SpecScope).min(1).max(allScopes.length).meta({
      description: 'scopes of the spec the app asks for (resource:read or resource:write)',
    }),
  })
  .meta({ id: 'ConsentRequestInput' })

export const ConsentRequestCreated = z
  .object({
    id: Uuid,
    userCode: z.string().meta({ description: 'for the app to show a person, who approves it' }),
    pollToken: z.string().meta({
      description:
        'in this answer only: header x-osd-poll-token of GET /v1/consent/requests/{id}, which answers the API token once approved',
    }),
    expiresAt: IsoTime.meta({ description: 'until when the request can be approved' }),
  })
  .meta({ id: 'ConsentRequestCreated' })

export const ConsentStatus = z.enum(['pending', 'approved', 'declined', 'expired', 'revoked'])
export type ConsentStatus = z.infer<typeof ConsentStatus>

export const ConsentPoll = z
  .object({
    status: ConsentStatus.meta({
      description:
        'expired: not decided in time; revoked: approved, then the connection was revoked (its token too)',
    }),
    expiresAt: IsoTime,
    token: z.string().optional().meta({
      description:
        'the API token, in the first answer after approval only; it holds the scopes asked for, in the approving enterprise',
    }),
  })
  .meta({ id: 'ConsentPoll' })
export type ConsentPoll = z.infer<typeof ConsentPoll>

/** What a person sees of a request before deciding it. */
export const ConsentRequestView = z
  .object({
    appName: z.string(),
    scopes: z.array(z.string()),
    status: ConsentStatus,
    expiresAt: IsoTime,
  })
  .meta({ id: 'ConsentRequest' })
export type ConsentRequestView = z.infer<typeof ConsentRequestView>

export const ConsentCodeQuery = z.object({ userCode: UserCode })
export const ConsentMembersQuery = z.object({ enterpriseId: EnterpriseRef })

export const ConsentApprove = z
  .object({ userCode: UserCode, enterpriseId: EnterpriseRef })
  .meta({ id: 'ConsentApprove' })

export const ConsentDecline = z.object({ userCode: UserCode }).meta({ id: 'ConsentDecline' })

export const AppConnection = z
  .object({
    id: Uuid,
    appName: z.string(),
    scopes: z.array(z.string()),
    approvedBy: z
      .object({ userId: Uuid, email: z.string() })
      .nullable()
      .meta({ description: 'null once that person is deleted' }),
    approvedAt: IsoTime,
    lastUsedAt: IsoTime.nullable().meta({ description: "when the app's token was last used" }),
    revokedAt: IsoTime.nullable(),
  })
  .meta({ id: 'AppConnection' })
export type AppConnection = z.infer<typeof AppConnection>

export const AppConnectionQuery = z.object({
  includeRevoked: z
    .enum(['true', 'false'])
    .optional()
    .meta({ description: 'true lists revoked connections too' }),
})
