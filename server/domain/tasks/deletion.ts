import { ApiError } from '../../../shared/errors.js'
import { underWayStatuses } from '../../../shared/schemas/runs.js'
import { literalIn, transaction, type Db } from '../../db/sql.js'
import { loadTask, refuseBuiltin } from './tasks.js'

// Deleting a task (spec: DELETE /v1/tasks/{id}): its versions go with it, its runs stay, and its clones
// in other enterprises are detached.

/** Deletes the task and all its versions; its runs are kept. Refused while a run is under way. */
export async function deleteTask(db: Db, enterpriseId: string, id: string): Promise<void> {
  await transaction(db, async (tx) => {
    const task = await loadTask(tx, enterpriseId, id, true)
    refuseBuiltin(task)
    const [busy] = await tx<{ n: number }[]>`
      select count(*)::int as n from runs
       where enterprise_id = ${enterpriseId} and task_id = ${id}
         and ${literalIn(tx, 'status', underWayStatuses)}`
    if (busy!.n > 0) {
      throw new ApiError(
        'task_busy',
        `Task ${task.slug} has ${busy!.n} run(s) under way; cancel them or wait.`,
        {
          runsUnderWay: busy!.n,
        },
      )
    }
    // Its clones in other enterprises keep the last version they had (DESIGN 12).
    await tx`
      update tasks set detached_at = now()
       where source_task_id = ${id} and origin = 'clone' and detached_at is null`
    await tx`update tasks set current_version_id = null where id = ${id}`
    await tx`delete from tasks where enterprise_id = ${enterpriseId} and id = ${id}`
  })
}
