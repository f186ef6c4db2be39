import { ApiError } from '../../../../shared/errors.js'
import { isUuid } from '../../../../shared/ids.js'
import { shorten } from '../../../../shared/text.js'
import {
  maxNoteLength,
  ValidUntil,
  type Evidence,
  type MemoryLayer,
  type MemoryNote,
  type NoteListQuery,
  type NotePage,
  type noteSorts,
  type TaskMemory,
} from '../../../../shared/schemas/memory.js'
import { lockMemoryLayer } from '../../../db/locks.js'
import { idFilter, type PageRequest } from '../../../db/paging.js'
import { transaction, type Db } from '../../../db/sql.js'
import { loadTask } from '../../tasks/index.js'
import { requireTeam } from '../../org/index.js'
import { searchTerms, searchScore } from './recall.js'
import { dismissItemsOf, openConflict, openRatedDown } from './review.js'
import {
  holds,
  loadNote,
  noteColumns,
  noteNotFound,
  supersede,
  toNote,
  type NoteRow,
} from './rows.js'

// Memory notes (DESIGN 10): written by people (through the API) and by training runs (os.remember), at
// the task, team or enterprise layer; corrected, rated, tombstoned, extended. Only active notes that
// hold (not past their validUntil) are listed. A note that says nearly what an active note of its layer
// and owner says is refused (issue 31).

/** The ways GET /v1/memory orders notes. */
export type NoteSort = (typeof noteSorts)[number]

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
  /** ISO time with a zone, in the future: the note holds until then. */
  validUntil?: string
  /** A person's request repeated with the same key (and the same createdBy) answers the first note. */
  idempotencyKey?: string
}

/** A validUntil as written: a time with a zone (400 otherwise), in the future unless `past` is allowed. */
export function readValidUntil(value: string): Date {
  const parsed = ValidUntil.safeParse(value)
  const time = parsed.success ? new Date(parsed.data) : undefined
  if (!time || Number.isNaN(time.getTime()))
    throw new ApiError(
      'invalid_request',
      `validUntil: "${value}" is not an ISO 8601 time with a zone (2027-03-31T00:00:00Z).`,
      { issues: [{ field: 'validUntil', message: 'not an ISO 8601 time with a zone' }] },
    )
  if (time.getTime() <= Date.now())
    throw new ApiError(
      'invalid_request',
      `validUntil: ${time.toISOString()} has passed; a note holds until a time in the future.`,
      { issues: [{ field: 'validUntil', message: 'must be in the future' }] },
    )
  return time
}

/**
 * Writes a note or a correction. A correction corrects a note of the same layer and owner (a task note
 * of the same task, a note of the same team, an enterprise note): it stands for that note before the
 * same readers. A person's correction, or a training run's of a training note, supersedes the note at
 * once; a training run's correction of a person's note is kept `proposed` and opens a `conflict` review
 * item instead. Refusals write nothing: text not 1..4,000 characters, a layer without its owner, evidence
 * naming no run of the enterprise, a validUntil not a time or not in the future (400); an owner or
 * corrected note not of the enterprise (404); a correction of another owner's note (400) or of a note
 * no longer active (409 note_not_active); a near-duplicate (trigram similarity >= 0.8 after case and
 * white-space folding) of an active note of the same layer and owner that holds, other than the one
 * corrected (409 note_duplicate with duplicateOf). The same idempotencyKey from the same writer answers
 * the note it wrote first, if the request is the same (409 note_idempotency_key_reused otherwise).
 */
