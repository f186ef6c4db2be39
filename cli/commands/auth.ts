import { Option, type Command } from 'commander'
import type { z } from 'zod'
import type { EnterpriseOverview } from '../../shared/schemas/enterprise.js'
import type { Notifications } from '../../shared/schemas/events.js'
import type { SessionSummary } from '../../shared/schemas/people.js'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, AuthError, CliError, UsageError } from '../errors.js'
import { printFields, printTable, show } from '../output.js'
import type { Profile, Target } from '../profiles.js'
import { idRef } from '../resolve.js'
import { apiTokenShape } from '../../shared/token-format.js'
import {
  asPerson,
  enterpriseText,
  personText,
  publicAnswer,
  signInCommand,
  type LoginAnswer,
  type Me,
} from '../people.js'
import { about } from './about.js'

export interface LoginFlags {
  verify: boolean
  withToken?: boolean
  email?: string
  passwordStdin?: boolean
  enterprise?: string
  force?: boolean
}

/**
 * Saves the global --url and an API token as a profile (--profile, OSCTL_PROFILE, default "default") and
 * makes it current, after checking that the daemon takes the token. The token is read from stdin with
 * --with-token (as gh does), else taken from --token (which warns: the shell's history keeps it) or
 * OSCTL_TOKEN. With --email, a person signs in instead.
 */
export async function login(deps: Deps, opts: LoginFlags): Promise<void> {
  if (opts.email !== undefined) {
    if (opts.withToken) throw new UsageError('give --email or --with-token, not both')
    return loginPerson(deps, opts)
  }
  if (opts.passwordStdin || opts.enterprise !== undefined || opts.force)
    throw new UsageError('--password-stdin, --enterprise and --force go with --email')
  if (opts.withToken && deps.globals.token !== undefined)
    throw new UsageError('give --with-token (the token on stdin) or --token, not both')
  const url = deps.globals.url ?? process.env.OSCTL_URL
  if (!url) throw new UsageError('--url is required (or OSCTL_URL)')
  const token = opts.withToken
    ? await tokenFromStdin(deps)
    : (deps.globals.token ?? process.env.OSCTL_TOKEN)
  if (!token)
    throw new UsageError(
      'give the token on stdin with --with-token (or --token TOKEN, or OSCTL_TOKEN)',
    )
  if (!opts.withToken && deps.globals.token !== undefined)
    deps.out.error(
      "warning: a token given with --token stays in the shell's history; pipe it to " +
        '`osctl auth login --with-token` instead\n',
    )
  const name = chosenProfile(deps) ?? 'default'
  let seen: TokenView | undefined
  if (opts.verify) seen = await whoAmI(deps.connect(url, token))
  deps.profiles().save(name, { url, token, kind: 'token' })
  show(deps.out, { profile: name, url, ...seen }, () => {
    deps.out.write(`logged in to ${url} as profile "${name}"`)
    deps.out.write(seen?.enterprise ? ` (enterprise ${seen.enterprise.slug})\n` : '\n')
    if (opts.verify) tellNextStep(deps)
  })
}

/**
 * The token of --with-token: piped to stdin (its one line, without surrounding white space), or typed
 * at a prompt that does not echo when stdin is a terminal.
 */
async function tokenFromStdin(deps: Deps): Promise<string> {
  const typed = await deps.password('API token (it does not echo): ')
  const lines = (typed ?? (await deps.stdin())).trim().split(/\r?\n/)
  if (lines.length > 1) throw new UsageError('--with-token reads one token, on one line of stdin')
  const token = lines[0]!.trim()
  if (!token) throw new UsageError('--with-token found no token on stdin')
  return token
}

/**
 * After the first sign-in on this machine (issue 35), once: the commands that lead to a first AI team
 * member. On stderr, and never with --json, which a script reads.
 */
function tellNextStep(deps: Deps): void {
  if (!deps.profiles().firstTime('after-login')) return
  deps.out.error(
    'next: `osctl catalog roles list` shows the roles you can clone onto a team, each with its tasks; ' +
      '`osctl chat` talks with a member\n',
  )
}

