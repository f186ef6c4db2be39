import { defaultLeaseSeconds } from '../../config.js'
import type { Sealer } from '../../crypto.js'
import type { Sql } from '../../db/sql.js'
import {
  answerKeptBytes,
  attemptTimeoutMs,
  claimDeliveries,
  deliveryChannel,
  deliveryMessage,
  deliveryStillHeld,
  dropDelivery,
  nextDeliveryDue,
  recordAttempt,
  releaseDeliveries,
  renewDeliveries,
  type Attempt,
  type ClaimedDelivery,
} from '../../domain/events/index.js'
import {
  egressFetch,
  egressRefusalOf,
  firstBytes,
  type EgressRule,
  type Fetch,
} from '../../egress.js'
import type { Logger } from '../../log.js'
import { LeaseLoop, type Leased, type WorkKind } from '../lease-loop.js'

// Deliveries of the feed's events to subscriptions (issue 47), as a kind of the lease loop: claimed
// with `for update skip locked` and a lease (domain/events/deliveries.ts), a bounded number at a time
// and of each subscription, each a POST that waits 10 s at most for its answer, through the egress
// rule. A receiver that is slow or gone holds at most its own share of the slots, never another's and
// never a run's (the runs' loop is another, on its own connections' work): each subscription's first
// delivery in flight has a slot of its own, so slow receivers that fill the shared slots (five dead
// ones once held all 64, and a healthy subscription's POSTs waited up to their 10 s) delay no other.
//
// A subscription has a window of deliveries in flight at once, each with its own webhook-id, attempts
// and back-off. At 4, each ending in a transaction of four statements and a pass to claim the next, a
// subscription's rate was about 70 a second on one core, below a busy enterprise's gates (bench:events:
// 1,000 gates at 100/s, a POST's p99 was 4.7 s and growing); the window is now 16 and an attempt is
// recorded in one statement. So a receiver may get a subscription's events out of their feed order
// (docs/events.md says so); `data.position` orders them.

/** Deliveries one subscription has in flight at once in a process. */
export const deliveryWindow = 16
/**
 * Deliveries a process has in flight at once beyond each subscription's first: the slots the
 * subscriptions share, four windows. Dead receivers (each attempt held its 10 s) may hold all of
 * them; they hold no subscription's first.
 */
export const deliveriesInFlight = 64
/**
 * Subscriptions a process has deliveries in flight to at once, each with its first in a slot of its
 * own: a subscription with none in flight sends at once, whatever slow receivers hold (issue 47: a
 * slow or dead receiver never delays another). With the shared slots, a process holds at most
 * 64 + 256 connections to receivers.
 */
export const subscriptionsInFlight = 256

export interface DeliveryLoopOptions {
  sql: Sql
  log: Logger
  sealer: Sealer
  engineId: string
  egress: EgressRule
  publicUrl: string | undefined
  /** Deliveries this process makes at once beyond each subscription's first (deliveriesInFlight unless told). */
  maxInFlight?: number
  /** Subscriptions it has deliveries in flight to at once (subscriptionsInFlight unless told). */
  maxSubscriptions?: number
  /** Of one subscription (deliveryWindow unless told). */
  perSubscription?: number
  leaseSeconds?: number
  sweepMs?: number
  /** The longest an attempt waits (10 s unless told: issue 47). */
  timeoutMs?: number
}

interface DeliveryWork extends Leased {
  delivery: ClaimedDelivery
}

export class DeliveryLoop extends LeaseLoop<DeliveryWork> {
  /** Deliveries in flight here, per subscription. */
  private readonly inFlight: Map<string, number>