export async function writeNote(
  db: Db,
  enterpriseId: string,
  input: NoteInput,
): Promise<MemoryNote> {
  const text = input.text
  if (text.length > maxNoteLength || text.trim().length === 0)
    throw new ApiError('invalid_request', `text: 1 to ${maxNoteLength} characters.`)
  if (input.validUntil !== undefined && !ValidUntil.safeParse(input.validUntil).success)
    readValidUntil(input.validUntil) // says why
  return transaction(db, async (tx) => {
    const owner = await layerOwner(tx, enterpriseId, input)
    // One write per layer and owner at a time (docs/locks.md): the duplicate check and the key's
    // lookup see the write before.
    await lockMemoryLayer(tx, enterpriseId, input.layer, owner.taskId ?? owner.teamId)
    if (input.idempotencyKey !== undefined) {
      const first = await firstWrite(tx, enterpriseId, input, owner)
      if (first) return first
    }
    const validUntil = input.validUntil === undefined ? null : readValidUntil(input.validUntil)
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
    await refuseDuplicate(tx, enterpriseId, input.layer, owner, text, corrected?.id ?? null)
    let row: NoteRow | undefined
    try {
      ;[row] = await tx<NoteRow[]>`
        insert into memory_notes (enterprise_id, layer, task_id, team_id, text, kind, corrects_id, status,
                                  source, evidence, created_by, valid_until, idempotency_key)
        values (${enterpriseId}, ${input.layer}, ${owner.taskId}, ${owner.teamId}, ${text},
                ${corrected ? 'correction' : 'note'}, ${corrected?.id ?? null}, ${status}, ${input.source},
                ${tx.json(evidence as never)}, ${input.createdBy ?? null}, ${validUntil},
                ${input.idempotencyKey ?? null})
        returning ${noteColumns(tx, 'memory_notes')}`
    } catch (err) {
      // The key's first write was at another layer, under another lock, at the same moment.
      if ((err as { constraint_name?: string }).constraint_name === 'memory_notes_idempotency')
        throw keyReused(input.idempotencyKey!)
      throw err
    }
    if (corrected && status === 'active') await supersede(tx, enterpriseId, corrected.id, row!.id)
    if (corrected && status === 'proposed')
      await openConflict(tx, enterpriseId, corrected.id, row!.id)
    return toNote(row!)
  })
}

function keyReused(key: string): ApiError {
  return new ApiError(
    'note_idempotency_key_reused',
    `idempotencyKey "${key}" wrote another note: a key names one request.`,
  )
}

/**
 * The note the writer's idempotency key wrote, if any, when this request is the one that wrote it (the
 * same layer, owner, text and correctsId; validUntil may have been extended since). A tombstoned one is
 * never answered again (409 note_not_active).
 */
async function firstWrite(
  db: Db,
  enterpriseId: string,
  input: NoteInput,
  owner: { taskId: string | null; teamId: string | null },
): Promise<MemoryNote | undefined> {
  const [row] = await db<(NoteRow & { sameRequest: boolean })[]>`
    select ${noteColumns(db)},
           (n.layer = ${input.layer} and n.task_id is not distinct from ${owner.taskId}::uuid
            and n.team_id is not distinct from ${owner.teamId}::uuid and n.text = ${input.text}
            and n.corrects_id is not distinct from ${input.correctsId ?? null}::uuid) as same_request
      from memory_notes n
     where n.enterprise_id = ${enterpriseId} and n.idempotency_key = ${input.idempotencyKey!}
       and n.created_by is not distinct from ${input.createdBy ?? null}`
  if (!row) return undefined
  if (!row.sameRequest) throw keyReused(input.idempotencyKey!)
  if (row.status === 'tombstoned')
    throw new ApiError(
      'note_not_active',
      `idempotencyKey "${input.idempotencyKey}" wrote note ${row.id}, since tombstoned.`,
    )
  const { sameRequest: _, ...note } = row
  return toNote(note)
}