/**
 * A person signs in (issue 20): POST /auth/login with the email and a password typed at a prompt that
 * does not echo, or read from stdin. The session token is kept in a profile like a token, marked as a
 * session with the person's email; the password is never stored. The profile is --profile, else
 * OSCTL_PROFILE, else one named after the email, and becomes current; one that holds an API token is
 * refused unless --force (issue 27): the daemon showed that token once.
 */
async function loginPerson(deps: Deps, opts: LoginFlags): Promise<void> {
  if (deps.globals.token !== undefined) throw new UsageError('give --email or --token, not both')
  const email = opts.email!.trim()
  if (!email) throw new UsageError('--email needs an address')
  const name = chosenProfile(deps) ?? email.toLowerCase()
  keepApiToken(deps, name, opts.force)
  const url = signInUrl(deps, name)
  const password = await readPassword(deps, opts.passwordStdin, `password for ${email}: `)
  const body: Record<string, string> = { email, password }
  if (opts.enterprise !== undefined) body.enterprise = opts.enterprise
  const client = deps.connect(url)
  const answer = publicAnswer<LoginAnswer>(
    await client.raw('POST', '/auth/login', { body }),
    (err) =>
      err.status === 401
        ? new AuthError(`${url} refused the sign-in (401 ${err.code}): wrong email or password`)
        : err,
  )
  await signedIn(deps, name, url, answer)
}

/**
 * Accepts an invitation (POST /auth/invites/accept): a new person chooses a password; a person who
 * already has one gives it. Signs in as `auth login --email` does, to a profile named after the email
 * the invitation was for unless one is chosen.
 */
export async function acceptInvite(
  deps: Deps,
  inviteToken: string,
  opts: { passwordStdin?: boolean; name?: string; force?: boolean },
): Promise<void> {
  if (deps.globals.token !== undefined)
    throw new UsageError('an invitation signs a person in: --token does not go with it')
  const chosen = chosenProfile(deps)
  if (chosen !== undefined) keepApiToken(deps, chosen, opts.force)
  const url = signInUrl(deps, chosen)
  const password = await readPassword(
    deps,
    opts.passwordStdin,
    'password (yours, or a new one for a new account): ',
  )
  const body: Record<string, string> = { inviteToken, password }
  if (opts.name !== undefined) body.name = opts.name
  const client = deps.connect(url)
  const answer = publicAnswer<LoginAnswer>(
    await client.raw('POST', '/auth/invites/accept', { body }),
    (err) =>
      err.status === 401
        ? new AuthError(`${url} refused the invitation (401 ${err.code}): ${err.message}`)
        : err,
  )
  // The email is known now: its profile is checked as a chosen one was before asking.
  const name = chosen ?? answer.user.email.toLowerCase()
  if (chosen === undefined && !opts.force && holdsApiToken(deps.profiles().get(name))) {
    await deps
      .connect(url, answer.sessionToken)
      .post('/auth/logout')
      .catch(() => undefined)
    const refusal = apiTokenRefusal(name)
    refusal.message = `the invitation is accepted, but ${refusal.message}`
    refusal.hint = `sign in with \`osctl auth login --email ${answer.user.email} --profile NAME\``
    throw refusal
  }
  await signedIn(deps, name, url, answer)
}

/**
 * An API token (profiles from before sessions hold tokens): the daemon showed it once, so a sign-in
 * never writes over it unasked (issue 27).
 */
function holdsApiToken(profile: Profile | undefined): boolean {
  return Boolean(profile?.token) && (profile?.kind ?? 'token') === 'token'
}

/** The profile named by --profile or OSCTL_PROFILE, as every verb picks one; undefined if neither. */
function chosenProfile(deps: Deps): string | undefined {
  return deps.globals.profile || process.env.OSCTL_PROFILE || undefined
}

/** Refuses to sign in over a profile's API token (exit 2) unless --force says to. */
function keepApiToken(deps: Deps, name: string, force: boolean | undefined): void {
  if (!force && holdsApiToken(deps.profiles().get(name))) throw apiTokenRefusal(name)
}

function apiTokenRefusal(name: string): UsageError {
  return new UsageError(
    `profile "${name}" holds an API token, which the daemon showed only once: a sign-in would ` +
      'replace it. Sign in to another profile with --profile NAME, or replace the token with --force',
  )
}

/**
 * The daemon to sign in to: --url, OSCTL_URL, the one the profile already names, or the one of the
 * current profile (the daemon osctl talks to now).
 */
