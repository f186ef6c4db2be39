import { z } from 'zod'
import type { Resource } from '../scopes.js'
import {
  IsoTime,
  JsonObject,
  PageQuery,
  Uuid,
  pagedEnvelope,
  queryInteger,
  waitSecondsParameter,
} from './common.js'
import { deliveryStates, subscriptionFormats, subscriptionStatuses } from '../values.js'

export { deliveryStates, subscriptionFormats, subscriptionStatuses }

// The event feed of an enterprise, outbound event subscriptions and a person's notifications
// (issue 47; DESIGN 15; docs/events.md).

/**
 * The resource whose read scope shows a family of event types (the word before the first dot): a
 * token sees in the feed only the types of the resources it may read, as the scope rule reads them
 * (spec: Authentication 3). A run's own progress (model and tool calls, improvement) is the run's.
 */
export const feedFamilies = {
  run: 'runs',
  model: 'runs',
  tool: 'runs',
  improvement: 'runs',
  gate: 'gates',
  execution: 'executions',
  chat: 'chats',
  recommendation: 'recommendations',
  memory: 'memory',
  // Pauses (issue 50): a task's is the task's, the enterprise's the enterprise settings'.
  task: 'tasks',
  enterprise: 'enterprise',
} as const satisfies Record<string, Resource>

export type FeedFamily = keyof typeof feedFamilies

/** The feed's own events (feed.reset), which every reader gets. */
export const feedOwnFamily = 'feed'

/** The resource a type belongs to, or undefined for the feed's own and unknown families. */
export function feedResourceOf(type: string): Resource | undefined {
  const family = type.split('.', 1)[0]!
  return Object.hasOwn(feedFamilies, family) ? feedFamilies[family as FeedFamily] : undefined
}

/** The families a holder of these scopes reads (a person's session holds every scope). */
export function readableFamilies(scopes: ReadonlySet<string>): FeedFamily[] {
  return (Object.keys(feedFamilies) as FeedFamily[]).filter((f) =>
    scopes.has(`${feedFamilies[f]}:read`),
  )
}

/**
 * One entry of a types filter: `*`, a family or type followed by `.*` (`run.*`), or an exact type
 * (`gate.waiting`).
 */
export const typePattern = /^(\*|[a-z][a-z_]*(\.[a-z][a-z_]*)*(\.\*)?)$/

/** The family (or undefined for `*`) a types filter entry names. */
export function patternFamily(pattern: string): string | undefined {
  return pattern === '*' ? undefined : pattern.split('.', 1)[0]
}

/** Whether a type matches a filter entry. */
export function typeMatches(type: string, pattern: string): boolean {
  if (pattern === '*') return true
  if (pattern.endsWith('.*')) return type.startsWith(pattern.slice(0, -1))
  return type === pattern
}

export const EventTypes = z
  .array(
    z.string().max(100).regex(typePattern, 'a type (gate.waiting), a family with .* (run.*), or *'),
  )
  .min(1)
  .max(50)

export const FeedEvent = z
  .object({
    position: z.number().int().meta({
      description:
        'its place in the enterprise feed: positions only grow, one by one; the SSE id, and what after= and Last-Event-ID resume from',
    }),
    type: z.string().meta({ example: 'gate.waiting' }),
    createdAt: IsoTime.meta({ description: 'when it happened (its change committed soon after)' }),
    subject: JsonObject.meta({
      description:
        'what it is about, as ids: runId, taskId, taskSlug, executionId, gateId, chatId, messageId, recommendationId, itemId, noteId (those that apply)',
    }),
    payload: JsonObject.meta({
      description:
        "the event's details: a run event's payload as recorded (GET /v1/runs/{id}), a gate's question or decision, ...",
    }),
  })
  .meta({ id: 'FeedEvent' })
export type FeedEvent = z.infer<typeof FeedEvent>

export const FeedQuery = z.object({
  after: queryInteger({
    min: 0,
    max: Number.MAX_SAFE_INTEGER,
    description:
      'read the events after this position (default: 0 for a page, now for a stream; Last-Event-ID wins over it)',
  }),
  limit: queryInteger({
    min: 1,
    max: 200,
    description: 'at most this many events, 1..200 (default 100)',
  }),
  types: z.string().optional().meta({
    description:
      'comma-separated types to keep: exact (gate.waiting), a family (run.*), or *; default every type the token may read',
  }),
  waitSeconds: waitSecondsParameter(
    'a page only: with nothing after `after`, wait up to this many seconds, 0..30, for the next event',
  ),
})

export const FeedPage = z
  .object({
    data: z.array(FeedEvent),
    next: z.number().int().meta({
      description:
        'the position to ask after= next: the last event of this page, or (nothing more now) the newest position read, events filtered out included',
    }),
    more: z.boolean().meta({ description: 'more events are there already: ask again at once' }),
  })
  .meta({ id: 'FeedPage' })
