import { ApiError } from '../../../shared/errors.js'
import type {
  MemberRef,
  Team,
  TeamCreate,
  TeamPatch,
  TeamRef,
} from '../../../shared/schemas/organisation.js'
import { validName, validSlug } from '../../../shared/names.js'
import { isUniqueViolation, transaction, type Db } from '../../db/sql.js'
import { requireMember } from './members.js'
import { wakeEngines } from '../engine-wake.js'

// Teams (spec: Endpoints Teams): a charter, a lead, a concurrent-run limit, and members.

interface TeamRow {
  id: string
  slug: string
  name: string
  charter: string
  leadMemberId: string | null
  concurrentRunLimit: number | null
  createdAt: Date
  updatedAt: Date
}

/** Teams with their members, in two queries however many there are. */
async function loadTeams(db: Db, enterpriseId: string, id?: string): Promise<Team[]> {
  const rows = await db<TeamRow[]>`
    select id, slug, name, charter, lead_member_id, concurrent_run_limit, created_at, updated_at
      from teams
     where enterprise_id = ${enterpriseId} ${id ? db`and id = ${id}` : db``}
     order by name, id`
  if (rows.length === 0) return []
  const members = await db<(MemberRef & { teamId: string })[]>`
    select tm.team_id, m.id, m.name, m.email
      from team_members tm join members m on m.id = tm.member_id
     where tm.enterprise_id = ${enterpriseId}
       and tm.team_id = any(${db.array(rows.map((r) => r.id))}::uuid[])
     order by m.name, m.id`
  return rows.map((row) => ({
    id: row.id,
    slug: row.slug,
    name: row.name,
    charter: row.charter,
    leadMemberId: row.leadMemberId,
    concurrentRunLimit: row.concurrentRunLimit,
    members: members
      .filter((m) => m.teamId === row.id)
      .map(({ id, name, email }) => ({ id, name, email })),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }))
}

export function listTeams(db: Db, enterpriseId: string): Promise<Team[]> {
  return loadTeams(db, enterpriseId)
}

export async function getTeam(db: Db, enterpriseId: string, id: string): Promise<Team> {
  const [team] = await loadTeams(db, enterpriseId, id)
  if (!team) throw teamNotFound(id)
  return team
}

export function teamNotFound(id: string): ApiError {
  return new ApiError('team_not_found', `No team ${id} in this enterprise.`)
}

/**
 * 404 team_not_found unless the team is the enterprise's. With `lock`, for a transaction about to put
 * something on the team (a task, a role, a member): the team's key share lock, so a deletion of the
 * team waits for that transaction and then sees what it put there, or went first and the team is not
 * found (docs/locks.md).
 */
