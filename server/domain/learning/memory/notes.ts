import { ApiError } from '../../../../shared/errors.js'
import { isUuid } from '../../../../shared/ids.js'
import {
  maxNoteLength,
  type Evidence,
  type MemoryLayer,
  type MemoryNote,
  type NoteListQuery,
  type NotePage,
  type TaskMemory,
} from '../../../../shared/schemas/memory.js'
import { idFilter, type PageRequest } from '../../../db/paging.js'
import { transaction, type Db } from '../../../db/sql.js'
import { loadTask } from '../../tasks/index.js'
import { requireTeam } from '../../org/index.js'
import { dismissItemsOf, openConflict, openRatedDown } from './review.js'
import { loadNote, noteColumns, noteNotFound, supersede, toNote, type NoteRow } from './rows.js'

// Memory notes (DESIGN 10): written by people (through the API) and by training runs (os.remember), at
// the task, team or enterprise layer; corrected, rated, tombstoned. Only active notes are listed.

export interface NoteInput {
  layer: MemoryLayer
  /** The task layer's task. */
  taskId?: string
  /** The team layer's team. */
  teamId?: string
  text: string
  source: 'person' | 'training'
  evidence?: Evidence[]
  /** The note this corrects: of the same layer and owner, active. */
  correctsId?: string
  /** token:<id> for a person through the API, run:<id> for a training run. */
  createdBy?: string
}

/**
 * Writes a note or a correction. A correction corrects a note of the same layer and owner (a task note
 * of the same task, a note of the same team, an enterprise note): it stands for that note before the
 * same readers. A person's correction, or a training run's of a training note, supersedes the note at
 * once; a training run's correction of a person's note is kept `proposed` and opens a `conflict` review
 * item instead. Refusals write nothing: text not 1..4,000 characters, a layer without its owner, evidence
 * naming no run of the enterprise (400); an owner or corrected note not of the enterprise (404); a
 * correction of another owner's note (400) or of a note no longer active (409 note_not_active).
 */
export async function writeNote(
  db: Db,
  enterpriseId: string,
  input: NoteInput,
): Promise<MemoryNote> {
  const text = input.text
  if (text.length > maxNoteLength || text.trim().length === 0)
    throw new ApiError('invalid_request', `text: 1 to ${maxNoteLength} characters.`)
  return transaction(db, async (tx) => {
    const owner = await layerOwner(tx, enterpriseId, input)
    const evidence = await checkEvidence(tx, enterpriseId, input.evidence ?? [])
    let status: 'active' | 'proposed' = 'active'
    let corrected: NoteRow | undefined
    if (input.correctsId !== undefined) {
      if (!isUuid(input.correctsId)) throw noteNotFound(input.correctsId)
      corrected = await loadNote(tx, enterpriseId, input.correctsId, true)
      if (
        corrected.layer !== input.layer ||
        corrected.taskId !== owner.taskId ||
        corrected.teamId !== owner.teamId
      )
        throw new ApiError(
          'invalid_request',
          `correctsId: note ${corrected.id} is a ${corrected.layer} note of ${corrected.taskId ?? corrected.teamId ?? 'the enterprise'}; a correction is written at the layer of the note it corrects.`,
        )
      if (corrected.status !== 'active')
        throw new ApiError(
          'note_not_active',
          `correctsId: note ${corrected.id} is ${corrected.status}; only an active note can be corrected.`,
        )
      if (input.source === 'training' && corrected.source === 'person') status = 'proposed'
    }
    const [row] = await tx<NoteRow[]>`
      insert into memory_notes (enterprise_id, layer, task_id, team_id, text, kind, corrects_id, status,
                                source, evidence, created_by)
      values (${enterpriseId}, ${input.layer}, ${owner.taskId}, ${owner.teamId}, ${text},
              ${corrected ? 'correction' : 'note'}, ${corrected?.id ?? null}, ${status}, ${input.source},
              ${tx.json(evidence as never)}, ${input.createdBy ?? null})
      returning ${noteColumns(tx, 'memory_notes')}`
    if (corrected && status === 'active') await supersede(tx, enterpriseId, corrected.id, row!.id)
    if (corrected && status === 'proposed')
      await openConflict(tx, enterpriseId, corrected.id, row!.id)
    return toNote(row!)
  })
}

