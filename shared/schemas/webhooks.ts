import { z } from 'zod'
import { IsoTime, PageQuery, Uuid, pagedEnvelope } from './common.js'
import { deliveryStatuses, deliveryKinds, runStatuses, webhookSorts } from '../values.js'
export { deliveryStatuses, deliveryKinds, webhookSorts }

// Inbound webhook deliveries (spec: Webhook history; Routes without a token).

export const WebhookDelivery = z
  .object({
    id: Uuid,
    kind: z.enum(deliveryKinds),
    /** The task slug or the gate id the call named. */
    target: z.string(),
    status: z.enum(deliveryStatuses),
    authenticated: z.boolean(),
    /**
     * As received, credentials left out and sensitive fields redacted; of a call that never
     * authenticated, only the method, path and safe headers (body null).
     */
    request: z.object({
      method: z.string(),
      path: z.string(),
      headers: z.record(z.string(), z.string()),
      body: z.unknown(),
    }),
    response: z.object({ status: z.number().int(), body: z.unknown() }).nullable(),
    durationMs: z.number().int().nullable(),
    runId: Uuid.nullable(),
    executionId: Uuid.nullable(),
    gateId: Uuid.nullable(),
    /** The original, when this delivery is a replay. */
    replayOf: Uuid.nullable(),
    replayable: z.boolean(),
    /** The client address the call came from (null for replays and older deliveries). */
    clientAddress: z.string().nullable(),
    /** The size of the request body in bytes, as sent (null when unknown). */
    sizeBytes: z.number().int().nullable(),
    receivedAt: IsoTime,
    finishedAt: IsoTime.nullable(),
  })
  .meta({ id: 'WebhookDelivery' })
export type WebhookDelivery = z.infer<typeof WebhookDelivery>

export const DeliveryListQuery = PageQuery.extend({
  status: z
    .string()
    .optional()
    .meta({ description: deliveryStatuses.join(', ') }),
  kind: z
    .string()
    .optional()
    .meta({ description: deliveryKinds.join(', ') }),
})

export const DeliveryPage = pagedEnvelope(WebhookDelivery).meta({ id: 'WebhookDeliveryPage' })

export const ReplayInput = z
  .object({
    idempotencyKey: z
      .string()
      .regex(/^[A-Za-z0-9_-]{16,64}$/, '16 to 64 letters, digits, hyphens or underscores'),
  })
  .meta({ id: 'ReplayInput' })

export const WebhookAccepted = z
  .object({
    runId: Uuid,
    executionId: Uuid,
    status: z.enum(runStatuses).meta({ description: 'queued, or pending while it waits its turn' }),
    deliveryId: Uuid,
  })
  .meta({ id: 'WebhookAccepted' })
