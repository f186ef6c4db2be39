import { ApiError } from '../../../../shared/errors.js'
import type { Evidence, MemoryNote } from '../../../../shared/schemas/memory.js'
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
  createdBy: string | null
  createdAt: Date
  updatedAt: Date
}

/** Every column but the search vector, which nobody reads back. */
export const noteColumns = (db: Db, alias = 'n'): Fragment =>
  db`${db(alias)}.id, ${db(alias)}.layer, ${db(alias)}.task_id, ${db(alias)}.team_id, ${db(alias)}.text,
     ${db(alias)}.kind, ${db(alias)}.corrects_id, ${db(alias)}.superseded_by_id, ${db(alias)}.status,
     ${db(alias)}.source, ${db(alias)}.evidence, ${db(alias)}.rating_up, ${db(alias)}.rating_down,
     ${db(alias)}.recalls, ${db(alias)}.created_by, ${db(alias)}.created_at, ${db(alias)}.updated_at`

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
