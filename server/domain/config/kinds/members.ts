import { ApiError } from '../../../../shared/errors.js'
import type { MemberPatch } from '../../../../shared/schemas/organisation.js'
import { slugFromName } from '../../../../shared/slug.js'
import { finishedStatuses, runStatuses } from '../../../../shared/values.js'
import { literalIn, type Db } from '../../../db/sql.js'
import {
  createMember,
  holdRole,
  joinTeam,
  removeMember,
  removeTeamMember,
  revokeRole,
  updateMember,
} from '../../org/index.js'
import { DocumentError, type Live, type Writer } from '../model.js'
import type { DesireContext, Kind } from './kind.js'
import { splitRole } from './roles.js'

// AI team members (/v1/members, members:write), named by their name. A member's teams and roles are
// written with it, as POST /v1/members/{id}/roles does; joining or leaving a team also needs
// teams:write, as the team's own routes do (otherWrites). Its address is left out of its document while
// it is the one osd made from the name.

/** The address createMember makes from a name (spec: Other records). */
function derivedEmail(name: string, ctx: Pick<DesireContext, 'enterpriseSlug' | 'mailDomain'>) {
  return `${slugFromName(name)}@${ctx.enterpriseSlug}.${ctx.mailDomain}`
}

const unfinished = runStatuses.filter((s) => !finishedStatuses.includes(s))

/**
 * Runs that need the member (prune never removes it then: 409 config_prune_refused): one not ended that
 * is its own, or that waits for a holder of a role it holds (the task's team role, else the
 * enterprise-wide one of that slug).
 */
async function runsNeeding(db: Db, enterpriseId: string, memberId: string) {
  return db<{ id: string; status: string; taskSlug: string }[]>`
    select r.id, r.status, t.slug as task_slug
      from runs r join tasks t on t.id = r.task_id
     where r.enterprise_id = ${enterpriseId} and ${literalIn(db, 'r.status', unfinished)}
       and (r.member_id = ${memberId}
            or (r.member_id is null and exists (
                  select 1 from role_members rm join roles ro on ro.id = rm.role_id
                   where rm.member_id = ${memberId} and ro.slug = t.assignee_role
                     and (ro.team_id = t.team_id or ro.team_id is null))))
     order by r.created_at
     limit 5`
}

