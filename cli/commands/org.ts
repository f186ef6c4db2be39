import type { Command } from 'commander'
import type { OrgTree } from '../../shared/schemas/organisation.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { bold, colour, show } from '../output.js'
import { safeText } from '../safe-text.js'
import { drawTree, type TreeNode } from '../tree.js'
import { about } from './about.js'

type OrgMember = OrgTree['unassigned'][number]

function memberNode(deps: Deps, member: OrgMember): TreeNode {
  return {
    label: `${safeText(member.name)} ${colour(deps.out, 'dim', `<${member.email}>`)}`,
    children: member.roles.map((role) => ({
      label: `${safeText(role.slug)}${role.teamId ? '' : colour(deps.out, 'dim', ' (enterprise-wide)')}`,
      children: role.tasks.map((task) => ({
        label: `${safeText(task.slug)} ${colour(deps.out, 'dim', task.name)}`,
      })),
    })),
  }
}

/** The organisation drawn as a tree on a terminal; the API's JSON with --json. */
export async function showOrg(deps: Deps): Promise<void> {
  const tree = await deps.client().get<OrgTree>('/orgs')
  show(deps.out, tree, () => {
    const heading = (text: string) => bold(deps.out, text)
    const roots: TreeNode[] = tree.teams.map((team) => ({
      label: `${heading(team.name)} (${safeText(team.slug)})${team.concurrentRunLimit ? `  run limit ${team.concurrentRunLimit}` : ''}`,
      children: team.members.map((m) => memberNode(deps, m)),
    }))
    if (tree.unassigned.length) {
      roots.push({
        label: String(heading('On no team')),
        children: tree.unassigned.map((m) => memberNode(deps, m)),
      })
    }
    deps.out.write(drawTree(roots).join('\n') + '\n')
  })
}

export function registerOrg(program: Command, makeDeps: MakeDeps): void {
  examples(
    program.command('org').description(about.org).action(actionOf(makeDeps, showOrg)),
    'osctl org',
    'osctl org --json',
  )
}
