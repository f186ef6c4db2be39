import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import {
  Role,
  RoleCreate,
  RoleDetail,
  RoleHolderAdd,
  RoleTaskAdd,
} from '../../shared/schemas/organisation.js'
import {
  createRole,
  deleteRole,
  getRoleDetail,
  grantRole,
  listRoles,
  revokeRole,
} from '../domain/org/index.js'
import { assignTaskToRole, unassignTaskFromRole } from '../domain/tasks/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

const RoleParams = z.object({ id: Uuid })

/** Roles (spec: Endpoints Roles). */
export function roleRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'role_not_found' } as const

  route(
    app,
    {
      operationId: 'listRoles',
      method: 'get',
      path: '/',
      summary: 'Every role',
      response: z.array(Role),
    },
    async (c) => listRoles(sql, c.var.caller.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'createRole',
      method: 'post',
      path: '/',
      summary: 'Create a role, team-scoped with teamId or enterprise-wide without',
      body: RoleCreate,
      status: 201,
      response: Role,
      errors: ['invalid_name', 'invalid_slug', 'role_slug_taken', 'team_not_found'],
    },
    async (c, { body }) => createRole(sql, c.var.caller.enterpriseId, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getRole',
      method: 'get',
      path: '/{id}',
      summary: 'The role, its holders and its tasks',
      params: RoleParams,
      response: RoleDetail,
    },
    async (c, { params }) => getRoleDetail(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteRole',
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a role and its grants; not a built-in one (beyond the spec)',
      params: RoleParams,
      status: 204,
      errors: ['role_builtin'],
    },
    async (c, { params }) => deleteRole(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'addRoleMember',
      method: 'post',
      path: '/{id}/members',
      summary: 'Grant the role to a member (a team role puts them on its team)',
      params: RoleParams,
      body: RoleHolderAdd,
      status: 201,
      response: RoleDetail,
      errors: ['member_not_found'],
    },
    async (c, { params, body }) => {
      await grantRole(sql, c.var.caller.enterpriseId, params.id, body.memberId)
      return getRoleDetail(sql, c.var.caller.enterpriseId, params.id)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'removeRoleMember',
      method: 'delete',
      path: '/{id}/members/{memberId}',
      summary: 'Take the role from a member',
      params: z.object({ id: Uuid, memberId: Uuid }),
      status: 204,
      errors: ['member_not_found'],
    },
    async (c, { params }) => revokeRole(sql, c.var.caller.enterpriseId, params.id, params.memberId),
  )

  route(
    app,
    {
      ...common,
      operationId: 'addRoleTask',
      method: 'post',
      path: '/{id}/tasks',
      summary:
        "Make the role run a task: its assigneeRole becomes the role's slug; no version is published",
      params: RoleParams,
      body: RoleTaskAdd,
      status: 201,
      response: RoleDetail,
      errors: ['task_not_found', 'role_team_mismatch', 'os_task_immutable'],
    },
    async (c, { params, body }) => {
      await assignTaskToRole(sql, c.var.caller.enterpriseId, params.id, body.taskId)
      return getRoleDetail(sql, c.var.caller.enterpriseId, params.id)
    },
  )

  route(
    app,
    {
      ...common,
      operationId: 'removeRoleTask',
      method: 'delete',
      path: '/{id}/tasks/{taskId}',
      summary: 'Stop the role running a task',
      params: z.object({ id: Uuid, taskId: Uuid }),
      status: 204,
      errors: ['task_not_found', 'os_task_immutable'],
    },
    async (c, { params }) =>
      unassignTaskFromRole(sql, c.var.caller.enterpriseId, params.id, params.taskId),
  )

  return app
}
