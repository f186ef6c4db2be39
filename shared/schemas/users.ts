import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { PersonRole } from './people.js'

// The people of an enterprise and the invites that bring them in (spec: Portal-only routes, /v1/users).
// Bodies beyond the spec's words are this service's own.

export const Person = z
  .object({
    id: Uuid,
    email: z.string(),
    name: z.string(),
    role: PersonRole,
    joinedAt: IsoTime,
  })
  .meta({ id: 'Person' })
export type Person = z.infer<typeof Person>

export const RoleChange = z
  .object({ role: PersonRole.meta({ description: 'owner: the chief executive' }) })
  .meta({ id: 'RoleChange' })

export const InviteInput = z
  .object({
    email: z.string().max(320),
    role: PersonRole.optional().meta({ description: 'member unless given' }),
  })
  .meta({ id: 'InviteInput' })

export const Invite = z
  .object({ id: Uuid, email: z.string(), role: PersonRole, expiresAt: IsoTime })
  .meta({ id: 'Invite' })
export type Invite = z.infer<typeof Invite>

export const PendingInvite = Invite.extend({
  createdAt: IsoTime,
  invitedBy: z.object({ userId: Uuid, email: z.string() }).nullable(),
}).meta({ id: 'PendingInvite' })
export type PendingInvite = z.infer<typeof PendingInvite>

export const InviteCreated = z
  .object({
    invite: Invite,
    inviteToken: z.string().meta({
      description:
        'the secret the invited person accepts with (POST /v1/auth/invites/accept), in this answer only: no mail is sent',
    }),
  })
  .meta({ id: 'InviteCreated' })
export type InviteCreated = z.infer<typeof InviteCreated>

export const AcceptInviteInput = z
  .object({
    inviteToken: z.string().max(200),
    password: z.string().max(1024).meta({
      description:
        'a new password when no person has the invited email yet; else that person’s own password',
    }),
    name: z.string().max(200).optional().meta({ description: 'of a new person' }),
  })
  .meta({ id: 'AcceptInviteInput' })

export const PersonRemoved = z
  .object({
    removed: Person.meta({ description: 'the person as they were in the enterprise' }),
    revokedTokens: z.number().int().meta({
      description:
        'how many API tokens they had made in the enterprise and which were revoked with their removal (revokedReason creator_removed)',
    }),
  })
  .meta({ id: 'PersonRemoved' })
export type PersonRemoved = z.infer<typeof PersonRemoved>
