import type { Command } from 'commander'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { printTable, show } from '../output.js'
import { about } from './about.js'

export async function listProfiles(deps: Deps): Promise<void> {
  const rows = deps.profiles().list()
  const view = rows.map((r) => ({
    name: r.name,
    url: r.profile.url,
    current: r.current,
    token: r.profile.token ? `…${r.profile.token.slice(-4)}` : null,
    // A person's session, or an API token (profiles from before sessions hold tokens).
    kind: r.profile.token ? (r.profile.kind ?? 'token') : null,
    email: r.profile.email ?? null,
  }))
  show(deps.out, view, () =>
    printTable(deps.out, view, [
      { header: '', value: (r) => (r.current ? '*' : ' ') },
      { header: 'NAME', value: (r) => r.name, id: true },
      { header: 'URL', value: (r) => r.url },
      { header: 'TOKEN', value: (r) => r.token },
      { header: 'KIND', value: (r) => r.kind },
      { header: 'PERSON', value: (r) => r.email },
    ]),
  )
}

export async function useProfile(deps: Deps, name: string): Promise<void> {
  if (!deps.profiles().use(name))
    throw new UsageError(`no profile "${name}"; see \`osctl profile list\``)
  show(deps.out, { current: name }, () => deps.out.write(`now using profile "${name}"\n`))
}

export async function removeProfile(deps: Deps, name: string): Promise<void> {
  if (!deps.profiles().remove(name)) throw new UsageError(`no profile "${name}"`)
  show(deps.out, { removed: name }, () => deps.out.write(`removed profile "${name}"\n`))
}

export function registerProfile(program: Command, makeDeps: MakeDeps): void {
  const profile = program.command('profile').description(about.profile)
  examples(
    profile.command('list').description('list profiles').action(actionOf(makeDeps, listProfiles)),
    'osctl profile list',
  )
  examples(
    profile
      .command('use')
      .argument('<name>')
      .description('make a profile current')
      .action(actionOf(makeDeps, useProfile)),
    'osctl profile use prod',
  )
  examples(
    profile
      .command('remove')
      .argument('<name>')
      .description('delete a profile')
      .action(actionOf(makeDeps, removeProfile)),
    'osctl profile remove staging',
  )
}