export const membersKind: Kind = {
  kind: 'Member',
  resource: 'members',
  read(snapshot) {
    const teamSlug = new Map(snapshot.teams.map((t) => [t.id, t.slug]))
    const seen = new Set<string>()
    return snapshot.members.map((member): Live => {
      if (seen.has(member.name))
        throw new ApiError(
          'config_name_ambiguous',
          `Two members are named "${member.name}": a document names a member by its name. Rename one (PATCH /v1/members/{id}).`,
          { kind: 'Member', name: member.name },
        )
      seen.add(member.name)
      const roles = member.roles.flatMap((r) => {
        if (!r.teamId) return [r.slug]
        const team = teamSlug.get(r.teamId)
        return team ? [`${team}/${r.slug}`] : []
      })
      return {
        kind: 'Member',
        name: member.name,
        layer: null,
        id: member.id,
        spec: {
          persona: member.persona,
          email: member.email.toLowerCase(),
          teams: member.teams.map((t) => t.slug).sort(),
          roles: [...new Set(roles)].sort(),
        },
      }
    })
  },
  show(spec, name, _layer, ctx) {
    if (spec.email !== derivedEmail(name, ctx)) return spec
    const { email: _derived, ...shown } = spec
    return shown
  },
  desire(doc, world, ctx) {
    if (doc.name !== doc.name.trim() || !slugFromName(doc.name))
      throw new DocumentError(
        'metadata.name',
        'a member is named by its name: letters or digits, without spaces around it',
      )
    const teams = [...new Set(doc.spec.teams as string[])].sort()
    for (const team of teams)
      if (!world.teams.has(team))
        throw new DocumentError('spec.teams', `no team "${team}" here or among the documents`)
    const roles = [...new Set(doc.spec.roles as string[])].sort()
    for (const role of roles) {
      if (!world.roles.has(role))
        throw new DocumentError('spec.roles', `no role "${role}" here or among the documents`)
      const { team } = splitRole(role)
      if (team !== null && !teams.includes(team))
        throw new DocumentError(
          'spec.roles',
          `${role} is a role of team ${team}, which the member is not on: add ${team} to spec.teams`,
        )
    }
    const email = (
      (doc.spec.email as string | undefined) ?? derivedEmail(doc.name, ctx)
    ).toLowerCase()
    return { ...doc.spec, email, teams, roles }
  },
  otherWrites(from, to) {
    const [hadTeams, hadRoles] = [(from?.teams ?? []) as string[], (from?.roles ?? []) as string[]]
    const [teams, roles] = [to.teams as string[], to.roles as string[]]
    // A team role granted puts its holder on the team, as POST /v1/members/{id}/roles does with
    // members:write alone: that join is the role's. Any other join, and every leave, is a team's
    // route (POST and DELETE /v1/teams/{id}/members, teams:write).
    const byRole = new Set(roles.filter((r) => !hadRoles.includes(r)).map((r) => splitRole(r).team))
    const joins = teams.filter((t) => !hadTeams.includes(t) && !byRole.has(t))
    const leaves = hadTeams.filter((t) => !teams.includes(t))
    return joins.length > 0 || leaves.length > 0 ? [{ field: 'spec.teams', resource: 'teams' }] : []
  },
  async create(w, doc, spec) {
    const member = await createMember(
      w.db,
      w.ctx.enterpriseId,
      { name: doc.name, persona: spec.persona as string },
      w.ctx.mailDomain,
    )
    w.refs.members.set(doc.name, member.id)
    if (member.email.toLowerCase() !== spec.email)
      await updateMember(w.db, w.ctx.enterpriseId, member.id, { email: spec.email as string })
    await syncMemberships(w, member.id, { teams: [], roles: [] }, spec)
  },
  async update(w, live, spec, fields) {
    const patch: MemberPatch = {}
    if (fields.has('persona')) patch.persona = spec.persona as string
    if (fields.has('email')) patch.email = spec.email as string
    if (Object.keys(patch).length > 0) await updateMember(w.db, w.ctx.enterpriseId, live.id, patch)
    if (fields.has('teams') || fields.has('roles'))
      await syncMemberships(w, live.id, live.spec, spec)
  },
  async remove(w, live) {
    const needing = await runsNeeding(w.db, w.ctx.enterpriseId, live.id)
    if (needing.length > 0)
      throw new ApiError(
        'config_prune_refused',
        `Member "${live.name}" is needed by runs not ended (${needing.map((r) => `${r.id} of ${r.taskSlug}, ${r.status}`).join('; ')}): it is not removed. Let them end, or cancel them.`,
        { runs: needing.map((r) => r.id) },
      )
    await removeMember(w.db, w.ctx.enterpriseId, live.id)
    w.refs.members.delete(live.name)
  },
}
/** The member's teams and roles as the document says: joined and granted first, then taken away. */
async function syncMemberships(
  w: Writer,
  memberId: string,
  from: Record<string, unknown>,
  to: Record<string, unknown>,
): Promise<void> {
  const enterpriseId = w.ctx.enterpriseId
  const [hadTeams, hadRoles] = [from.teams as string[], from.roles as string[]]
  const [teams, roles] = [to.teams as string[], to.roles as string[]]
  for (const team of teams.filter((t) => !hadTeams.includes(t)))
    await joinTeam(w.db, enterpriseId, w.refs.teams.get(team)!, memberId)
  for (const role of roles.filter((r) => !hadRoles.includes(r))) {
    const found = w.refs.roles.get(role)!
    await holdRole(w.db, enterpriseId, { id: found.id, teamId: found.teamId }, memberId)
  }
  for (const role of hadRoles.filter((r) => !roles.includes(r)))
    await revokeRole(w.db, enterpriseId, w.refs.roles.get(role)!.id, memberId)
  for (const team of hadTeams.filter((t) => !teams.includes(t)))
    await removeTeamMember(w.db, enterpriseId, w.refs.teams.get(team)!, memberId)
}