function signInUrl(deps: Deps, profile: string | undefined): string {
  const profiles = deps.profiles()
  const url =
    deps.globals.url ||
    process.env.OSCTL_URL ||
    (profile !== undefined ? profiles.get(profile)?.url : undefined) ||
    (profiles.current !== undefined ? profiles.get(profiles.current)?.url : undefined)
  if (!url) throw new UsageError('--url is required (or OSCTL_URL)')
  return url
}

/**
 * Keeps a session in the profile, makes it current, and says who signed in; never prints the session's
 * secrets. A session the profile held before is ended first (best effort), not left open on the daemon
 * unseen. The profile that was current is remembered, for `auth logout` to make current again.
 */
async function signedIn(deps: Deps, name: string, url: string, answer: LoginAnswer): Promise<void> {
  const profiles = deps.profiles()
  const before = profiles.get(name)
  if (before?.kind === 'session' && before.token && before.token !== answer.sessionToken) {
    const client = deps.connect(before.url, before.token)
    await client.post('/auth/logout').catch(() => undefined)
  }
  const current = profiles.current
  const previous =
    current !== undefined && current !== name && profiles.get(current) ? current : before?.previous
  profiles.save(name, {
    url,
    token: answer.sessionToken,
    kind: 'session',
    email: answer.user.email,
    ...(previous !== undefined && { previous }),
  })
  if (holdsApiToken(before)) deps.out.error(`note: replaced the API token of profile "${name}"\n`)
  if (current !== name)
    deps.out.error(
      `profile "${name}" is current now` +
        (previous !== undefined ? ` (\`osctl auth logout\` goes back to "${previous}")\n` : '\n'),
    )
  if (process.env.OSCTL_TOKEN)
    deps.out.error(
      'note: OSCTL_TOKEN is set and is used before the profile: unset it to act as this person\n',
    )
  else if (process.env.OSCTL_PROFILE && process.env.OSCTL_PROFILE !== name)
    deps.out.error(
      `note: OSCTL_PROFILE names profile "${process.env.OSCTL_PROFILE}", which is used before the current one\n`,
    )
  const view = {
    profile: name,
    url,
    user: answer.user,
    enterprise: answer.enterprise,
    expiresAt: answer.expiresAt,
  }
  show(deps.out, view, () => {
    deps.out.write(
      `signed in to ${url} as ${personText(answer.user)}, profile "${name}"` +
        (answer.enterprise ? `, enterprise ${enterpriseText(answer.enterprise)}\n` : '\n'),
    )
    if (!answer.enterprise)
      deps.out.error('choose an enterprise with `osctl enterprises use SLUG`\n')
    else tellNextStep(deps)
  })
}

/**
 * A password from stdin (--password-stdin: the first line, its newline dropped) or typed at a prompt that
 * does not echo. Without a terminal to ask on, a usage error: a pipeline passes --password-stdin.
 */
async function readPassword(
  deps: Deps,
  fromStdin: boolean | undefined,
  question: string,
): Promise<string> {
  let password: string | undefined
  if (fromStdin) {
    password = (await deps.stdin()).replace(/\r?\n$/, '')
  } else {
    password = await deps.password(question)
    if (password === undefined)
      throw new UsageError(
        'stdin is not a terminal to type a password on: pass it with --password-stdin',
      )
  }
  if (!password) throw new UsageError('the password is empty')
  return password
}

interface TokenView {
  enterprise?: EnterpriseOverview['enterprise']
  scopes: string[]
}

/**
 * The token's enterprise and scopes as the daemon sees them. A token without enterprise:read is still a
 * valid token: the refusal names the scopes it holds.
 */
async function whoAmI(client: ApiClient): Promise<TokenView> {
  try {
    const overview = await client.get<EnterpriseOverview>('/enterprise')
    return { enterprise: overview.enterprise, scopes: overview.token?.scopes ?? [] }
  } catch (err) {
    if (err instanceof ApiRequestError && err.status === 401) {
      // A token of the checked format whose checksum is wrong was mistyped (or cut) on the way here.
      const mistyped = client.token !== undefined && apiTokenShape(client.token) === 'malformed'
      throw new AuthError(
        `${client.baseUrl} refused the token (401): ` +
          (mistyped
            ? 'it is mistyped or cut, or not an osd API token (osd_ and 49 letters and digits, the last 6 a checksum)'
            : 'it is wrong, revoked or expired'),
      )
    }
    if (err instanceof ApiRequestError && err.code === 'api_token_scope') {
      return { scopes: ((err.body as { held?: string[] }).held ?? []).slice() }
    }
    throw err
  }
}

