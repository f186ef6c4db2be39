import { ApiError } from '../../../shared/errors.js'
import type { Avatar } from '../../../shared/schemas/enterprise.js'
import type {
  Member,
  MemberPatch,
  MemberRef,
  RoleRef,
  TeamRef,
} from '../../../shared/schemas/organisation.js'
import { slugFromName } from '../../../shared/slug.js'
import { validName } from '../../../shared/names.js'
import { isUniqueViolation, transaction, type Db } from '../../db/sql.js'
import { parseImageDataUrl, type Image } from './images.js'

// AI team members (spec: Resources "Other records"; Endpoints Members).

interface MemberRow {
  id: string
  name: string
  email: string
  persona: string
  hasAvatar: boolean
  lastAssignedAt: Date | null
  createdAt: Date
  updatedAt: Date
}

/**
 * Members with their roles and teams, in three queries however many there are: the members, then the
 * roles and the teams of all of them at once.
 */
export async function loadMembers(db: Db, enterpriseId: string, ids?: string[]): Promise<Member[]> {
  const rows = await db<MemberRow[]>`
    select m.id, m.name, m.email, m.persona, m.created_at, m.updated_at,
           (select max(r.queued_at) from runs r where r.member_id = m.id) as last_assigned_at,
           exists (select 1 from member_avatars a where a.member_id = m.id) as has_avatar
      from members m
     where m.enterprise_id = ${enterpriseId}
       and m.removed_at is null
       ${ids ? db`and m.id = any(${db.array(ids)}::uuid[])` : db``}
     order by m.created_at, m.id`
  if (rows.length === 0) return []
  const memberIds = rows.map((r) => r.id)
  const [roles, teams] = await Promise.all([
    db<(RoleRef & { memberId: string })[]>`
      select rm.member_id, r.id, r.slug, r.name, r.team_id
        from role_members rm join roles r on r.id = rm.role_id
       where rm.enterprise_id = ${enterpriseId} and rm.member_id = any(${db.array(memberIds)}::uuid[])
       order by r.slug, r.id`,
    db<(TeamRef & { memberId: string })[]>`
      select tm.member_id, t.id, t.slug, t.name
        from team_members tm join teams t on t.id = tm.team_id
       where tm.enterprise_id = ${enterpriseId} and tm.member_id = any(${db.array(memberIds)}::uuid[])
       order by t.slug, t.id`,
  ])
  return rows.map((row) => ({
    id: row.id,
    name: row.name,
    email: row.email,
    persona: row.persona,
    avatarUrl: row.hasAvatar ? `/v1/members/${row.id}/avatar` : null,
    roles: roles
      .filter((r) => r.memberId === row.id)
      .map(({ id, slug, name, teamId }) => ({ id, slug, name, teamId })),
    teams: teams
      .filter((t) => t.memberId === row.id)
      .map(({ id, slug, name }) => ({ id, slug, name })),
    lastAssignedAt: row.lastAssignedAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }))
}

export function listMembers(db: Db, enterpriseId: string): Promise<Member[]> {
  return loadMembers(db, enterpriseId)
}

export async function getMember(db: Db, enterpriseId: string, id: string): Promise<Member> {
  const [member] = await loadMembers(db, enterpriseId, [id])
  if (!member) throw memberNotFound(id)
  return member
}

export function memberNotFound(id: string): ApiError {
  return new ApiError('member_not_found', `No member ${id} in this enterprise.`)
}

/**
 * 404 member_not_found unless the member exists (and is not removed) in the enterprise. With `lock`,
 * for a transaction about to give the member something (a role, a team, a team's lead): the member's
 * key share lock, so a removal waits for that transaction and then takes it away again, or went first
 * and the member is not found (removeMember; docs/locks.md).
 */
