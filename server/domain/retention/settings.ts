import {
  defaultRetention,
  type RetentionSettings,
  type RetentionSettingsInput,
} from '../../../shared/schemas/retention.js'
import type { Db } from '../../db/sql.js'

// An enterprise's retention windows (issue 46): one row once changed, the defaults until then. The
// windows are stored as the ISO 8601 text the API took (checked by its schema), which PostgreSQL reads
// as an interval where the pass computes its cut-offs.

interface SettingsRow {
  finishedRuns: string | null
  closedChats: string | null
  webhookDeliveries: string | null
  archive: boolean
}

const toSettings = (row: SettingsRow | undefined): RetentionSettings =>
  row
    ? {
        finishedRuns: row.finishedRuns,
        closedChats: row.closedChats,
        webhookDeliveries: row.webhookDeliveries,
        archive: row.archive,
      }
    : { ...defaultRetention }

/** GET /v1/enterprise/retention: the enterprise's windows, the defaults if never changed. */
export async function getRetention(db: Db, enterpriseId: string): Promise<RetentionSettings> {
  const [row] = await db<SettingsRow[]>`
    select finished_runs, closed_chats, webhook_deliveries, archive
      from retention_settings where enterprise_id = ${enterpriseId}`
  return toSettings(row)
}

/** Every enterprise's windows, for a pass: the enterprises without a row have the defaults. */
export async function listRetention(
  db: Db,
  enterpriseId?: string,
): Promise<(RetentionSettings & { enterpriseId: string; slug: string })[]> {
  const rows = await db<(SettingsRow & { id: string; slug: string; set: boolean })[]>`
    select e.id, e.slug, s.enterprise_id is not null as set,
           s.finished_runs, s.closed_chats, s.webhook_deliveries, s.archive
      from enterprises e left join retention_settings s on s.enterprise_id = e.id
     ${enterpriseId ? db`where e.id = ${enterpriseId}` : db``}
     order by e.id`
  return rows.map((row) => ({
    enterpriseId: row.id,
    slug: row.slug,
    ...toSettings(row.set ? row : undefined),
  }))
}

/**
 * PATCH /v1/enterprise/retention: the fields given change, the others keep their value (the defaults
 * when never set). One statement, so two changes at once each keep the other's fields.
 */
export async function updateRetention(
  db: Db,
  enterpriseId: string,
  patch: RetentionSettingsInput,
): Promise<RetentionSettings> {
  const given = (key: keyof RetentionSettingsInput) => patch[key] !== undefined
  // A window given as null is kept for ever; one not given is the default in a new row.
  const window = (key: 'finishedRuns' | 'closedChats' | 'webhookDeliveries') =>
    given(key) ? (patch[key] ?? null) : defaultRetention[key]
  const [row] = await db<SettingsRow[]>`
    insert into retention_settings as s
      (enterprise_id, finished_runs, closed_chats, webhook_deliveries, archive)
    values (${enterpriseId},
            ${window('finishedRuns')}, ${window('closedChats')}, ${window('webhookDeliveries')},
            ${patch.archive ?? defaultRetention.archive})
    on conflict (enterprise_id) do update set
      finished_runs = ${given('finishedRuns') ? db`excluded.finished_runs` : db`s.finished_runs`},
      closed_chats = ${given('closedChats') ? db`excluded.closed_chats` : db`s.closed_chats`},
      webhook_deliveries = ${given('webhookDeliveries') ? db`excluded.webhook_deliveries` : db`s.webhook_deliveries`},
      archive = ${given('archive') ? db`excluded.archive` : db`s.archive`},
      updated_at = now()
    returning finished_runs, closed_chats, webhook_deliveries, archive`
  return toSettings(row)
}
