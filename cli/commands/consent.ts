import type { Command } from 'commander'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { CliError, UsageError } from '../errors.js'
import { printTable, show } from '../output.js'
import { asPerson, type Me, type PersonEnterprise } from '../people.js'
import { isUuid } from '../resolve.js'

// Consent for an app asking for access (issue 20): the app shows its user a code; an owner of the
// enterprise signed in approves it for that enterprise (the app then gets a token) or declines it.

type ConsentEnterprise = Pick<PersonEnterprise, 'id' | 'slug' | 'name'> & { role?: string }

interface Owner {
  id?: string
  userId?: string
  email: string
  name: string | null
}

/** The enterprises where you may approve an app: the ones you own. */
export async function listConsentEnterprises(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) =>
    client.get<ConsentEnterprise[]>('/consent/enterprises'),
  )
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'SLUG', value: (e) => e.slug },
      { header: 'NAME', value: (e) => e.name },
      { header: 'ID', value: (e) => e.id },
    ]),
  )
}

/** The owners of an enterprise (default: the session's), whom a member can ask to approve an app. */
export async function listConsentOwners(deps: Deps, opts: { enterprise?: string }): Promise<void> {
  const rows = await asPerson(deps, async (client) => {
    const enterpriseId = await personEnterpriseId(client, opts.enterprise)
    return client.get<Owner[]>('/consent/members', { enterpriseId })
  })
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'EMAIL', value: (o) => o.email },
      { header: 'NAME', value: (o) => o.name },
    ]),
  )
}

/** The id of one of the person's enterprises named by slug or id; by default the session's own. */
async function personEnterpriseId(client: ApiClient, ref: string | undefined): Promise<string> {
  if (ref === undefined) {
    const me = await client.get<Me>('/auth/me')
    if (!me.enterprise)
      throw new UsageError('the session acts in no enterprise: give --enterprise SLUG')
    return me.enterprise.id
  }
  if (isUuid(ref)) return ref
  const found = (await client.get<PersonEnterprise[]>('/enterprises')).find((e) => e.slug === ref)
  if (!found)
    throw new CliError(`you belong to no enterprise "${ref}"; see \`osctl enterprises list\``)
  return found.id
}

/**
 * Approves an app's request, shown to its user as a code, for one enterprise you own (--enterprise;
 * it may be left out when you own just one).
 */
export async function approveConsent(
  deps: Deps,
  code: string,
  opts: { enterprise?: string },
): Promise<void> {
  const answer = await asPerson(deps, async (client) => {
    const owned = await client.get<ConsentEnterprise[]>('/consent/enterprises')
    const named =
      opts.enterprise === undefined
        ? owned
        : owned.filter((e) => e.id === opts.enterprise || e.slug === opts.enterprise)
    if (named.length === 0)
      throw new CliError(
        opts.enterprise === undefined
          ? 'you own no enterprise, so you cannot approve an app: ask an owner (`osctl consent owners`)'
          : `you own no enterprise "${opts.enterprise}"; see \`osctl consent enterprises\``,
      )
    if (named.length > 1)
      throw new UsageError(
        `you own ${named.length} enterprises: give --enterprise (${named.map((e) => e.slug).join(', ')})`,
      )
    const enterprise = named[0]!
    const approved = await client.post<unknown>('/consent/approve', {
      userCode: code,
      enterpriseId: enterprise.id,
    })
    return { approved, enterprise }
  })
  show(deps.out, answer.approved ?? {}, () =>
    deps.out.write(`approved request ${code} for enterprise ${answer.enterprise.slug}\n`),
  )
}

export async function declineConsent(deps: Deps, code: string): Promise<void> {
  const answer = await asPerson(deps, (client) =>
    client.post<unknown>('/consent/decline', { userCode: code }),
  )
  show(deps.out, answer ?? {}, () => deps.out.write(`declined request ${code}\n`))
}

export function registerConsent(program: Command, makeDeps: MakeDeps): void {
  const consent = program
    .command('consent')
    .description("approve or decline an app's request for access (a signed-in person only)")
  examples(
    consent
      .command('approve')
      .argument('<code>', 'the code the app shows')
      .option('--enterprise <slug>', 'the enterprise the app may act in (slug or id)')
      .description(
        'approve an app for an enterprise you own: it gets a token with the scopes asked',
      )
      .action(actionOf(makeDeps, approveConsent)),
    'osctl consent approve WXYZ-1234 --enterprise acme',
  )
  examples(
    consent
      .command('decline')
      .argument('<code>', 'the code the app shows')
      .description("decline an app's request")
      .action(actionOf(makeDeps, declineConsent)),
    'osctl consent decline WXYZ-1234',
  )
  examples(
    consent
      .command('enterprises')
      .description('the enterprises where you may approve an app (the ones you own)')
      .action(actionOf(makeDeps, listConsentEnterprises)),
    'osctl consent enterprises',
  )
  examples(
    consent
      .command('owners')
      .option('--enterprise <slug>', "slug or id (default: the session's enterprise)")
      .description('the owners of an enterprise, whom a member can ask to approve an app')
      .action(actionOf(makeDeps, listConsentOwners)),
    'osctl consent owners --enterprise acme',
  )
}