/** 409 note_duplicate when an active note of the layer and owner that holds says nearly the same. */
async function refuseDuplicate(
  db: Db,
  enterpriseId: string,
  layer: MemoryLayer,
  owner: { taskId: string | null; teamId: string | null },
  text: string,
  correctedId: string | null,
): Promise<void> {
  // Materialised: the function runs once, not once per note.
  const [dup] = await db<{ id: string; text: string }[]>`
    with d as materialized (
      select memory_duplicate(${enterpriseId}, ${layer}, ${owner.taskId}::uuid, ${owner.teamId}::uuid,
                              ${text}, ${correctedId}::uuid) as id)
    select n.id, n.text from d join memory_notes n on n.enterprise_id = ${enterpriseId} and n.id = d.id`
  if (!dup) return
  const said = dup.text.replace(/\s+/g, ' ').trim()
  throw new ApiError(
    'note_duplicate',
    `Note ${dup.id} of this layer already says nearly the same: "${shorten(said, 200)}". Correct that note (correctsId ${dup.id}) rather than writing another.`,
    { duplicateOf: dup.id },
  )
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
      await loadTask(db, enterpriseId, input.taskId, 'key share')
      return { taskId: input.taskId, teamId: null }
    }
    case 'team': {
      if (!input.teamId)
        throw new ApiError('invalid_request', 'teamId: the team layer needs a team.')
      if (!isUuid(input.teamId)) throw new ApiError('team_not_found', `No team ${input.teamId}.`)
      await requireTeam(db, enterpriseId, input.teamId, true)
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
 * Active notes that hold (or, with expired=true, those past their validUntil), searched or not, filtered,
 * in the order asked: newest first, or by relevance with q (createdAt, the default); by lift, notes
 * without one last (impact); by recalls (recalls). Lists never show a note that is not active: a status
 * filter other than active lists none.
 */
export async function listNotes(
  db: Db,
  enterpriseId: string,
  query: NoteListQuery,
  page: PageRequest<NoteSort>,
): Promise<NotePage> {
  const empty = { notes: [], page: page.page, limit: page.limit, total: 0 }
  if (query.status && query.status !== 'active') return empty
  const q = query.q?.trim() ? query.q : undefined
  const where = db`
    n.enterprise_id = ${enterpriseId} and n.status = 'active'
    and ${query.expired === 'true' ? db`n.valid_until <= now()` : holds(db)}
    ${query.layer ? db`and n.layer = ${query.layer}` : db``}
    ${query.kind ? db`and n.kind = ${query.kind}` : db``}
    ${idFilter(db, 'n.task_id', query.taskId)}
    ${idFilter(db, 'n.team_id', query.teamId)}
    ${q ? db`and n.search @@ s.every` : db``}`
  const search = q
    ? db`with s as materialized (${searchTerms(db, enterpriseId, q)})`
    : db`with s as materialized (select null::tsquery as every)`
  const order =
    page.sort === 'impact'
      ? db`m.lift desc nulls last,`
      : page.sort === 'recalls'
        ? db`n.recalls desc,`
        : q
          ? db`${searchScore(db)} desc,`
          : db``
  const [rows, [count]] = await Promise.all([
    db<NoteRow[]>`
      ${search}
      select ${noteColumns(db)} from s, memory_notes n
      ${page.sort === 'impact' ? db`left join memory_impact m on m.enterprise_id = ${enterpriseId} and m.note_id = n.id` : db``}
       where ${where}
       order by ${order} n.created_at desc, n.id desc
       limit ${page.limit} offset ${page.offset}`,
    db<{ total: number }[]>`
      ${search} select count(*)::int as total from s, memory_notes n where ${where}`,
  ])
  return { ...empty, notes: rows.map(toNote), total: count!.total }
}

/** A note with its evidence, unless tombstoned (never answered again): superseded and proposed ones too. */
export async function getNote(db: Db, enterpriseId: string, id: string): Promise<MemoryNote> {
  return toNote(await loadNote(db, enterpriseId, id))
}

/**
 * PATCH /v1/memory/{id}: extends an active note (expired or not) to a new validUntil in the future, or
 * lets it hold with no end (null). A note not active is 409 note_not_active.
 */
export async function setValidUntil(
  db: Db,
  enterpriseId: string,
  id: string,
  validUntil: string | null,
): Promise<MemoryNote> {
  const until = validUntil === null ? null : readValidUntil(validUntil)
  return transaction(db, async (tx) => {
    const note = await loadNote(tx, enterpriseId, id, true)
    if (note.status !== 'active')
      throw new ApiError(
        'note_not_active',
        `Note ${id} is ${note.status}; only an active note holds until a time.`,
      )
    const [row] = await tx<NoteRow[]>`
      update memory_notes n set valid_until = ${until}, updated_at = now()
       where n.enterprise_id = ${enterpriseId} and n.id = ${id}
      returning ${noteColumns(tx)}`
    return toNote(row!)
  })
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

/** A task's active task-layer notes that hold, newest first, and its training grants. */
export async function taskMemory(
  db: Db,
  enterpriseId: string,
  taskId: string,
): Promise<TaskMemory> {
  const task = await loadTask(db, enterpriseId, taskId)
  const rows = await db<NoteRow[]>`
    select ${noteColumns(db)} from memory_notes n
     where n.enterprise_id = ${enterpriseId} and n.task_id = ${taskId} and n.status = 'active'
       and ${holds(db)}
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
  input: {
    layer: MemoryLayer
    text: string
    correctsId?: string
    validUntil?: string
    idempotencyKey?: string
    createdBy: string | null
  },
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
    validUntil: input.validUntil,
    idempotencyKey: input.idempotencyKey,
    createdBy: input.createdBy ?? undefined,
  })
}
