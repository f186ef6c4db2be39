import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  DeliveryListQuery,
  DeliveryPage,
  ReplayInput,
  WebhookAccepted,
  WebhookDelivery,
  webhookSorts,
} from '../../shared/schemas/webhooks.js'
import { GateDecidedByWebhook, WebhookGateDecision } from '../../shared/schemas/gates.js'
import { RunInput } from '../../shared/schemas/runs.js'
import { readPage } from '../db/paging.js'
import {
  getDelivery,
  listDeliveries,
  receiveWebhook,
  replayDelivery,
  secretHeader,
} from '../domain/webhooks/index.js'
import { unknownHolder, webhookSecretHolder } from '../domain/enterprises/index.js'
import { readRouteBody } from '../http/body.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { requestHeader } from '../http/headers.js'
import { createRouter, route } from '../http/router.js'
import { traceParentOf } from '../traces/index.js'

/** The challenge of a refused webhook secret, naming its header (errors.ts writes it). */
export const webhookChallenge = `WebhookSecret header="${secretHeader}"`

/**
 * The body's size as sent: its content-length (the body is read only once the secret is right, and
 * then measured if it did not say: receiveWebhook).
 */
function bodySize(c: AppContext): number | undefined {
  const declared = Number(requestHeader(c, 'content-length'))
  return declared > 0 ? declared : undefined
}

/** Inbound webhooks and their history (spec: Routes without a token; Webhook history). */
export function webhookRoutes({ sql, sealer, caches, limits, starts }: RouteDeps) {
  const app = createRouter()
  // An unknown slug is kept too (as unknownHolder), so that it answers from memory as a known one does
  // (spec: Authentication 8: the same 401); a rotation anywhere drops those (caches.ts).
  const holderOf = async (slug: string) => {
    const holder = await caches.webhookSecrets.through(
      slug,
      async () => (await webhookSecretHolder(sql, slug)) ?? unknownHolder(slug),
    )
    return holder?.id === '' ? undefined : holder
  }

  const receive = async (
    c: AppContext,
    kind: 'task' | 'gate',
    enterprise: string,
    target: string,
  ) => {
    const outcome = await receiveWebhook(sql, starts, sealer, holderOf, kind, {
      enterpriseSlug: enterprise,
      target,
      secret: requestHeader(c, secretHeader),
      method: c.req.method,
      path: c.req.path,
      headers: c.req.header(),
      body: undefined,
      // Read only with the right secret (http/body.ts leaves these routes' bodies to them).
      readBody: () => readRouteBody(c),
      clientAddress: limits.clientOf(c),
      sizeBytes: bodySize(c),
      traceParent: traceParentOf(c.var.trace),
    })
    // Its 401 names the credential these routes take (RFC 9110 11.6.1: a challenge applicable to the
    // target): not a bearer token, which they do not read, but the secret header.
    if (outcome.status === 401) c.set('challenge', webhookChallenge)
    const body =
      outcome.status < 300 ? { ...outcome.body, deliveryId: outcome.deliveryId } : outcome.body
    return c.json(body, outcome.status as 202)
  }

  route(
    app,
    {
      operationId: 'startTaskRunByWebhook',
      method: 'post',
      path: '/{enterprise}/tasks/{task}',
      summary:
        "Start a task by webhook: {enterprise} and {task} are slugs, the body is the run's input; header x-os-webhook-secret",
      description:
        'Starts a run like POST /v1/tasks/{id}/runs, but waits instead of being refused: if its lane has a run under way or every holder of the role is busy, the new run waits (status pending); otherwise it is queued at once. 202 means consumed, not finished. The delivery is stored in the same transaction as the run.',
      params: z.object({ enterprise: z.string(), task: z.string() }),
      bodyDoc: RunInput,
      status: 202,
      response: WebhookAccepted,
      errors: ['task_not_found', 'task_not_runnable'],
      public: true,
      credential: 'webhookSecret',
    },
    async (c, { params }) => receive(c, 'task', params.enterprise, params.task),
  )

  route(
    app,
    {
      operationId: 'decideGateByWebhook',
      method: 'post',
      path: '/{enterprise}/gates/{gateId}',
      summary:
        'Decide a gate by webhook: body decision (approve, reject, request_changes) and an optional note; header x-os-webhook-secret',
      description:
        'The same rules as POST /v1/gates/{id}/decision; stored as a delivery and replayable (a replay of a decided gate is refused).',
      params: z.object({ enterprise: z.string(), gateId: z.string() }),
      bodyDoc: WebhookGateDecision,
      status: 201,
      response: GateDecidedByWebhook,
      errors: ['gate_not_found', 'gate_not_waiting'],
      public: true,
      credential: 'webhookSecret',
    },
    async (c, { params }) => receive(c, 'gate', params.enterprise, params.gateId),
  )

  route(
    app,
    {
      operationId: 'listWebhookDeliveries',
      method: 'get',
      path: '/',
      summary:
        'Webhook deliveries, paged; sort receivedAt, status, target, responseStatus, durationMs',
      query: DeliveryListQuery,
      response: DeliveryPage,
    },
    async (c, { query }) =>
      listDeliveries(sql, c.var.caller.enterpriseId, query, readPage(query, webhookSorts)),
  )

  route(
    app,
    {
      operationId: 'getWebhookDelivery',
      method: 'get',
      path: '/{id}',
      summary: 'One delivery: request, response, what followed',
      params: z.object({ id: Uuid }),
      notFound: 'delivery_not_found',
      response: WebhookDelivery,
    },
    async (c, { params }) => getDelivery(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      operationId: 'replayWebhookDelivery',
      method: 'post',
      path: '/{id}/replay',
      summary: 'Apply a delivery again through the current rules, as a new delivery linked to it',
      description:
        'The same idempotencyKey on the same delivery answers the same replay; on another delivery it is 409 replay_idempotency_key_reused. A replay its target refuses (a gate decided since: 409 gate_not_waiting; a task deprecated or deleted since: 404 task_not_runnable or task_not_found) answers that refusal, with the id of the replay in deliveryId: the refused replay is kept as a delivery linked to the original.',
      params: z.object({ id: Uuid }),
      notFound: 'delivery_not_found',
      body: ReplayInput,
      status: 201,
      response: WebhookDelivery,
      otherAnswers: {
        200: {
          description: 'the same key on the same delivery again: the replay it made first',
          schema: WebhookDelivery,
        },
      },
      errors: [
        'replay_idempotency_key_reused',
        'delivery_not_replayable',
        'gate_not_waiting',
        'gate_not_found',
        'task_not_found',
        'task_not_runnable',
      ],
    },
    async (c, { params, body }) => {
      const { delivery, created } = await replayDelivery(
        sql,
        starts,
        sealer,
        c.var.caller.enterpriseId,
        params.id,
        body.idempotencyKey,
        traceParentOf(c.var.trace),
      )
      return created ? delivery : c.json(delivery, 200)
    },
  )

  return app
}
