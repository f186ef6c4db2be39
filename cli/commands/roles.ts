import type { Command } from 'commander'
import type { Role, RoleDetail } from '../../shared/schemas/organisation.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { Deps } from '../deps.js'
import { printFields, printTable, show } from '../output.js'
import { memberId, roleId, taskId, teamId } from '../resolve.js'
import { about } from './about.js'

const columns = [
  { header: 'SLUG', value: (r: Role) => r.slug, id: true },
  { header: 'NAME', value: (r: Role) => r.name },
  { header: 'SCOPE', value: (r: Role) => (r.teamId ? `team ${r.teamId}` : 'enterprise') },
  { header: 'HOLDERS', value: (r: Role) => r.holderCount },
  { header: 'BUILT-IN', value: (r: Role) => (r.builtin ? 'yes' : '') },
  { header: 'ID', value: (r: Role) => r.id },
]

function showRole(deps: Deps, detail: RoleDetail): void {
  show(deps.out, detail, () =>
    printFields(deps.out, [
      ['name', detail.role.name],
      ['slug', detail.role.slug],
      ['id', detail.role.id],
      ['team', detail.role.teamId ?? 'enterprise-wide'],
      ['built-in', detail.role.builtin ? 'yes' : 'no'],
      ['holders', detail.holders.map((m) => `${m.name} <${m.email}>`)],
      ['tasks', detail.tasks.map((t) => t.slug)],
    ]),
  )
}

export async function listRoles(deps: Deps): Promise<void> {
  const roles = await deps.client().get<Role[]>('/roles')
  show(deps.out, roles, () => printTable(deps.out, roles, columns))
}

export async function getRole(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  showRole(deps, await client.get<RoleDetail>(`/roles/${await roleId(client, ref)}`))
}

export async function createRole(
  deps: Deps,
  opts: { name?: string; slug?: string; team?: string; data?: string; file?: string },
): Promise<void> {
  const client = deps.client()
  const body = await bodyWith(deps, opts, {
    name: opts.name,
    slug: opts.slug,
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
  })
  const role = await client.post<Role>('/roles', body)
  showRole(deps, await client.get<RoleDetail>(`/roles/${role.id}`))
}

export async function deleteRole(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const client = deps.client()
  const id = await roleId(client, ref)
  await confirmDestructive(deps, opts.yes, `Delete role ${ref} and its grants`)
  await client.delete(`/roles/${id}`)
  show(deps.out, { deleted: id }, () => deps.out.write(`deleted role ${ref}\n`))
}

export async function grantRole(deps: Deps, role: string, member: string): Promise<void> {
  const client = deps.client()
  const id = await roleId(client, role)
  showRole(
    deps,
    await client.post<RoleDetail>(`/roles/${id}/members`, {
      memberId: await memberId(client, member),
    }),
  )
}

export async function revokeRole(deps: Deps, role: string, member: string): Promise<void> {
  const client = deps.client()
  const [rid, mid] = [await roleId(client, role), await memberId(client, member)]
  await client.delete(`/roles/${rid}/members/${mid}`)
  show(deps.out, { role: rid, revoked: mid }, () => deps.out.write(`took ${role} from ${member}\n`))
}

export async function assignTask(deps: Deps, role: string, task: string): Promise<void> {
  const client = deps.client()
  const id = await roleId(client, role)
  showRole(
    deps,
    await client.post<RoleDetail>(`/roles/${id}/tasks`, { taskId: await taskId(client, task) }),
  )
}

export async function unassignTask(deps: Deps, role: string, task: string): Promise<void> {
  const client = deps.client()
  const [rid, tid] = [await roleId(client, role), await taskId(client, task)]
  await client.delete(`/roles/${rid}/tasks/${tid}`)
  show(deps.out, { role: rid, task: tid }, () => deps.out.write(`${role} no longer runs ${task}\n`))
}

export function registerRoles(program: Command, makeDeps: MakeDeps): void {
  const roles = program.command('roles').description(about.roles)
  examples(
    roles.command('list').description('every role').action(actionOf(makeDeps, listRoles)),
    'osctl roles list',
  )
  examples(
    roles
      .command('get')
      .argument('<role>', 'id or slug')
      .description('the role, its holders and tasks')
      .action(actionOf(makeDeps, getRole)),
    'osctl roles get reviewer',
  )
  examples(
    withBodyOptions(
      roles
        .command('create')
        .description('create a role, on a team or enterprise-wide')
        .option('--name <name>')
        .option('--slug <slug>')
        .option('--team <team>', 'team id or slug (omit for enterprise-wide)'),
    ).action(actionOf(makeDeps, createRole)),
    'osctl roles create --name Reviewer --team platform',
  )
  examples(
    roles
      .command('delete')
      .argument('<role>')
      .option('-y, --yes', 'do not ask')
      .description('delete a role')
      .action(actionOf(makeDeps, deleteRole)),
    'osctl roles delete reviewer --yes',
  )
  examples(
    roles
      .command('grant')
      .argument('<role>')
      .argument('<member>', 'id, email or name')
      .description('grant the role to a member')
      .action(actionOf(makeDeps, grantRole)),
    'osctl roles grant reviewer ada@acme.osd.local',
  )
  examples(
    roles
      .command('revoke')
      .argument('<role>')
      .argument('<member>', 'id, email or name')
      .description('take the role from a member')
      .action(actionOf(makeDeps, revokeRole)),
    'osctl roles revoke reviewer ada@acme.osd.local',
  )
  examples(
    roles
      .command('assign-task')
      .argument('<role>')
      .argument('<task>', 'id or slug')
      .description('make the role run a task')
      .action(actionOf(makeDeps, assignTask)),
    'osctl roles assign-task reviewer review-prs',
  )
  examples(
    roles
      .command('unassign-task')
      .argument('<role>')
      .argument('<task>', 'id or slug')
      .description('stop the role running a task')
      .action(actionOf(makeDeps, unassignTask)),
    'osctl roles unassign-task reviewer review-prs',
  )
}
