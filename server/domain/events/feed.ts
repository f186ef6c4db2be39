import { ApiError } from '../../../shared/errors.js'
import {
  feedOwnFamily,
  feedResourceOf,
  patternFamily,
  readableFamilies,
  type FeedEvent,
  type FeedFamily,
} from '../../../shared/schemas/events.js'
import { notifyAfterCommit, transaction, type Db, type Sql } from '../../db/sql.js'
import { deliveryChannel } from './deliveries.js'
import { mailChannel } from './notifications.js'

// One ordered event feed per enterprise (issue 47; DESIGN 15; migration 0033; docs/events.md).
//
// Events enter an inbox from triggers on the tables that record them, in their writers' transactions.
// sequenceFeed gives them their positions: under the lock of the enterprise's head row, it moves the
// committed inbox rows into the feed with the next positions and moves the head, in one transaction.
// Passes of one enterprise are serialised by that lock and their positions become visible at their
// commits, each pass's after the last's: a reader sees 1..head without a hole however writers' commits
// interleave, and a later commit gets a later position. The same transaction fans each event out to the
// enterprise's subscriptions and to the people it is mailed to, so each is told exactly once.

/** NOTIFY channel of new positions (the payload is the enterprise id): wakes the feed's readers. */
export const feedChannel = 'osd_feed'

/**
 * NOTIFY channel of inbox rows waiting for a position, sent by the triggers of the tables whose writers
 * notify nothing of their own (executions, recommendations, memory review). A run's events and a chat's
 * messages wake the passes through their own channels (osd_run, osd_chat).
 */
export const inboxChannel = 'osd_feed_inbox'

/** How long the feed keeps an event (and a delivery, a mail item) unless told (OSD_FEED_KEEP_HOURS). */
export const feedKeepDays = 7

/** The most inbox rows one pass moves: a backlog (an engine down for a while) goes in bounded steps. */
const passLimit = 5000

/** The most enterprises one pass takes. */
const passEnterprises = 100

export interface SequenceOptions {
  /** Whether to fan events out to mail (only a process that sends mail does: OSD_SMTP_URL). */
  mail: boolean
}

export interface Sequenced {
  /** The enterprises whose feed moved, and their new heads. */
  heads: Map<string, number>
  /** How many events got positions. */
  events: number
  /** How many deliveries to subscriptions and mail items were made. */
  deliveries: number
  mails: number
  /** Whether inbox rows are left (over passLimit, or of enterprises another pass holds). */
  more: boolean
  /** Heads made for enterprises that had none (their events go in the next pass). */
  madeHeads: number
}

/**
 * One pass: gives positions to the inbox rows of up to 100 enterprises whose heads no other pass holds
 * (skip locked: two engines sequence different enterprises at once), fans them out, and tells the
 * feed's readers once committed.
 */
