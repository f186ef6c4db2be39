import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  CatalogClone,
  CatalogRole,
  CatalogRoleClone,
  CatalogRoleCloned,
  CatalogRoleListQuery,
  CatalogRolePage,
  CatalogTaskListQuery,
  CatalogTaskPage,
  CatalogTaskRead,
  catalogRoleSorts,
  catalogTaskSorts,
} from '../../shared/schemas/catalog.js'
import { TaskCopy, TaskRead } from '../../shared/schemas/tasks.js'
import { readPage } from '../db/paging.js'
import {
  cloneCatalogRole,
  cloneCatalogTask,
  copyCatalogTask,
  getCatalogRole,
  getCatalogTask,
  listCatalogRoles,
  listCatalogTasks,
} from '../domain/catalog/index.js'
import { getRole } from '../domain/org/index.js'
import { readTask } from '../domain/tasks/index.js'
import { apiBaseOf, type AppContext, type RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

const EntryParams = z.object({ id: Uuid })

/**
 * The catalogue (spec: Endpoints Catalogue; DESIGN 12): every enterprise reads the same entries;
 * clone and copy install into the caller's enterprise.
 */
export function catalogRoutes(deps: RouteDeps) {
  const { sql } = deps
  const app = createRouter()
  // The address callers reach the API at, for the webhook URL of the read answer.
  const read = (c: AppContext, id: string) =>
    readTask(sql, c.var.caller.enterpriseId, id, apiBaseOf(deps))
  const tasks = { notFound: 'task_not_found', params: EntryParams } as const
  const roles = { notFound: 'role_not_found', params: EntryParams } as const
  const installErrors = [
    'team_not_found',
    'task_slug_taken',
    'invalid_slug',
    'invalid_name',
    'invalid_task_definition',
    'gate_required_for_tool',
    'assignee_member_removed',
  ] as const

  route(
    app,
    {
      operationId: 'listCatalogTasks',
      method: 'get',
      path: '/tasks',
      summary:
        'Public tasks, paged; sort slug (default), name, status, provenance, createdAt, updatedAt; filters status, kind, provenance, origin; slug matches any part',
      query: CatalogTaskListQuery,
      response: CatalogTaskPage,
    },
    async (_c, { query }) => listCatalogTasks(sql, query, readPage(query, catalogTaskSorts)),
  )

  route(
    app,
    {
      ...tasks,
      operationId: 'getCatalogTask',
      method: 'get',
      path: '/tasks/{id}',
      summary:
        'One public task with its current definition, skill and the schedule clones start with',
      response: CatalogTaskRead,
    },
    async (_c, { params }) => getCatalogTask(sql, params.id),
  )

  route(
    app,
    {
      ...tasks,
      operationId: 'cloneCatalogTask',
      method: 'post',
      path: '/tasks/{id}/clone',
      summary:
        "Install the task on a team, linked to the original: its definition stays the original's, and each new version of the original is what the clone runs",
      description:
        "The clone keeps the original's role (assigneeRole) and schedule, the schedule on only when its input gives every required input a value; name and slug default to the original's. Its name, slug, team, role, status and schedule are the enterprise's to change; a change to its definition answers 403 task_definition_read_only.",
      body: CatalogClone,
      status: 201,
      response: TaskRead,
      errors: [...installErrors],
    },
    async (c, { params, body }) =>
      read(c, await cloneCatalogTask(sql, c.var.caller.enterpriseId, params.id, body)),
  )

  route(
    app,
    {
      ...tasks,
      operationId: 'copyCatalogTask',
      method: 'post',
      path: '/tasks/{id}/copy',
      summary:
        "Install an independent, editable copy on a team; assigneeRole defaults to the original's",
      body: TaskCopy,
      status: 201,
      response: TaskRead,
      errors: [...installErrors],
    },
    async (c, { params, body }) =>
      read(c, await copyCatalogTask(sql, c.var.caller.enterpriseId, params.id, body)),
  )

  route(
    app,
    {
      operationId: 'listCatalogRoles',
      method: 'get',
      path: '/roles',
      summary:
        'Public roles, each with its public tasks, paged; sort slug (default), name, provenance, createdAt, updatedAt; filter provenance; slug matches any part',
      query: CatalogRoleListQuery,
      response: CatalogRolePage,
    },
    async (_c, { query }) => listCatalogRoles(sql, query, readPage(query, catalogRoleSorts)),
  )

  route(
    app,
    {
      ...roles,
      operationId: 'getCatalogRole',
      method: 'get',
      path: '/roles/{id}',
      summary: 'One public role with its public tasks',
      response: CatalogRole,
    },
    async (_c, { params }) => getCatalogRole(sql, params.id),
  )

  route(
    app,
    {
      ...roles,
      operationId: 'cloneCatalogRole',
      method: 'post',
      path: '/roles/{id}/clone',
      summary:
        'Install the role on a team (a role with its slug on the team or enterprise-wide is reused) and each of its public tasks, linked; deprecated tasks are skipped',
      description:
        "One transaction: if any task slug exists in the enterprise nothing is installed, and the 409 task_slug_taken lists those slugs in `slugs`. A task's schedule is turned on only when its input gives every required input of the task a value; `schedules` lists each one, on or off, with the inputs it misses.",
      body: CatalogRoleClone,
      status: 201,
      response: CatalogRoleCloned,
      errors: [...installErrors],
    },
    async (c, { params, body }) => {
      const enterpriseId = c.var.caller.enterpriseId
      const done = await cloneCatalogRole(sql, enterpriseId, params.id, body.teamId)
      return {
        role: await getRole(sql, enterpriseId, done.roleId),
        roleCreated: done.roleCreated,
        tasks: await Promise.all(done.taskIds.map((id) => read(c, id))),
        skipped: done.skipped,
        schedules: done.schedules,
      }
    },
  )

  return app
}
