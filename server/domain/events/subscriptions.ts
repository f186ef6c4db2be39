import { randomBytes, randomUUID } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import {
  readableFamilies,
  type EventSubscription,
  type EventSubscriptionChange,
  type EventSubscriptionInput,
  type EventSubscriptionWithSecret,
  type FeedFamily,
} from '../../../shared/schemas/events.js'
import { sealedColumns, type Sealer } from '../../crypto.js'
import { type Db } from '../../db/sql.js'
import { requireAllowedUrl, type EgressRule } from '../../egress.js'
import { isUuid } from '../../../shared/ids.js'
import { checkTypeFamilies } from './feed.js'

// Outbound event subscriptions (issue 47; migration 0034): POST /v1/event-subscriptions and its verbs.
// A subscription is sent the feed's events of its types (deliveries.ts), signed with its secret as
// Standard Webhooks asks. It never carries what its maker could not read in the feed: the families it
// may carry are fixed from the maker's scopes, and narrowed to those of who changes its types or url.

/** Who makes or changes a subscription: the caller's actor (token:<id>, user:<id>) and its scopes. */
export interface SubscriptionCaller {
  actor: string
  scopes: ReadonlySet<string>
}

interface SubscriptionRow {
  id: string
  enterpriseId: string
  url: string
  types: string[]
  families: string[]
  format: 'standard' | 'slack'
  description: string | null
  status: 'enabled' | 'disabled'
  disabledReason: string | null
  secretHint: string
  createdAt: Date
  updatedAt: Date
}

const columns = (db: Db) =>
  db`id, enterprise_id, url, types, families, format, description, status, disabled_reason, secret_hint,
     created_at, updated_at`

