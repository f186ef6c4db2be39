import { slugFromName } from '../../shared/slug.js'
import type { Db } from '../db/sql.js'

// What a new enterprise starts with (createEnterprise calls it in its transaction). A leaf: it writes
// the first rows itself and imports nothing from domain/, so every module may rely on it (STYLE:
// Growing without tangling). A feature whose enterprise starts with rows of its own adds them here.

const builtinRoles = [
  { slug: 'ceo', name: 'Chief executive', member: 'Chief Executive' },
  { slug: 'coo', name: 'Chief operating', member: 'Chief Operating Officer' },
] as const

/**
 * What a new enterprise starts with, so it can run a task at once: a team, the built-in enterprise-wide
 * roles ceo and coo, and a member holding each, on that team (issue: Roles).
 */
export async function setupOrganisation(
  tx: Db,
  enterprise: { id: string; slug: string },
  mailDomain: string,
): Promise<void> {
  const [team] = await tx<{ id: string }[]>`
    insert into teams (enterprise_id, name, slug, charter)
    values (${enterprise.id}, 'General', 'general', 'Where everyone starts.')
    returning id`
  for (const builtin of builtinRoles) {
    const local = slugFromName(builtin.member) // as createMember derives it
    await tx`
      with role as (
        insert into roles (enterprise_id, name, slug, builtin)
        values (${enterprise.id}, ${builtin.name}, ${builtin.slug}, true)
        returning id
      ), member as (
        insert into members (enterprise_id, name, email)
        values (${enterprise.id}, ${builtin.member}, ${`${local}@${enterprise.slug}.${mailDomain}`})
        returning id
      ), joined as (
        insert into team_members (enterprise_id, team_id, member_id)
        select ${enterprise.id}, ${team!.id}, member.id from member
      )
      insert into role_members (enterprise_id, role_id, member_id)
      select ${enterprise.id}, role.id, member.id from role, member`
  }
}