export type FeedPage = z.infer<typeof FeedPage>

// --- subscriptions -------------------------------------------------------------------------------

const SubscriptionUrl = z
  .string()
  .max(2000)
  .meta({ description: 'http or https; the egress rule applies (url_not_allowed)' })
const Description = z.string().max(500)

export const EventSubscriptionInput = z
  .object({
    url: SubscriptionUrl,
    types: EventTypes,
    format: z.enum(subscriptionFormats).optional().meta({
      description:
        'standard (default): Standard Webhooks {type, timestamp, data}, signed; slack: {text, blocks} for a Slack incoming webhook, signed too',
    }),
    description: Description.optional(),
  })
  .meta({ id: 'EventSubscriptionInput' })
export type EventSubscriptionInput = z.infer<typeof EventSubscriptionInput>

export const EventSubscriptionChange = z
  .object({
    url: SubscriptionUrl.optional(),
    types: EventTypes.optional(),
    format: z.enum(subscriptionFormats).optional(),
    description: Description.nullable().optional(),
    status: z.enum(subscriptionStatuses).optional().meta({
      description:
        'disabled stops deliveries; enabled starts them again (those still pending are sent)',
    }),
  })
  .meta({ id: 'EventSubscriptionChange' })
export type EventSubscriptionChange = z.infer<typeof EventSubscriptionChange>

export const EventSubscription = z
  .object({
    id: Uuid,
    url: z.string(),
    types: z.array(z.string()),
    families: z.array(z.string()).meta({
      description:
        'read-only: the families it may carry (run, gate, ...), those its maker could read when it was made, narrowed to the reader of a change of its types or url; of its types, only events of these families are sent',
      example: ['run', 'model', 'tool', 'improvement', 'gate'],
    }),
    format: z.enum(subscriptionFormats),
    description: z.string().nullable(),
    status: z.enum(subscriptionStatuses),
    disabledReason: z.string().nullable().meta({
      description: 'why osd disabled it (deliveries failing for 3 days), or null',
    }),
    secretHint: z.string().meta({ description: 'the last characters of the signing secret' }),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'EventSubscription' })
export type EventSubscription = z.infer<typeof EventSubscription>

export const EventSubscriptionWithSecret = EventSubscription.extend({
  secret: z.string().meta({
    description: 'whsec_ and the base64 of the signing key: shown in this answer only, never again',
    example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  }),
}).meta({ id: 'EventSubscriptionWithSecret' })
export type EventSubscriptionWithSecret = z.infer<typeof EventSubscriptionWithSecret>

export const DeliveryAttempt = z
  .object({
    at: IsoTime,
    statusCode: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'null: no answer (timeout, refused)' }),
    latencyMs: z.number().int(),
    answer: z.string().meta({ description: 'the first 1 KB of the answer, or why there was none' }),
  })
  .meta({ id: 'EventDeliveryAttempt' })

export const EventDelivery = z
  .object({
    id: Uuid.meta({ description: 'also the webhook-id header of every attempt' }),
    subscriptionId: Uuid,
    position: z.number().int(),
    type: z.string(),
    status: z.enum(deliveryStates).meta({
      description: 'pending (to be tried, or tried again), succeeded (a 2xx), failed (given up)',
    }),
    attempts: z.array(DeliveryAttempt),
    nextAttemptAt: IsoTime.nullable(),
    createdAt: IsoTime,
  })
  .meta({ id: 'EventDelivery' })
export type EventDelivery = z.infer<typeof EventDelivery>

export const EventDeliveryQuery = PageQuery.pick({ page: true, limit: true }).extend({
  status: z
    .string()
    .optional()
    .meta({ description: deliveryStates.join(', ') }),
})

export const EventDeliveryPage = pagedEnvelope(EventDelivery).meta({ id: 'EventDeliveryPage' })

// --- notifications -------------------------------------------------------------------------------

export const Notifications = z
  .object({
    email: z
      .string()
      .meta({ description: 'where mail goes: the address the person signs in with' }),
    gates: z.boolean().meta({ description: 'mail when a gate waits that you may decide' }),
    runFailures: z.boolean().meta({ description: 'mail when a run you started fails' }),
    mailConfigured: z.boolean().meta({
      description: 'whether this osd sends mail at all (OSD_SMTP_URL and OSD_MAIL_FROM)',
    }),
  })
  .meta({ id: 'Notifications' })
export type Notifications = z.infer<typeof Notifications>

export const NotificationsChange = z
  .object({ gates: z.boolean().optional(), runFailures: z.boolean().optional() })
  .meta({ id: 'NotificationsChange' })
