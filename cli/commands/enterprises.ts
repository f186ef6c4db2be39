import type { Command } from 'commander'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { printTable, show } from '../output.js'
import { asPerson, enterpriseText, personText, type Me, type PersonEnterprise } from '../people.js'
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

/** Switches the session's enterprise (POST /auth/enterprise); the profile keeps the same session. */
export async function useEnterprise(deps: Deps, enterprise: string): Promise<void> {
  const me = await asPerson(deps, (client) => client.post<Me>('/auth/enterprise', { enterprise }))
  show(deps.out, me, () =>
    deps.out.write(
      `${personText(me.user)} now acts in enterprise ${enterpriseText(me.enterprise)}\n`,
    ),
  )
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
      .description('act in another of your enterprises (the session switches; the profile stays)')
      .action(actionOf(makeDeps, useEnterprise)),
    'osctl enterprises use acme',
  )
}
