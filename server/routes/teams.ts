import { z } from 'zod'
import { Uuid } from '../../shared/schemas/common.js'
import { Team, TeamCreate, TeamMemberAdd, TeamPatch } from '../../shared/schemas/organisation.js'
import {
  addTeamMember,
  createTeam,
  deleteTeam,
  getTeam,
  listTeams,
  removeTeamMember,
  updateTeam,
} from '../domain/org/index.js'
import type { RouteDeps } from '../http/context.js'
import { createRouter, route } from '../http/router.js'

const TeamParams = z.object({ id: Uuid })
const TeamMemberParams = z.object({ id: Uuid, memberId: Uuid })

/** Teams (spec: Endpoints Teams). Every list answers a plain array. */
export function teamRoutes({ sql }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'team_not_found' } as const

  route(
    app,
    {
      operationId: 'listTeams',
      method: 'get',
      path: '/',
      summary: 'Every team',
      response: z.array(Team),
    },
    async (c) => listTeams(sql, c.var.caller.enterpriseId),
  )

  route(
    app,
    {
      operationId: 'createTeam',
      method: 'post',
      path: '/',
      summary: 'Create a team; the slug is made from the name when omitted',
      body: TeamCreate,
      status: 201,
      response: Team,
      errors: ['invalid_name', 'invalid_slug', 'team_slug_taken', 'member_not_found'],
    },
    async (c, { body }) => createTeam(sql, c.var.caller.enterpriseId, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'getTeam',
      method: 'get',
      path: '/{id}',
      summary: 'One team',
      params: TeamParams,
      response: Team,
    },
    async (c, { params }) => getTeam(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'updateTeam',
      method: 'patch',
      path: '/{id}',
      summary:
        "Change a team's name, charter, lead or concurrent-run limit (null clears the last two)",
      params: TeamParams,
      body: TeamPatch,
      response: Team,
      errors: ['invalid_name', 'member_not_found'],
    },
    async (c, { params, body }) => updateTeam(sql, c.var.caller.enterpriseId, params.id, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'deleteTeam',
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a team; not the last one, nor one that tasks belong to',
      params: TeamParams,
      status: 204,
      errors: ['team_last', 'team_has_tasks'],
    },
    async (c, { params }) => deleteTeam(sql, c.var.caller.enterpriseId, params.id),
  )

  route(
    app,
    {
      ...common,
      operationId: 'addTeamMember',
      method: 'post',
      path: '/{id}/members',
      summary: 'Put a member on the team, and grant a role when roleId is sent',
      params: TeamParams,
      body: TeamMemberAdd,
      status: 201,
      response: Team,
      errors: ['member_not_found', 'role_not_found', 'role_team_mismatch'],
    },
    async (c, { params, body }) => addTeamMember(sql, c.var.caller.enterpriseId, params.id, body),
  )

  route(
    app,
    {
      ...common,
      operationId: 'removeTeamMember',
      method: 'delete',
      path: '/{id}/members/{memberId}',
      summary: "Take a member off the team, with the team's own roles",
      params: TeamMemberParams,
      status: 204,
      errors: ['member_not_found'],
    },
    async (c, { params }) =>
      removeTeamMember(sql, c.var.caller.enterpriseId, params.id, params.memberId),
  )

  return app
}
