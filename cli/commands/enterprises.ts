import type { Command } from 'commander'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { printTable, show } from '../output.js'
import type { EnterpriseChosen } from '../../shared/schemas/people.js'
import { asPerson, enterpriseText, personText, type PersonEnterprise } from '../people.js'
import { about } from './about.js'

// A person's enterprises (issue 20): the ones they belong to, and which one the session acts in.

export async function listEnterprises(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) => client.get<PersonEnterprise[]>('/enterprises'))
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'SLUG', value: (e) => e.slug, id: true },
      { header: 'NAME', value: (e) => e.name },
      { header: 'ROLE', value: (e) => e.role },
      { header: 'ID', value: (e) => e.id },
    ]),
  )
}

/**
 * Switches the session's enterprise (POST /auth/enterprise). The daemon gives the session a new secret
 * and the old one stops working (issue 41), so the profile keeps the new one: the person stays signed
 * in, and the output never shows it. A session given by --token or OSCTL_TOKEN has no profile to keep it
 * in: the new secret is printed once instead (stdout; --json: the API's answer), as `tokens create` does.
 */
export async function useEnterprise(deps: Deps, enterprise: string): Promise<void> {
  const target = deps.target()
  const chosen = await asPerson(deps, (client) =>
    client.post<EnterpriseChosen>('/auth/enterprise', { enterprise }),
  )
  const { sessionToken, csrfToken: _, ...me } = chosen
  const said = `${personText(me.user)} now acts in enterprise ${enterpriseText(me.enterprise)}\n`
  // An older osd answers no new secret: the old one still works.
  if (!sessionToken) return show(deps.out, me, () => deps.out.write(said))
  if (target.tokenSource === 'profile') {
    const profiles = deps.profiles()
    const profile = profiles.get(target.profile)
    if (profile) {
      profiles.save(target.profile, { ...profile, token: sessionToken }, false)
      return show(deps.out, me, () => deps.out.write(said))
    }
  }
  deps.out.error(
    `the session has a new secret, shown once, now: the one from ${target.tokenSource === 'flag' ? '--token' : 'OSCTL_TOKEN'} no longer works\n`,
  )
  show(deps.out, chosen, () => deps.out.write(said + sessionToken + '\n'))
}

export function registerEnterprises(program: Command, makeDeps: MakeDeps): void {
  const enterprises = program.command('enterprises').description(about.enterprises)
  examples(
    enterprises
      .command('list')
      .description('the enterprises you belong to, with your role in each')
      .action(actionOf(makeDeps, listEnterprises)),
    'osctl enterprises list',
  )
  examples(
    enterprises
      .command('use')
      .argument('<enterprise>', 'slug or id')
      .description(
        'act in another of your enterprises (the session switches, with a new secret the profile keeps)',
      )
      .action(actionOf(makeDeps, useEnterprise)),
    'osctl enterprises use acme',
  )
}
