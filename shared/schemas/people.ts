import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'

// People and their sessions (spec: Portal-only routes; DESIGN 8). Bodies beyond the spec's words are
// this service's own ("Response bodies of routes not described above: not shown").

export const PersonRole = z.enum(['owner', 'member'])
export type PersonRole = z.infer<typeof PersonRole>

export const User = z.object({ id: Uuid, email: z.string(), name: z.string() }).meta({ id: 'User' })
export type User = z.infer<typeof User>

/** An enterprise as one of its people sees it: with their role there (owner: the chief executive). */
export const MyEnterprise = z
  .object({ id: Uuid, slug: z.string(), name: z.string(), role: PersonRole })
  .meta({ id: 'MyEnterprise' })
export type MyEnterprise = z.infer<typeof MyEnterprise>

export const Email = z
  .string()
  .trim()
  .min(3)
  .max(320)
  .regex(/^[^\s@]+@[^\s@]+$/, 'an email address')

export const LoginInput = z
  .object({
    email: z.string().max(320),
    password: z.string().max(1024),
    enterprise: z.string().max(200).optional().meta({
      description: 'slug or id of the enterprise to act in; else the first of the person',
    }),
  })
  .meta({ id: 'LoginInput' })

export const SessionInfo = z
  .object({
    id: Uuid,
    createdAt: IsoTime,
    expiresAt: IsoTime.meta({ description: 'the absolute end of the session' }),
    idleExpiresAt: IsoTime.meta({ description: 'when it ends unless used before' }),
  })
  .meta({ id: 'SessionInfo' })

export const Me = z
  .object({ user: User, enterprise: MyEnterprise.nullable(), session: SessionInfo })
  .meta({ id: 'Me' })
export type Me = z.infer<typeof Me>

export const LoginAnswer = z
  .object({
    user: User,
    enterprise: MyEnterprise.nullable(),
    sessionToken: z.string().meta({
      description:
        'the session secret, in this answer only, for command-line use as Authorization: Bearer; browsers use the cookie',
    }),
    csrfToken: z.string().meta({
      description: 'header x-osd-csrf of every state-changing call made with the cookie',
    }),
    expiresAt: IsoTime,
  })
  .meta({ id: 'LoginAnswer' })
export type LoginAnswer = z.infer<typeof LoginAnswer>

/**
 * POST /v1/auth/enterprise's answer: Me, and the session's fresh secret and CSRF token (issue 41, OWASP
 * ASVS 3.2: a session that changes what it may do gets a new secret; the old one stops at once).
 */
export const EnterpriseChosen = z
  .object({
    user: User,
    enterprise: MyEnterprise.nullable(),
    session: SessionInfo,
    sessionToken: z.string().meta({
      description:
        'the session secret from now on, in this answer only (the one the call was made with no longer works); browsers get it as the cookie',
    }),
    csrfToken: z.string().meta({
      description:
        'the CSRF token from now on: header x-osd-csrf of every state-changing call made with the cookie',
    }),
  })
  .meta({ id: 'EnterpriseChosen' })
export type EnterpriseChosen = z.infer<typeof EnterpriseChosen>

export const ChooseEnterprise = z
  .object({ enterprise: z.string().min(1).max(200).meta({ description: 'slug or id' }) })
  .meta({ id: 'ChooseEnterprise' })

export const SessionSummary = z
  .object({
    id: Uuid,
    enterprise: z.string().nullable().meta({ description: 'slug of the enterprise it acts in' }),
    current: z.boolean().meta({ description: 'the session asking' }),
    createdAt: IsoTime,
    lastSeenAt: IsoTime,
    expiresAt: IsoTime,
    idleExpiresAt: IsoTime,
  })
  .meta({ id: 'SessionSummary' })

export const ChangePassword = z
  .object({ currentPassword: z.string().max(1024), newPassword: z.string().max(1024) })
  .meta({ id: 'ChangePassword' })
