import { eventCommand, firstLine, gateQuestion, shellWord } from '../../../shared/event-text.js'
import type { FeedEvent, Notifications } from '../../../shared/schemas/events.js'
import { transaction, unflushedCommit, type Db, type Sql } from '../../db/sql.js'

// Mail to people (issue 47; migration 0034): what is told to whom is decided by the sequencing pass
// (feed.ts mailFanOut) as mail items; the engines' mailer claims a person with items waiting (not
// before a minute after their last mail), sends them all in one mail, and marks them sent. So a
// person gets at most one mail a minute, what came meanwhile folded into the next.

/** NOTIFY channel of mail to send (no payload): wakes the engines' mailers. */
export const mailChannel = 'osd_mail'

/** The least time between two mails to one person. */
export const mailGapMs = 60_000

/** What a person is mailed, in the enterprise the session acts in; null columns are the role's default. */
export async function getNotifications(
  db: Db,
  enterpriseId: string,
  userId: string,
  mailConfigured: boolean,
): Promise<Notifications> {
  const [row] = await db<{ email: string; gates: boolean; runFailures: boolean }[]>`
    select u.email, coalesce(ns.gates, true) as gates,
           coalesce(ns.run_failures, p.role = 'owner') as run_failures
      from users u
      join enterprise_people p on p.user_id = u.id and p.enterprise_id = ${enterpriseId}
      left join notification_settings ns on ns.enterprise_id = p.enterprise_id and ns.user_id = u.id
     where u.id = ${userId}`
  // The session's person is one of the enterprise's (the session acts in it).
  return { ...row!, mailConfigured }
}

export async function setNotifications(
  db: Db,
  enterpriseId: string,
  userId: string,
  change: { gates?: boolean; runFailures?: boolean },
  mailConfigured: boolean,
): Promise<Notifications> {
  await db`
    insert into notification_settings (enterprise_id, user_id, gates, run_failures)
    values (${enterpriseId}, ${userId}, ${change.gates ?? null}, ${change.runFailures ?? null})
    on conflict (enterprise_id, user_id) do update
      set gates = coalesce(${change.gates ?? null}::boolean, notification_settings.gates),
          run_failures = coalesce(${change.runFailures ?? null}::boolean, notification_settings.run_failures)`
  return getNotifications(db, enterpriseId, userId, mailConfigured)
}

// --- the mailer's side ---------------------------------------------------------------------------

export interface MailItem {
  id: number
  enterpriseId: string
  enterpriseName: string
  kind: 'gate' | 'run_failed' | 'subscription_disabled'
  subject: Record<string, unknown>
  payload: Record<string, unknown>
  createdAt: Date
}

export interface PersonToMail {
  userId: string
  email: string
  name: string
}

/** Claims people with mail waiting whose minute has passed, at most `limit`, under a lease. */
export async function claimMailPeople(
  sql: Sql,
  engineId: string,
  limit: number,
  leaseSeconds: number,
): Promise<PersonToMail[]> {
  if (limit <= 0) return []
  return sql<PersonToMail[]>`
    with claimed as (
      update mail_people m
         set lease_owner = ${engineId}, lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
       where m.user_id in (
               select c.user_id from mail_people c
                where c.not_before <= now()
                  and (c.lease_expires_at is null or c.lease_expires_at < now())
                  and exists (select 1 from mail_items i where i.user_id = c.user_id and i.sent_at is null)
                limit ${limit}
                for update skip locked)
      returning m.user_id)
    select u.id as user_id, u.email, u.name, ${unflushedCommit(sql)}
      from claimed c join users u on u.id = c.user_id`
}

/**
 * How long (ms, by the database's clock) until the next person's minute passes, if mail waits for
 * one, later: not a minute passed already (a person another engine is mailing, or one this mailer has
 * no room for yet), which would have woken the mailer at once, again and again (as nextDeliveryDue).
 */
export async function nextMailDue(db: Db): Promise<number | null> {
  const [row] = await db<{ inMs: number | null }[]>`
    select extract(epoch from min(m.not_before) - now())::float8 * 1000 as in_ms from mail_people m
     where m.not_before > now()
       and exists (select 1 from mail_items i where i.user_id = m.user_id and i.sent_at is null)`
  return row!.inMs
}

/** The items waiting for a person, oldest first (at most 100 in one mail; the rest go in the next). */
export async function mailItemsOf(db: Db, userId: string): Promise<MailItem[]> {
  return db<MailItem[]>`
    select i.id, i.enterprise_id, e.name as enterprise_name, i.kind, i.subject, i.payload, i.created_at
      from mail_items i join enterprises e on e.id = i.enterprise_id
     where i.user_id = ${userId} and i.sent_at is null
     order by i.id limit 100`
}

/** The mail went: its items are sent, and the person is not mailed again for a minute. */
export async function mailSent(
  sql: Sql,
  engineId: string,
  userId: string,
  itemIds: number[],
): Promise<void> {
  await transaction(sql, async (tx) => {
    await tx`update mail_items set sent_at = now() where id = any(${tx.array(itemIds)}::bigint[])`
    await tx`
      update mail_people
         set not_before = now() + make_interval(secs => ${mailGapMs / 1000}), failures = 0,
             lease_owner = null, lease_expires_at = null
       where user_id = ${userId} and lease_owner = ${engineId}`
  })
}

