import type { Command } from 'commander'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { CliError, UsageError, exitCodes } from '../errors.js'
import { printFields, printTable, show } from '../output.js'
import { asPerson, publicAnswer, type Me, type PersonEnterprise } from '../people.js'
import { safeText } from '../safe-text.js'
import type {
  AppConnection,
  ConsentPoll,
  ConsentRequestCreated,
  ConsentRequestView,
} from '../../shared/schemas/consent.js'
import type { z } from 'zod'
import type { User } from '../../shared/schemas/people.js'
import { about } from './about.js'
import { requiredScopes } from './tokens.js'

// Consent for an app asking for access (issue 20): the app shows its user a code; an owner of the
// enterprise signed in approves it for that enterprise (the app then gets a token) or declines it.

/** The enterprises where you may approve an app: the ones you own. */
export async function listConsentEnterprises(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) =>
    client.get<PersonEnterprise[]>('/consent/enterprises'),
  )
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'SLUG', value: (e) => e.slug, id: true },
      { header: 'NAME', value: (e) => e.name },
      { header: 'ID', value: (e) => e.id },
    ]),
  )
}

/** The owners of an enterprise (default: the session's), whom a member can ask to approve an app. */
export async function listConsentOwners(deps: Deps, opts: { enterprise?: string }): Promise<void> {
  const rows = await asPerson(deps, async (client) => {
    const enterpriseId = await personEnterprise(client, opts.enterprise)
    return client.get<User[]>('/consent/members', { enterpriseId })
  })
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: 'EMAIL', value: (o) => o.email },
      { header: 'NAME', value: (o) => o.name },
    ]),
  )
}

/** An enterprise of the person by slug or id, as given; by default the one the session acts in. */
async function personEnterprise(client: ApiClient, ref: string | undefined): Promise<string> {
  if (ref !== undefined) return ref
  const me = await client.get<Me>('/auth/me')
  if (!me.enterprise)
    throw new UsageError('the session acts in no enterprise: give --enterprise SLUG')
  return me.enterprise.id
}

/** What an app asks for, by the code it shows: read it before approving. */
export async function showConsent(deps: Deps, code: string): Promise<void> {
  const request = await asPerson(deps, (client) =>
    client.get<ConsentRequestView>('/consent/requests', { userCode: code }),
  )
  show(deps.out, request, () =>
    printFields(deps.out, [
      ['app', request.appName],
      ['scopes', request.scopes.join(' ')],
      ['status', request.status],
      ['expires', request.expiresAt],
    ]),
  )
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
  const connection = await asPerson(deps, async (client) => {
    const enterpriseId = opts.enterprise ?? (await onlyOwned(client))
    return client.post<AppConnection>('/consent/approve', { userCode: code, enterpriseId })
  })
  show(deps.out, connection, () =>
    deps.out.write(
      `approved ${safeText(connection.appName)} (${connection.scopes.join(' ')}): connected app ${connection.id}\n`,
    ),
  )
}

/** The one enterprise the person owns, when --enterprise is left out. */
async function onlyOwned(client: ApiClient): Promise<string> {
  const owned = await client.get<PersonEnterprise[]>('/consent/enterprises')
  if (owned.length === 1) return owned[0]!.id
  if (owned.length === 0)
    throw new CliError(
      'you own no enterprise, so you cannot approve an app: ask an owner (`osctl consent owners`)',
    )
  throw new UsageError(
    `you own ${owned.length} enterprises: give --enterprise (${owned.map((e) => e.slug).join(', ')})`,
  )
}

export async function declineConsent(deps: Deps, code: string): Promise<void> {
  const request = await asPerson(deps, (client) =>
    client.post<ConsentRequestView>('/consent/decline', { userCode: code }),
  )
  show(deps.out, request, () => deps.out.write(`declined ${safeText(request.appName)} (${code})\n`))
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
  const scopes = requiredScopes(opts.scopes)
  const timeout = opts.timeout === undefined ? undefined : Number(opts.timeout)
  if (timeout !== undefined && !(timeout >= 0))
    throw new UsageError(`--timeout takes a number of seconds; got "${opts.timeout}"`)
  const client = deps.connect(deps.target().url)
  const request = publicAnswer<z.infer<typeof ConsentRequestCreated>>(
    await client.raw('POST', '/consent/requests', { body: { appName: opts.app, scopes } }),
  )
  deps.out.error(
    `code ${request.userCode}: an owner of the enterprise approves it with ` +
      `\`osctl consent approve ${request.userCode}\` (until ${request.expiresAt}); waiting\n`,
  )
  const deadline = timeout === undefined ? Infinity : Date.now() + timeout * 1000
  for (;;) {
    const state = publicAnswer<ConsentPoll>(
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
  const consent = program.command('consent').description(about.consent)
  examples(
    consent
      .command('show')
      .argument('<code>', 'the code the app shows')
      .description('what an app asks for: its name, the scopes, whether still pending')
      .action(actionOf(makeDeps, showConsent)),
    'osctl consent show WXYZ-1234',
  )
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
