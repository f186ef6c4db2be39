import { createHmac } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import type { EventDelivery, FeedEvent } from '../../../shared/schemas/events.js'
import { storable } from '../../../shared/text.js'
import { sealedColumns, type Sealer } from '../../crypto.js'
import { envelope, readPage } from '../../db/paging.js'
import {
  literalIn,
  notifyAfterCommit,
  transaction,
  unflushedCommit,
  type Db,
  type Sql,
} from '../../db/sql.js'
import { formatMessage } from './formats.js'

// Deliveries of the feed's events to subscriptions (issue 47; migration 0034). Made by the sequencing
// pass (feed.ts), one per event and subscription; claimed by the engines like runs (`for update skip
// locked`, a lease), a few of each subscription at a time, so a slow or dead receiver holds only its
// own; each attempt recorded with its answer. At least once: a 2xx ends a delivery; anything else, or
// no answer in 10 s, is tried again after 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h, for 3 days
// from the delivery's making; after that the delivery has failed and its subscription is disabled, its
// owner told by mail.

/** NOTIFY channel of deliveries to make (no payload): wakes the engines' delivery loops. */
export const deliveryChannel = 'osd_deliveries'

/** The waits after the first failed attempts, in seconds; every one after them waits 6 hours. */
export const retryWaitsSeconds = [5, 30, 120, 600, 3600] as const
export const laterWaitSeconds = 6 * 3600
/** How long a delivery is tried before it fails and its subscription is disabled. */
export const giveUpAfterMs = 3 * 86_400_000
/** The longest an attempt waits for its answer. */
export const attemptTimeoutMs = 10_000
/** How much of an answer is kept. */
export const answerKeptBytes = 1024

/** When the next attempt goes after `attempts` failed ones, or null when the delivery gives up. */
export function nextAttemptAt(attempts: number, tryingSince: Date, now: Date): Date | null {
  const wait = retryWaitsSeconds[attempts - 1] ?? laterWaitSeconds
  const at = new Date(now.getTime() + wait * 1000)
  return at.getTime() > tryingSince.getTime() + giveUpAfterMs ? null : at
}

export interface ClaimedDelivery {
  id: string
  enterpriseId: string
  subscriptionId: string
  position: number
  type: string
  attempts: number
  /** Tried for 3 days from here: its making, or a person's retry. */
  tryingSince: Date
}

/**
 * Claims due deliveries for this engine. Of each subscription, at most `perSubscription` less those
 * this engine has in flight already (`inFlight`), its own oldest due first, so one receiver's backlog
 * never stands in front of another's. A subscription with none in flight takes its first at once, in
 * a slot of its own (at most `firstRoom` of them); every other delivery takes one of the slots the
 * subscriptions share (at most `sharedRoom`), those with the fewest in flight first. So slow receivers
 * that hold every shared slot never hold another subscription's first.
 */
export async function claimDeliveries(
  sql: Sql,
  engineId: string,
  options: {
    firstRoom: number
    sharedRoom: number
    perSubscription: number
    inFlight: ReadonlyMap<string, number>
    leaseSeconds: number
  },
): Promise<ClaimedDelivery[]> {
  if (options.firstRoom <= 0 && options.sharedRoom <= 0) return []
  const busy = Object.fromEntries(options.inFlight)
  // Each subscription's due deliveries through its own index (event_deliveries_pending), and the rows
  // claimed by their ids: joined to the claim as a table, a plan that guessed thousands of them read
  // every delivery kept (a week of them) to hash it.
  return sql<ClaimedDelivery[]>`
    update event_deliveries d
       set lease_owner = ${engineId},
           lease_expires_at = now() + make_interval(secs => ${options.leaseSeconds}),
           attempts = d.attempts + 1
     where d.id = any(array(
        select z.id from (
          select y.id, y.own,
                 -- Each subscription's next delivery before any subscription's one after it: the
                 -- shared slots go round the subscriptions, the fewest in flight first.
                 row_number() over (partition by y.own order by y.busy + y.nth, y.next_at) as k
            from (
              select w.*, w.first and row_number() over (partition by w.first order by w.next_at)
                                      <= ${options.firstRoom}::int as own
                from (
                  select x.id, x.next_at, b.busy,
                         row_number() over (partition by s.id order by x.next_at) as nth,
                         b.busy = 0 and row_number() over (partition by s.id order by x.next_at) = 1 as first
                    from event_subscriptions s
                   cross join lateral (
                     select coalesce((${sql.json(busy)}::jsonb ->> s.id::text)::int, 0) as busy) b
                   cross join lateral (
                     select d2.id, d2.next_at from event_deliveries d2
                      where d2.subscription_id = s.id and d2.status = 'pending' and d2.next_at <= now()
                        and (d2.lease_expires_at is null or d2.lease_expires_at < now())
                      order by d2.next_at
                      limit greatest(0, ${options.perSubscription} - b.busy)
                      for update skip locked) x
                   where s.status = 'enabled') w) y) z
         -- A first beyond the slots of their own (more subscriptions in flight than those) takes a
         -- shared slot as any other, ahead of every subscription's second.
         where z.own or z.k <= ${options.sharedRoom}::int))
    returning d.id, d.enterprise_id, d.subscription_id, d.position, d.type, d.attempts, d.trying_since,
              ${unflushedCommit(sql)}`
}