  constructor(options: DeliveryLoopOptions) {
    const { sql, engineId, log } = options
    const leaseSeconds = options.leaseSeconds ?? defaultLeaseSeconds
    const maxInFlight = options.maxInFlight ?? deliveriesInFlight
    const maxSubscriptions = options.maxSubscriptions ?? subscriptionsInFlight
    const perSubscription = options.perSubscription ?? deliveryWindow
    const timeoutMs = options.timeoutMs ?? attemptTimeoutMs
    const post = egressFetch(options.egress)
    const inFlight = new Map<string, number>()
    const kind: WorkKind<DeliveryWork> = {
      name: 'event delivery',
      logKey: 'deliveryId',
      channel: deliveryChannel,
      // This process's sequencer wakes this loop itself (engine/events/index.ts).
      listenLocally: () => () => undefined,
      // The loop's capacity is both kinds of slot; which are free is counted here, from what is in
      // flight (each subscription's first in its own slot, the rest in the shared ones).
      async claim(room) {
        let total = 0
        for (const n of inFlight.values()) total += n
        // Past maxSubscriptions, the firsts of the others hold shared slots.
        const own = Math.min(inFlight.size, maxSubscriptions)
        const firstRoom = Math.min(room, maxSubscriptions - own)
        const sharedRoom = Math.min(room, maxInFlight - (total - own))
        const claimed = await claimDeliveries(sql, engineId, {
          firstRoom,
          sharedRoom,
          perSubscription,
          inFlight,
          leaseSeconds,
        })
        const firsts = Math.min(
          firstRoom,
          new Set(claimed.map((d) => d.subscriptionId).filter((id) => !inFlight.has(id))).size,
        )
        return {
          claimed: claimed.map((delivery) => ({ id: delivery.id, wakeKey: '', delivery })),
          // Claimed as much as one kind of slot had room for: there may be more.
          more:
            claimed.length > 0 && (firsts === firstRoom || claimed.length - firsts === sharedRoom),
        }
      },
      nextDue: () => nextDeliveryDue(sql),
      async execute({ delivery }, signal) {
        // Counted when its sending starts and uncounted when it ends, not at the claim: a delivery
        // whose lease lapsed while this engine was still sending it is claimed again by this engine
        // and not sent twice (the lease loop lets the first sending go on), so a count made at the
        // claim went up for it and never came back down, and the subscription lost a slot for good.
        // Synchronous up to here: the next claim of the same pass already sees it.
        inFlight.set(delivery.subscriptionId, (inFlight.get(delivery.subscriptionId) ?? 0) + 1)
        try {
          await deliver(options, post, timeoutMs, delivery, signal)
        } finally {
          const left = (inFlight.get(delivery.subscriptionId) ?? 1) - 1
          if (left > 0) inFlight.set(delivery.subscriptionId, left)
          else inFlight.delete(delivery.subscriptionId)
        }
      },
      renew: (ids) => renewDeliveries(sql, engineId, ids, leaseSeconds),
      stillHeld: (id) => deliveryStillHeld(sql, engineId, id),
      release: (ids) => releaseDeliveries(sql, engineId, ids),
    }
    super(kind, {
      sql,
      log,
      sweepMs: options.sweepMs,
      leaseSeconds,
      capacity: maxInFlight + maxSubscriptions,
    })
    this.inFlight = inFlight
  }

  /** Deliveries in flight here now, per subscription (for tests). */
  get inFlightBySubscription(): ReadonlyMap<string, number> {
    return this.inFlight
  }
}

/** One attempt: the message signed now, POSTed, its answer (or why none) recorded. */
async function deliver(
  options: DeliveryLoopOptions,
  post: Fetch,
  timeoutMs: number,
  delivery: ClaimedDelivery,
  signal: AbortSignal,
): Promise<void> {
  const { sql, sealer, engineId, log } = options
  const message = await deliveryMessage(sql, sealer, delivery, options.publicUrl)
  if (!message) {
    await dropDelivery(sql, engineId, delivery.id)
    return
  }
  const at = new Date()
  const began = performance.now()
  const timeout = AbortSignal.timeout(timeoutMs)
  let attempt: Attempt
  try {
    const res = await post(message.url, {
      method: 'POST',
      headers: message.headers,
      body: message.body,
      // A redirect is an answer, not a 2xx: a receiver that moved says so and is retried.
      redirect: 'manual',
      signal: AbortSignal.any([signal, timeout]),
    })
    const latencyMs = Math.round(performance.now() - began)
    const answer = await firstBytes(res.body, answerKeptBytes)
    attempt = { at, statusCode: res.status, latencyMs, answer }
  } catch (err) {
    // The engine stopping (or the delivery no longer held): not an attempt; the lease goes back and
    // another engine sends it, with the same webhook-id.
    if (signal.aborted) return
    const latencyMs = Math.round(performance.now() - began)
    attempt = { at, statusCode: null, latencyMs, answer: whyNoAnswer(err, timeout, timeoutMs) }
  }
  const outcome = await recordAttempt(sql, engineId, delivery, attempt)
  if (outcome === 'failed')
    log.warn(
      { deliveryId: delivery.id, subscriptionId: delivery.subscriptionId },
      'an event delivery failed for 3 days: its subscription is disabled',
    )
}

function whyNoAnswer(err: unknown, timeout: AbortSignal, timeoutMs: number): string {
  if (timeout.aborted) return `no answer within ${timeoutMs / 1000} s`
  const refused = egressRefusalOf(err)
  if (refused) return `not sent: ${refused.message}`
  let cause: unknown = err
  for (let depth = 0; depth < 4 && (cause as { cause?: unknown })?.cause; depth++)
    cause = (cause as { cause?: unknown }).cause
  const code = (cause as { code?: string })?.code
  const message = (cause as Error)?.message ?? String(cause)
  return `no answer: ${code ? `${code} ` : ''}${message}`.slice(0, answerKeptBytes)
}
