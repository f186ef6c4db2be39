import type { Pause, RunPause } from '../../../shared/schemas/pauses.js'
import type { Db, Fragment } from '../../db/sql.js'

// Pauses (issue 50; migration 0039; docs/usage.md#pause): the one module that reads and writes the
// pauses table. A leaf: runs (starts, admission, dispatch, the engine's check between steps), chats
// (claiming turns) and tasks (the read answer) ask it, and it asks none of them.

interface PauseRow {
  id: string
  enterpriseId: string
  /** null: the whole enterprise. */
  taskId: string | null
  pausedAt: Date
  pausedBy: string
  reason: string
  resumedAt: Date | null
  resumedBy: string | null
  resumeReason: string | null
}

/** Who paused, when and why, as answered (task and enterprise answers). */
export function toPause(row: Pick<PauseRow, 'pausedAt' | 'pausedBy' | 'reason'>): Pause {
  return { at: row.pausedAt.toISOString(), by: row.pausedBy, reason: row.reason }
}

/**
 * SQL: true when a pause in force holds work of this enterprise and task (the task's own, or the
 * enterprise's). `taskId` may be SQL null (a chat's turn is held by the enterprise's pause only).
 */
export function pausedWhere(db: Db, enterpriseId: Fragment, taskId: Fragment): Fragment {
  return db`exists (
    select 1 from pauses p
     where p.resumed_at is null and p.enterprise_id = ${enterpriseId}
       and (p.task_id is null or p.task_id = ${taskId}))`
}

/**
 * SQL: the pause that holds work of this enterprise and task, as JSON for toRunPause, or null. The
 * enterprise's before the task's: it is the wider one, and the task's resume does not end it.
 */
export function pauseJson(db: Db, enterpriseId: Fragment, taskId: Fragment): Fragment {
  return db`(
    select jsonb_build_object('scope', case when p.task_id is null then 'enterprise' else 'task' end,
                              'at', p.paused_at, 'by', p.paused_by, 'reason', p.reason)
      from pauses p
     where p.resumed_at is null and p.enterprise_id = ${enterpriseId}
       and (p.task_id is null or p.task_id = ${taskId})
     order by p.task_id nulls first
     limit 1)`
}

/** What pauseJson selected, as answered (times as every answer writes them). */
export function toRunPause(json: Omit<RunPause, 'at'> & { at: string }): RunPause {
  return { ...json, at: new Date(json.at).toISOString() }
}

/** The pauses in force in an enterprise: its own (taskId null) and its tasks'. */
export async function pausesInForce(db: Db, enterpriseId: string): Promise<PauseRow[]> {
  return db<PauseRow[]>`
    select * from pauses where enterprise_id = ${enterpriseId} and resumed_at is null`
}

/** The pause in force of a task (or with null, of the enterprise itself), if any. */
export async function pauseOf(
  db: Db,
  enterpriseId: string,
  taskId: string | null,
): Promise<Pause | null> {
  const [row] = await db<PauseRow[]>`
    select * from pauses
     where enterprise_id = ${enterpriseId} and task_id is not distinct from ${taskId}::uuid
       and resumed_at is null`
  return row ? toPause(row) : null
}

/**
 * The tasks among `taskIds` held by a pause in force (theirs or their enterprise's). Read by a start
 * after it holds its tasks' row locks, so a pause that committed before it is seen (pauseTask locks the
 * task's row).
 */
export async function pausedTasks(
  db: Db,
  tasks: { enterpriseId: string; taskId: string }[],
): Promise<Map<string, RunPause>> {
  if (tasks.length === 0) return new Map()
  const rows = await db<{ taskId: string; pause: Omit<RunPause, 'at'> & { at: string } }[]>`
    select want.task_id, ${pauseJson(db, db`want.enterprise_id`, db`want.task_id`)} as pause
      from unnest(${db.array(tasks.map((t) => t.enterpriseId))}::uuid[],
                  ${db.array(tasks.map((t) => t.taskId))}::uuid[]) as want(enterprise_id, task_id)
     where ${pausedWhere(db, db`want.enterprise_id`, db`want.task_id`)}`
  return new Map(rows.map((r) => [r.taskId, toRunPause(r.pause)]))
}

/**
 * Puts a pause in force, answering it and whether this call made it: a pause already in force is kept
 * as it was (its time, who and why), so pausing twice is idempotent and the first reason stands.
 */
export async function insertPause(
  db: Db,
  fields: { enterpriseId: string; taskId: string | null; by: string; reason: string },
): Promise<{ pause: Pause; created: boolean }> {
  const [made] = await db<PauseRow[]>`
    insert into pauses (enterprise_id, task_id, paused_by, reason)
    values (${fields.enterpriseId}, ${fields.taskId}, ${fields.by}, ${fields.reason})
    on conflict (enterprise_id, coalesce(task_id, '00000000-0000-0000-0000-000000000000'::uuid))
      where resumed_at is null do nothing
    returning *`
  if (made) return { pause: toPause(made), created: true }
  // A statement of its own: its snapshot sees the pause the conflict waited for.
  const kept = await pauseOf(db, fields.enterpriseId, fields.taskId)
  return { pause: kept!, created: false }
}

/** Ends the pause in force of a task (or with null, of the enterprise), if any; answers whether one was. */
export async function endPause(
  db: Db,
  fields: { enterpriseId: string; taskId: string | null; by: string; reason?: string },
): Promise<boolean> {
  const rows = await db`
    update pauses
       set resumed_at = statement_timestamp(), resumed_by = ${fields.by},
           resume_reason = ${fields.reason ?? null}
     where enterprise_id = ${fields.enterpriseId} and task_id is not distinct from ${fields.taskId}::uuid
       and resumed_at is null
    returning id`
  return rows.length > 0
}
