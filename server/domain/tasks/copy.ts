import type { TaskCopy } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import { createTask, loadTask, loadVersion } from './tasks.js'

// Copying a task (spec: POST /v1/tasks/{id}/copy): beside tasks.ts, which the copy builds on.

/**
 * An independent copy of the task's current definition, on a team of the caller's choosing
 * (spec: POST /v1/tasks/{id}/copy); the assignee role defaults to the original's.
 */
export async function copyTask(
  db: Db,
  enterpriseId: string,
  id: string,
  body: TaskCopy,
): Promise<string> {
  const task = await loadTask(db, enterpriseId, id)
  const current = (await loadVersion(db, enterpriseId, task.currentVersionId))!
  return createTask(
    db,
    enterpriseId,
    {
      ...current.definition,
      name: body.name,
      slug: body.slug,
      teamId: body.teamId,
      assigneeRole: body.assigneeRole === undefined ? task.assigneeRole : body.assigneeRole,
      kind: task.kind,
      serializeOn: task.serializeOn,
      status: 'active',
    },
    { origin: 'copy', sourceTaskId: task.id },
  )
}