/** The task and team columns of a note at `input.layer`, once its owner is found in the enterprise. */
async function layerOwner(
  db: Db,
  enterpriseId: string,
  input: NoteInput,
): Promise<{ taskId: string | null; teamId: string | null }> {
  switch (input.layer) {
    case 'task': {
      if (!input.taskId)
        throw new ApiError('invalid_request', 'taskId: the task layer needs a task.')
      if (!isUuid(input.taskId)) throw new ApiError('task_not_found', `No task ${input.taskId}.`)
      await loadTask(db, enterpriseId, input.taskId)
      return { taskId: input.taskId, teamId: null }
    }
    case 'team': {
      if (!input.teamId)
        throw new ApiError('invalid_request', 'teamId: the team layer needs a team.')
      if (!isUuid(input.teamId)) throw new ApiError('team_not_found', `No team ${input.teamId}.`)
      await requireTeam(db, enterpriseId, input.teamId)
      return { taskId: null, teamId: input.teamId }
    }
    case 'enterprise':
      return { taskId: null, teamId: null }
    default:
      throw new ApiError(
        'invalid_request',
        `layer: one of task, team, enterprise; got "${String(input.layer)}".`,
      )
  }
}

/** The evidence, once every run it names is one of the enterprise's (else 400). */
async function checkEvidence(
  db: Db,
  enterpriseId: string,
  evidence: Evidence[],
): Promise<Evidence[]> {
  if (evidence.length === 0) return []
  const ids = [...new Set(evidence.map((e) => e.runId))]
  const bad = ids.find((id) => !isUuid(id))
  const found = bad
    ? []
    : await db<{ id: string }[]>`
        select id from runs where enterprise_id = ${enterpriseId} and id = any(${db.array(ids)}::uuid[])`
  const known = new Set(found.map((r) => r.id))
  const missing = ids.find((id) => !known.has(id))
  if (missing)
    throw new ApiError('invalid_request', `evidence: no run ${missing} in this enterprise.`)
  return evidence.map((e) =>
    e.excerpt === undefined ? { runId: e.runId } : { runId: e.runId, excerpt: e.excerpt },
  )
}

/**
 * Active notes, searched (ranked by relevance) or newest first, filtered. Lists never show a note that
 * is not active: a status filter other than active lists none.
 */
export async function listNotes(
  db: Db,
  enterpriseId: string,
  query: NoteListQuery,
  page: PageRequest,
): Promise<NotePage> {
  const empty = { notes: [], page: page.page, limit: page.limit, total: 0 }
  if (query.status && query.status !== 'active') return empty
  const q = query.q?.trim() ? query.q : undefined
  const where = db`
    n.enterprise_id = ${enterpriseId} and n.status = 'active'
    ${query.layer ? db`and n.layer = ${query.layer}` : db``}
    ${query.kind ? db`and n.kind = ${query.kind}` : db``}
    ${idFilter(db, 'n.task_id', query.taskId)}
    ${idFilter(db, 'n.team_id', query.teamId)}
    ${q ? db`and n.search @@ s.query` : db``}`
  const search = db`with s as materialized (select memory_query(${q ?? ''}) as query)`
  const [rows, [count]] = await Promise.all([
    db<NoteRow[]>`
      ${search}
      select ${noteColumns(db)} from memory_notes n, s where ${where}
       order by ${q ? db`ts_rank(n.search, s.query) desc,` : db``} n.created_at desc, n.id desc
       limit ${page.limit} offset ${page.offset}`,
    db<{ total: number }[]>`
      ${search} select count(*)::int as total from memory_notes n, s where ${where}`,
  ])
  return { ...empty, notes: rows.map(toNote), total: count!.total }
}

/** A note with its evidence, unless tombstoned (never answered again): superseded and proposed ones too. */
export async function getNote(db: Db, enterpriseId: string, id: string): Promise<MemoryNote> {
  return toNote(await loadNote(db, enterpriseId, id))
}