/**
 * How long (ms, by the database's clock) until the next pending delivery falls due, if one does
 * later. Not one due already: a claim takes those it can, and one it cannot (its subscription
 * disabled, its lease another engine's, its subscription's window full) would have woken the loop at
 * once, again and again, as long as it stays.
 */
export async function nextDeliveryDue(db: Db): Promise<number | null> {
  // Each subscription's next, by its index (event_deliveries_pending): there are few subscriptions.
  const [row] = await db<{ inMs: number | null }[]>`
    select extract(epoch from min(x.next_at) - now())::float8 * 1000 as in_ms
      from event_subscriptions s
      cross join lateral (
        select d.next_at from event_deliveries d
         where d.subscription_id = s.id and d.status = 'pending' and d.next_at > now()
         order by d.next_at limit 1) x`
  return row!.inMs
}

/** Renews this engine's leases of these deliveries; answers those it still holds. */
export async function renewDeliveries(
  sql: Sql,
  engineId: string,
  ids: string[],
  leaseSeconds: number,
): Promise<Set<string>> {
  const rows = await sql<{ id: string }[]>`
    update event_deliveries set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
     where id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId} and status = 'pending'
    returning id, ${unflushedCommit(sql)}`
  return new Set(rows.map((r) => r.id))
}

export async function releaseDeliveries(sql: Sql, engineId: string, ids: string[]): Promise<void> {
  await sql`
    update event_deliveries set lease_owner = null, lease_expires_at = null
     where id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId}`
}

export async function deliveryStillHeld(db: Db, engineId: string, id: string): Promise<boolean> {
  const [row] = await db<{ held: boolean }[]>`
    select exists (select 1 from event_deliveries d join event_subscriptions s on s.id = d.subscription_id
                    where d.id = ${id} and d.lease_owner = ${engineId} and d.status = 'pending'
                      and s.status = 'enabled') as held`
  return row!.held
}

/** What an attempt sends: the address, the body, and the headers that sign it. */
export interface Message {
  url: string
  body: string
  headers: Record<string, string>
}

/**
 * The message of a delivery, signed now (Standard Webhooks: webhook-id, webhook-timestamp and
 * webhook-signature `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the base64-decoded part
 * of the secret). Undefined when its event is no longer kept (the feed keeps 7 days unless OSD_FEED_KEEP_HOURS says otherwise).
 */
export async function deliveryMessage(
  db: Db,
  sealer: Sealer,
  delivery: ClaimedDelivery,
  publicUrl: string | undefined,
): Promise<Message | undefined> {
  const [row] = await db<
    (Omit<FeedEvent, 'createdAt'> & {
      createdAt: Date
      url: string
      format: 'standard' | 'slack'
      secretSealed: Buffer
      enterpriseSlug: string
    })[]
  >`
    select e.position, e.type, e.subject, e.payload, e.created_at, s.url, s.format, s.secret_sealed,
           n.slug as enterprise_slug
      from event_subscriptions s
      join enterprises n on n.id = s.enterprise_id
      join events e on e.enterprise_id = s.enterprise_id and e.position = ${delivery.position}
     where s.id = ${delivery.subscriptionId}`
  if (!row) return undefined
  const event: FeedEvent = {
    position: row.position,
    type: row.type,
    createdAt: row.createdAt.toISOString(),
    subject: row.subject,
    payload: row.payload,
  }
  const body = formatMessage(row.format, event, { publicUrl, enterpriseSlug: row.enterpriseSlug })
  const timestamp = Math.floor(Date.now() / 1000)
  return {
    url: row.url,
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'osd-webhooks',
      'webhook-id': delivery.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': sign(
        sealer.open(row.secretSealed, sealedColumns.subscriptionSecret, delivery.subscriptionId),
        delivery.id,
        timestamp,
        body,
      ),
    },
  }
}

/** `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the decoded part of `whsec_...`. */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')
  return `v1,${mac}`
}

export interface Attempt {
  at: Date
  /** null: no answer. */
  statusCode: number | null
  latencyMs: number
  /** The first 1 KB of the answer, or why there was none. */
  answer: string
}

export type AttemptOutcome = 'succeeded' | 'retry' | 'failed' | 'lost'

