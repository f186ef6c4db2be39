import { ApiError } from '../../../shared/errors.js'
import { transaction, type Db } from '../../db/sql.js'
import { lockRole, requireRole } from '../org/index.js'
import { loadTask, refuseBuiltin } from './tasks.js'

// Which role runs a task (spec: Endpoints Roles, POST and DELETE /v1/roles/{id}/tasks): written here,
// with the tasks this folder owns, though the routes are the role's.

/**
 * Makes a role run a task: the task's assigneeRole becomes the role's slug, without publishing a
 * version (spec: Endpoints Roles). A team role runs tasks of its team: a task of no team joins it, a
 * task of another team is refused.
 */
export async function assignTaskToRole(
  db: Db,
  enterpriseId: string,
  roleId: string,
  taskId: string,
): Promise<void> {
  await transaction(db, async (tx) => {
    const role = await lockRole(tx, enterpriseId, roleId)
    const task = await loadTask(tx, enterpriseId, taskId, true)
    refuseBuiltin(task)
    if (role.teamId && task.teamId && task.teamId !== role.teamId) {
      throw new ApiError(
        'role_team_mismatch',
        `Task ${task.slug} belongs to another team than role ${role.slug}; move the task first.`,
      )
    }
    await tx`
      update tasks
         set assignee_role = ${role.slug}, team_id = coalesce(team_id, ${role.teamId}::uuid), updated_at = now()
       where enterprise_id = ${enterpriseId} and id = ${taskId}`
  })
}

/** Stops the role running the task (again: no change): the task is left without an assignee role. */
export async function unassignTaskFromRole(
  db: Db,
  enterpriseId: string,
  roleId: string,
  taskId: string,
): Promise<void> {
  const role = await requireRole(db, enterpriseId, roleId)
  refuseBuiltin(await loadTask(db, enterpriseId, taskId))
  await db`
    update tasks set assignee_role = null, updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${taskId} and assignee_role = ${role.slug}
       and (${role.teamId}::uuid is null or team_id = ${role.teamId}::uuid)`
}
