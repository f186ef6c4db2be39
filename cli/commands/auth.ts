import type { Command } from 'commander'
import type { z } from 'zod'
import type { EnterpriseOverview } from '../../shared/schemas/enterprise.js'
import type { SessionSummary } from '../../shared/schemas/people.js'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, AuthError, CliError, UsageError } from '../errors.js'
import { printFields, printTable, show } from '../output.js'
import { idRef } from '../resolve.js'
import {
  asPerson,
  enterpriseText,
  personText,
  publicAnswer,
  signInCommand,
  type LoginAnswer,
  type Me,
} from '../people.js'

export interface LoginFlags {
  verify: boolean
  email?: string
  passwordStdin?: boolean
  enterprise?: string
}

/**
 * Saves the global --url and --token as a profile (--profile, OSCTL_PROFILE, default "default") and makes it current,
 * after checking that the daemon takes the token. With --email, a person signs in instead.
 */
export async function login(deps: Deps, opts: LoginFlags): Promise<void> {
  if (opts.email !== undefined) return loginPerson(deps, opts)
  if (opts.passwordStdin || opts.enterprise !== undefined)
    throw new UsageError('--password-stdin and --enterprise go with --email')
  const url = deps.globals.url ?? process.env.OSCTL_URL
  const token = deps.globals.token ?? process.env.OSCTL_TOKEN
  if (!url) throw new UsageError('--url is required (or OSCTL_URL)')
  if (!token) throw new UsageError('--token is required (or OSCTL_TOKEN)')
  const name = signInProfile(deps)
  let seen: TokenView | undefined
  if (opts.verify) seen = await whoAmI(deps.connect(url, token))
  deps.profiles().save(name, { url, token, kind: 'token' })
  show(deps.out, { profile: name, url, ...seen }, () => {
    deps.out.write(`logged in to ${url} as profile "${name}"`)
    deps.out.write(seen?.enterprise ? ` (enterprise ${seen.enterprise.slug})\n` : '\n')
  })
}

/**
 * A person signs in (issue 20): POST /auth/login with the email and a password typed at a prompt that
 * does not echo, or read from stdin. The session token is kept in the profile like a token, marked as a
 * session with the person's email; the password is never stored.
 */
async function loginPerson(deps: Deps, opts: LoginFlags): Promise<void> {
  if (deps.globals.token !== undefined) throw new UsageError('give --email or --token, not both')
  const email = opts.email!.trim()
  if (!email) throw new UsageError('--email needs an address')
  const name = signInProfile(deps)
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
 * already has one gives it. Signs in as `auth login --email` does.
 */
export async function acceptInvite(
  deps: Deps,
  inviteToken: string,
  opts: { passwordStdin?: boolean; name?: string },
): Promise<void> {
  if (deps.globals.token !== undefined)
    throw new UsageError('an invitation signs a person in: --token does not go with it')
  const profile = signInProfile(deps)
  const url = signInUrl(deps, profile)
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
  await signedIn(deps, profile, url, answer)
}

/** The profile a person signs in to: as every verb picks one (--profile, OSCTL_PROFILE, default). */
function signInProfile(deps: Deps): string {
  return deps.globals.profile || process.env.OSCTL_PROFILE || 'default'
}

/** The daemon to sign in to: --url, OSCTL_URL, or the one the profile already names. */
function signInUrl(deps: Deps, profile: string): string {
  const url = deps.globals.url || process.env.OSCTL_URL || deps.profiles().get(profile)?.url
  if (!url) throw new UsageError('--url is required (or OSCTL_URL)')
  return url
}

/**
 * Keeps a session in the profile and says who signed in; never prints the session's secrets. A session
 * the profile held before is ended first (best effort), not left open on the daemon unseen.
 */
async function signedIn(deps: Deps, name: string, url: string, answer: LoginAnswer): Promise<void> {
  const before = deps.profiles().get(name)
  if (before?.kind === 'session' && before.token && before.token !== answer.sessionToken) {
    const client = deps.connect(before.url, before.token)
    await client.post('/auth/logout').catch(() => undefined)
  }
  deps.profiles().save(name, {
    url,
    token: answer.sessionToken,
    kind: 'session',
    email: answer.user.email,
  })
  if (process.env.OSCTL_TOKEN)
    deps.out.error(
      'note: OSCTL_TOKEN is set and is used before the profile: unset it to act as this person\n',
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
      throw new AuthError(`${client.baseUrl} refused the token (401): it is wrong or revoked`)
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
      ['token', `…${view.tokenLastChars} (from ${view.tokenSource})`],
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
      ['profile', `${view.profile} (session, from ${view.tokenSource})`],
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
 * could not be ended (osd unreachable, or another failure) stays, so it can be ended later.
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
  deps.profiles().save(name, { url: profile.url }, false)
  show(deps.out, { profile: name, kind: profile.kind ?? 'token', signedOut: ended }, () =>
    deps.out.write(
      session
        ? `${ended ? 'signed out' : 'the session had already ended'}; removed it from profile "${name}"\n`
        : `removed the token of profile "${name}"\n`,
    ),
  )
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
  const auth = program
    .command('auth')
    .description('sign in as a person or with an API token, and see who you are')
  examples(
    auth
      .command('login')
      .description(
        'save --url and --token as a profile (--profile, else OSCTL_PROFILE, else "default") and make it current; ' +
          'with --email, sign in as a person and save the session instead',
      )
      .option('--email <email>', "sign in as a person: the password is asked for (it doesn't echo)")
      .option('--password-stdin', 'with --email: read the password from stdin')
      .option('--enterprise <slug>', 'with --email: the enterprise to act in (slug or id)')
      .option('--no-verify', 'with --token: save without asking the daemon')
      .action(actionOf(makeDeps, login)),
    'osctl auth login --url http://127.0.0.1:8080/v1 --email ada@example.com',
    'printf %s "$OSD_PASSWORD" | osctl auth login --email ada@example.com --password-stdin --enterprise acme',
    'osctl auth login --url http://127.0.0.1:8080/v1 --token osd_xxx',
    'osctl auth login --profile prod --url https://osd.example.com/v1 --token "$OSD_TOKEN"',
  )
  examples(
    auth
      .command('status')
      .description(
        "show the URL and profile, and the person, enterprise, role and session expiry of a session, or a token's last characters and scopes",
      )
      .action(actionOf(makeDeps, status)),
    'osctl auth status',
    'osctl --profile prod auth status --json',
  )
  examples(
    auth
      .command('logout')
      .description(
        'forget the credential of the current profile; a session is ended on the daemon first',
      )
      .action(actionOf(makeDeps, logout)),
    'osctl auth logout',
  )
  examples(
    auth
      .command('accept-invite')
      .argument('<invite-token>', 'the invite token `osctl users invite` printed')
      .description(
        'accept an invitation to an enterprise and sign in (a new person chooses a password)',
      )
      .option('--password-stdin', 'read the password from stdin')
      .option('--name <name>', 'your name, for a new account')
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