/**
 * Records an attempt and decides what follows: a 2xx ends the delivery; otherwise it goes again at
 * its next time, or, past 3 days, fails and disables its subscription, whose owner is told by mail
 * (subscription_disabled). `lost`: this engine no longer held the delivery (nothing written).
 */
export async function recordAttempt(
  sql: Sql,
  engineId: string,
  delivery: ClaimedDelivery,
  attempt: Attempt,
): Promise<AttemptOutcome> {
  const ok = attempt.statusCode !== null && attempt.statusCode >= 200 && attempt.statusCode < 300
  const next = ok ? null : nextAttemptAt(delivery.attempts, delivery.tryingSince, new Date())
  const outcome: AttemptOutcome = ok ? 'succeeded' : next ? 'retry' : 'failed'
  // The receiver's words, as text PostgreSQL can keep: a body of bytes may hold U+0000, and the
  // attempt could then not be recorded; the delivery was sent again at each lapse of its lease.
  const answer = storable(attempt.answer.slice(0, answerKeptBytes))
  if (outcome !== 'failed') {
    // One statement, not a transaction of four: every delivery ends here, and at 100 events a second
    // to a subscription its round trips were a good part of a delivery's cost (bench:events). The
    // update checks the lease and locks the row; the attempt is recorded only if it did.
    const [row] = await sql<{ id: string }[]>`
      with d as (
        update event_deliveries
           set status = ${outcome === 'retry' ? 'pending' : 'succeeded'}, next_at = ${next},
               lease_owner = null, lease_expires_at = null,
               finished_at = ${outcome === 'retry' ? null : new Date()}
         where id = ${delivery.id} and lease_owner = ${engineId} and status = 'pending'
        returning id)
      insert into event_delivery_attempts (delivery_id, at, status_code, latency_ms, answer)
      select id, ${attempt.at}, ${attempt.statusCode}, ${attempt.latencyMs},
             ${answer} from d
      returning delivery_id as id`
    return row ? outcome : 'lost'
  }
  return transaction(sql, async (tx) => {
    const [held] = await tx<{ id: string }[]>`
      select id from event_deliveries
       where id = ${delivery.id} and lease_owner = ${engineId} and status = 'pending'
       for no key update`
    if (!held) return 'lost'
    await tx`
      insert into event_delivery_attempts (delivery_id, at, status_code, latency_ms, answer)
      values (${delivery.id}, ${attempt.at}, ${attempt.statusCode}, ${attempt.latencyMs},
              ${answer})`
    // Failed for 3 days: the delivery ends, its subscription is disabled and its owner told.
    await tx`
      update event_deliveries
         set status = 'failed', next_at = null, lease_owner = null, lease_expires_at = null,
             finished_at = now()
       where id = ${delivery.id}`
    await disableSubscription(tx, delivery)
    return outcome
  })
}

/** Finishes a delivery whose event the feed no longer keeps: nothing to send. */
export async function dropDelivery(sql: Sql, engineId: string, id: string): Promise<void> {
  await sql`
    with d as (
      update event_deliveries set status = 'failed', next_at = null, finished_at = now(),
                                  lease_owner = null, lease_expires_at = null
       where id = ${id} and lease_owner = ${engineId} and status = 'pending'
      returning id)
    insert into event_delivery_attempts (delivery_id, at, status_code, latency_ms, answer)
    select id, now(), null, 0, 'not sent: the feed no longer keeps its event' from d`
}

/**
 * Disables the subscription of a delivery that failed for 3 days and tells its owner by mail (its
 * maker, else the enterprise's owners). Never the secret, nor the whole url: the mail names its host.
 */
async function disableSubscription(tx: Db, delivery: ClaimedDelivery): Promise<void> {
  const [sub] = await tx<{ id: string; url: string; description: string | null }[]>`
    update event_subscriptions
       set status = 'disabled', updated_at = now(),
           disabled_reason = ${`a delivery (event ${delivery.position}, ${delivery.type}) failed for 3 days`}
     where id = ${delivery.subscriptionId} and status = 'enabled'
    returning id, url, description`
  if (!sub) return
  let host = ''
  try {
    host = new URL(sub.url).host
  } catch {
    // kept as checked on save; an unreadable one is simply not named
  }
  await tx`
    with owners as (
      select s.owner_user as user_id from event_subscriptions s
       join enterprise_people p on p.enterprise_id = s.enterprise_id and p.user_id = s.owner_user
       where s.id = ${sub.id}
      union
      select p.user_id from enterprise_people p
       where p.enterprise_id = ${delivery.enterpriseId} and p.role = 'owner'
         and not exists (select 1 from event_subscriptions s
                          join enterprise_people o on o.enterprise_id = s.enterprise_id and o.user_id = s.owner_user
                          where s.id = ${sub.id})
    ), items as (
      insert into mail_items (enterprise_id, user_id, kind, subject, payload)
      select ${delivery.enterpriseId}, user_id, 'subscription_disabled',
             ${tx.json({ subscriptionId: sub.id })}, ${tx.json({ host, description: sub.description, position: delivery.position, type: delivery.type })}
        from owners
      returning user_id
    )
    insert into mail_people (user_id) select distinct user_id from items on conflict do nothing`
}