export async function sequenceFeed(sql: Sql, options: SequenceOptions): Promise<Sequenced> {
  // The enterprises with events waiting, one index descent each (a loose index scan): the inbox is a
  // queue, its pages full of rows already moved until a vacuum comes, and a plain distinct read them
  // all (8 to 19 ms a pass under bench:runs's load, issue 47).
  const waiting = await sql<{ enterpriseId: string }[]>`
    with recursive waiting as (
      (select enterprise_id from event_inbox order by enterprise_id limit 1)
      union all
      select (select i.enterprise_id from event_inbox i
               where i.enterprise_id > w.enterprise_id order by i.enterprise_id limit 1)
        from waiting w where w.enterprise_id is not null)
    select enterprise_id from waiting where enterprise_id is not null limit ${passEnterprises}`
  const done: Sequenced = {
    heads: new Map(),
    events: 0,
    deliveries: 0,
    mails: 0,
    more: false,
    madeHeads: 0,
  }
  if (waiting.length === 0) return done
  const ids = waiting.map((w) => w.enterpriseId)
  await transaction(sql, async (tx) => {
    // The head rows are the feed's lock (docs/locks.md): held to the commit, so the next pass of an
    // enterprise reads (with a snapshot taken after this one committed) what this one left.
    const heads = await tx<{ enterpriseId: string }[]>`
      select enterprise_id from event_feed_heads
       where enterprise_id = any(${tx.array(ids)}::uuid[])
       order by enterprise_id
       for no key update skip locked`
    if (heads.length < ids.length) {
      // Another pass holds them, or (an enterprise made before its first event) they have no head yet:
      // made now, taken by the next pass.
      done.more = true
      const held = new Set(heads.map((h) => h.enterpriseId))
      const made = await tx`
        insert into event_feed_heads (enterprise_id)
        select id from enterprises where id = any(${tx.array(ids.filter((id) => !held.has(id)))}::uuid[])
        on conflict do nothing`
      done.madeHeads = made.count
    }
    if (heads.length === 0) return
    const locked = heads.map((h) => h.enterpriseId)
    // A statement of its own, after the locks: its snapshot sees every earlier pass's commit (the heads
    // it moved, the inbox rows it took).
    const rows = await tx<
      { enterpriseId: string; last: number; events: number; deliveries: number; mails: number }[]
    >`
      with h as (
        select enterprise_id, last_position from event_feed_heads
         where enterprise_id = any(${tx.array(locked)}::uuid[])
      ), moved as (
        delete from event_inbox
         where ctid = any(array(select ctid from event_inbox
                                 where enterprise_id = any(${tx.array(locked)}::uuid[])
                                 order by id limit ${passLimit}))
        returning *
      ), numbered as (
        select m.enterprise_id, m.type, m.subject, m.payload, m.created_at,
               h.last_position + row_number() over (partition by m.enterprise_id order by m.id) as position
          from moved m join h on h.enterprise_id = m.enterprise_id
      ), inserted as (
        insert into events (enterprise_id, position, type, subject, payload, created_at)
        select enterprise_id, position, type, subject, payload, created_at from numbered
      ), heads as (
        update event_feed_heads f set last_position = x.last
          from (select enterprise_id, max(position) as last from numbered group by enterprise_id) x
         where f.enterprise_id = x.enterprise_id
      ), delivered as (
        insert into event_deliveries (enterprise_id, subscription_id, position, type, next_at)
        select n.enterprise_id, s.id, n.position, n.type, statement_timestamp()
          from numbered n
          join event_subscriptions s
            on s.enterprise_id = n.enterprise_id and s.status = 'enabled'
           and split_part(n.type, '.', 1) = any(s.families)
           and exists (select 1 from unnest(s.types) p
                        where p = '*' or p = n.type
                           or (right(p, 2) = '.*' and starts_with(n.type, left(p, -1))))
        order by n.position
        returning enterprise_id
      ), ${options.mail ? mailFanOut(tx) : noMail(tx)}
      select n.enterprise_id, max(n.position) as last, count(*)::int as events,
             (select count(*)::int from delivered d where d.enterprise_id = n.enterprise_id) as deliveries,
             (select count(*)::int from gate_mail m where m.enterprise_id = n.enterprise_id)
               + (select count(*)::int from failure_mail m where m.enterprise_id = n.enterprise_id) as mails
        from numbered n group by n.enterprise_id`
    for (const row of rows) {
      done.heads.set(row.enterpriseId, row.last)
      done.events += row.events
      done.deliveries += row.deliveries
      done.mails += row.mails
    }
    if (done.events >= passLimit) done.more = true
    // Readers, delivery loops and mailers of every process; this one's are told by its caller.
    notifyAfterCommit(tx, feedChannel, done.heads.keys())
    if (done.deliveries > 0) notifyAfterCommit(tx, deliveryChannel, [''])
    if (done.mails > 0) notifyAfterCommit(tx, mailChannel, [''])
  })
  return done
}

/**
 * Who is told of what, by mail (issue 47): a gate that waits, each person who may decide it (a gate for
 * the chief executive, the default owner, goes to the enterprise's owners; any other to every person of
 * the enterprise) with gate mail on; a run that failed, the person who started it with run-failure mail
 * on. Defaults by role: owners both, members gates only. A part of sequenceFeed's statement.
 */
function mailFanOut(tx: Db) {
  return tx`
    gate_mail as (
      insert into mail_items (enterprise_id, user_id, kind, subject, payload)
      select n.enterprise_id, p.user_id, 'gate', n.subject || jsonb_build_object('position', n.position),
             n.payload
        from numbered n
        join enterprise_people p on p.enterprise_id = n.enterprise_id
        left join notification_settings ns on ns.enterprise_id = p.enterprise_id and ns.user_id = p.user_id
       where n.type = 'gate.waiting'
         and (p.role = 'owner' or coalesce(n.payload ->> 'owner', 'ceo') <> 'ceo')
         and coalesce(ns.gates, true)
      returning enterprise_id, user_id
    ), failure_mail as (
      insert into mail_items (enterprise_id, user_id, kind, subject, payload)
      select n.enterprise_id, r.started_by, 'run_failed',
             n.subject || jsonb_build_object('position', n.position, 'taskName', r.task_name),
             n.payload
        from numbered n
        join runs r on r.id = (n.subject ->> 'runId')::uuid
        join enterprise_people p on p.enterprise_id = n.enterprise_id and p.user_id = r.started_by
        left join notification_settings ns on ns.enterprise_id = p.enterprise_id and ns.user_id = p.user_id
       where n.type = 'run.failed' and coalesce(ns.run_failures, p.role = 'owner')
      returning enterprise_id, user_id
    ), mail_to as (
      insert into mail_people (user_id)
      select user_id from (select user_id from gate_mail union select user_id from failure_mail) u
      on conflict do nothing
    )`
}

