import { ApiError } from '../../../shared/errors.js'
import type {
  Avatar,
  Enterprise,
  WebhookSecretInfo,
  WebhookSecretRotated,
} from '../../../shared/schemas/enterprise.js'
import type { ModelTier } from '../../../shared/schemas/models.js'
import { validName, validSlug } from '../../../shared/names.js'
import { isUniqueViolation, transaction, type Db } from '../../db/sql.js'
import { parseImageDataUrl } from '../org/index.js'
import { setupBuiltinTasks, setupOrganisation } from './setup.js'
import { hashSecret, lastChars, matchesHash, newSecret } from '../secrets.js'
import { wakeEngines } from '../engine-wake.js'

/**
 * Creates an enterprise with its own organisation (a team, the built-in roles ceo and coo and a member
 * holding each) and the service's own tasks, in one transaction.
 */
export async function createEnterprise(
  db: Db,
  input: { name: string; slug?: string },
  options: { mailDomain: string },
): Promise<Enterprise> {
  const name = validName(input.name)
  const slug = validSlug(input.slug ?? name)
  // The initial webhook secret is never revealed (spec: Authentication 8): only its hash is kept.
  const secret = newSecret('whsec')
  try {
    return await transaction(db, async (tx) => {
      const [enterprise] = await tx<Enterprise[]>`
        insert into enterprises (slug, name, webhook_secret_hash, webhook_secret_last_chars)
        values (${slug}, ${name}, ${hashSecret(secret)}, ${lastChars(secret)})
        returning id, slug, name`
      await setupOrganisation(tx, enterprise!, options.mailDomain)
      await setupBuiltinTasks(tx, enterprise!.id)
      return enterprise!
    })
  } catch (err) {
    if (isUniqueViolation(err, 'enterprises_slug_key')) {
      throw new ApiError('enterprise_slug_taken', `An enterprise with the slug "${slug}" exists.`)
    }
    throw err
  }
}

export async function findEnterpriseBySlug(db: Db, slug: string): Promise<Enterprise | undefined> {
  const [row] = await db<
    Enterprise[]
  >`select id, slug, name from enterprises where slug = ${slug} and not catalog`
  return row
}

export async function getEnterprise(db: Db, id: string): Promise<Enterprise> {
  const [row] = await db<Enterprise[]>`select id, slug, name from enterprises where id = ${id}`
  if (!row) throw new ApiError('enterprise_not_found')
  return row
}

export async function listEnterprises(db: Db): Promise<Enterprise[]> {
  return db<
    Enterprise[]
  >`select id, slug, name from enterprises where not catalog order by created_at, id`
}

/** Whether the database holds an enterprise yet (the service's catalogue is not one). */
export async function anyEnterprise(db: Db): Promise<boolean> {
  const [row] = await db<{ any: boolean }[]>`
    select exists (select 1 from enterprises where not catalog) as any`
  return row!.any
}

// --- webhook secret (spec: Enterprise settings; Authentication 8) ---------------------------------

export async function getWebhookSecretInfo(
  db: Db,
  enterpriseId: string,
): Promise<WebhookSecretInfo> {
  const [row] = await db<{ lastChars: string; since: Date; rotated: boolean }[]>`
    select webhook_secret_last_chars as last_chars,
           webhook_secret_since as since,
           webhook_secret_rotated as rotated
      from enterprises
     where id = ${enterpriseId}`
  if (!row) throw new ApiError('enterprise_not_found')
  return { lastChars: row.lastChars, since: row.since.toISOString(), rotated: row.rotated }
}

/** NOTIFY channel of rotated webhook secrets; the payload is the enterprise id. */
export const webhookSecretRotatedChannel = 'osd_webhook_secret_rotated'

/** A new secret, shown in this answer only; the old one stops matching at once. */
export async function rotateWebhookSecret(
  db: Db,
  enterpriseId: string,
): Promise<WebhookSecretRotated> {
  const secret = newSecret('whsec')
  const [row] = await db<{ since: Date }[]>`
    update enterprises
       set webhook_secret_hash = ${hashSecret(secret)},
           webhook_secret_last_chars = ${lastChars(secret)},
           webhook_secret_since = now(),
           webhook_secret_rotated = true,
           updated_at = now()
     where id = ${enterpriseId}
     returning webhook_secret_since as since, pg_notify(${webhookSecretRotatedChannel}, id::text)`
  if (!row) throw new ApiError('enterprise_not_found')
  return { secret, lastChars: lastChars(secret), since: row.since.toISOString(), rotated: true }
}

