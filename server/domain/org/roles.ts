import { ApiError } from '../../../shared/errors.js'
import type {
  MemberRef,
  Role,
  RoleCreate,
  RoleDetail,
  RoleRef,
  TaskRef,
  Team,
} from '../../../shared/schemas/organisation.js'
import { validName, validSlug } from '../../../shared/names.js'
import { isUniqueViolation, transaction, type Db } from '../../db/sql.js'
import { requireMember } from './members.js'
import { getTeam, joinTeam, requireTeam } from './teams.js'
import { wakeEngines } from '../engine-wake.js'

// Roles (spec: Endpoints Roles): team-scoped (teamId) or enterprise-wide (no team). A task names a role
// by slug; its runs go to the role's holders (DESIGN 5).

interface RoleRow {
  id: string
  slug: string
  name: string
  teamId: string | null
  builtin: boolean
  holderCount: number
  createdAt: Date
  updatedAt: Date
}

function toRole(row: RoleRow): Role {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    teamId: row.teamId,
    builtin: row.builtin,
    holderCount: row.holderCount,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

async function loadRoles(db: Db, enterpriseId: string, id?: string): Promise<Role[]> {
  const rows = await db<RoleRow[]>`
    select r.id, r.slug, r.name, r.team_id, r.builtin, r.created_at, r.updated_at,
           (select count(*)::int from role_members rm where rm.role_id = r.id) as holder_count
      from roles r
     where r.enterprise_id = ${enterpriseId} ${id ? db`and r.id = ${id}` : db``}
     order by r.team_id nulls first, r.slug, r.id`
  return rows.map(toRole)
}

export function listRoles(db: Db, enterpriseId: string): Promise<Role[]> {
  return loadRoles(db, enterpriseId)
}

/** One role as the roles list answers it. */
export async function getRole(db: Db, enterpriseId: string, id: string): Promise<Role> {
  const [role] = await loadRoles(db, enterpriseId, id)
  if (!role) throw roleNotFound(id)
  return role
}

export function roleNotFound(id: string): ApiError {
  return new ApiError('role_not_found', `No role ${id} in this enterprise.`)
}

export async function requireRole(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<RoleRef & { builtin: boolean }> {
  const [row] = await db<(RoleRef & { builtin: boolean })[]>`
    select id, slug, name, team_id, builtin from roles where enterprise_id = ${enterpriseId} and id = ${id}
    ${lock ? db`for key share` : db``}`
  if (!row) throw roleNotFound(id)
  return row
}

/**
 * The role, for a transaction about to give it to a member or a task: its key share lock, and first
 * its team's, so a deletion of the role or of its team waits for that transaction, or went first and
 * the role is not found. The team before the role, as a team's deletion takes them (docs/locks.md):
 * the other order waited in a circle with it.
 */
export async function lockRole(
  tx: Db,
  enterpriseId: string,
  id: string,
): Promise<RoleRef & { builtin: boolean }> {
  const role = await requireRole(tx, enterpriseId, id)
  // A team gone since took its roles with it: the role's own lookup below answers role_not_found.
  if (role.teamId) await tx`select 1 from teams where id = ${role.teamId} for key share`
  return requireRole(tx, enterpriseId, id, true)
}

/** The role, its holders and the tasks its holders run. */
export async function getRoleDetail(db: Db, enterpriseId: string, id: string): Promise<RoleDetail> {
  const [role] = await loadRoles(db, enterpriseId, id)
  if (!role) throw roleNotFound(id)
  const [holders, tasks] = await Promise.all([
    db<MemberRef[]>`
      select m.id, m.name, m.email
        from role_members rm join members m on m.id = rm.member_id
       where rm.enterprise_id = ${enterpriseId} and rm.role_id = ${id}
       order by m.name, m.id`,
    tasksOfRoles(db, enterpriseId, [role]),
  ])
  return { role, holders, tasks: tasks.get(role.id) ?? [] }
}

/**
 * The tasks each role runs, in one query: a task names a role by slug; a team role of that slug on the
 * task's team runs it, else the enterprise-wide role of that slug does (spec: Task definition,
 * assigneeRole).
 */
export async function tasksOfRoles(
  db: Db,
  enterpriseId: string,
  roles: Pick<RoleRef, 'id' | 'slug' | 'teamId'>[],
): Promise<Map<string, TaskRef[]>> {
  const byRole = new Map<string, TaskRef[]>()
  if (roles.length === 0) return byRole
  const rows = await db<
    (TaskRef & { teamId: string | null; assigneeRole: string; teamHasRole: boolean })[]
  >`
    select t.id, t.slug, t.name, t.team_id, t.assignee_role,
           exists (select 1 from roles r
                    where r.enterprise_id = t.enterprise_id and r.team_id = t.team_id
                      and r.slug = t.assignee_role) as team_has_role
      from tasks t
     where t.enterprise_id = ${enterpriseId}
       and t.assignee_role = any(${db.array([...new Set(roles.map((r) => r.slug))])}::text[])
     order by t.slug`
  for (const role of roles) {
    const runs = rows.filter(
      (t) =>
        t.assigneeRole === role.slug && (role.teamId ? t.teamId === role.teamId : !t.teamHasRole),
    )
    byRole.set(
      role.id,
      runs.map(({ id, slug, name }) => ({ id, slug, name })),
    )
  }
  return byRole
}

export async function createRole(db: Db, enterpriseId: string, input: RoleCreate): Promise<Role> {
  const name = validName(input.name)
  const slug = validSlug(input.slug ?? name)
  try {
    return await transaction(db, async (tx) => {
      if (input.teamId) await requireTeam(tx, enterpriseId, input.teamId, true)
      const [row] = await tx<{ id: string }[]>`
        insert into roles (enterprise_id, team_id, name, slug)
        values (${enterpriseId}, ${input.teamId ?? null}, ${name}, ${slug})
        returning id`
      return (await loadRoles(tx, enterpriseId, row!.id))[0]!
    })
  } catch (err) {
    if (isUniqueViolation(err, 'roles_slug')) {
      throw new ApiError(
        'role_slug_taken',
        `A role with the slug "${slug}" exists ${input.teamId ? 'on this team' : 'enterprise-wide'}.`,
      )
    }
    throw err
  }
}

/**
 * Grants a role (again: no change). A team role is held on its team, so its holder joins the team.
 */
export async function grantRole(
  db: Db,
  enterpriseId: string,
  roleId: string,
  memberId: string,
): Promise<void> {
  await transaction(db, (tx) => grant(tx, enterpriseId, roleId, memberId))
}

/**
 * Puts a member on a team (again: no change), and grants the role when one is named: by the same rule
 * as grantRole, and the role must be the team's own or enterprise-wide (409 role_team_mismatch).
 */
export async function addTeamMember(
  db: Db,
  enterpriseId: string,
  teamId: string,
  input: { memberId: string; roleId?: string },
): Promise<Team> {
  await transaction(db, async (tx) => {
    await requireTeam(tx, enterpriseId, teamId, true)
    if (input.roleId) await grant(tx, enterpriseId, input.roleId, input.memberId, teamId)
    else await requireMember(tx, enterpriseId, input.memberId, true)
    await joinTeam(tx, enterpriseId, teamId, input.memberId)
  })
  return getTeam(db, enterpriseId, teamId)
}

/**
 * The one rule of granting a role, in the caller's transaction: the role, then the member, must be the
 * enterprise's (404 role_not_found, member_not_found); granted on a team, a role of another team is
 * refused; then the member holds it.
 */
async function grant(
  tx: Db,
  enterpriseId: string,
  roleId: string,
  memberId: string,
  onTeam?: string,
): Promise<void> {
  const role = await lockRole(tx, enterpriseId, roleId)
  await requireMember(tx, enterpriseId, memberId, true)
  if (onTeam && role.teamId && role.teamId !== onTeam) {
    throw new ApiError('role_team_mismatch', `Role ${role.slug} belongs to another team.`)
  }
  await holdRole(tx, enterpriseId, role, memberId)
}

/** Gives a member, found already, a role found already; a team role puts the member on its team. */
export async function holdRole(
  tx: Db,
  enterpriseId: string,
  role: Pick<RoleRef, 'id' | 'teamId'>,
  memberId: string,
): Promise<void> {
  if (role.teamId) await joinTeam(tx, enterpriseId, role.teamId, memberId)
  await tx`
    insert into role_members (enterprise_id, role_id, member_id)
    values (${enterpriseId}, ${role.id}, ${memberId})
    on conflict do nothing`
  wakeEngines(tx) // runs waiting for a free holder of the role may go
}

export async function revokeRole(
  db: Db,
  enterpriseId: string,
  roleId: string,
  memberId: string,
): Promise<void> {
  await requireRole(db, enterpriseId, roleId)
  await requireMember(db, enterpriseId, memberId)
  await db`
    delete from role_members
     where enterprise_id = ${enterpriseId} and role_id = ${roleId} and member_id = ${memberId}`
}

/**
 * Renames a role (its slug and team stay: tasks name the slug, holders hold it on its team). Beyond
 * the spec, which has no PATCH of a role: an apply of documents changes a role's name this way.
 */
export async function renameRole(
  db: Db,
  enterpriseId: string,
  id: string,
  name: string,
): Promise<Role> {
  const role = await requireRole(db, enterpriseId, id)
  if (role.builtin) {
    throw new ApiError('role_builtin', `The built-in role ${role.slug} keeps its name.`)
  }
  await db`
    update roles set name = ${validName(name)}, updated_at = now()
     where enterprise_id = ${enterpriseId} and id = ${id}`
  return getRole(db, enterpriseId, id)
}

/**
 * Deletes a role and its grants. Runs name members, not roles, so no run history is lost; tasks that
 * named it keep the slug and cannot start until a role of that slug exists again. Built-in roles stay.
 */
export async function deleteRole(db: Db, enterpriseId: string, id: string): Promise<void> {
  const role = await requireRole(db, enterpriseId, id)
  if (role.builtin) {
    throw new ApiError('role_builtin', `The built-in role ${role.slug} exists in every enterprise.`)
  }
  // Two deletions at once both found it: the one that deleted nothing answers as a repeat does.
  const gone =
    await db`delete from roles where enterprise_id = ${enterpriseId} and id = ${id} returning id`
  if (gone.length === 0) throw roleNotFound(id)
}

// --- the tasks a role runs --------------------------------------------------------------------------