/**
 * Excludes a note from every future answer; repeating it changes nothing. Open review items about it
 * are dismissed, in the history under `by`.
 */
export async function tombstoneNote(
  db: Db,
  enterpriseId: string,
  id: string,
  by: string | null,
): Promise<void> {
  await transaction(db, async (tx) => {
    const [row] = await tx<{ status: string }[]>`
      select status from memory_notes where enterprise_id = ${enterpriseId} and id = ${id} for update`
    if (!row) throw noteNotFound(id)
    if (row.status === 'tombstoned') return
    await tx`
      update memory_notes set status = 'tombstoned', updated_at = now()
       where enterprise_id = ${enterpriseId} and id = ${id}`
    await dismissItemsOf(tx, enterpriseId, id, by)
  })
}

/** Rates an active note up or down; down opens a rated_down review item (one open per note). */
export async function rateNote(
  db: Db,
  enterpriseId: string,
  id: string,
  input: { rating: 'up' | 'down'; reason?: string; by: string | null },
): Promise<MemoryNote> {
  return transaction(db, async (tx) => {
    const note = await loadNote(tx, enterpriseId, id, true)
    if (note.status !== 'active')
      throw new ApiError(
        'note_not_active',
        `Note ${id} is ${note.status}; only active notes are rated.`,
      )
    await tx`
      insert into memory_ratings (enterprise_id, note_id, rating, reason, created_by)
      values (${enterpriseId}, ${id}, ${input.rating}, ${input.reason ?? null}, ${input.by})`
    const [row] = await tx<NoteRow[]>`
      update memory_notes n
         set rating_up = rating_up + ${input.rating === 'up' ? 1 : 0},
             rating_down = rating_down + ${input.rating === 'down' ? 1 : 0}
       where n.enterprise_id = ${enterpriseId} and n.id = ${id}
      returning ${noteColumns(tx)}`
    if (input.rating === 'down') await openRatedDown(tx, enterpriseId, id, input.reason ?? null)
    return toNote(row!)
  })
}

/** The layers a task reads and may train: its own, its team's (when it has one), the enterprise's. */
export function taskGrants(task: { teamId: string | null }): MemoryLayer[] {
  return task.teamId ? ['task', 'team', 'enterprise'] : ['task', 'enterprise']
}

/** A task's active task-layer notes, newest first, and its training grants. */
export async function taskMemory(
  db: Db,
  enterpriseId: string,
  taskId: string,
): Promise<TaskMemory> {
  const task = await loadTask(db, enterpriseId, taskId)
  const rows = await db<NoteRow[]>`
    select ${noteColumns(db)} from memory_notes n
     where n.enterprise_id = ${enterpriseId} and n.task_id = ${taskId} and n.status = 'active'
     order by n.created_at desc, n.id desc limit 500`
  const layers = taskGrants(task)
  return {
    taskId,
    teamId: task.teamId,
    notes: rows.map(toNote),
    grants: { read: layers, write: layers },
  }
}

/**
 * A person's note from a task (POST /v1/tasks/{id}/memory and .../memory/train): at the task layer, the
 * task's team (a task without a team cannot write it: 400) or the enterprise.
 */
export async function writeTaskNote(
  db: Db,
  enterpriseId: string,
  taskId: string,
  input: { layer: MemoryLayer; text: string; correctsId?: string; createdBy: string | null },
): Promise<MemoryNote> {
  const task = await loadTask(db, enterpriseId, taskId)
  if (input.layer === 'team' && !task.teamId)
    throw new ApiError(
      'invalid_request',
      `layer: task ${taskId} has no team, so no team layer to train.`,
    )
  return writeNote(db, enterpriseId, {
    layer: input.layer,
    taskId: input.layer === 'task' ? taskId : undefined,
    teamId: input.layer === 'team' ? task.teamId! : undefined,
    text: input.text,
    source: 'person',
    correctsId: input.correctsId,
    createdBy: input.createdBy ?? undefined,
  })
}
