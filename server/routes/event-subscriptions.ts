import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  EventDelivery,
  EventDeliveryPage,
  EventDeliveryQuery,
  EventSubscription,
  EventSubscriptionChange,
  EventSubscriptionInput,
  EventSubscriptionWithSecret,
} from '../../shared/schemas/events.js'
import {
  createSubscription,
  deleteSubscription,
  getSubscription,
  listDeliveries,
  listSubscriptions,
  retryDelivery,
  rotateSubscriptionSecret,
  updateSubscription,
} from '../domain/events/index.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

// Outbound event subscriptions (issue 47; docs/events.md): the feed's events POSTed to a URL, signed
// as Standard Webhooks ask. The path's resource is event-subscriptions; the scope rule reads it as
// webhooks (shared/scopes.ts resourceAliases): webhooks:read to read, webhooks:write to change.

const SubscriptionParams = z.object({ id: Uuid })
const DeliveryParams = z.object({ id: Uuid, deliveryId: Uuid })

const caller = (c: AppContext) => ({ actor: c.var.caller.actor, scopes: c.var.caller.scopes })

/** Mounted at /v1/event-subscriptions. */
export function eventSubscriptionRoutes({ sql, sealer, config }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'subscription_not_found', params: SubscriptionParams } as const

  route(
    app,
    {
      operationId: 'createEventSubscription',
      method: 'post',
      path: '/',
      summary:
        "Subscribe a URL to the feed's events of some types; the signing secret is shown once",
      description:
        "Each event of the types (as GET /v1/events ?types= takes them) is POSTed to the url: format standard, the Standard Webhooks payload {type, timestamp, data: {position, subject, payload}}; format slack, {text, blocks} for a Slack incoming webhook. Every attempt carries webhook-id (the delivery's id, the same on every attempt), webhook-timestamp and webhook-signature (v1, and the base64 HMAC-SHA256 of id.timestamp.body keyed with the base64-decoded part of the secret after whsec_). A 2xx ends a delivery; anything else, or no answer in 10 s, is tried again after 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h; after 3 days the subscription is disabled and its maker told by mail. A subscription carries only the events its maker may read in the feed (403 api_token_scope for types it may not). The url obeys the egress rule (400 url_not_allowed).",
      body: EventSubscriptionInput,
      status: 201,
      response: EventSubscriptionWithSecret,
      errors: ['url_not_allowed'],
    },
    async (c, { body }) =>
      createSubscription(sql, sealer, config.egress, c.var.caller.enterpriseId, body, caller(c)),
  )
  route(
    app,
    {
      operationId: 'listEventSubscriptions',
      method: 'get',
      path: '/',
      summary: "The enterprise's event subscriptions, oldest first",
      response: z.array(EventSubscription),
    },
    async (c) => listSubscriptions(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      ...common,
      operationId: 'getEventSubscription',
      method: 'get',
      path: '/{id}',
      summary: 'One event subscription (its secret is never shown again)',
      response: EventSubscription,
    },
    async (c, { params }) => getSubscription(sql, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      ...common,
      operationId: 'updateEventSubscription',
      method: 'patch',
      path: '/{id}',
      summary:
        'Change its url, types, format or description, or disable and enable it (enabled again, it sends what is pending)',
      description:
        'What it may carry narrows to what the caller reads too: its types must be events the caller may read in the feed (403 api_token_scope).',
      body: EventSubscriptionChange,
      response: EventSubscription,
      errors: ['url_not_allowed'],
    },
    async (c, { params, body }) =>
      updateSubscription(sql, config.egress, c.var.caller.enterpriseId, params.id, body, caller(c)),
  )
  route(
    app,
    {
      ...common,
      operationId: 'deleteEventSubscription',
      method: 'delete',
      path: '/{id}',
      summary: 'Delete the subscription and its deliveries; nothing more is sent',
      status: 204,
    },
    async (c, { params }) => deleteSubscription(sql, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      ...common,
      operationId: 'rotateEventSubscriptionSecret',
      method: 'post',
      path: '/{id}/rotate-secret',
      summary:
        'A new signing secret, shown in this answer only; the old one signs nothing from now on',
      response: EventSubscriptionWithSecret,
    },
    async (c, { params }) =>
      rotateSubscriptionSecret(sql, sealer, c.var.caller.enterpriseId, params.id),
  )
  route(
    app,
    {
      ...common,
      operationId: 'listEventDeliveries',
      method: 'get',
      path: '/{id}/deliveries',
      summary:
        "The subscription's deliveries, newest first, each with its attempts: time, status code, latency, the first 1 KB of the answer",
      query: EventDeliveryQuery,
      response: EventDeliveryPage,
    },
    async (c, { params, query }) =>
      listDeliveries(sql, c.var.caller.enterpriseId, params.id, query),
  )
  route(
    app,
    {
      operationId: 'retryEventDelivery',
      method: 'post',
      path: '/{id}/deliveries/{deliveryId}/retry',
      summary:
        'Send a delivery again now, with the same webhook-id (its waits and its 3 days start again)',
      params: DeliveryParams,
      notFound: 'subscription_not_found',
      status: 202,
      response: EventDelivery,
      errors: ['delivery_not_found', 'subscription_disabled'],
    },
    async (c, { params }) =>
      retryDelivery(sql, c.var.caller.enterpriseId, params.id, params.deliveryId),
  )
  return app
}