// --- the API's side ------------------------------------------------------------------------------

interface DeliveryRow {
  id: string
  subscriptionId: string
  position: number
  type: string
  status: EventDelivery['status']
  nextAt: Date | null
  createdAt: Date
  attempts: { at: string; statusCode: number | null; latencyMs: number; answer: string }[]
}

function toDelivery(row: DeliveryRow): EventDelivery {
  return {
    id: row.id,
    subscriptionId: row.subscriptionId,
    position: row.position,
    type: row.type,
    status: row.status,
    attempts: row.attempts.map((a) => ({ ...a, at: new Date(a.at).toISOString() })),
    nextAttemptAt: row.status === 'pending' && row.nextAt ? row.nextAt.toISOString() : null,
    createdAt: row.createdAt.toISOString(),
  }
}

const deliveryColumns = (db: Db) => db`
  d.id, d.subscription_id, d.position, d.type, d.status, d.next_at, d.created_at,
  coalesce((select jsonb_agg(jsonb_build_object('at', a.at, 'statusCode', a.status_code,
                                                'latencyMs', a.latency_ms, 'answer', a.answer) order by a.id)
              from event_delivery_attempts a where a.delivery_id = d.id), '[]') as attempts`

async function requireSubscription(db: Db, enterpriseId: string, id: string) {
  const [row] = await db<{ status: 'enabled' | 'disabled' }[]>`
    select status from event_subscriptions where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row)
    throw new ApiError('subscription_not_found', `No event subscription ${id} in this enterprise.`)
  return row
}

/**
 * A subscription's deliveries, newest first, each with its attempts; `status` filters. The status is
 * written into the statement (literalIn): a generic plan reads the failed ones, page and count,
 * through their partial index (event_deliveries_failed).
 */
export async function listDeliveries(
  db: Db,
  enterpriseId: string,
  subscriptionId: string,
  query: { page?: number; limit?: number; status?: string },
): Promise<Paged<EventDelivery>> {
  await requireSubscription(db, enterpriseId, subscriptionId)
  const page = readPage(query, ['createdAt'] as const)
  const status = ['pending', 'succeeded', 'failed'].includes(query.status ?? '')
    ? query.status
    : undefined
  const filter = status ? db`and ${literalIn(db, 'd.status', [status])}` : db``
  const [rows, [count]] = await Promise.all([
    db<DeliveryRow[]>`
      select ${deliveryColumns(db)} from event_deliveries d
       where d.subscription_id = ${subscriptionId} ${filter}
       order by d.created_at desc, d.id desc
       limit ${page.limit} offset ${page.offset}`,
    db<{ total: number }[]>`
      select count(*)::int as total from event_deliveries d
       where d.subscription_id = ${subscriptionId} ${filter}`,
  ])
  return envelope(rows.map(toDelivery), count!.total, page)
}

/**
 * Sends a delivery again now, with the same webhook-id: one that failed, succeeded, or waits for its
 * next time. Its waits start again from 5 s and its 3 days from now. 409 subscription_disabled while
 * its subscription is.
 */
export async function retryDelivery(
  db: Db,
  enterpriseId: string,
  subscriptionId: string,
  deliveryId: string,
): Promise<EventDelivery> {
  const subscription = await requireSubscription(db, enterpriseId, subscriptionId)
  return transaction(db, async (tx) => {
    const [found] = await tx<{ id: string }[]>`
      select id from event_deliveries
       where id = ${deliveryId} and subscription_id = ${subscriptionId} and enterprise_id = ${enterpriseId}`
    if (!found)
      throw new ApiError(
        'delivery_not_found',
        `No delivery ${deliveryId} of subscription ${subscriptionId}.`,
      )
    if (subscription.status !== 'enabled')
      throw new ApiError(
        'subscription_disabled',
        `Subscription ${subscriptionId} is disabled: enable it (PATCH status enabled) to send again.`,
      )
    const [row] = await tx<DeliveryRow[]>`
      with d as (
        update event_deliveries
           set status = 'pending', next_at = now(), finished_at = null, attempts = 0, trying_since = now()
         where id = ${deliveryId}
        returning *)
      select ${deliveryColumns(tx)} from d`
    notifyAfterCommit(tx, deliveryChannel, [''])
    return toDelivery(row!)
  })
}
