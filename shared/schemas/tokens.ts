import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'

// API tokens as a signed-in person manages them (spec: Authentication 6; Portal-only routes). Bodies
// beyond the spec's words are this service's own.

export const ApiToken = z
  .object({
    id: Uuid,
    name: z.string(),
    scopes: z.array(z.string()),
    lastChars: z
      .string()
      .meta({ description: 'the last characters of the secret, to recognise it' }),
    lastUsedAt: IsoTime.nullable().meta({ description: 'to the minute' }),
    createdAt: IsoTime,
    createdBy: z
      .object({ userId: Uuid, email: z.string() })
      .nullable()
      .meta({ description: 'the person who made it; null when made on the server host' }),
    revokedAt: IsoTime.nullable(),
  })
  .meta({ id: 'ApiToken' })
export type ApiToken = z.infer<typeof ApiToken>

export const ApiTokenCreated = ApiToken.extend({
  token: z.string().meta({ description: 'the secret, in this answer only' }),
}).meta({ id: 'ApiTokenCreated' })
export type ApiTokenCreated = z.infer<typeof ApiTokenCreated>

export const ApiTokenInput = z
  .object({
    name: z.string().max(1000),
    scopes: z.array(z.string().max(200)).max(200).meta({
      description: 'resource:read or resource:write, at least one; duplicates count once',
    }),
  })
  .meta({ id: 'ApiTokenInput' })

export const ApiTokenListQuery = z.object({
  includeRevoked: z
    .enum(['true', 'false'])
    .optional()
    .meta({ description: 'true lists revoked tokens too' }),
})
