import { z } from 'zod'
import { Pause } from './pauses.js'
import { IsoTime, Uuid } from './common.js'
import { ModelTier } from './models.js'

export const Enterprise = z
  .object({ id: Uuid, slug: z.string(), name: z.string() })
  .meta({ id: 'Enterprise' })
export type Enterprise = z.infer<typeof Enterprise>

/** The enterprise and its caller (a token, or a person) as the daemon sees them (beyond the spec; for osctl auth status). */
export const EnterpriseOverview = z
  .object({
    enterprise: Enterprise,
    token: z
      .object({
        id: Uuid,
        name: z.string(),
        scopes: z.array(z.string()),
        lastChars: z.string(),
      })
      .nullable()
      .meta({ description: 'the calling API token; null when a person calls with a session' }),
    person: z
      .object({ id: Uuid, email: z.string(), name: z.string(), role: z.enum(['owner', 'member']) })
      .nullable()
      .meta({ description: 'the signed-in person, with their role; null when a token calls' }),
    paused: Pause.nullable().meta({
      description:
        "the enterprise's pause in force (POST /v1/enterprise/pause), or null (beyond the spec; issue 50)",
    }),
  })
  .meta({ id: 'EnterpriseOverview' })
export type EnterpriseOverview = z.infer<typeof EnterpriseOverview>

/** The secret itself is never answered after its rotation (spec: Authentication 8). */
export const WebhookSecretInfo = z
  .object({
    lastChars: z.string().meta({ description: 'last four characters of the secret in use' }),
    since: IsoTime,
    rotated: z
      .boolean()
      .meta({ description: 'false while the initial, never revealed, secret is in use' }),
  })
  .meta({ id: 'WebhookSecretInfo' })
export type WebhookSecretInfo = z.infer<typeof WebhookSecretInfo>

export const WebhookSecretRotated = WebhookSecretInfo.extend({
  secret: z.string().meta({ description: 'the new secret; shown in this answer only' }),
}).meta({ id: 'WebhookSecretRotated' })
export type WebhookSecretRotated = z.infer<typeof WebhookSecretRotated>

export const imageContentTypes = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const

export const AvatarInput = z
  .object({
    dataUrl: z
      .string()
      .meta({ description: 'a data: URL of a png, jpeg, gif or webp image, base64-encoded' }),
  })
  .meta({ id: 'AvatarInput' })

export const Avatar = z
  .object({ contentType: z.enum(imageContentTypes), bytes: z.number().int() })
  .meta({ id: 'Avatar' })
export type Avatar = z.infer<typeof Avatar>

/** Allowed range of concurrentRunLimit is not shown by the spec; 1..10000 keeps it meaningful. */
export const ConcurrentRunLimit = z.number().int().min(1).max(10000)

export const Concurrency = z
  .object({ concurrentRunLimit: ConcurrentRunLimit })
  .meta({ id: 'EnterpriseConcurrency' })
export type Concurrency = z.infer<typeof Concurrency>

export const ChatModelTierSetting = z
  .object({ chatModelTier: ModelTier })
  .meta({ id: 'EnterpriseChatModelTier' })

export const chatMemoryDepths = ['off', 'small', 'medium', 'large'] as const
export const ChatMemoryDepth = z.enum(chatMemoryDepths)

export const ChatMemoryDepthInput = z
  .object({ chatMemoryDepth: ChatMemoryDepth })
  .meta({ id: 'EnterpriseChatMemoryDepthInput' })

export const ChatMemoryDepthSetting = z
  .object({ chatMemoryDepth: ChatMemoryDepth, depths: z.array(ChatMemoryDepth) })
  .meta({ id: 'EnterpriseChatMemoryDepth' })

export const Metrics = z
  .object({ metrics: z.array(z.string().trim().min(1).max(200)).max(50) })
  .meta({ id: 'EnterpriseMetrics' })
export type Metrics = z.infer<typeof Metrics>
