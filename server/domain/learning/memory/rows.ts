import { ApiError } from '../../../../shared/errors.js'
import type { Evidence, MemoryNote, NoteImpact } from '../../../../shared/schemas/memory.js'
import type { Db, Fragment } from '../../../db/sql.js'

// A memory note as stored and as answered, shared by the notes and the review queue (DESIGN 10).

export interface NoteRow {
  id: string
  layer: MemoryNote['layer']
  taskId: string | null
  teamId: string | null
  text: string
  kind: MemoryNote['kind']
  correctsId: string | null
  supersededById: string | null
  status: MemoryNote['status']
  source: MemoryNote['source']
  evidence: Evidence[]
  ratingUp: number
  ratingDown: number
  recalls: number
  validUntil: Date | null
  expired: boolean
  /** From the memory_impact view; null before any run that recalled the note ended. */
  impact: NoteImpact | null
  createdBy: string | null
  createdAt: Date
  updatedAt: Date
}

/**
 * Every column but the search vector (which nobody reads back) and the idempotency key; whether the note
 * has expired; and its impact, read from the counters of migration 0023 (one index lookup per note).
 */
export const noteColumns = (db: Db, alias = 'n'): Fragment =>
  db`${db(alias)}.id, ${db(alias)}.layer, ${db(alias)}.task_id, ${db(alias)}.team_id, ${db(alias)}.text,
     ${db(alias)}.kind, ${db(alias)}.corrects_id, ${db(alias)}.superseded_by_id, ${db(alias)}.status,
     ${db(alias)}.source, ${db(alias)}.evidence, ${db(alias)}.rating_up, ${db(alias)}.rating_down,
     ${db(alias)}.recalls, ${db(alias)}.valid_until,
     coalesce(${db(alias)}.valid_until <= now(), false) as expired,
     (select jsonb_build_object('recalledRuns', m.recalled_runs, 'succeeded', m.succeeded,
                                'failed', m.failed, 'successRate', m.success_rate,
                                'baseRate', m.base_rate, 'lift', m.lift)
        from memory_impact m where m.note_id = ${db(alias)}.id) as impact,
     ${db(alias)}.created_by, ${db(alias)}.created_at, ${db(alias)}.updated_at`

/** A note's impact before any run that recalled it ended. */
export const noImpact: NoteImpact = {
  recalledRuns: 0,
  succeeded: 0,
  failed: 0,
  successRate: null,
  baseRate: null,
  lift: null,
}

/** Holds now: not past its validUntil (an active note past it is neither recalled nor listed). */
export const holds = (db: Db, alias = 'n'): Fragment =>
  db`(${db(alias)}.valid_until is null or ${db(alias)}.valid_until > now())`

export const toNote = (row: NoteRow): MemoryNote => ({
  id: row.id,
  layer: row.layer,
  taskId: row.taskId,
  teamId: row.teamId,
  text: row.text,
  kind: row.kind,
  correctsId: row.correctsId,
  supersededById: row.supersededById,
  status: row.status,
  source: row.source,
  evidence: row.evidence,
  ratingUp: row.ratingUp,
  ratingDown: row.ratingDown,
  recalls: row.recalls,
  validUntil: row.validUntil?.toISOString() ?? null,
  expired: row.expired,
  impact: row.impact ?? noImpact,
  createdBy: row.createdBy,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
})

export function noteNotFound(id: string): ApiError {
  return new ApiError('note_not_found', `No memory note ${id} in this enterprise.`)
}

/**
 * A note of the enterprise that is not tombstoned (a tombstoned note is never answered again), locked
 * for the caller's transaction when `lock`; else 404 note_not_found.
 */
export async function loadNote(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<NoteRow> {
  const [row] = await db<NoteRow[]>`
    select ${noteColumns(db)} from memory_notes n
     where n.enterprise_id = ${enterpriseId} and n.id = ${id} and n.status <> 'tombstoned'
     ${lock ? db`for update` : db``}`
  if (!row) throw noteNotFound(id)
  return row
}

/** Marks `noteId` superseded by `correctionId`, if it is still active. */
export async function supersede(
  db: Db,
  enterpriseId: string,
  noteId: string,
  correctionId: string,
): Promise<void> {
  await db`
    update memory_notes set status = 'superseded', superseded_by_id = ${correctionId}, updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${noteId} and status = 'active'`
}