function toSubscription(row: SubscriptionRow): EventSubscription {
  return {
    id: row.id,
    url: row.url,
    types: row.types,
    families: row.families,
    format: row.format,
    description: row.description,
    status: row.status,
    disabledReason: row.disabledReason,
    secretHint: row.secretHint,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

/**
 * A new signing secret: whsec_ and the base64 of 32 random bytes, as Standard Webhooks writes them
 * (the key is the base64-decoded part).
 */
function newSecret(): { secret: string; hint: string } {
  const secret = `whsec_${randomBytes(32).toString('base64')}`
  return { secret, hint: `…${secret.slice(-4)}` }
}

function readable(caller: SubscriptionCaller): FeedFamily[] {
  const families = readableFamilies(caller.scopes)
  if (families.length === 0)
    throw new ApiError(
      'api_token_scope',
      'A subscription carries the events its maker may read, and this caller reads none: it needs runs:read, gates:read, executions:read, chats:read, recommendations:read or memory:read.',
      { needed: 'runs:read', held: [...caller.scopes] },
    )
  return families
}

/** The person a caller is: the session's, or the maker of the token (who is told when osd disables it). */
function ownerOf(db: Db, actor: string) {
  const [kind, id] = actor.split(':', 2)
  if (!id || !isUuid(id)) return db`null::uuid`
  return kind === 'user'
    ? db`${id}::uuid`
    : db`(select created_by_user from api_tokens where id = ${id}::uuid)`
}

export async function createSubscription(
  db: Db,
  sealer: Sealer,
  egress: EgressRule,
  enterpriseId: string,
  input: EventSubscriptionInput,
  caller: SubscriptionCaller,
): Promise<EventSubscriptionWithSecret> {
  const families = readable(caller)
  checkTypeFamilies(input.types, families, caller.scopes)
  await requireAllowedUrl('url', input.url, egress)
  const { secret, hint } = newSecret()
  // The secret is sealed for its row (crypto.ts): its id is chosen here.
  const id = randomUUID()
  const [row] = await db<SubscriptionRow[]>`
    insert into event_subscriptions (id, enterprise_id, url, types, families, format, description, secret_sealed,
                                     secret_hint, created_by, owner_user)
    values (${id}, ${enterpriseId}, ${input.url}, ${db.array([...new Set(input.types)])}::text[],
            ${db.array(families)}::text[], ${input.format ?? 'standard'}, ${input.description ?? null},
            ${sealer.seal(secret, sealedColumns.subscriptionSecret, id)}, ${hint}, ${caller.actor}, ${ownerOf(db, caller.actor)})
    returning ${columns(db)}`
  return { ...toSubscription(row!), secret }
}

export async function listSubscriptions(
  db: Db,
  enterpriseId: string,
): Promise<EventSubscription[]> {
  const rows = await db<SubscriptionRow[]>`
    select ${columns(db)} from event_subscriptions where enterprise_id = ${enterpriseId}
     order by created_at, id`
  return rows.map(toSubscription)
}

function notFound(id: string): ApiError {
  return new ApiError('subscription_not_found', `No event subscription ${id} in this enterprise.`)
}

async function loadSubscription(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<SubscriptionRow> {
  const [row] = await db<SubscriptionRow[]>`
    select ${columns(db)} from event_subscriptions where enterprise_id = ${enterpriseId} and id = ${id}
    ${lock ? db`for no key update` : db``}`
  if (!row) throw notFound(id)
  return row
}

export async function getSubscription(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<EventSubscription> {
  return toSubscription(await loadSubscription(db, enterpriseId, id))
}

/**
 * Changes a subscription. A change of its types or url narrows what it may carry to what the changer
 * reads too: a holder of webhooks:write who reads no chats cannot send a chat subscription's events
 * somewhere else, nor ask for them. Any other change keeps what it carries. A new url
 * obeys the egress rule; enabled again, it sends what is still pending.
 */
export async function updateSubscription(
  db: Db,
  egress: EgressRule,
  enterpriseId: string,
  id: string,
  change: EventSubscriptionChange,
  caller: SubscriptionCaller,
): Promise<EventSubscription> {
  const current = await loadSubscription(db, enterpriseId, id)
  // Narrowed only by a change of what is sent or where: a description, a format or a status changes
  // neither, and narrowing then would silently stop events the subscription shows it carries.
  const narrows = change.types !== undefined || change.url !== undefined
  const families = narrows
    ? current.families.filter((f) => readableFamilies(caller.scopes).includes(f as FeedFamily))
    : current.families
  const types = change.types ? [...new Set(change.types)] : current.types
  if (narrows) checkTypeFamilies(types, families, caller.scopes)
  if (change.url !== undefined) await requireAllowedUrl('url', change.url, egress)
  const [row] = await db<SubscriptionRow[]>`
    update event_subscriptions
       set url = ${change.url ?? current.url},
           types = ${db.array(types)}::text[],
           families = ${db.array(families)}::text[],
           format = ${change.format ?? current.format},
           description = ${change.description === undefined ? current.description : change.description},
           status = ${change.status ?? current.status},
           disabled_reason = ${change.status === 'enabled' ? null : current.disabledReason},
           updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${id}
    returning ${columns(db)}`
  if (!row) throw notFound(id)
  return toSubscription(row)
}

export async function deleteSubscription(db: Db, enterpriseId: string, id: string): Promise<void> {
  const gone =
    await db`delete from event_subscriptions where enterprise_id = ${enterpriseId} and id = ${id}`
  if (gone.count === 0) throw notFound(id)
}

/**
 * A new signing secret, shown in this answer only; the old one signs nothing from now on (as the
 * enterprise's webhook secret's rotation, spec: Authentication 8). Attempts already under way finish
 * with the old one.
 */
export async function rotateSubscriptionSecret(
  db: Db,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
): Promise<EventSubscriptionWithSecret> {
  const { secret, hint } = newSecret()
  const [row] = await db<SubscriptionRow[]>`
    update event_subscriptions set secret_sealed = ${sealer.seal(secret, sealedColumns.subscriptionSecret, id)}, secret_hint = ${hint}, updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${id}
    returning ${columns(db)}`
  if (!row) throw notFound(id)
  return { ...toSubscription(row), secret }
}
