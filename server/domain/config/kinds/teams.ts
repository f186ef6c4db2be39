import type { TeamPatch } from '../../../../shared/schemas/organisation.js'
import { createTeam, deleteTeam, updateTeam } from '../../org/index.js'
import { DocumentError, requireSlug, type Live, type Writer } from '../model.js'
import type { Kind } from './kind.js'

// Teams (/v1/teams, teams:write), named by slug. A team's lead is a member, and members name teams:
// the lead is set once the members exist (setLeads, after the members' step of an apply).

export const teamsKind: Kind = {
  kind: 'Team',
  resource: 'teams',
  read(snapshot) {
    const memberName = new Map(snapshot.members.map((m) => [m.id, m.name]))
    return snapshot.teams.map((team): Live => ({
      kind: 'Team',
      name: team.slug,
      layer: null,
      id: team.id,
      spec: {
        name: team.name,
        charter: team.charter,
        lead: (team.leadMemberId && memberName.get(team.leadMemberId)) ?? null,
        concurrentRunLimit: team.concurrentRunLimit,
      },
    }))
  },
  desire(doc, world) {
    requireSlug(doc.name)
    const lead = doc.spec.lead as string | null
    if (lead !== null && !world.members.has(lead))
      throw new DocumentError('spec.lead', `no member "${lead}" here or among the documents`)
    return doc.spec
  },
  async create(w, doc, spec) {
    const team = await createTeam(w.db, w.ctx.enterpriseId, {
      name: spec.name as string,
      slug: doc.name,
      charter: spec.charter as string,
      concurrentRunLimit: spec.concurrentRunLimit as number | null,
    })
    w.refs.teams.set(doc.name, team.id)
  },
  async update(w, live, spec, fields) {
    const patch: TeamPatch = {}
    if (fields.has('name')) patch.name = spec.name as string
    if (fields.has('charter')) patch.charter = spec.charter as string
    if (fields.has('concurrentRunLimit'))
      patch.concurrentRunLimit = spec.concurrentRunLimit as number | null
    if (Object.keys(patch).length > 0) await updateTeam(w.db, w.ctx.enterpriseId, live.id, patch)
  },
  async remove(w, live) {
    await deleteTeam(w.db, w.ctx.enterpriseId, live.id)
    w.refs.teams.delete(live.name)
  },
}

/** Sets a team's lead by the member's name (null: none), once the members are written. */
export async function setLead(w: Writer, team: string, lead: string | null): Promise<void> {
  const leadMemberId = lead === null ? null : w.refs.members.get(lead)
  if (leadMemberId === undefined) throw new DocumentError('spec.lead', `no member "${lead}"`)
  await updateTeam(w.db, w.ctx.enterpriseId, w.refs.teams.get(team)!, { leadMemberId })
}