/** The same CTEs, empty: a process that sends no mail makes none to send. */
function noMail(tx: Db) {
  return tx`
    gate_mail as (select null::uuid as enterprise_id where false),
    failure_mail as (select null::uuid as enterprise_id where false)`
}

/** Whether inbox rows wait for a position (the passes' sweep looks before it does more). */
export async function inboxWaiting(db: Db): Promise<boolean> {
  const [row] = await db<
    { waiting: boolean }[]
  >`select exists (select 1 from event_inbox) as waiting`
  return row!.waiting
}

// --- reading ---------------------------------------------------------------------------------------

/** What a reader may see: the families its scopes read, narrowed by its types filter. */
export interface FeedFilter {
  families: FeedFamily[]
  /** Exact types to keep (with prefixes: either), or undefined for every type of the families. */
  exact?: string[]
  /** Prefixes (`run.`) of types to keep. */
  prefixes?: string[]
}

/**
 * The filter of a reader: its scopes' families (403 api_token_scope for a reader that may read none
 * of them, or whose types name a family it may not read), narrowed by `types` (comma-separated).
 */
export function feedFilter(scopes: ReadonlySet<string>, types: string[] | undefined): FeedFilter {
  const families = readableFamilies(scopes)
  if (families.length === 0)
    throw new ApiError(
      'api_token_scope',
      'The event feed shows the events of what a token may read: this one reads none of runs, gates, executions, chats, recommendations or memory.',
      { needed: 'runs:read', held: [...scopes] },
    )
  if (!types || types.includes('*')) return { families }
  checkTypeFamilies(
    types.filter((t) => patternFamily(t) !== feedOwnFamily),
    families,
    scopes,
  )
  return {
    families: families.filter((f) => types.some((t) => patternFamily(t) === f)),
    exact: types.filter((t) => !t.endsWith('.*')),
    prefixes: types.filter((t) => t.endsWith('.*')).map((t) => t.slice(0, -1)),
  }
}

/**
 * Every family `types` names is one the feed has and one of `readable`. A family the feed does not
 * have (`foo.*`, `foo.bar`) is a mistake in the request, 400 invalid_request naming `types`, whatever
 * the caller's scopes; one it has but the caller may not read is 403 api_token_scope naming the
 * scopes needed and those held (spec: Authentication 4), as the routes' own check says it.
 */
export function checkTypeFamilies(
  types: string[],
  readable: readonly string[],
  scopes: ReadonlySet<string>,
): void {
  const named = [...new Set(types.map(patternFamily).filter((f) => f !== undefined))]
  const unknown = named.filter((f) => feedResourceOf(`${f}.`) === undefined)
  if (unknown.length > 0)
    throw new ApiError(
      'invalid_request',
      `types: ${unknown.map((f) => `${f}.*`).join(', ')} ${unknown.length === 1 ? 'is' : 'are'} no family of the feed's (run.*, gate.*, execution.*, chat.*, ... as docs/events.md lists them).`,
      { issues: [{ field: 'types', message: `no such family: ${unknown.join(', ')}` }] },
    )
  const unreadable = named.filter((f) => !readable.includes(f))
  if (unreadable.length === 0) return
  const needed = [...new Set(unreadable.map((f) => `${feedResourceOf(`${f}.`)}:read`))].join(', ')
  throw new ApiError(
    'api_token_scope',
    `The types asked for (${unreadable.map((f) => `${f}.*`).join(', ')}) need ${needed}; the token holds ${[...scopes].join(', ') || 'none'}.`,
    { needed, held: [...scopes] },
  )
}

export interface FeedRead {
  events: FeedEvent[]
  /** Where the next read starts (after=): the last event read, or the head when nothing more is there. */
  next: number
  more: boolean
  /** The feed had lost what the reader asked after (kept 7 days unless told), or the reader was ahead of it. */
  reset?: FeedEvent
}

interface EventRow {
  head: number
  first: number | null
  position: number | null
  type: string
  subject: Record<string, unknown>
  payload: Record<string, unknown>
  createdAt: Date
}

/**
 * The events after `after` that the filter keeps, at most `limit`, in one snapshot with the feed's
 * head and its oldest kept position. A reader asking from before what the feed keeps (or from past its
 * head: a database restored from an older backup) is told by a `feed.reset` event whose position is
 * where it now reads from.
 */