/** The mail did not go (the SMTP server refused or is away): tried again after a growing wait. */
export async function mailFailed(sql: Sql, engineId: string, userId: string): Promise<void> {
  await sql`
    update mail_people
       set failures = failures + 1,
           not_before = now() + make_interval(secs => least(3600, 60 * power(2, least(failures, 6)))),
           lease_owner = null, lease_expires_at = null
     where user_id = ${userId} and lease_owner = ${engineId}`
}

export async function releaseMailPeople(sql: Sql, engineId: string, ids: string[]): Promise<void> {
  await sql`
    update mail_people set lease_owner = null, lease_expires_at = null
     where user_id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId}`
}

export async function renewMailPeople(
  sql: Sql,
  engineId: string,
  ids: string[],
  leaseSeconds: number,
): Promise<Set<string>> {
  const rows = await sql<{ userId: string }[]>`
    update mail_people set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
     where user_id = any(${sql.array(ids)}::uuid[]) and lease_owner = ${engineId}
    returning user_id, ${unflushedCommit(sql)}`
  return new Set(rows.map((r) => r.userId))
}

// --- what a mail says ------------------------------------------------------------------------------

export interface Mail {
  subject: string
  text: string
}

function asEvent(item: MailItem, type: string): FeedEvent {
  return {
    position: Number(item.subject.position ?? 0),
    type,
    createdAt: item.createdAt.toISOString(),
    subject: item.subject,
    payload: item.payload,
  }
}

/** One item as a mail tells it: a headline, then its lines (what waits, the run, the task, the command). */
function told(item: MailItem): { headline: string; lines: string[] } {
  const s = item.subject
  const task = typeof s.taskSlug === 'string' ? s.taskSlug : undefined
  const lines: string[] = []
  if (item.kind === 'gate') {
    const event = asEvent(item, 'gate.waiting')
    const question = gateQuestion(item.payload)
    lines.push(
      `A gate waits for your decision${task ? ` in task ${task}` : s.chatId ? ` in chat ${s.chatId as string}` : ''}.`,
    )
    if (s.runId) lines.push(`Run: ${s.runId as string}`)
    if (task) lines.push(`Task: ${task}`)
    lines.push(`Gate: ${s.gateId as string}`)
    if (question) lines.push(`Question: ${question}`)
    const command = eventCommand(event)
    if (command) lines.push(`Decide: ${command}`)
    return {
      headline: `Gate waiting${task ? ` in ${task}` : ''}: ${firstLine(question, 80) || 'a decision'}`,
      lines,
    }
  }
  if (item.kind === 'run_failed') {
    const event = asEvent(item, 'run.failed')
    const reason = typeof item.payload.reason === 'string' ? item.payload.reason : undefined
    lines.push(`A run you started failed.`)
    lines.push(`Run: ${s.runId as string}`)
    if (task)
      lines.push(
        `Task: ${task}${typeof s.taskName === 'string' && s.taskName !== task ? ` (${s.taskName})` : ''}`,
      )
    if (reason) lines.push(`Why: ${reason}`)
    const command = eventCommand(event)
    if (command) lines.push(`See: ${command}`)
    return { headline: `Run failed${task ? `: ${task}` : ''}`, lines }
  }
  const p = item.payload
  lines.push(
    `Event subscription ${s.subscriptionId as string}${p.description ? ` (${p.description as string})` : ''}${p.host ? ` to ${p.host as string}` : ''} was disabled: a delivery (event ${String(p.position)}, ${String(p.type)}) failed for 3 days.`,
  )
  const id = shellWord(String(s.subscriptionId))
  lines.push(`See: osctl subscriptions deliveries ${id}`)
  lines.push(`Enable it again: osctl subscriptions update ${id} --enable`)
  return { headline: 'An event subscription was disabled', lines }
}

/**
 * The mail of a person's items: one item says itself in the subject; several are counted there and
 * told one after the other. Never a secret: gates' arguments and subscriptions' urls and secrets stay
 * out (their pages show them).
 */
export function composeMail(items: MailItem[]): Mail {
  const toldItems = items.map((item) => ({ item, ...told(item) }))
  const enterprises = [...new Set(items.map((i) => i.enterpriseName))]
  const inWhere = enterprises.length === 1 ? ` (${enterprises[0]})` : ''
  const subject =
    toldItems.length === 1
      ? `${toldItems[0]!.headline}${inWhere}`
      : `${toldItems.length} things for you in osd${inWhere}: ${summaryCounts(items)}`
  const text = toldItems
    .map(
      ({ item, lines }) =>
        `${enterprises.length > 1 ? `[${item.enterpriseName}] ` : ''}${lines.join('\n')}\n(${item.createdAt.toISOString()})`,
    )
    .join('\n\n---\n\n')
  return {
    subject: firstLine(subject, 200),
    text: `${text}\n\n--\nosd tells you this because of your notifications: osctl auth notifications\n`,
  }
}

function summaryCounts(items: MailItem[]): string {
  const count = (kind: MailItem['kind']) => items.filter((i) => i.kind === kind).length
  const parts: string[] = []
  if (count('gate')) parts.push(`${count('gate')} gate${count('gate') > 1 ? 's' : ''} waiting`)
  if (count('run_failed'))
    parts.push(`${count('run_failed')} run${count('run_failed') > 1 ? 's' : ''} failed`)
  if (count('subscription_disabled'))
    parts.push(
      `${count('subscription_disabled')} subscription${count('subscription_disabled') > 1 ? 's' : ''} disabled`,
    )
  return parts.join(', ')
}