export async function status(deps: Deps): Promise<void> {
  const target = deps.target()
  if (!target.token) {
    throw new AuthError(
      `no token configured for profile "${target.profile}": run \`osctl auth login --url URL --token TOKEN\` or ${signInCommand}`,
    )
  }
  if (target.kind === 'session') return sessionStatus(deps)
  const seen = await whoAmI(deps.client())
  const view = {
    url: target.url,
    profile: target.profile,
    kind: target.kind,
    tokenSource: target.tokenSource,
    tokenLastChars: target.token.slice(-4),
    enterprise: seen.enterprise ?? null,
    scopes: seen.scopes,
  }
  show(deps.out, view, () =>
    printFields(deps.out, [
      ['url', view.url],
      ['profile', view.profile],
      ['credential', `API token …${view.tokenLastChars} (from ${sourceText(view.tokenSource)})`],
      [
        'enterprise',
        seen.enterprise
          ? `${seen.enterprise.slug} (${seen.enterprise.id})`
          : '(needs enterprise:read)',
      ],
      ['scopes', view.scopes.join(' ')],
    ]),
  )
}

/** Where the credential came from, in words. */
function sourceText(source: Target['tokenSource']): string {
  return { flag: '--token', env: 'OSCTL_TOKEN', profile: 'the profile', none: 'nowhere' }[source]
}

/** A person's session: who, in which enterprise with which role, and until when (GET /auth/me). */
async function sessionStatus(deps: Deps): Promise<void> {
  const target = deps.target()
  let me: Me
  try {
    me = await deps.client().get<Me>('/auth/me')
  } catch (err) {
    if (err instanceof ApiRequestError && err.status === 401) {
      throw new AuthError(
        `${target.url} refused the session of profile "${target.profile}" (401): it has ended ` +
          `(signed out, expired or revoked); sign in again with ${signInCommand}`,
      )
    }
    throw err
  }
  const view = {
    url: target.url,
    profile: target.profile,
    kind: target.kind,
    tokenSource: target.tokenSource,
    user: me.user,
    enterprise: me.enterprise,
    session: me.session,
  }
  show(deps.out, view, () =>
    printFields(deps.out, [
      ['url', view.url],
      ['profile', view.profile],
      ['credential', `a person's session (from ${sourceText(view.tokenSource)})`],
      ['person', personText(me.user)],
      ['enterprise', enterpriseText(me.enterprise)],
      ['expires', me.session.expiresAt],
      ['idle expiry', me.session.idleExpiresAt],
    ]),
  )
}

/**
 * Forgets the credential of the current profile. A session is first ended on the daemon
 * (POST /auth/logout); one the daemon already refuses (401) is forgotten all the same, but one that
 * could not be ended (osd unreachable, or another failure) stays, so it can be ended later. The
 * profile keeps its URL (and a session's email), for signing in again; the other profiles are left
 * alone, and the one that was current before the sign-in is current again (issue 27).
 */
export async function logout(deps: Deps): Promise<void> {
  const name = deps.target().profile
  const profile = deps.profiles().get(name)
  if (!profile) throw new UsageError(`no profile "${name}"`)
  const session = profile.kind === 'session' && Boolean(profile.token)
  let ended = false
  if (session) {
    const client = deps.connect(profile.url, profile.token)
    try {
      await client.post('/auth/logout')
      ended = true
    } catch (err) {
      if (!(err instanceof ApiRequestError && err.status === 401)) {
        if (err instanceof CliError)
          err.hint = `the session was not ended and stays in profile "${name}": run \`osctl auth logout\` again`
        throw err
      }
    }
  }
  const profiles = deps.profiles()
  profiles.save(name, { url: profile.url, ...(session && { email: profile.email }) }, false)
  const back = profile.previous
  if (profiles.current === name && back !== undefined && profiles.get(back)?.token)
    profiles.use(back)
  const current = profiles.current ?? null
  const view = { profile: name, kind: profile.kind ?? 'token', signedOut: ended, current }
  show(deps.out, view, () => {
    deps.out.write(
      session
        ? `${ended ? 'signed out' : 'the session had already ended'}; removed it from profile "${name}"\n`
        : `removed the token of profile "${name}"\n`,
    )
    const credential = current === null ? undefined : profiles.get(current)?.token
    deps.out.error(
      current === null
        ? 'no profile is current now\n'
        : `profile "${current}" is current now` +
            (credential
              ? '\n'
              : `; it holds no credential: sign in with ${signInCommand} or \`osctl auth login --token TOKEN\`\n`),
    )
  })
}

