import type { Schedule, ScheduleInput } from '../../../shared/schemas/tasks.js'
import { transaction, type Db } from '../../db/sql.js'
import { deleteSchedule, getSchedule, setSchedule } from './schedules.js'
import { loadTask, refuseBuiltin } from './tasks.js'

// A task's schedule set and cleared through the task (spec: PUT and DELETE /v1/tasks/{id}/schedule):
// the task found in the enterprise, a built-in one refused; the schedules themselves and their fires
// are schedules.ts's.

/** Sets the task's schedule (DESIGN 7) and answers it; a built-in task's is not changed. */
export async function setTaskSchedule(
  db: Db,
  enterpriseId: string,
  id: string,
  input: ScheduleInput,
): Promise<Schedule> {
  return transaction(db, async (tx) => {
    const task = await loadTask(tx, enterpriseId, id, 'key share')
    refuseBuiltin(task)
    await setSchedule(tx, enterpriseId, task.id, input)
    return (await getSchedule(tx, enterpriseId, task.id, task.status))!
  })
}

/** Removes the task's schedule (none: no change); a built-in task's is not changed. */
export async function clearTaskSchedule(db: Db, enterpriseId: string, id: string): Promise<void> {
  const task = await loadTask(db, enterpriseId, id)
  refuseBuiltin(task)
  await deleteSchedule(db, enterpriseId, task.id)
}
