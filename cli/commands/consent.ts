import type { Command } from 'commander'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { CliError, UsageError, exitCodes } from '../errors.js'
import { printTable, show } from '../output.js'
import { asPerson, publicAnswer, type Me, type PersonEnterprise } from '../people.js'
import { parseScopes } from '../../shared/scopes.js'
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

interface ConsentRequest {
  id: string
  userCode: string
  pollToken: string
  expiresAt: string
}

interface ConsentState {
  status: 'pending' | 'approved' | 'declined' | 'expired'
  token?: string
}

/**
 * The app's side (a script asking for access, no credential of its own): asks for the scopes, shows the
 * code an owner approves, and waits. Once approved the token is printed on stdout, once; declined or
 * expired exits 1, and --timeout running out exits 8 (still pending).
 */
export async function requestConsent(
  deps: Deps,
  opts: { app: string; scopes: string; timeout?: string },
  pollMs = 2000,
): Promise<void> {
  const { scopes, unknown } = parseScopes(opts.scopes)
  if (unknown.length || scopes.length === 0)
    throw new UsageError(
      `unknown scopes: ${unknown.join(', ') || '(none given)'}; scopes are <resource>:read|write, ` +
        '<resource>:* or * for all',
    )
  const timeout = opts.timeout === undefined ? undefined : Number(opts.timeout)
  if (timeout !== undefined && !(timeout >= 0))
    throw new UsageError(`--timeout takes a number of seconds; got "${opts.timeout}"`)
  const client = deps.connect(deps.target().url)
  const request = publicAnswer<ConsentRequest>(
    await client.raw('POST', '/consent/requests', { body: { appName: opts.app, scopes } }),
  )
  deps.out.error(
    `code ${request.userCode}: an owner of the enterprise approves it with ` +
      `\`osctl consent approve ${request.userCode}\` (until ${request.expiresAt}); waiting\n`,
  )
  const deadline = timeout === undefined ? Infinity : Date.now() + timeout * 1000
  for (;;) {
    const state = publicAnswer<ConsentState>(
      await client.raw('GET', `/consent/requests/${request.id}`, {
        headers: { 'x-osd-poll-token': request.pollToken },
      }),
    )
    if (state.status === 'approved') {
      deps.out.error('approved: the token is shown once, now; store it\n')
      show(deps.out, state, () => deps.out.write(`${state.token ?? ''}\n`))
      return
    }
    if (state.status !== 'pending')
      throw new CliError(`request ${request.userCode} was ${state.status}`)
    if (Date.now() >= deadline)
      throw new CliError(
        `request ${request.userCode} is still pending after ${timeout}s`,
        exitCodes.pending,
      )
    await new Promise((resolve) => setTimeout(resolve, pollMs))
  }
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
  examples(
    consent
      .command('request')
      .description(
        "an app's side: ask for access, show the code to approve, wait, and print the token once approved",
      )
      .requiredOption('--app <name>', 'the name the owner sees')
      .requiredOption('--scopes <list>', 'comma-separated scopes, e.g. tasks:read,runs:write')
      .option('--timeout <seconds>', 'stop waiting after this long (exit 8)')
      .action(
        actionOf(makeDeps, (deps, opts: { app: string; scopes: string; timeout?: string }) =>
          requestConsent(deps, opts),
        ),
      ),
    'osctl --url https://osd.example.com/v1 consent request --app reports --scopes tasks:read > token',
  )
}