export async function readFeed(
  db: Db,
  enterpriseId: string,
  after: number,
  filter: FeedFilter,
  limit: number,
): Promise<FeedRead> {
  const everyType = !filter.exact && !filter.prefixes
  const rows = await db<EventRow[]>`
    with f as (
      select coalesce((select last_position from event_feed_heads where enterprise_id = ${enterpriseId}), 0) as head,
             (select min(position) from events where enterprise_id = ${enterpriseId}) as first
    )
    select f.head, f.first, e.position, e.type, e.subject, e.payload, e.created_at
      from f left join lateral (
        select position, type, subject, payload, created_at from events
         where enterprise_id = ${enterpriseId} and position > ${after} and position <= f.head
           and split_part(type, '.', 1) = any(${db.array(filter.families)}::text[])
           ${
             everyType
               ? db``
               : db`and (type = any(${db.array(filter.exact ?? [])}::text[])
                         or exists (select 1 from unnest(${db.array(filter.prefixes ?? [])}::text[]) p
                                     where starts_with(type, p)))`
           }
         order by position limit ${limit}) e on true`
  const { head, first } = rows[0]!
  const events = rows.filter((r) => r.position !== null).map(toFeedEvent)
  const floor = first ?? head + 1
  let reset: FeedEvent | undefined
  if (after > head || after < floor - 1) {
    const position = after > head ? head : floor - 1
    reset = {
      position,
      type: 'feed.reset',
      createdAt: new Date().toISOString(),
      subject: {},
      payload: {
        after,
        firstPosition: floor,
        reason:
          after > head
            ? `the feed's newest position is ${head}: it reads on from there`
            : `the feed keeps its events for a while (7 days unless the operator says otherwise): events before position ${floor} are gone`,
      },
    }
  }
  const more = events.length === limit
  const next = more ? events.at(-1)!.position : Math.max(head, reset?.position ?? 0)
  return { events, next, more, reset }
}

function toFeedEvent(row: EventRow): FeedEvent {
  return {
    position: row.position!,
    type: row.type,
    createdAt: row.createdAt.toISOString(),
    subject: row.subject,
    payload: row.payload,
  }
}

/** The newest position of an enterprise's feed (0 before its first event). */
export async function feedHead(db: Db, enterpriseId: string): Promise<number> {
  const [row] = await db<{ head: number }[]>`
    select coalesce((select last_position from event_feed_heads where enterprise_id = ${enterpriseId}), 0) as head`
  return row!.head
}

/**
 * Vacuums the inbox: a queue whose rows are deleted as fast as they come (thousands a second under
 * load), so its pages fill with dead rows between two of autovacuum's visits (a minute apart), and
 * every pass reads past them. The sequencer calls it after it has moved many rows. skip_locked: a
 * vacuum another process runs already is enough. Not inside a transaction (PostgreSQL refuses it).
 */
export async function vacuumInbox(sql: Sql): Promise<void> {
  await sql.unsafe('vacuum (skip_locked) event_inbox')
}

// --- keeping ---------------------------------------------------------------------------------------

/**
 * Deletes what is older than the feed keeps (7 days unless told: OSD_FEED_KEEP_HOURS): events, deliveries to subscriptions
 * (with their attempts), mail items. In batches, each its own statement, so a week of a busy feed is
 * not one long transaction. Answers how many events went. The engines call it hourly; the retention
 * work may call it instead (it takes `sql` and a cut-off like the others).
 *
 * An enterprise's events go from the start of its feed, in position order, up to its first event
 * not older than the cut-off: the feed stays a run of positions without a hole, and it is walked by
 * its primary key, since an index of the events' times would cost every event written for a read
 * made hourly (migration 0051). A late commit's event (an older time at a later position) goes with
 * the next prune after those before it.
 */
export async function pruneFeed(
  sql: Sql,
  olderThan: Date = new Date(Date.now() - feedKeepDays * 86_400_000),
): Promise<number> {
  let events = 0
  // Each enterprise whose feed starts before the cut-off: one descent of the primary key each.
  const stale = await sql<{ enterpriseId: string }[]>`
    select h.enterprise_id from event_feed_heads h
     where (select e.created_at from events e where e.enterprise_id = h.enterprise_id
             order by e.position limit 1) < ${olderThan}`
  for (const { enterpriseId } of stale)
    for (;;) {
      const gone = await sql`
        with oldest as (
          select position, created_at from events
           where enterprise_id = ${enterpriseId} order by position limit 10000
        )
        delete from events
         where enterprise_id = ${enterpriseId}
           and position < coalesce((select min(position) from oldest where created_at >= ${olderThan}),
                                   (select max(position) + 1 from oldest))`
      events += gone.count
      if (gone.count < 10000) break
    }
  for (;;) {
    const gone = await sql`
      delete from event_deliveries
       where id in (select id from event_deliveries where created_at < ${olderThan} limit 10000)`
    if (gone.count < 10000) break
  }
  for (;;) {
    const gone = await sql`
      delete from mail_items
       where id in (select id from mail_items where created_at < ${olderThan} limit 10000)`
    if (gone.count < 10000) break
  }
  return events
}
