import type { MemberRef, OrgTree, RoleRef } from '../../../shared/schemas/organisation.js'
import type { Db } from '../../db/sql.js'
import { tasksOfRoles } from './roles.js'

/**
 * The whole organisation as a tree (spec: Endpoints Organisation): teams, their members, the roles each
 * holds and the tasks of each role. Five queries, however large the enterprise (issue: no query per
 * member). Under a team a member shows the enterprise-wide roles and that team's roles.
 */
export async function getOrgTree(db: Db, enterpriseId: string): Promise<OrgTree> {
  const [teams, members, memberships, grants] = await Promise.all([
    db<
      {
        id: string
        slug: string
        name: string
        charter: string
        leadMemberId: string | null
        concurrentRunLimit: number | null
      }[]
    >`
      select id, slug, name, charter, lead_member_id, concurrent_run_limit
        from teams where enterprise_id = ${enterpriseId} order by name, id`,
    db<MemberRef[]>`
      select id, name, email from members
       where enterprise_id = ${enterpriseId} and removed_at is null order by name, id`,
    db<{ teamId: string; memberId: string }[]>`
      select team_id, member_id from team_members where enterprise_id = ${enterpriseId}`,
    db<(RoleRef & { memberId: string })[]>`
      select rm.member_id, r.id, r.slug, r.name, r.team_id
        from role_members rm join roles r on r.id = rm.role_id
       where rm.enterprise_id = ${enterpriseId} order by r.slug, r.id`,
  ])
  const roles = [...new Map(grants.map((g) => [g.id, g])).values()]
  const tasks = await tasksOfRoles(db, enterpriseId, roles)

  const memberView = (member: MemberRef, teamId: string | null) => ({
    ...member,
    roles: grants
      .filter((g) => g.memberId === member.id && (g.teamId === null || g.teamId === teamId))
      .map(({ id, slug, name, teamId: roleTeam }) => ({
        id,
        slug,
        name,
        teamId: roleTeam,
        tasks: tasks.get(id) ?? [],
      })),
  })
  const onTeam = new Set(memberships.map((m) => m.memberId))
  return {
    teams: teams.map((team) => {
      const ids = new Set(memberships.filter((m) => m.teamId === team.id).map((m) => m.memberId))
      return {
        ...team,
        members: members.filter((m) => ids.has(m.id)).map((m) => memberView(m, team.id)),
      }
    }),
    unassigned: members.filter((m) => !onTeam.has(m.id)).map((m) => memberView(m, null)),
  }
}
