import { ApiError } from '../../../shared/errors.js'
import { underWayStatuses } from '../../../shared/schemas/runs.js'
import { improveIntervalMinutes } from '../../config.js'
import { literalIn, transaction, type Db, type Tx } from '../../db/sql.js'
import {
  appendEvent,
  enqueueRun,
  laneOf,
  tryLockLanes,
  onRunOutcomes,
  onSetbacks,
  type Setback,
} from '../runs/index.js'
import { countImpact } from './memory/index.js'

// Self-improvement starting by itself (DESIGN 10): a failed run of a custom task, or a gate of one
// rejected or sent back, starts an os-improve run of that task (origin learning), in the transaction of
// the change that called for it; never for a built-in task (nor a clone, whose definition is not its
// owner's to change, nor a deprecated task); not while one is under way or a recommendation of the task
// waits; at most once per task per OSD_IMPROVE_INTERVAL_MINUTES. Runs know nothing of it: a run's end
// and a gate's decision report their setbacks to what installLearning registered (runs/setbacks.ts).

/** What calls for an improvement: a run's setback, a task and the run whose failure or gate it was. */
export type ImproveCause = Setback

/**
 * Starts the os-improve runs `causes` call for, in `tx`. Each task is decided under its os-improve lane's
 * lock (held to commit, as any start's, but only tried: see below), so processes that see failures of
 * one task at once start one run; the interval is a row per task, written with the start. A start that cannot happen (nobody holds
 * the coo role, the database refused it) is left out in a savepoint: learning never stops the change
 * that called for it.
 */
export async function triggerImprovements(tx: Db, causes: readonly ImproveCause[]): Promise<void> {
  const minutes = improveIntervalMinutes()
  if (causes.length === 0 || minutes === undefined) return
  const candidates = await tx<
    { taskId: string; enterpriseId: string; improveId: string; serializeOn: string[] | null }[]
  >`
    select t.id as task_id, t.enterprise_id, i.id as improve_id, i.serialize_on
      from tasks t
      join tasks i on i.enterprise_id = t.enterprise_id and i.slug = 'os-improve' and i.origin = 'builtin'
     where t.id = any(${tx.array([...new Set(causes.map((c) => c.taskId))])}::uuid[])
       and t.origin in ('custom', 'copy') and t.status = 'active'
     order by t.id`
  if (candidates.length === 0) return
  for (const task of candidates) {
    const cause = causes.find(
      (c) => c.taskId === task.taskId && c.enterpriseId === task.enterpriseId,
    )
    if (!cause) continue
    await inSavepoint(tx, async (sp) => {
      const input = { taskId: task.taskId }
      const lane = laneOf({ id: task.improveId, serializeOn: task.serializeOn }, input)
      // Tried, never waited for: this runs inside a run's end or a gate's decision, which already
      // hold row locks (the enterprise's running count among them), while the engine's admission holds
      // lanes and waits for those rows (docs/locks.md; issue 42). Whoever holds the lane is starting
      // or admitting an os-improve run of this task, or deciding to: this cause is already answered.
      if (!(await tryLockLanes(sp, [lane]))) return
      const [state] = await sp<{ underWay: boolean; waiting: boolean; recent: boolean }[]>`
        select
          exists (select 1 from runs where lane = ${lane}
                     and ${literalIn(sp, 'status', underWayStatuses)}) as under_way,
          exists (select 1 from recommendations
                   where enterprise_id = ${task.enterpriseId} and task_id = ${task.taskId}
                     and status = 'waiting') as waiting,
          exists (select 1 from improve_triggers
                   where enterprise_id = ${task.enterpriseId} and task_id = ${task.taskId}
                     and last_at > now() - ${minutes} * interval '1 minute') as recent`
      if (state!.underWay || state!.waiting || state!.recent) return
      await sp`
        insert into improve_triggers (enterprise_id, task_id, last_at)
        values (${task.enterpriseId}, ${task.taskId}, now())
        on conflict (enterprise_id, task_id) do update set last_at = excluded.last_at`
      const run = await enqueueRun(sp, task.enterpriseId, task.improveId, input, {
        origin: 'learning',
      })
      await appendEvent(sp, run, 'improvement.triggered', {
        taskId: task.taskId,
        runId: cause.runId,
        because: cause.because,
      })
      if (cause.runId)
        await appendEvent(
          sp,
          { id: cause.runId, enterpriseId: task.enterpriseId },
          'improvement.started',
          { runId: run.id, because: cause.because },
        )
    })
  }
}

/** Runs fn in a savepoint of tx (or a transaction of its own); what it throws is left out. */
async function inSavepoint(tx: Db, fn: (sp: Db) => Promise<void>): Promise<void> {
  try {
    const savepoint = (tx as Partial<Tx>).savepoint
    if (typeof savepoint === 'function') await (tx as Tx).savepoint((sp) => fn(sp))
    else await transaction(tx, fn)
  } catch (err) {
    // task_not_runnable (nobody holds coo) and any refusal: no improvement this time.
    if (err instanceof ApiError) return
    if ((err as { name?: string })?.name === 'PostgresError') return
    throw err
  }
}

/**
 * What learning answers of the rest of the domain, registered once at start (createApp, startEngine):
 * a run's setback calls for its task's improvement, and a run's outcome counts for the notes it
 * recalled (DESIGN 2, 10).
 */
export function installLearning(): void {
  onSetbacks(triggerImprovements)
  onRunOutcomes(countImpact)
}
