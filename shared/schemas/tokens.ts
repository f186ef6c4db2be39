import { z } from 'zod'
import { maxGraceSeconds } from '../values.js'
import { IsoTime, Uuid, idPrefixParameter } from './common.js'

// API tokens as a signed-in person manages them (spec: Authentication 6; Portal-only routes). Bodies
// beyond the spec's words are this service's own (issue 45: change, rotate, expire, last used).

export const ApiToken = z
  .object({
    id: Uuid,
    name: z.string(),
    scopes: z.array(z.string()),
    lastChars: z
      .string()
      .meta({ description: 'the last characters of the secret, to recognise it' }),
    lastUsedAt: IsoTime.nullable().meta({
      description: 'when it was last used, to the minute (written at most once a minute)',
    }),
    createdAt: IsoTime,
    createdBy: z
      .object({ userId: Uuid, email: z.string() })
      .nullable()
      .meta({ description: 'the person who made it; null when made on the server host' }),
    expiresAt: IsoTime.nullable().meta({
      description: 'when it stops working (401, as an unknown token); null when it never expires',
    }),
    rotatedAt: IsoTime.nullable().meta({ description: 'its last rotation; null if never rotated' }),
    graceEndsAt: IsoTime.nullable().meta({
      description:
        'while the secret its last rotation replaced still works: until when; null otherwise',
    }),
    revokedAt: IsoTime.nullable(),
    revokedReason: z.enum(['revoked', 'creator_removed']).nullable().meta({
      description:
        'why it was revoked: by a person or the operator (revoked), or because the person who made it left the enterprise (creator_removed); null while live',
    }),
  })
  .meta({ id: 'ApiToken' })
export type ApiToken = z.infer<typeof ApiToken>

export const ApiTokenCreated = ApiToken.extend({
  token: z.string().meta({
    description:
      'the secret, in this answer only: osd_, 43 random characters and a 6-character CRC32 checksum, all of [0-9A-Za-z]',
  }),
}).meta({ id: 'ApiTokenCreated' })
export type ApiTokenCreated = z.infer<typeof ApiTokenCreated>

const ExpiresAt = z.string().max(40).meta({
  description:
    'an ISO 8601 date-time, or a date (00:00 UTC that day); in the future. The token answers 401 from then on',
  example: '2027-01-31',
})

export const ApiTokenInput = z
  .object({
    name: z.string().max(1000),
    scopes: z.array(z.string().max(200)).max(200).meta({
      description: 'resource:read or resource:write, at least one; duplicates count once',
    }),
    expiresInDays: z
      .number()
      .int()
      .min(1)
      .max(3650)
      .optional()
      .meta({ description: 'the token stops working this many days from now' }),
    expiresAt: ExpiresAt.optional().meta({
      description: 'the token stops working then (not with expiresInDays); never, when neither',
    }),
  })
  .meta({ id: 'ApiTokenInput' })

export const ApiTokenChange = z
  .object({
    name: z.string().max(1000).optional(),
    scopes: z.array(z.string().max(200)).max(200).optional().meta({
      description:
        'the new scopes, replacing the old; resource:read or resource:write, at least one',
    }),
    expiresAt: ExpiresAt.nullable().optional().meta({
      description: 'a new expiry in the future, or null: never expires',
    }),
  })
  .meta({ id: 'ApiTokenChange' })

export const ApiTokenRotation = z
  .object({
    graceSeconds: z.number().int().min(0).max(maxGraceSeconds).optional().meta({
      description:
        'how long the replaced secret keeps working, 0 (default: it stops at once) to 604800 (7 days)',
    }),
  })
  .meta({ id: 'ApiTokenRotation' })

export const ApiTokenListQuery = z.object({
  idPrefix: idPrefixParameter('tokens'),
  includeRevoked: z
    .enum(['true', 'false'])
    .optional()
    .meta({ description: 'true lists revoked tokens too' }),
})