type SessionSummary = z.infer<typeof SessionSummary>

/** The person's open sessions (GET /auth/sessions), this one marked. */
export async function listSessions(deps: Deps): Promise<void> {
  const rows = await asPerson(deps, (client) => client.get<SessionSummary[]>('/auth/sessions'))
  show(deps.out, rows, () =>
    printTable(deps.out, rows, [
      { header: '', value: (r) => (r.current ? '*' : ' ') },
      { header: 'ID', value: (r) => r.id },
      { header: 'ENTERPRISE', value: (r) => r.enterprise },
      { header: 'CREATED', value: (r) => r.createdAt },
      { header: 'LAST SEEN', value: (r) => r.lastSeenAt },
      { header: 'EXPIRES', value: (r) => r.expiresAt },
    ]),
  )
}

/**
 * What osd mails you about in the enterprise you act in (GET /auth/me/notifications); with --gates or
 * --run-failures, turns that kind on or off first (PATCH).
 */
export async function notifications(
  deps: Deps,
  flags: { gates?: 'on' | 'off'; runFailures?: 'on' | 'off' },
): Promise<void> {
  const change = {
    ...(flags.gates && { gates: flags.gates === 'on' }),
    ...(flags.runFailures && { runFailures: flags.runFailures === 'on' }),
  }
  const answer = await asPerson(deps, (client) =>
    Object.keys(change).length > 0
      ? client.patch<Notifications>('/auth/me/notifications', change)
      : client.get<Notifications>('/auth/me/notifications'),
  )
  const onOff = (on: boolean) => (on ? 'on' : 'off')
  show(deps.out, answer, () => {
    printFields(deps.out, [
      ['email', answer.email],
      ['gates', onOff(answer.gates)],
      ['run failures', onOff(answer.runFailures)],
    ])
    if (!answer.mailConfigured)
      deps.out.write(
        'this osd sends no mail (its operator sets OSD_SMTP_URL and OSD_MAIL_FROM): nothing is mailed until then\n',
      )
  })
}

/** Ends one of the person's sessions (another device, say) at once. */
export async function revokeSession(deps: Deps, ref: string): Promise<void> {
  const id = idRef(ref, 'a session')
  await asPerson(deps, (client) => client.delete(`/auth/sessions/${id}`))
  show(deps.out, { revoked: id }, () => deps.out.write(`ended session ${id}\n`))
}

/**
 * Changes the person's password: the current one and the new one typed at prompts that do not echo
 * (the new one twice), or two lines on stdin with --password-stdin. Every other session ends at once.
 */
export async function changePassword(deps: Deps, opts: { passwordStdin?: boolean }): Promise<void> {
  let currentPassword: string | undefined
  let newPassword: string | undefined
  if (opts.passwordStdin) {
    const lines = (await deps.stdin()).split(/\r?\n/)
    ;[currentPassword, newPassword] = lines
    if (lines.length > 3 || (lines.length === 3 && lines[2] !== ''))
      throw new UsageError(
        '--password-stdin takes two lines: the current password, then the new one',
      )
  } else {
    currentPassword = await deps.password('current password: ')
    if (currentPassword === undefined)
      throw new UsageError(
        'stdin is not a terminal to type passwords on: pass them with --password-stdin',
      )
    newPassword = await deps.password('new password: ')
    if (newPassword !== (await deps.password('the new password again: ')))
      throw new UsageError('the two new passwords differ')
  }
  if (!currentPassword || !newPassword)
    throw new UsageError('give the current password and the new one')
  await asPerson(deps, (client) => client.post('/auth/password', { currentPassword, newPassword }))
  show(deps.out, { changed: true }, () =>
    deps.out.write('password changed; your other sessions have ended\n'),
  )
}

