import { ApiError } from '../../../../shared/errors.js'
import type {
  ReviewDecision,
  ReviewHistoryPage,
  ReviewItem,
  ReviewPage,
} from '../../../../shared/schemas/memory.js'
import type { PageRequest } from '../../../db/paging.js'
import { transaction, type Db } from '../../../db/sql.js'
import { loadNote, noteColumns, supersede, toNote, type NoteRow } from './rows.js'

// The review queue (DESIGN 10): conflicts (a training run's correction of a person's note, proposed and
// not applied) and notes rated down. Resolve (with the correcting note) or dismiss closes an item; every
// decision goes to the history with who, when and why.

interface ItemRow {
  id: string
  kind: ReviewItem['kind']
  status: ReviewItem['status']
  noteId: string
  correctionId: string | null
  reason: string | null
  createdAt: Date
  decidedAt: Date | null
}

export function reviewItemNotFound(id: string): ApiError {
  return new ApiError('review_item_not_found', `No memory review item ${id} in this enterprise.`)
}

/** Opens a conflict: `correctionId` (proposed) would correct the person's note `noteId`. */
export async function openConflict(
  db: Db,
  enterpriseId: string,
  noteId: string,
  correctionId: string,
): Promise<void> {
  await db`
    insert into memory_review_items (enterprise_id, kind, note_id, correction_id)
    values (${enterpriseId}, 'conflict', ${noteId}, ${correctionId})`
}

/** Opens a rated_down item for the note, unless one is open already (one open item per note). */
export async function openRatedDown(
  db: Db,
  enterpriseId: string,
  noteId: string,
  reason: string | null,
): Promise<void> {
  await db`
    insert into memory_review_items (enterprise_id, kind, note_id, reason)
    values (${enterpriseId}, 'rated_down', ${noteId}, ${reason})
    on conflict (note_id) where status = 'open' and kind = 'rated_down' do nothing`
}

/** The open items, newest first. */
export async function listReview(
  db: Db,
  enterpriseId: string,
  page: PageRequest,
): Promise<ReviewPage> {
  const [rows, [count]] = await Promise.all([
    db<ItemRow[]>`
      select id, kind, status, note_id, correction_id, reason, created_at, decided_at
        from memory_review_items
       where enterprise_id = ${enterpriseId} and status = 'open'
       order by created_at desc, id desc limit ${page.limit} offset ${page.offset}`,
    db<{ total: number }[]>`
      select count(*)::int as total from memory_review_items
       where enterprise_id = ${enterpriseId} and status = 'open'`,
  ])
  return {
    items: await toItems(db, enterpriseId, rows),
    page: page.page,
    limit: page.limit,
    total: count!.total,
  }
}

/** Items with their notes, read in one query. */
async function toItems(db: Db, enterpriseId: string, rows: ItemRow[]): Promise<ReviewItem[]> {
  const ids = [
    ...new Set(rows.flatMap((r) => (r.correctionId ? [r.noteId, r.correctionId] : [r.noteId]))),
  ]
  const notes = ids.length
    ? await db<NoteRow[]>`
        select ${noteColumns(db)} from memory_notes n
         where n.enterprise_id = ${enterpriseId} and n.id = any(${db.array(ids)}::uuid[])`
    : []
  const byId = new Map(notes.map((n) => [n.id, toNote(n)]))
  return rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    status: row.status,
    note: byId.get(row.noteId)!,
    correction: row.correctionId ? (byId.get(row.correctionId) ?? null) : null,
    reason: row.reason,
    createdAt: row.createdAt.toISOString(),
    decidedAt: row.decidedAt?.toISOString() ?? null,
  }))
}

interface DecisionRow {
  id: string
  itemId: string
  kind: ReviewDecision['kind']
  noteId: string
  decision: ReviewDecision['decision']
  correctionId: string | null
  reason: string
  decidedBy: string | null
  decidedAt: Date
}

/** Every decision, newest first. */
export async function listReviewHistory(
  db: Db,
  enterpriseId: string,
  page: PageRequest,
): Promise<ReviewHistoryPage> {
  const [rows, [count]] = await Promise.all([
    db<DecisionRow[]>`
      select d.id, d.item_id, i.kind, i.note_id, d.decision, d.correction_id, d.reason, d.decided_by,
             d.decided_at
        from memory_review_decisions d
        join memory_review_items i on i.enterprise_id = d.enterprise_id and i.id = d.item_id
       where d.enterprise_id = ${enterpriseId}
       order by d.decided_at desc, d.id desc limit ${page.limit} offset ${page.offset}`,
    db<{ total: number }[]>`
      select count(*)::int as total from memory_review_decisions where enterprise_id = ${enterpriseId}`,
  ])
  return {
    decisions: rows.map((r) => ({ ...r, decidedAt: r.decidedAt.toISOString() })),
    page: page.page,
    limit: page.limit,
    total: count!.total,
  }
}