export async function requireTeam(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<TeamRef> {
  const [row] = await db<TeamRef[]>`
    select id, slug, name from teams where enterprise_id = ${enterpriseId} and id = ${id}
    ${lock ? db`for key share` : db``}`
  if (!row) throw teamNotFound(id)
  return row
}

export async function createTeam(db: Db, enterpriseId: string, input: TeamCreate): Promise<Team> {
  const name = validName(input.name)
  const slug = validSlug(input.slug ?? name)
  try {
    return await transaction(db, async (tx) => {
      if (input.leadMemberId) await requireMember(tx, enterpriseId, input.leadMemberId, true)
      const [row] = await tx<{ id: string }[]>`
        insert into teams (enterprise_id, name, slug, charter, lead_member_id, concurrent_run_limit)
        values (${enterpriseId}, ${name}, ${slug}, ${input.charter ?? ''}, ${input.leadMemberId ?? null},
                ${input.concurrentRunLimit ?? null})
        returning id`
      return getTeam(tx, enterpriseId, row!.id)
    })
  } catch (err) {
    if (isUniqueViolation(err, 'teams_enterprise_id_slug_key')) {
      throw new ApiError('team_slug_taken', `A team with the slug "${slug}" exists.`)
    }
    throw err
  }
}

/** Changes name, charter, lead and limit; a field sent as null clears the lead or the limit. */
export async function updateTeam(
  db: Db,
  enterpriseId: string,
  id: string,
  patch: TeamPatch,
): Promise<Team> {
  const name = patch.name === undefined ? undefined : validName(patch.name)
  await transaction(db, async (tx) => {
    if (patch.leadMemberId) await requireMember(tx, enterpriseId, patch.leadMemberId, true)
    const [row] = await tx`
      update teams
         set name = ${name === undefined ? tx`name` : name},
             charter = ${patch.charter === undefined ? tx`charter` : patch.charter},
             lead_member_id = ${patch.leadMemberId === undefined ? tx`lead_member_id` : patch.leadMemberId},
             concurrent_run_limit = ${
               patch.concurrentRunLimit === undefined
                 ? tx`concurrent_run_limit`
                 : patch.concurrentRunLimit
             },
             updated_at = now()
       where enterprise_id = ${enterpriseId} and id = ${id}
       returning id`
    if (!row) throw teamNotFound(id)
    if (patch.concurrentRunLimit !== undefined) wakeEngines(tx)
  })
  return getTeam(db, enterpriseId, id)
}

/**
 * Deletes a team, its memberships and its team-scoped roles. The last team of an enterprise stays, and a
 * team that tasks still belong to is refused, naming them (issue: Teams).
 */
export async function deleteTeam(db: Db, enterpriseId: string, id: string): Promise<void> {
  await transaction(db, async (tx) => {
    // Serialises deletions of one enterprise's teams, so two of them cannot both be "not the last".
    await tx`select 1 from enterprises where id = ${enterpriseId} for no key update`
    // The team's own lock before its tasks are counted: a task, role or member being put on it
    // (requireTeam's lock) lands first and is counted, or finds the team gone.
    const [team] = await tx<{ others: number }[]>`
      select (select count(*)::int from teams where enterprise_id = ${enterpriseId} and id <> ${id}) as others
        from teams where enterprise_id = ${enterpriseId} and id = ${id}
         for update`
    if (!team) throw teamNotFound(id)
    if (team.others === 0) {
      throw new ApiError('team_last', 'The last team of an enterprise cannot be deleted.')
    }
    const tasks = await tasksOfTeam(tx, enterpriseId, id)
    if (tasks.length > 0) {
      throw new ApiError(
        'team_has_tasks',
        `Tasks still belong to this team: ${tasks.map((t) => t.slug).join(', ')}. Move or delete them first.`,
        { tasks },
      )
    }
    await tx`delete from teams where enterprise_id = ${enterpriseId} and id = ${id}`
  })
}

async function tasksOfTeam(db: Db, enterpriseId: string, teamId: string): Promise<TeamRef[]> {
  return db<TeamRef[]>`
    select id, slug, name from tasks
     where enterprise_id = ${enterpriseId} and team_id = ${teamId}
     order by slug`
}

/**
 * Puts a member, found already, on a team (again: no change). Adding a member with a role is granting
 * it: roles.ts addTeamMember.
 */
export async function joinTeam(
  db: Db,
  enterpriseId: string,
  teamId: string,
  memberId: string,
): Promise<void> {
  await db`
    insert into team_members (enterprise_id, team_id, member_id)
    values (${enterpriseId}, ${teamId}, ${memberId})
    on conflict do nothing`
}

/** Takes a member off a team, and with it the team's own roles (a team role is held on its team). */
export async function removeTeamMember(
  db: Db,
  enterpriseId: string,
  teamId: string,
  memberId: string,
): Promise<void> {
  await transaction(db, async (tx) => {
    await requireTeam(tx, enterpriseId, teamId)
    await requireMember(tx, enterpriseId, memberId)
    await tx`
      delete from role_members rm
       using roles r
       where r.id = rm.role_id and r.team_id = ${teamId}
         and rm.enterprise_id = ${enterpriseId} and rm.member_id = ${memberId}`
    await tx`
      delete from team_members
       where enterprise_id = ${enterpriseId} and team_id = ${teamId} and member_id = ${memberId}`
  })
}