export async function requireMember(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<MemberRef> {
  const [row] = await db<MemberRef[]>`
    select id, name, email from members
     where enterprise_id = ${enterpriseId} and id = ${id} and removed_at is null
     ${lock ? db`for key share` : db``}`
  if (!row) throw memberNotFound(id)
  return row
}

/**
 * Creates a member. The email is always derived from the name (spec: Other records), as
 * <name-slug>@<enterprise-slug>.<mail domain>; a sent email is ignored.
 */
export async function createMember(
  db: Db,
  enterpriseId: string,
  input: { name: string; persona?: string },
  mailDomain: string,
): Promise<Member> {
  const name = validName(input.name)
  const local = slugFromName(name)
  if (!local) {
    throw new ApiError('invalid_name', 'name needs letters or digits: the email is made from it.')
  }
  let id: string
  try {
    const [row] = await db<{ id: string }[]>`
      insert into members (enterprise_id, name, email, persona)
      select e.id, ${name}, ${local} || '@' || e.slug || '.' || ${mailDomain}, ${input.persona ?? ''}
        from enterprises e
       where e.id = ${enterpriseId}
      returning id`
    id = row!.id
  } catch (err) {
    if (isUniqueViolation(err, 'members_email')) {
      throw new ApiError(
        'member_email_taken',
        `A member with the email made from "${name}" exists; choose another name.`,
      )
    }
    throw err
  }
  return getMember(db, enterpriseId, id)
}

export async function updateMember(
  db: Db,
  enterpriseId: string,
  id: string,
  patch: MemberPatch,
): Promise<Member> {
  const name = patch.name === undefined ? null : validName(patch.name)
  try {
    const [row] = await db`
      update members
         set name = coalesce(${name}::text, name),
             email = coalesce(${patch.email?.toLowerCase() ?? null}::text, email),
             persona = coalesce(${patch.persona ?? null}::text, persona),
             updated_at = now()
       where enterprise_id = ${enterpriseId} and id = ${id} and removed_at is null
       returning id`
    if (!row) throw memberNotFound(id)
  } catch (err) {
    if (isUniqueViolation(err, 'members_email')) {
      throw new ApiError('member_email_taken', `Another member has the email ${patch.email}.`)
    }
    throw err
  }
  return getMember(db, enterpriseId, id)
}

/**
 * Removes a member from the organisation: off every team and role, no longer anyone's lead, listed
 * nowhere. The row stays so that runs naming it keep their history (issue: Rules).
 */
export async function removeMember(db: Db, enterpriseId: string, id: string): Promise<void> {
  await transaction(db, async (tx) => {
    // The member's whole lock, not only the update's: it waits for a grant, a team's join or a lead
    // under way (requireMember's key share lock), whose rows the deletes below then take away.
    await tx`
      select 1 from members
       where enterprise_id = ${enterpriseId} and id = ${id} and removed_at is null
         for update`
    const [row] = await tx`
      update members set removed_at = now(), updated_at = now()
       where enterprise_id = ${enterpriseId} and id = ${id} and removed_at is null
       returning id`
    if (!row) throw memberNotFound(id)
    await tx`delete from team_members where enterprise_id = ${enterpriseId} and member_id = ${id}`
    await tx`delete from role_members where enterprise_id = ${enterpriseId} and member_id = ${id}`
    await tx`delete from member_avatars where enterprise_id = ${enterpriseId} and member_id = ${id}`
    await tx`
      update teams set lead_member_id = null, updated_at = now()
       where enterprise_id = ${enterpriseId} and lead_member_id = ${id}`
  })
}

// --- the picture ------------------------------------------------------------------------------------

export async function setMemberAvatar(
  db: Db,
  enterpriseId: string,
  id: string,
  dataUrl: string,
): Promise<Avatar> {
  await requireMember(db, enterpriseId, id)
  const image = parseImageDataUrl(dataUrl)
  await db`
    insert into member_avatars (enterprise_id, member_id, content_type, data)
    values (${enterpriseId}, ${id}, ${image.contentType}, ${image.data})
    on conflict (member_id)
    do update set content_type = excluded.content_type, data = excluded.data, updated_at = now()`
  return { contentType: image.contentType, bytes: image.data.length }
}

export async function getMemberAvatar(db: Db, enterpriseId: string, id: string): Promise<Image> {
  await requireMember(db, enterpriseId, id)
  const [row] = await db<Image[]>`
    select content_type, data from member_avatars where enterprise_id = ${enterpriseId} and member_id = ${id}`
  if (!row) throw new ApiError('avatar_not_found', `Member ${id} has no picture.`)
  return row
}

export async function deleteMemberAvatar(db: Db, enterpriseId: string, id: string): Promise<void> {
  await requireMember(db, enterpriseId, id)
  await db`delete from member_avatars where enterprise_id = ${enterpriseId} and member_id = ${id}`
}