/** An enterprise and the hash of its webhook secret, which a webhook call is checked against. */
export interface WebhookSecretHolder extends Enterprise {
  hash: Buffer
}

export async function webhookSecretHolder(
  db: Db,
  enterpriseSlug: string,
): Promise<WebhookSecretHolder | undefined> {
  const [row] = await db<WebhookSecretHolder[]>`
    select id, slug, name, webhook_secret_hash as hash from enterprises where slug = ${enterpriseSlug} and not catalog`
  return row
}

// A hash to compare against when the enterprise is unknown, so that the secret is checked with the same
// work either way; a known enterprise's refusal is stored after the answer (issue 44), so the two take
// the same time.
const absentHash = hashSecret(newSecret('whsec'))

/**
 * What a cache keeps for a slug that names no enterprise (id ''), so that it is answered from memory as
 * a known one is; no secret matches its hash.
 */
export function unknownHolder(slug: string): WebhookSecretHolder {
  return { id: '', slug, name: '', hash: absentHash }
}

/**
 * The enterprise whose webhook secret this is, or undefined: a wrong secret and an unknown enterprise
 * (no holder) are indistinguishable to the caller (spec: Authentication 8).
 */
export function verifyWebhookSecret(
  holder: WebhookSecretHolder | undefined,
  secret: string | undefined,
): Enterprise | undefined {
  const ok = matchesHash(secret ?? '', holder?.hash ?? absentHash)
  return holder && secret && ok
    ? { id: holder.id, slug: holder.slug, name: holder.name }
    : undefined
}

// --- settings (spec: Enterprise settings) ---------------------------------------------------------

export interface EnterpriseSettings {
  concurrentRunLimit: number
  chatModelTier: ModelTier
  chatMemoryDepth: string
  metrics: string[]
}

export async function getSettings(db: Db, enterpriseId: string): Promise<EnterpriseSettings> {
  const [row] = await db<EnterpriseSettings[]>`
    select concurrent_run_limit, chat_model_tier, chat_memory_depth, metrics
      from enterprises
     where id = ${enterpriseId}`
  if (!row) throw new ApiError('enterprise_not_found')
  return row
}

/** NOTIFY channel of changed enterprise settings; the payload is the enterprise id. */
export const settingsChangedChannel = 'osd_enterprise_settings_changed'

/**
 * Sets the given settings; setting a value twice leaves the same value (spec: Retry safety). Every osd
 * process hears of the change when it commits, and drops what it cached (db/notified-cache.ts).
 */
export async function updateSettings(
  db: Db,
  enterpriseId: string,
  patch: Partial<EnterpriseSettings>,
): Promise<EnterpriseSettings> {
  const [row] = await db<EnterpriseSettings[]>`
    with changed as (
      update enterprises
         set concurrent_run_limit = coalesce(${patch.concurrentRunLimit ?? null}::integer, concurrent_run_limit),
             chat_model_tier = coalesce(${patch.chatModelTier ?? null}::text, chat_model_tier),
             chat_memory_depth = coalesce(${patch.chatMemoryDepth ?? null}::text, chat_memory_depth),
             metrics = coalesce(${patch.metrics ? db.json(patch.metrics) : null}::jsonb, metrics),
             updated_at = now()
       where id = ${enterpriseId}
       returning id, concurrent_run_limit, chat_model_tier, chat_memory_depth, metrics
    )
    select concurrent_run_limit, chat_model_tier, chat_memory_depth, metrics,
           pg_notify(${settingsChangedChannel}, id::text) as notified
      from changed`
  if (!row) throw new ApiError('enterprise_not_found')
  if (patch.concurrentRunLimit !== undefined) wakeEngines(db)
  const { concurrentRunLimit, chatModelTier, chatMemoryDepth, metrics } = row
  return { concurrentRunLimit, chatModelTier, chatMemoryDepth, metrics }
}

export async function setEnterpriseAvatar(
  db: Db,
  enterpriseId: string,
  dataUrl: string,
): Promise<Avatar> {
  const image = parseImageDataUrl(dataUrl)
  await db`
    insert into enterprise_avatars (enterprise_id, content_type, data)
    values (${enterpriseId}, ${image.contentType}, ${image.data})
    on conflict (enterprise_id)
    do update set content_type = excluded.content_type, data = excluded.data, updated_at = now()`
  return { contentType: image.contentType, bytes: image.data.length }
}

export async function deleteEnterpriseAvatar(db: Db, enterpriseId: string): Promise<void> {
  await db`delete from enterprise_avatars where enterprise_id = ${enterpriseId}`
}
