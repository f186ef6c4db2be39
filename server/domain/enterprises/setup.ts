import { slugFromName } from '../../../shared/slug.js'
import type { Db } from '../../db/sql.js'
import { builtinTasks } from '../tasks/index.js'

// What a new enterprise starts with (createEnterprise calls it in its transaction). A leaf: it writes
// the first rows itself and imports nothing from domain/ but the leaf tasks/builtin.ts (the
// definitions), so every module may rely on it (STYLE:
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

/**
 * The service's own tasks (DESIGN 10), each a task row and its first version, the rows createTask
 * writes for such a definition: no team, the enterprise-wide coo role, no definition issues.
 * migrations/0012_builtin_tasks.sql writes the same rows for the enterprises made before them.
 */
export async function setupBuiltinTasks(tx: Db, enterpriseId: string): Promise<void> {
  for (const task of builtinTasks) {
    // The task names its version before the version exists (the key is checked at commit).
    await tx`
      with ids as materialized (
        select gen_random_uuid() as task_id, gen_random_uuid() as version_id
      ), task as (
        insert into tasks (id, enterprise_id, slug, name, team_id, assignee_role, kind, status, serialize_on,
                           current_version_id, definition_issues, origin, source_task_id)
        select ids.task_id, ${enterpriseId}, ${task.slug}, ${task.name}, null, ${task.assigneeRole},
               ${task.kind}, 'active', ${tx.json(task.serializeOn)}, ids.version_id, '[]', 'builtin', null
          from ids
      )
      insert into task_versions (id, enterprise_id, task_id, number, definition)
      select ids.version_id, ${enterpriseId}, ids.task_id, 1, ${tx.json(task.definition as never)} from ids`
  }
}
