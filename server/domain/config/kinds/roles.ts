import { createRole, deleteRole, renameRole } from '../../org/index.js'
import { DocumentError, requireSlug, type Live } from '../model.js'
import type { Kind } from './kind.js'

// Roles (/v1/roles, roles:write): `slug` enterprise-wide, `team/slug` on a team. The built-in roles
// (ceo, coo) are in every enterprise and have no document; members name them all the same.

/** A role's name: its team's slug (none: enterprise-wide) and its own. */
export function splitRole(name: string): { team: string | null; slug: string } {
  const cut = name.indexOf('/')
  return cut < 0
    ? { team: null, slug: name }
    : { team: name.slice(0, cut), slug: name.slice(cut + 1) }
}

export const rolesKind: Kind = {
  kind: 'Role',
  resource: 'roles',
  read(snapshot) {
    const teamSlug = new Map(snapshot.teams.map((t) => [t.id, t.slug]))
    return snapshot.roles
      .filter((role) => !role.builtin && (!role.teamId || teamSlug.has(role.teamId)))
      .map((role): Live => ({
        kind: 'Role',
        name: role.teamId ? `${teamSlug.get(role.teamId)}/${role.slug}` : role.slug,
        layer: null,
        id: role.id,
        spec: { name: role.name },
      }))
  },
  desire(doc, world, ctx) {
    const { team, slug } = splitRole(doc.name)
    if (team !== null) {
      requireSlug(team)
      if (!world.teams.has(team))
        throw new DocumentError('metadata.name', `no team "${team}" here or among the documents`)
    }
    requireSlug(slug)
    if (team === null && ctx.builtinRoles.has(slug))
      throw new DocumentError(
        'metadata.name',
        `${slug} is a built-in role, in every enterprise: it has no document`,
      )
    return doc.spec
  },
  async create(w, doc, spec) {
    const { team, slug } = splitRole(doc.name)
    const teamId = team === null ? null : w.refs.teams.get(team)!
    const role = await createRole(w.db, w.ctx.enterpriseId, {
      name: spec.name as string,
      slug,
      teamId,
    })
    w.refs.roles.set(doc.name, { id: role.id, teamId, builtin: false })
  },
  async update(w, live, spec) {
    await renameRole(w.db, w.ctx.enterpriseId, live.id, spec.name as string)
  },
  async remove(w, live) {
    await deleteRole(w.db, w.ctx.enterpriseId, live.id)
    w.refs.roles.delete(live.name)
  },
}
