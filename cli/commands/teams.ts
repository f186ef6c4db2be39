import type { Command } from 'commander'
import type { Team } from '../../shared/schemas/organisation.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  intOrNone,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { Deps } from '../deps.js'
import { printFields, printTable, show } from '../output.js'
import { memberId, roleId, teamId } from '../resolve.js'
import { about } from './about.js'

const columns = [
  { header: 'SLUG', value: (t: Team) => t.slug, id: true },
  { header: 'NAME', value: (t: Team) => t.name },
  { header: 'MEMBERS', value: (t: Team) => t.members.length },
  { header: 'LIMIT', value: (t: Team) => t.concurrentRunLimit },
  { header: 'ID', value: (t: Team) => t.id },
]

function showTeam(deps: Deps, team: Team): void {
  show(deps.out, team, () =>
    printFields(deps.out, [
      ['name', team.name],
      ['slug', team.slug],
      ['id', team.id],
      ['charter', team.charter || '-'],
      ['lead', team.members.find((m) => m.id === team.leadMemberId)?.name ?? team.leadMemberId],
      ['run limit', team.concurrentRunLimit],
      ['members', team.members.map((m) => m.name)],
    ]),
  )
}

export async function listTeams(deps: Deps): Promise<void> {
  const teams = await deps.client().get<Team[]>('/teams')
  show(deps.out, teams, () => printTable(deps.out, teams, columns))
}

export async function getTeam(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  showTeam(deps, await client.get<Team>(`/teams/${await teamId(client, ref)}`))
}

interface TeamFlags {
  name?: string
  slug?: string
  charter?: string
  lead?: string
  limit?: string
  data?: string
  file?: string
}

async function teamBody(deps: Deps, opts: TeamFlags) {
  const client = deps.client()
  return bodyWith(deps, opts, {
    name: opts.name,
    slug: opts.slug,
    charter: opts.charter,
    leadMemberId:
      opts.lead === undefined
        ? undefined
        : opts.lead === 'none'
          ? null
          : await memberId(client, opts.lead),
    concurrentRunLimit: opts.limit === undefined ? undefined : intOrNone(opts.limit),
  })
}

export async function createTeam(deps: Deps, opts: TeamFlags): Promise<void> {
  showTeam(deps, await deps.client().post<Team>('/teams', await teamBody(deps, opts)))
}

export async function updateTeam(deps: Deps, ref: string, opts: TeamFlags): Promise<void> {
  const client = deps.client()
  const id = await teamId(client, ref)
  showTeam(deps, await client.patch<Team>(`/teams/${id}`, await teamBody(deps, opts)))
}

export async function deleteTeam(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const client = deps.client()
  const id = await teamId(client, ref)
  await confirmDestructive(deps, opts.yes, `Delete team ${ref}`)
  await client.delete(`/teams/${id}`)
  show(deps.out, { deleted: id }, () => deps.out.write(`deleted team ${ref}\n`))
}

export async function addMember(
  deps: Deps,
  team: string,
  member: string,
  opts: { role?: string },
): Promise<void> {
  const client = deps.client()
  const body = {
    memberId: await memberId(client, member),
    roleId: opts.role ? await roleId(client, opts.role) : undefined,
  }
  showTeam(deps, await client.post<Team>(`/teams/${await teamId(client, team)}/members`, body))
}

export async function removeMember(
  deps: Deps,
  team: string,
  member: string,
  opts: { yes?: boolean },
): Promise<void> {
  const client = deps.client()
  const [tid, mid] = [await teamId(client, team), await memberId(client, member)]
  await confirmDestructive(deps, opts.yes, `Take ${member} off team ${team}`)
  await client.delete(`/teams/${tid}/members/${mid}`)
  show(deps.out, { team: tid, removed: mid }, () => deps.out.write(`took ${member} off ${team}\n`))
}

export function registerTeams(program: Command, makeDeps: MakeDeps): void {
  const teams = program.command('teams').description(about.teams)
  examples(
    teams.command('list').description('every team').action(actionOf(makeDeps, listTeams)),
    'osctl teams list',
  )
  examples(
    teams
      .command('get')
      .argument('<team>', 'id or slug')
      .description('one team')
      .action(actionOf(makeDeps, getTeam)),
    'osctl teams get platform',
  )
  const fields = (c: Command) =>
    withBodyOptions(
      c
        .option('--name <name>', 'display name')
        .option('--charter <text>', 'what the team is for')
        .option('--lead <member>', 'lead: member id, email or name ("none" to clear)')
        .option('--limit <n>', 'concurrent-run limit ("none" to clear)'),
    )
  examples(
    fields(
      teams
        .command('create')
        .description('create a team')
        .option('--slug <slug>', 'URL name (from the name when omitted)'),
    ).action(actionOf(makeDeps, createTeam)),
    'osctl teams create --name "Platform" --charter "Keep the lights on" --limit 3',
  )
  examples(
    fields(
      teams
        .command('update')
        .argument('<team>', 'id or slug')
        .description('change name, charter, lead or limit'),
    ).action(actionOf(makeDeps, updateTeam)),
    'osctl teams update platform --lead ada@acme.osd.local --limit none',
  )
  examples(
    teams
      .command('delete')
      .argument('<team>', 'id or slug')
      .option('-y, --yes', 'do not ask')
      .description('delete a team')
      .action(actionOf(makeDeps, deleteTeam)),
    'osctl teams delete platform --yes',
  )
  examples(
    teams
      .command('add-member')
      .argument('<team>', 'id or slug')
      .argument('<member>', 'id, email or name')
      .option('--role <role>', 'also grant this role (id or slug)')
      .description('put a member on the team')
      .action(actionOf(makeDeps, addMember)),
    'osctl teams add-member platform ada@acme.osd.local --role reviewer',
  )
  examples(
    teams
      .command('remove-member')
      .argument('<team>', 'id or slug')
      .argument('<member>', 'id, email or name')
      .option('-y, --yes', 'do not ask')
      .description("take a member off the team, with the team's roles")
      .action(actionOf(makeDeps, removeMember)),
    'osctl teams remove-member platform ada@acme.osd.local --yes',
  )
}
