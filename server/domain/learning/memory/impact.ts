import { isUuid } from '../../../../shared/ids.js'
import type { Db } from '../../../db/sql.js'
import type { RunOutcome } from '../../runs/index.js'

// A note's impact (DESIGN 10, issue 31): what the runs that recalled it did, against the runs of the same
// tasks over the same period that did not. Counted as runs end, in the end's transaction (runs report
// outcomes through the hook installLearning registers): a task's finished runs (memory_task_outcomes),
// and per note and task the outcomes of the runs that recalled it (their memory.recalled event) with the
// task's counts when the first and the latest of them ended (memory_note_impact). The memory_impact view
// (migration 0023) turns those into rates and lift; a read never scans runs or events.
//
// Locks (docs/locks.md): a run's end takes the rows of its tasks' counts in task id order, then those of
// its notes' counts in note id order; nothing else writes them.

/** A note recalled by at least this many finished runs... */
export const lowImpactRuns = 20
/** ...whose lift is this or lower opens a low_impact review item. */
export const lowImpactLift = -0.2

interface TaskCount {
  enterpriseId: string
  taskId: string
  succeeded: number
  failed: number
}

interface NoteCount extends TaskCount {
  noteId: string
}

/** Counts the outcomes of runs that just ended, and opens the low_impact items they call for. */
export async function countImpact(tx: Db, outcomes: readonly RunOutcome[]): Promise<void> {
  if (outcomes.length === 0) return
  const tasks = new Map<string, TaskCount>()
  for (const o of outcomes) {
    const t = tasks.get(o.taskId) ?? { ...o, succeeded: 0, failed: 0 }
    t[o.outcome] += 1
    tasks.set(o.taskId, t)
  }
  const byTask = [...tasks.values()].sort((a, b) => compare(a.taskId, b.taskId))
  const [events, totals] = await Promise.all([
    tx<{ runId: string; noteIds: unknown }[]>`
      select run_id, payload -> 'noteIds' as note_ids from run_events
       where run_id = any(${tx.array(outcomes.map((o) => o.runId))}::uuid[])
         and type = 'memory.recalled'`,
    tx<{ taskId: string; succeeded: number; failed: number }[]>`
      insert into memory_task_outcomes (enterprise_id, task_id, succeeded, failed)
      select * from unnest(${tx.array(byTask.map((t) => t.enterpriseId))}::uuid[],
                           ${tx.array(byTask.map((t) => t.taskId))}::uuid[],
                           ${tx.array(byTask.map((t) => t.succeeded))}::int[],
                           ${tx.array(byTask.map((t) => t.failed))}::int[])
       order by 2
      on conflict (task_id) do update
        set succeeded = memory_task_outcomes.succeeded + excluded.succeeded,
            failed = memory_task_outcomes.failed + excluded.failed
      returning task_id, succeeded, failed`,
  ])
  const recalled = new Map(events.map((e) => [e.runId, e.noteIds]))
  const notes = new Map<string, NoteCount>()
  for (const o of outcomes) {
    const ids = recalled.get(o.runId)
    if (!Array.isArray(ids)) continue
    for (const noteId of new Set(ids.filter(isUuid))) {
      const key = `${noteId}:${o.taskId}`
      const n = notes.get(key) ?? { ...o, noteId, succeeded: 0, failed: 0 }
      n[o.outcome] += 1
      notes.set(key, n)
    }
  }
  if (notes.size === 0) return
  const after = new Map(totals.map((t) => [t.taskId, t]))
  const rows = [...notes.values()].sort(
    (a, b) => compare(a.noteId, b.noteId) || compare(a.taskId, b.taskId),
  )
  // The task's counts once this change ends its runs (last), and before it (first): a period that
  // starts now leaves out every run of this change, and takes them in again at the difference.
  const last = (n: NoteCount) => after.get(n.taskId)!
  const first = (n: NoteCount) => ({
    succeeded: last(n).succeeded - tasks.get(n.taskId)!.succeeded,
    failed: last(n).failed - tasks.get(n.taskId)!.failed,
  })
  const column = <T>(fn: (n: NoteCount) => T) => tx.array(rows.map(fn) as never[])
  await tx`
    insert into memory_note_impact (enterprise_id, note_id, task_id, succeeded, failed,
                                    first_succeeded, first_failed, last_succeeded, last_failed,
                                    first_at, last_at)
    select u.enterprise_id, u.note_id, u.task_id, u.succeeded, u.failed, u.first_succeeded,
           u.first_failed, u.last_succeeded, u.last_failed, now(), now()
      from unnest(${column((n) => n.enterpriseId)}::uuid[], ${column((n) => n.noteId)}::uuid[],
                  ${column((n) => n.taskId)}::uuid[], ${column((n) => n.succeeded)}::int[],
                  ${column((n) => n.failed)}::int[], ${column((n) => first(n).succeeded)}::int8[],
                  ${column((n) => first(n).failed)}::int8[], ${column((n) => last(n).succeeded)}::int8[],
                  ${column((n) => last(n).failed)}::int8[])
           as u(enterprise_id, note_id, task_id, succeeded, failed, first_succeeded, first_failed,
                last_succeeded, last_failed)
     -- A note gone since it was recalled (its task or team deleted) has nothing to count.
     where exists (select 1 from memory_notes n
                    where n.enterprise_id = u.enterprise_id and n.id = u.note_id)
     order by u.note_id, u.task_id
    on conflict (note_id, task_id) do update
      set succeeded = memory_note_impact.succeeded + excluded.succeeded,
          failed = memory_note_impact.failed + excluded.failed,
          last_succeeded = excluded.last_succeeded,
          last_failed = excluded.last_failed,
          last_at = excluded.last_at`
  await openLowImpact(tx, [...new Set(rows.map((n) => n.noteId))].sort(compare))
}

/**
 * Opens a low_impact review item (issue 31) for each of `noteIds` that is active, recalled by at least
 * lowImpactRuns finished runs, with a lift of lowImpactLift or lower: one open per note, and after a
 * decision another only once lowImpactRuns more runs recalled it, so a person who dismissed one is not
 * asked again at the next run.
 */
async function openLowImpact(tx: Db, noteIds: string[]): Promise<void> {
  await tx`
    insert into memory_review_items (enterprise_id, kind, note_id, reason, recalled_runs)
    select m.enterprise_id, 'low_impact', m.note_id,
           format('Recalled by %s finished runs, of which %s%% succeeded, against %s%% of the runs of the same tasks that did not recall it (lift %s).',
                  m.recalled_runs, round(m.success_rate * 100), round(m.base_rate * 100), m.lift),
           m.recalled_runs
      from memory_impact m
      join memory_notes n on n.enterprise_id = m.enterprise_id and n.id = m.note_id
     where m.note_id = any(${tx.array(noteIds)}::uuid[]) and n.status = 'active'
       and m.recalled_runs >= ${lowImpactRuns}::int and m.lift <= ${lowImpactLift}::float8
       and not exists (
             select 1 from memory_review_items r
              where r.note_id = m.note_id and r.kind = 'low_impact'
                and (r.status = 'open' or r.recalled_runs > m.recalled_runs - ${lowImpactRuns}::int))
     order by m.note_id
    on conflict (note_id) where status = 'open' and kind = 'low_impact' do nothing`
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