export function registerAuth(program: Command, makeDeps: MakeDeps): void {
  const auth = program.command('auth').description(about.auth)
  examples(
    auth
      .command('login')
      .description(
        'save --url and an API token (from stdin with --with-token, or --token) as a profile (--profile, else OSCTL_PROFILE, else "default") and make it current; ' +
          'with --email, sign in as a person and save the session to a profile (--profile, else OSCTL_PROFILE, ' +
          'else one named after the email) that becomes current; a profile holding an API token is never signed in over without --force',
      )
      .option('--email <email>', "sign in as a person: the password is asked for (it doesn't echo)")
      .option('--password-stdin', 'with --email: read the password from stdin')
      .option('--enterprise <slug>', 'with --email: the enterprise to act in (slug or id)')
      .option('--force', "with --email: sign in over the profile's API token (it is lost)")
      .option(
        '--with-token',
        "read an API token from stdin, or ask for it without echo on a terminal (--token works too, but the shell's history keeps it)",
      )
      .option('--no-verify', 'with a token: save without asking the daemon')
      .action(actionOf(makeDeps, login)),
    'osctl auth login --url http://127.0.0.1:8080/v1 --email ada@example.com',
    'osctl auth login --email ada@example.com --profile work',
    'printf %s "$OSD_PASSWORD" | osctl auth login --email ada@example.com --password-stdin --enterprise acme',
    'osctl auth login --url http://127.0.0.1:8080/v1 --with-token < ci-token',
    'printenv OSD_TOKEN | osctl auth login --profile prod --url https://osd.example.com/v1 --with-token',
  )
  examples(
    auth
      .command('status')
      .description(
        "show the URL, the profile and whether its credential is an API token or a person's session: a session's person, enterprise, role and expiry, or a token's last characters and scopes",
      )
      .action(actionOf(makeDeps, status)),
    'osctl auth status',
    'osctl --profile prod auth status --json',
  )
  examples(
    auth
      .command('logout')
      .description(
        'forget the credential of the current profile; a session is ended on the daemon first, and the profile current before the sign-in is current again',
      )
      .action(actionOf(makeDeps, logout)),
    'osctl auth logout',
  )
  examples(
    auth
      .command('accept-invite')
      .argument('<invite-token>', 'the invite token `osctl users invite` printed')
      .description(
        'accept an invitation to an enterprise and sign in (a new person chooses a password), as `auth login --email` does',
      )
      .option('--password-stdin', 'read the password from stdin')
      .option('--name <name>', 'your name, for a new account')
      .option('--force', "sign in over the profile's API token (it is lost)")
      .action(actionOf(makeDeps, acceptInvite)),
    'osctl --url https://osd.example.com/v1 auth accept-invite osdi_xxx --name "Ada Lovelace"',
  )
  const sessions = auth
    .command('sessions')
    .description("a signed-in person's sessions: list them, end one")
  examples(
    sessions
      .command('list')
      .description('your open sessions, newest first (* marks this one)')
      .action(actionOf(makeDeps, listSessions)),
    'osctl auth sessions list',
  )
  examples(
    sessions
      .command('revoke')
      .argument('<id>', 'session id')
      .description('end one of your sessions at once (this one too: then sign in again)')
      .action(actionOf(makeDeps, revokeSession)),
    'osctl auth sessions revoke 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    auth
      .command('notifications')
      .description(
        'what osd mails you about in the enterprise you act in: a gate waiting that you may decide, a run you started failing (at most one mail a minute); --gates and --run-failures turn each on or off',
      )
      .addOption(new Option('--gates <on|off>', 'mail when a gate waits').choices(['on', 'off']))
      .addOption(
        new Option('--run-failures <on|off>', 'mail when a run you started fails').choices([
          'on',
          'off',
        ]),
      )
      .action(actionOf(makeDeps, notifications)),
    'osctl auth notifications',
    'osctl auth notifications --run-failures off',
  )
  examples(
    auth
      .command('password')
      .description('change your password; every other session of yours ends at once')
      .option(
        '--password-stdin',
        'read two lines from stdin: the current password, then the new one',
      )
      .action(actionOf(makeDeps, changePassword)),
    'osctl auth password',
  )
}