/** The item, locked, if it is open: 404 review_item_not_found, 409 review_item_decided. */
async function openItem(db: Db, enterpriseId: string, id: string): Promise<ItemRow> {
  const [row] = await db<ItemRow[]>`
    select id, kind, status, note_id, correction_id, reason, created_at, decided_at
      from memory_review_items where enterprise_id = ${enterpriseId} and id = ${id} for update`
  if (!row) throw reviewItemNotFound(id)
  if (row.status !== 'open')
    throw new ApiError('review_item_decided', `Review item ${id} is already ${row.status}.`)
  return row
}

async function decide(
  db: Db,
  enterpriseId: string,
  item: ItemRow,
  decision: {
    decision: 'resolved' | 'dismissed'
    correctionId: string | null
    reason: string
    by: string | null
  },
): Promise<ReviewDecision> {
  await db`
    update memory_review_items set status = ${decision.decision}, decided_at = now()
     where enterprise_id = ${enterpriseId} and id = ${item.id}`
  const [row] = await db<DecisionRow[]>`
    insert into memory_review_decisions (enterprise_id, item_id, decision, correction_id, reason, decided_by)
    values (${enterpriseId}, ${item.id}, ${decision.decision}, ${decision.correctionId}, ${decision.reason},
            ${decision.by})
    returning id, item_id, ${item.kind} as kind, ${item.noteId}::uuid as note_id, decision, correction_id,
              reason, decided_by, decided_at`
  return { ...row!, decidedAt: row!.decidedAt.toISOString() }
}

/**
 * Resolves an open item with `correctionId`, a note that corrects the reviewed one: a proposed correction
 * (a conflict's) is applied, and the reviewed note is superseded. Another proposed correction of the
 * item is tombstoned: it was not taken. 400 when the note does not correct the reviewed one.
 */
export async function resolveReview(
  db: Db,
  enterpriseId: string,
  id: string,
  input: { correctionId: string; reason: string; by: string | null },
): Promise<ReviewDecision> {
  return transaction(db, async (tx) => {
    const item = await openItem(tx, enterpriseId, id)
    const correction = await loadNote(tx, enterpriseId, input.correctionId, true)
    if (correction.correctsId !== item.noteId)
      throw new ApiError(
        'invalid_request',
        `correctionId: note ${correction.id} does not correct the reviewed note ${item.noteId}.`,
      )
    if (correction.status === 'superseded')
      throw new ApiError(
        'note_not_active',
        `correctionId: note ${correction.id} is itself superseded by ${correction.supersededById}.`,
      )
    if (correction.status === 'proposed')
      await tx`
        update memory_notes set status = 'active', updated_at = now()
         where enterprise_id = ${enterpriseId} and id = ${correction.id}`
    await supersede(tx, enterpriseId, item.noteId, correction.id)
    if (item.correctionId && item.correctionId !== correction.id)
      await tombstoneProposed(tx, enterpriseId, item.correctionId)
    return decide(tx, enterpriseId, item, {
      ...input,
      decision: 'resolved',
      correctionId: correction.id,
    })
  })
}

/** Dismisses an open item: the note stands; a conflict's proposed correction is tombstoned. */
export async function dismissReview(
  db: Db,
  enterpriseId: string,
  id: string,
  input: { reason: string; by: string | null },
): Promise<ReviewDecision> {
  return transaction(db, async (tx) => {
    const item = await openItem(tx, enterpriseId, id)
    if (item.correctionId) await tombstoneProposed(tx, enterpriseId, item.correctionId)
    return decide(tx, enterpriseId, item, { decision: 'dismissed', correctionId: null, ...input })
  })
}

async function tombstoneProposed(db: Db, enterpriseId: string, noteId: string): Promise<void> {
  await db`
    update memory_notes set status = 'tombstoned', updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${noteId} and status = 'proposed'`
}

/**
 * Dismisses the open items about a note just tombstoned (under review, or a conflict's proposed
 * correction): nothing is left to decide. Each goes to the history, by whoever tombstoned it.
 */
export async function dismissItemsOf(
  db: Db,
  enterpriseId: string,
  noteId: string,
  by: string | null,
): Promise<void> {
  const items = await db<ItemRow[]>`
    select id, kind, status, note_id, correction_id, reason, created_at, decided_at
      from memory_review_items
     where enterprise_id = ${enterpriseId} and status = 'open'
       and (note_id = ${noteId} or correction_id = ${noteId})
     for update`
  for (const item of items) {
    if (item.correctionId && item.correctionId !== noteId)
      await tombstoneProposed(db, enterpriseId, item.correctionId)
    await decide(db, enterpriseId, item, {
      decision: 'dismissed',
      correctionId: null,
      reason: `note ${noteId} was tombstoned`,
      by,
    })
  }
}
