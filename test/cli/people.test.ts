import { randomUUID } from 'node:crypto'
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { beforeAll, describe, expect, it, vi } from 'vitest'
import {
  acceptInvite,
  changePassword,
  listSessions,
  login,
  logout,
  notifications,
  revokeSession,
  status,
} from '../../cli/commands/auth.js'
import {
  approveConsent,
  declineConsent,
  listConsentOwners,
  requestConsent,
  showConsent,
} from '../../cli/commands/consent.js'
import { listConnections, revokeConnection } from '../../cli/commands/connections.js'
import { listEnterprises, useEnterprise } from '../../cli/commands/enterprises.js'
import { createToken, listTokens, revokeToken, type ApiToken } from '../../cli/commands/tokens.js'
import {
  inviteUser,
  listInvites,
  listUsers,
  removeUser,
  changeUserRole,
  withdrawInvite,
} from '../../cli/commands/users.js'
import { makeDeps } from '../../cli/deps.js'
import { ApiRequestError, CliError, exitCodes } from '../../cli/errors.js'
import { loadProfileStore, ProfileStore, resolveTarget } from '../../cli/profiles.js'
import { allScopes } from '../../shared/scopes.js'
import { FakeApi, fakeDeps, type Answer, type Sent } from '../helpers/cli.js'

// ProfileStore reads conf, loaded once (cli/profiles.ts).
beforeAll(() => loadProfileStore())

// The people side of osctl (issue 20) in process: sign-in and sign-out of a person kept in a profile
// store of the test's own, and the verbs of the portal-only routes against a fake API, with a person's
// session and with an API token (refused, with the hint to sign in).

const url = 'http://osd.test/v1'
const sessionToken = `osds_${randomUUID()}`
const csrfToken = `csrf_${randomUUID()}`
const password = 'correct horse battery staple'
const user = { id: randomUUID(), email: 'ada@example.com', name: 'Ada Lovelace' }
const acme = { id: randomUUID(), slug: 'acme', name: 'Acme', role: 'owner' as const }
const globex = { id: randomUUID(), slug: 'globex', name: 'Globex', role: 'member' as const }
const later = new Date(Date.now() + 12 * 3600_000).toISOString()
const session = {
  id: randomUUID(),
  createdAt: new Date().toISOString(),
  expiresAt: later,
  idleExpiresAt: later,
}

async function store(): Promise<{ profiles: ProfileStore; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'osctl-people-'))
  return { profiles: new ProfileStore(dir), dir }
}

/** A fake API answering by "METHOD /path"; anything else is a 404. */
function routes(table: Record<string, Answer | ((req: Sent) => Answer)>): FakeApi {
  return new FakeApi((req) => {
    const answer = table[`${req.method} ${req.path}`]
    if (!answer) return { status: 404, body: { error: 'not_found', message: req.path } }
    return typeof answer === 'function' ? answer(req) : answer
  })
}

const loginAnswer = (enterprise: typeof acme | null = acme) => ({
  status: 200,
  body: { user, enterprise, sessionToken, csrfToken, expiresAt: later },
})

const rejected = async (promise: Promise<unknown>): Promise<CliError> => {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(CliError)
  return err as CliError
}

const sessionTarget = {
  kind: 'session' as const,
  token: sessionToken,
  tokenSource: 'profile' as const,
}

/** What the first sign-in of a configuration says next (once: a later one says nothing of it). */
const nextStep =
  'next: `osctl catalog roles list` shows the roles you can clone onto a team, each with its tasks; ' +
  '`osctl chat` talks with a member\n'

describe('osctl auth login --email', () => {
  it('signs in with the password from stdin and keeps the session in the profile, readable by its owner only', async () => {
    const api = routes({ 'POST /auth/login': loginAnswer() })
    const { profiles, dir } = await store()
    const f = fakeDeps(api, { profiles, stdin: `${password}\n` })
    f.deps.globals.url = url
    await login(f.deps, {
      verify: true,
      email: 'ada@example.com',
      passwordStdin: true,
      enterprise: 'acme',
    })
    expect(api.sent).toEqual([
      {
        method: 'POST',
        path: '/auth/login',
        query: {},
        body: { email: 'ada@example.com', password, enterprise: 'acme' },
      },
    ])
    expect(f.connected).toEqual([{ url, token: undefined }])
    // No profile chosen: one named after the email, made current.
    expect(profiles.get('ada@example.com')).toEqual({
      url,
      token: sessionToken,
      kind: 'session',
      email: 'ada@example.com',
    })
    expect(profiles.current).toBe('ada@example.com')
    expect((await stat(join(dir, 'config.json'))).mode & 0o777).toBe(0o600)
    const file = await readFile(join(dir, 'config.json'), 'utf8')
    expect(file).not.toContain(password)
    expect(file).not.toContain(csrfToken)
    expect(f.stdout()).toBe(
      `signed in to ${url} as Ada Lovelace <ada@example.com>, profile "ada@example.com", enterprise acme (owner)\n`,
    )
    expect(f.stderr()).toBe('profile "ada@example.com" is current now\n' + nextStep)
    for (const secret of [password, sessionToken, csrfToken])
      expect(f.stdout() + f.stderr()).not.toContain(secret)
  })

  it('asks for the password at a prompt on a terminal; --json shows the person, never the secrets', async () => {
    const api = routes({ 'POST /auth/login': loginAnswer(null) })
    const { profiles } = await store()
    const f = fakeDeps(api, { profiles, password, json: true })
    f.deps.globals.url = url
    f.deps.globals.profile = 'work'
    await login(f.deps, { verify: true, email: 'ada@example.com' })
    expect(api.sent[0]!.body).toEqual({ email: 'ada@example.com', password })
    const view = JSON.parse(f.stdout())
    expect(view).toEqual({ profile: 'work', url, user, enterprise: null, expiresAt: later })
    expect(profiles.get('work')).toMatchObject({ token: sessionToken, kind: 'session' })
  })

  it('signing in again over a session ends the one the profile held', async () => {
    const api = routes({ 'POST /auth/login': loginAnswer(), 'POST /auth/logout': { status: 204 } })
    const { profiles } = await store()
    profiles.save(user.email, { url, token: 'osds_old', kind: 'session', email: user.email })
    const f = fakeDeps(api, { profiles, stdin: password })
    await login(f.deps, { verify: true, email: user.email, passwordStdin: true })
    expect(api.sent.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /auth/login',
      'POST /auth/logout',
    ])
    expect(f.connected).toEqual([
      { url, token: undefined },
      { url, token: 'osds_old' },
    ])
    expect(profiles.get(user.email)?.token).toBe(sessionToken)
  })

  it('refuses to prompt when stdin is not a terminal and --password-stdin is absent (exit 2)', async () => {
    const api = routes({ 'POST /auth/login': loginAnswer() })
    const { profiles } = await store()
    const f = fakeDeps(api, { profiles }) // no terminal: password() answers undefined
    f.deps.globals.url = url
    const err = await rejected(login(f.deps, { verify: true, email: 'ada@example.com' }))
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(err.message).toContain('--password-stdin')
    expect(api.sent).toEqual([])
    expect(profiles.list()).toEqual([])
  })

  it('wrong email or password: exit 4, nothing saved', async () => {
    const api = routes({
      'POST /auth/login': {
        status: 401,
        body: { error: 'invalid_credentials', message: 'Wrong email or password.' },
      },
    })
    const { profiles } = await store()
    const f = fakeDeps(api, { profiles, stdin: 'nope' })
    f.deps.globals.url = url
    const err = await rejected(
      login(f.deps, { verify: true, email: 'ada@example.com', passwordStdin: true }),
    )
    expect(err.exitCode).toBe(exitCodes.auth)
    expect(err.message).toContain('wrong email or password')
    expect(profiles.list()).toEqual([])
  })

  it('a lock-out is the API refusal (exit 1); usage errors for --email with --token and for an empty password', async () => {
    const api = routes({
      'POST /auth/login': {
        status: 429,
        body: { error: 'login_locked', message: 'Too many failed sign-ins; try later.' },
      },
    })
    const { profiles } = await store()
    const f = fakeDeps(api, { profiles, stdin: password })
    f.deps.globals.url = url
    const locked = await rejected(
      login(f.deps, { verify: true, email: 'ada@example.com', passwordStdin: true }),
    )
    expect(locked).toBeInstanceOf(ApiRequestError)
    expect(locked).toMatchObject({ code: 'login_locked', exitCode: exitCodes.failed })

    f.deps.globals.token = 'osd_x'
    expect(
      (await rejected(login(f.deps, { verify: true, email: 'ada@example.com' }))).exitCode,
    ).toBe(exitCodes.usage)
    delete f.deps.globals.token
    const empty = fakeDeps(api, { profiles, stdin: '\n' })
    empty.deps.globals.url = url
    const err = await rejected(
      login(empty.deps, { verify: true, email: 'ada@example.com', passwordStdin: true }),
    )
    expect(err).toMatchObject({ exitCode: exitCodes.usage, message: 'the password is empty' })
    expect(api.sent).toHaveLength(1)
  })
})

describe('profiles of sessions', () => {
  it('reads profiles written before sessions as tokens, and knows a session by its profile or prefix', async () => {
    const { profiles, dir } = await store()
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({ current: 'old', profiles: { old: { url, token: 'osd_old' } } }),
      { mode: 0o600 },
    )
    expect(resolveTarget({}, profiles, {})).toMatchObject({
      token: 'osd_old',
      kind: 'token',
      tokenSource: 'profile',
    })
    profiles.save('me', { url, token: sessionToken, kind: 'session', email: user.email })
    expect(resolveTarget({}, profiles, {})).toMatchObject({ kind: 'session', profile: 'me' })
    expect(resolveTarget({}, profiles, { OSCTL_TOKEN: 'osd_ci' })).toMatchObject({
      kind: 'token',
      tokenSource: 'env',
    })
    expect(resolveTarget({ token: sessionToken }, new ProfileStore(dir), {})).toMatchObject({
      kind: 'session',
      tokenSource: 'flag',
    })
  })

  it('asks for a password without echoing it, only where it can be both seen and typed', async () => {
    const stream = (isTTY: boolean, typed?: string) => {
      const s = Object.assign(new PassThrough(), { isTTY })
      if (typed !== undefined) s.end(typed)
      return s
    }
    const stderr = stream(true)
    let shown = ''
    stderr.on('data', (chunk: Buffer) => (shown += chunk.toString()))
    const typed = await makeDeps({}, { stdin: stream(true, `${password}\n`), stderr }).password(
      'password for ada@example.com: ',
    )
    expect(typed).toBe(password)
    expect(shown).toBe('password for ada@example.com: \n')
    for (const [stdinTTY, stderrTTY] of [
      [false, true],
      [true, false],
    ] as const) {
      const deps = makeDeps({}, { stdin: stream(stdinTTY, 'x\n'), stderr: stream(stderrTTY) })
      expect(await deps.password('password: ')).toBeUndefined()
    }
  })
})

describe('osctl auth status and logout with a session', () => {
  it('status shows the person, the enterprise, the role and the session expiry', async () => {
    const api = routes({
      'GET /auth/me': { body: { user, enterprise: acme, session } },
    })
    const f = fakeDeps(api, { target: sessionTarget })
    await status(f.deps)
    expect(api.sent.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /auth/me'])
    expect(f.stdout()).toContain('person       Ada Lovelace <ada@example.com>')
    expect(f.stdout()).toContain('enterprise   acme (owner)')
    expect(f.stdout()).toContain(`expires      ${later}`)
    const json = fakeDeps(api, { target: sessionTarget, json: true })
    await status(json.deps)
    expect(JSON.parse(json.stdout())).toMatchObject({
      kind: 'session',
      user,
      enterprise: acme,
      session,
    })
    expect(json.stdout()).not.toContain(sessionToken)
  })

  it('status of an ended session: exit 4 and how to sign in again', async () => {
    const api = routes({
      'GET /auth/me': { status: 401, body: { message: 'Unauthorized', statusCode: 401 } },
    })
    const err = await rejected(status(fakeDeps(api, { target: sessionTarget }).deps))
    expect(err.exitCode).toBe(exitCodes.auth)
    expect(err.message).toContain('osctl auth login --email')
  })

  it('logout ends the session on the daemon with the profile credential, then forgets it', async () => {
    const api = routes({ 'POST /auth/logout': { status: 204 } })
    const { profiles } = await store()
    profiles.save('default', { url, token: sessionToken, kind: 'session', email: user.email })
    const f = fakeDeps(api, { profiles, target: { ...sessionTarget, profile: 'default' } })
    await logout(f.deps)
    expect(f.connected).toEqual([{ url, token: sessionToken }])
    expect(api.sent.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /auth/logout'])
    // The URL and the email stay, for signing in again.
    expect(profiles.get('default')).toEqual({ url, email: user.email })
    expect(f.stdout()).toBe('signed out; removed it from profile "default"\n')
  })

  it('a logout the daemon refuses with 401 still forgets the session; a failure keeps it', async () => {
    const { profiles } = await store()
    const target = { ...sessionTarget, profile: 'default' }
    profiles.save('default', { url, token: sessionToken, kind: 'session', email: user.email })
    const down = routes({
      'POST /auth/logout': { status: 500, body: { error: 'internal', message: 'boom' } },
    })
    const err = await rejected(logout(fakeDeps(down, { profiles, target }).deps))
    expect(err.exitCode).toBe(exitCodes.failed)
    expect(err.hint).toContain('stays in profile "default"')
    expect(profiles.get('default')?.token).toBe(sessionToken)

    const ended = routes({
      'POST /auth/logout': { status: 401, body: { message: 'Unauthorized', statusCode: 401 } },
    })
    const f = fakeDeps(ended, { profiles, target })
    await logout(f.deps)
    expect(profiles.get('default')).toEqual({ url, email: user.email })
    expect(f.stdout()).toContain('the session had already ended')
  })

  it('logout of a token profile asks the daemon nothing', async () => {
    const api = routes({})
    const { profiles } = await store()
    profiles.save('default', { url, token: 'osd_x' })
    const f = fakeDeps(api, { profiles, target: { profile: 'default' } })
    await logout(f.deps)
    expect(api.sent).toEqual([])
    expect(profiles.get('default')).toEqual({ url })
  })
})

describe('a sign-in beside a profile that holds an API token (issue 27)', () => {
  const ciToken = 'osd_shown_once_1234'

  /** A store whose current profile, "default", holds an API token, as `auth login --token` leaves it. */
  async function withToken() {
    const made = await store()
    made.profiles.save('default', { url, token: ciToken, kind: 'token' })
    made.profiles.save('prod', { url: 'https://osd.example.com/v1', token: 'osd_prod' }, false)
    return made
  }

  const signIn = (profiles: ProfileStore, flags: { profile?: string; force?: boolean } = {}) => {
    const api = routes({ 'POST /auth/login': loginAnswer(), 'POST /auth/logout': { status: 204 } })
    const f = fakeDeps(api, { profiles, stdin: password })
    if (flags.profile) f.deps.globals.profile = flags.profile
    const run = login(f.deps, {
      verify: true,
      email: 'Ada@Example.com',
      passwordStdin: true,
      force: flags.force,
    })
    return { api, f, run }
  }

  it("signs in to a profile named after the email, on the current profile's daemon, and leaves the token alone", async () => {
    const { profiles, dir } = await withToken()
    const { f, run } = signIn(profiles)
    await run
    expect(profiles.get('default')).toEqual({ url, token: ciToken, kind: 'token' })
    expect(profiles.get('ada@example.com')).toEqual({
      url, // no --url: the daemon of the profile that was current
      token: sessionToken,
      kind: 'session',
      email: 'ada@example.com',
      previous: 'default',
    })
    expect(profiles.current).toBe('ada@example.com')
    expect(f.stderr()).toBe(
      'profile "ada@example.com" is current now (`osctl auth logout` goes back to "default")\n' +
        nextStep,
    )
    // What a user finds in the file: the token is still there, readable by its owner only.
    const file = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))
    expect(file.profiles.default.token).toBe(ciToken)
    expect(file.current).toBe('ada@example.com')
  })

  it('refuses a chosen profile that holds a token (exit 2, naming --profile and --force), by flag or OSCTL_PROFILE', async () => {
    const { profiles } = await withToken()
    const byFlag = signIn(profiles, { profile: 'default' })
    const err = await rejected(byFlag.run)
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(err.message).toBe(
      'profile "default" holds an API token, which the daemon showed only once: a sign-in would ' +
        'replace it. Sign in to another profile with --profile NAME, or replace the token with --force',
    )
    expect(byFlag.api.sent).toEqual([]) // refused before the password was even sent
    vi.stubEnv('OSCTL_PROFILE', 'prod')
    try {
      const byEnv = signIn(profiles)
      expect((await rejected(byEnv.run)).message).toContain('profile "prod" holds an API token')
    } finally {
      vi.unstubAllEnvs()
    }
    expect(profiles.get('default')?.token).toBe(ciToken)
    expect(profiles.get('prod')?.token).toBe('osd_prod')
    expect(profiles.current).toBe('default')
  })

  it('--force signs in over the token, and says it is gone; --profile NAME signs in beside it', async () => {
    const { profiles } = await withToken()
    const forced = signIn(profiles, { profile: 'default', force: true })
    await forced.run
    expect(profiles.get('default')).toMatchObject({ token: sessionToken, kind: 'session' })
    expect(forced.f.stderr()).toBe('note: replaced the API token of profile "default"\n' + nextStep)

    const other = await withToken()
    const work = signIn(other.profiles, { profile: 'work' })
    await work.run
    expect(other.profiles.get('work')).toMatchObject({ token: sessionToken, previous: 'default' })
    expect(other.profiles.get('default')?.token).toBe(ciToken)
  })

  it('logout of the session ends it, leaves the other profiles alone and makes the token profile current again', async () => {
    const { profiles } = await withToken()
    await signIn(profiles).run
    const api = routes({ 'POST /auth/logout': { status: 204 } })
    const f = fakeDeps(api, {
      profiles,
      target: { ...sessionTarget, profile: 'ada@example.com' },
    })
    await logout(f.deps)
    expect(f.stdout()).toBe('signed out; removed it from profile "ada@example.com"\n')
    expect(f.stderr()).toBe('profile "default" is current now\n')
    expect(profiles.current).toBe('default')
    expect(profiles.get('default')).toEqual({ url, token: ciToken, kind: 'token' })
    expect(profiles.get('prod')).toEqual({ url: 'https://osd.example.com/v1', token: 'osd_prod' })
    expect(profiles.get('ada@example.com')).toEqual({ url, email: 'ada@example.com' })

    const json = fakeDeps(routes({}), { profiles, json: true, target: { profile: 'prod' } })
    await logout(json.deps)
    expect(JSON.parse(json.stdout())).toEqual({
      profile: 'prod',
      kind: 'token',
      signedOut: false,
      current: 'default',
    })
  })

  it('logout with nothing to go back to says the current profile holds no credential', async () => {
    const { profiles } = await store()
    profiles.save('default', { url, token: 'osd_x' })
    const f = fakeDeps(routes({}), { profiles, target: { profile: 'default' } })
    await logout(f.deps)
    expect(f.stderr()).toBe(
      'profile "default" is current now; it holds no credential: sign in with ' +
        '`osctl auth login --email EMAIL` or `osctl auth login --token TOKEN`\n',
    )
  })

  it('accept-invite signs in to a profile named after the invited email, and refuses a chosen token profile', async () => {
    const { profiles } = await withToken()
    const accept = { status: 200, body: loginAnswer().body }
    const api = routes({ 'POST /auth/invites/accept': accept })
    const f = fakeDeps(api, { profiles, stdin: password })
    await acceptInvite(f.deps, 'osdi_x', { passwordStdin: true })
    expect(profiles.get('ada@example.com')).toMatchObject({
      token: sessionToken,
      previous: 'default',
    })
    expect(profiles.get('default')?.token).toBe(ciToken)

    const chosen = fakeDeps(api, { profiles, stdin: password })
    chosen.deps.globals.profile = 'prod'
    const err = await rejected(acceptInvite(chosen.deps, 'osdi_y', { passwordStdin: true }))
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(api.sent).toHaveLength(1)
  })

  it("status says whether the credential is an API token or a person's session", async () => {
    const token = routes({
      'GET /enterprise': {
        body: {
          enterprise: { id: acme.id, slug: 'acme', name: 'Acme' },
          token: { scopes: ['a:read'] },
        },
      },
    })
    const t = fakeDeps(token, { target: { token: ciToken, tokenSource: 'profile' } })
    await status(t.deps)
    expect(t.stdout()).toContain('credential  API token …1234 (from the profile)\n')
    const me = routes({ 'GET /auth/me': { body: { user, enterprise: acme, session } } })
    const p = fakeDeps(me, { target: sessionTarget })
    await status(p.deps)
    expect(p.stdout()).toContain("credential   a person's session (from the profile)\n")
    const env = fakeDeps(me, { target: { ...sessionTarget, tokenSource: 'env' } })
    await status(env.deps)
    expect(env.stdout()).toContain("credential   a person's session (from OSCTL_TOKEN)\n")
  })
})

describe('osctl auth notifications', () => {
  it('shows what osd mails you about, turns a kind off, and says when this osd sends no mail', async () => {
    const answer = { email: user.email, gates: true, runFailures: false, mailConfigured: false }
    const api = routes({
      'GET /auth/me/notifications': { body: answer },
      'PATCH /auth/me/notifications': { body: { ...answer, gates: false, runFailures: true } },
    })
    const shown = fakeDeps(api, { target: sessionTarget })
    await notifications(shown.deps, {})
    expect(shown.stdout()).toMatch(/^email\s+ada@example\.com\ngates\s+on\nrun failures\s+off\n/)
    expect(shown.stdout()).toContain('this osd sends no mail')
    const changed = fakeDeps(api, { target: sessionTarget })
    await notifications(changed.deps, { gates: 'off', runFailures: 'on' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'PATCH',
      path: '/auth/me/notifications',
      body: { gates: false, runFailures: true },
    })
    expect(changed.stdout()).toMatch(/^gates\s+off$/m)
  })
})

describe('osctl auth sessions and password', () => {
  it('lists the sessions with this one marked, and ends one', async () => {
    const other = { ...session, id: randomUUID(), enterprise: 'globex', current: false }
    const api = routes({
      'GET /auth/sessions': {
        body: [
          { ...session, enterprise: 'acme', current: true, lastSeenAt: session.createdAt },
          { ...other, lastSeenAt: session.createdAt },
        ],
      },
      [`DELETE /auth/sessions/${other.id}`]: { status: 204 },
    })
    const list = fakeDeps(api, { target: sessionTarget })
    await listSessions(list.deps)
    const lines = list.stdout().split('\n')
    expect(lines[1]).toMatch(new RegExp(`^\\*\\s+${session.id}\\s+acme`))
    expect(lines[2]).toMatch(new RegExp(`^\\s+${other.id}\\s+globex`))
    const end = fakeDeps(api, { target: sessionTarget })
    await revokeSession(end.deps, other.id)
    expect(api.sent.at(-1)).toMatchObject({ method: 'DELETE', path: `/auth/sessions/${other.id}` })
    expect((await rejected(revokeSession(end.deps, 'nope'))).exitCode).toBe(exitCodes.usage)
  })

  it('changes the password from two lines of stdin, or prompts that ask the new one twice', async () => {
    const api = routes({ 'POST /auth/password': { status: 204 } })
    const piped = fakeDeps(api, { target: sessionTarget, stdin: `${password}\nnew password 123\n` })
    await changePassword(piped.deps, { passwordStdin: true })
    expect(api.sent[0]!.body).toEqual({
      currentPassword: password,
      newPassword: 'new password 123',
    })
    expect(piped.stdout()).toBe('password changed; your other sessions have ended\n')

    const typed = fakeDeps(api, { target: sessionTarget })
    const answers = [password, 'new password 456', 'new password 456']
    typed.deps.password = async () => answers.shift()
    await changePassword(typed.deps, {})
    expect(api.sent[1]!.body).toEqual({
      currentPassword: password,
      newPassword: 'new password 456',
    })

    const differ = fakeDeps(api, { target: sessionTarget })
    const mistyped = [password, 'new password 456', 'new password 465']
    differ.deps.password = async () => mistyped.shift()
    const err = await rejected(changePassword(differ.deps, {}))
    expect(err).toMatchObject({
      exitCode: exitCodes.usage,
      message: 'the two new passwords differ',
    })
    const noTerminal = await rejected(
      changePassword(fakeDeps(api, { target: sessionTarget }).deps, {}),
    )
    expect(noTerminal.exitCode).toBe(exitCodes.usage)
    expect(api.sent).toHaveLength(2)
  })
})

describe('osctl enterprises', () => {
  const switched = `osds_${'n'.repeat(43)}`
  const api = () =>
    routes({
      'GET /enterprises': { body: [acme, globex] },
      'POST /auth/enterprise': {
        body: { user, enterprise: globex, session, sessionToken: switched, csrfToken: 'csrf-new' },
      },
    })

  it('lists the person’s enterprises and switches the session to another, keeping its new secret in the profile', async () => {
    const fake = api()
    const list = fakeDeps(fake, { target: sessionTarget })
    await listEnterprises(list.deps)
    expect(list.stdout().split('\n')[0]).toMatch(/^SLUG\s+NAME\s+ROLE\s+ID$/)
    expect(list.stdout()).toMatch(/globex\s+Globex\s+member/)
    const { profiles } = await store()
    profiles.save('work', { url, token: sessionToken, kind: 'session', email: user.email })
    profiles.save('other', { url, token: 'osd_token' })
    const use = fakeDeps(fake, { target: { ...sessionTarget, profile: 'work' }, profiles })
    await useEnterprise(use.deps, 'globex')
    expect(fake.sent.at(-1)).toMatchObject({
      method: 'POST',
      path: '/auth/enterprise',
      body: { enterprise: 'globex' },
    })
    expect(use.stdout()).toBe(
      'Ada Lovelace <ada@example.com> now acts in enterprise globex (member)\n',
    )
    expect(use.stderr()).toBe('')
    // The old secret stopped working on the daemon: the profile holds the new one, and stays as it was
    // otherwise; the current profile is still the one it was.
    expect(profiles.get('work')).toEqual({
      url,
      token: switched,
      kind: 'session',
      email: user.email,
    })
    expect(profiles.current).toBe('other')

    const json = fakeDeps(fake, {
      target: { ...sessionTarget, profile: 'work' },
      profiles,
      json: true,
    })
    await useEnterprise(json.deps, 'globex')
    expect(JSON.parse(json.stdout())).toEqual({ user, enterprise: globex, session })
    expect(json.stdout()).not.toContain('osds_')
  })

  it('prints the new secret once when the session came from OSCTL_TOKEN or --token, not a profile', async () => {
    const fake = api()
    const env = fakeDeps(fake, { target: { ...sessionTarget, tokenSource: 'env' } })
    await useEnterprise(env.deps, 'globex')
    expect(env.stdout()).toBe(
      `Ada Lovelace <ada@example.com> now acts in enterprise globex (member)\n${switched}\n`,
    )
    expect(env.stderr()).toContain('the one from OSCTL_TOKEN no longer works')
    const flag = fakeDeps(fake, { target: { ...sessionTarget, tokenSource: 'flag' }, json: true })
    await useEnterprise(flag.deps, 'globex')
    expect(JSON.parse(flag.stdout())).toMatchObject({ sessionToken: switched })
    expect(flag.stderr()).toContain('the one from --token no longer works')
  })
})

const token = (overrides: Partial<ApiToken> = {}): ApiToken => ({
  id: randomUUID(),
  name: 'ci',
  scopes: ['tasks:read', 'runs:write'],
  lastChars: 'a1b2',
  lastUsedAt: null,
  createdAt: new Date().toISOString(),
  createdBy: { userId: user.id, email: user.email },
  expiresAt: null,
  rotatedAt: null,
  graceEndsAt: null,
  revokedAt: null,
  revokedReason: null,
  ...overrides,
})

describe('osctl tokens', () => {
  it('list: name, scopes, last used and who made it; --include-revoked asks for revoked ones', async () => {
    const rows = [
      token(),
      token({ name: 'old', revokedAt: new Date().toISOString() }),
      token({ name: 'root', scopes: [...allScopes] }),
      token({
        name: 'ops',
        scopes: ['runs:read', 'tasks:write', 'runs:write', 'later:read'] as ApiToken['scopes'],
      }),
    ]
    const api = routes({ 'GET /enterprise/api-tokens': { body: rows } })
    const f = fakeDeps(api, { target: sessionTarget })
    await listTokens(f.deps, {})
    expect(api.sent[0]!.query).toEqual({})
    expect(f.stdout()).toMatch(
      /ci\s+…a1b2\s+tasks:read runs:write\s+never\s+never\s+ada@example.com/,
    )
    // Briefly, as --scopes takes them (issue 51 item 10): every scope is *, both levels res:*.
    expect(f.stdout()).toMatch(/root\s+…a1b2\s+\*\s+never/)
    expect(f.stdout()).toMatch(/ops\s+…a1b2\s+tasks:write runs:\* later:read\s+never/)
    await listTokens(fakeDeps(api, { target: sessionTarget }).deps, { includeRevoked: true })
    expect(api.sent[1]!.query).toEqual({ includeRevoked: 'true' })
  })

  it('create prints the secret once on stdout, with a warning on stderr; --json gives the API body', async () => {
    const secret = `osd_${randomUUID()}`
    const api = routes({
      'POST /enterprise/api-tokens': (req) => ({
        status: 201,
        body: {
          ...token({ scopes: (req.body as { scopes: string[] }).scopes }),
          token: secret,
        },
      }),
    })
    const f = fakeDeps(api, { target: sessionTarget })
    await createToken(f.deps, { name: 'ci', scopes: 'tasks:read, runs:*' })
    expect(api.sent[0]!.body).toEqual({
      name: 'ci',
      scopes: ['tasks:read', 'runs:read', 'runs:write'],
    })
    expect(f.stdout()).toBe(`${secret}\n`)
    expect(f.stderr()).toContain('shown once')
    const json = fakeDeps(api, { target: sessionTarget, json: true })
    await createToken(json.deps, { name: 'ci', scopes: 'tasks:read' })
    expect(JSON.parse(json.stdout())).toMatchObject({ name: 'ci', token: secret })
    expect(json.stderr()).toContain('shown once')
  })

  it('create sends --expires-in-days as days and --expires as a date, not both (issue 45)', async () => {
    const api = routes({
      'POST /enterprise/api-tokens': { status: 201, body: { ...token(), token: 'osd_x' } },
    })
    const made = (opts: { expiresInDays?: string; expires?: string }) =>
      createToken(fakeDeps(api, { target: sessionTarget }).deps, {
        name: 'ci',
        scopes: 'tasks:read',
        ...opts,
      })
    await made({ expiresInDays: '90' })
    expect(api.sent.at(-1)!.body).toMatchObject({ expiresInDays: 90 })
    await made({ expires: '2027-01-31' })
    expect(api.sent.at(-1)!.body).toMatchObject({ expiresAt: '2027-01-31' })
    await made({ expires: 'never' })
    expect(api.sent.at(-1)!.body).toEqual({ name: 'ci', scopes: ['tasks:read'] })
    const sent = api.sent.length
    for (const opts of [{ expiresInDays: '90', expires: '2027-01-31' }, { expires: 'later' }]) {
      const err = await rejected(made(opts))
      expect(err.exitCode, JSON.stringify(opts)).toBe(exitCodes.usage)
    }
    expect(api.sent).toHaveLength(sent)
  })

  it('create refuses unknown scopes before asking the API (exit 2)', async () => {
    const api = routes({})
    const err = await rejected(
      createToken(fakeDeps(api, { target: sessionTarget }).deps, {
        name: 'ci',
        scopes: 'tasks:read,tasks:admin',
      }),
    )
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(err.message).toContain('tasks:admin')
    expect(api.sent).toEqual([])
  })

  it('revoke takes a name or an id, and needs --yes off a terminal', async () => {
    const ci = token()
    const api = routes({
      'GET /enterprise/api-tokens': { body: [ci, token({ name: 'other' })] },
      [`DELETE /enterprise/api-tokens/${ci.id}`]: {
        body: { ...ci, revokedAt: new Date().toISOString() },
      },
    })
    const refused = await rejected(
      revokeToken(fakeDeps(api, { target: sessionTarget }).deps, 'ci', {}),
    )
    expect(refused.exitCode).toBe(exitCodes.usage)
    expect(api.sent.filter((r) => r.method === 'DELETE')).toEqual([])
    const f = fakeDeps(api, { target: sessionTarget })
    await revokeToken(f.deps, 'ci', { yes: true })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'DELETE',
      path: `/enterprise/api-tokens/${ci.id}`,
    })
    expect(f.stdout()).toBe(`revoked token ci (${ci.id}, …a1b2)\n`)
    const byId = fakeDeps(api, { target: sessionTarget, confirm: true })
    await revokeToken(byId.deps, ci.id, {})
    expect(api.sent.at(-1)).toMatchObject({ method: 'DELETE' })
  })

  it('takes the first 8 or more characters of an id; several are ambiguous, exit 2 (issue 51)', async () => {
    const ci = token()
    const other = token({ name: 'other' })
    const api = routes({
      'GET /enterprise/api-tokens': (req) => ({
        body: [ci, other].filter((k) => k.id.startsWith(req.query.idPrefix ?? '')),
      }),
      [`DELETE /enterprise/api-tokens/${ci.id}`]: {
        body: { ...ci, revokedAt: new Date().toISOString() },
      },
    })
    const f = fakeDeps(api, { target: sessionTarget })
    await revokeToken(f.deps, ci.id.slice(0, 8), { yes: true })
    expect(api.sent.find((r) => r.method === 'GET')!.query).toEqual({ idPrefix: ci.id.slice(0, 8) })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'DELETE',
      path: `/enterprise/api-tokens/${ci.id}`,
    })
    // Both start with the same characters: none is chosen.
    other.id = `${ci.id.slice(0, 9)}${other.id.slice(9)}`
    const both = fakeDeps(api, { target: sessionTarget })
    const err = await rejected(revokeToken(both.deps, ci.id.slice(0, 9), { yes: true }))
    expect(err.exitCode).toBe(exitCodes.usage)
    expect(err.message.split('\n')[0]).toBe(
      `ambiguous token prefix ${ci.id.slice(0, 9)}: matches 2 tokens`,
    )
    expect(err.message).toContain(`  ${other.id}  token other  `)
  })
})

describe('a token profile on the portal-only verbs', () => {
  const refusal = (code: string) => ({
    status: 403,
    body: { error: code, message: `refused: ${code}` },
  })
  it('prints the API refusal with a hint that a person must sign in (exit 4: credentials)', async () => {
    const api = routes({
      'GET /enterprise/api-tokens': refusal('api_token_cannot_manage_tokens'),
      'POST /enterprise/api-tokens': refusal('api_token_cannot_manage_tokens'),
      'GET /enterprise/connections': refusal('api_token_cannot_manage_connections'),
      'GET /users': refusal('api_token_scope'),
      'GET /enterprises': refusal('api_token_scope'),
      'POST /consent/decline': refusal('api_token_scope'),
    })
    const calls: [string, (f: ReturnType<typeof fakeDeps>) => Promise<void>][] = [
      ['api_token_cannot_manage_tokens', (f) => listTokens(f.deps, {})],
      ['api_token_cannot_manage_tokens', (f) => createToken(f.deps, { name: 'x', scopes: '*' })],
      ['api_token_cannot_manage_connections', (f) => listConnections(f.deps)],
      ['api_token_scope', (f) => listUsers(f.deps)],
      ['api_token_scope', (f) => listEnterprises(f.deps)],
      ['api_token_scope', (f) => declineConsent(f.deps, 'ABCD')],
    ]
    for (const [code, call] of calls) {
      const err = await rejected(call(fakeDeps(api)))
      expect(err).toBeInstanceOf(ApiRequestError)
      expect(err).toMatchObject({ code, exitCode: exitCodes.auth, message: `refused: ${code}` })
      expect(err.hint).toContain('a person must sign in with `osctl auth login --email EMAIL`')
    }
  })

  it('a member refused owner_only hears that only an owner may', async () => {
    const api = routes({ 'GET /users': refusal('owner_only') })
    const err = await rejected(listUsers(fakeDeps(api, { target: sessionTarget }).deps))
    expect(err.hint).toBe('only an owner of the enterprise may do this')
  })

  it('no credential at all: exit 4 naming the sign-in', async () => {
    const api = routes({})
    const err = await rejected(
      listTokens(fakeDeps(api, { target: { token: undefined, tokenSource: 'none' } }).deps, {}),
    )
    expect(err.exitCode).toBe(exitCodes.auth)
    expect(err.message).toContain('osctl auth login --email')
    expect(api.sent).toEqual([])
  })
})

describe('osctl users', () => {
  const grace = {
    id: randomUUID(),
    email: 'grace@example.com',
    name: 'Grace',
    role: 'member',
    joinedAt: new Date().toISOString(),
  }
  it('list, invite (the invite token printed once), remove by email with --yes', async () => {
    const inviteToken = `osdi_${randomUUID()}`
    const api = routes({
      'GET /users': { body: [{ ...user, role: 'owner', joinedAt: grace.joinedAt }, grace] },
      'POST /users': (req) => ({
        status: 201,
        body: {
          invite: { id: randomUUID(), ...(req.body as object), expiresAt: later },
          inviteToken,
        },
      }),
      [`DELETE /users/${grace.id}`]: { body: { removed: grace, revokedTokens: 2 } },
      [`PATCH /users/${grace.id}`]: { body: { ...grace, role: 'owner' } },
    })
    const list = fakeDeps(api, { target: sessionTarget })
    await listUsers(list.deps)
    expect(list.stdout()).toMatch(/grace@example.com\s+Grace\s+member/)

    const invite = fakeDeps(api, { target: sessionTarget })
    await inviteUser(invite.deps, 'new@example.com', { owner: true })
    expect(api.sent.at(-1)!.body).toEqual({ email: 'new@example.com', role: 'owner' })
    expect(invite.stdout()).toBe(`${inviteToken}\n`)
    expect(invite.stderr()).toContain('shown once')

    const refused = await rejected(
      removeUser(fakeDeps(api, { target: sessionTarget }).deps, 'grace@example.com', {}),
    )
    expect(refused.exitCode).toBe(exitCodes.usage)
    expect(api.sent.some((r) => r.method === 'DELETE')).toBe(false)
    const role = fakeDeps(api, { target: sessionTarget })
    await changeUserRole(role.deps, 'grace@example.com', 'owner')
    expect(role.stdout()).toBe('Grace <grace@example.com> is now owner\n')
    expect(api.sent.at(-1)).toMatchObject({
      method: 'PATCH',
      path: `/users/${grace.id}`,
      body: { role: 'owner' },
    })
    const badRole = await rejected(
      changeUserRole(fakeDeps(api, { target: sessionTarget }).deps, grace.id, 'admin'),
    )
    expect(badRole.exitCode).toBe(exitCodes.usage)

    const remove = fakeDeps(api, { target: sessionTarget })
    await removeUser(remove.deps, 'GRACE@example.com', { yes: true })
    expect(api.sent.at(-1)).toMatchObject({ method: 'DELETE', path: `/users/${grace.id}` })
    expect(remove.stdout()).toBe(
      `removed GRACE@example.com (${grace.id}) from the enterprise; revoked the 2 API tokens they made in it\n`,
    )
  })

  it('remove against an osd that answers no count (204) says only who was removed', async () => {
    const api = routes({
      'GET /users': { body: [{ ...user, role: 'owner', joinedAt: later }] },
      [`DELETE /users/${user.id}`]: { status: 204 },
    })
    const f = fakeDeps(api, { target: sessionTarget })
    await removeUser(f.deps, user.id, { yes: true })
    expect(f.stdout()).toBe(`removed ${user.id} from the enterprise\n`)
  })

  it('lists pending invites and withdraws one', async () => {
    const invite = {
      id: randomUUID(),
      email: 'new@example.com',
      role: 'member',
      expiresAt: later,
      createdAt: new Date().toISOString(),
      invitedBy: { userId: user.id, email: user.email },
    }
    const api = routes({
      'GET /users/invites': { body: [invite] },
      [`DELETE /users/invites/${invite.id}`]: { status: 204 },
    })
    const list = fakeDeps(api, { target: sessionTarget })
    await listInvites(list.deps)
    expect(list.stdout()).toMatch(/new@example.com\s+member\s+ada@example.com/)
    const withdraw = fakeDeps(api, { target: sessionTarget })
    await withdrawInvite(withdraw.deps, invite.id)
    expect(api.sent.at(-1)).toMatchObject({ method: 'DELETE', path: `/users/invites/${invite.id}` })
    expect(withdraw.stdout()).toBe(`withdrew invite ${invite.id}\n`)
  })

  it('a last owner refused is the API refusal', async () => {
    const api = routes({
      [`DELETE /users/${user.id}`]: {
        status: 409,
        body: { error: 'last_owner', message: 'The last owner cannot be removed.' },
      },
    })
    const err = await rejected(
      removeUser(fakeDeps(api, { target: sessionTarget }).deps, user.id, { yes: true }),
    )
    expect(err).toMatchObject({ code: 'last_owner', exitCode: exitCodes.failed })
  })
})

describe('osctl connections and consent', () => {
  it('lists connected apps and revokes one with --yes', async () => {
    const app = {
      id: randomUUID(),
      appName: 'Zapier',
      scopes: ['tasks:read'],
      approvedBy: { userId: user.id, email: user.email },
      approvedAt: new Date().toISOString(),
      lastUsedAt: null,
      revokedAt: null,
    }
    const api = routes({
      'GET /enterprise/connections': { body: [app] },
      [`DELETE /enterprise/connections/${app.id}`]: {
        body: { ...app, revokedAt: new Date().toISOString() },
      },
    })
    const list = fakeDeps(api, { target: sessionTarget })
    await listConnections(list.deps)
    expect(list.stdout()).toMatch(/Zapier\s+tasks:read\s+ada@example.com/)
    expect(
      (await rejected(revokeConnection(fakeDeps(api, { target: sessionTarget }).deps, app.id, {})))
        .exitCode,
    ).toBe(exitCodes.usage)
    const revoke = fakeDeps(api, { target: sessionTarget })
    await revokeConnection(revoke.deps, app.id, { yes: true })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'DELETE',
      path: `/enterprise/connections/${app.id}`,
    })
    expect(revoke.stdout()).toBe(`revoked connected app Zapier (${app.id})\n`)
    await listConnections(fakeDeps(api, { target: sessionTarget }).deps, { includeRevoked: true })
    expect(api.sent.at(-1)).toMatchObject({ query: { includeRevoked: 'true' } })
  })

  it('show reads a request by its code; approve takes --enterprise or the one enterprise you own; decline', async () => {
    const view = { appName: 'reports', scopes: ['tasks:read'], status: 'pending', expiresAt: later }
    const connection = {
      id: randomUUID(),
      appName: 'reports',
      scopes: ['tasks:read'],
      approvedBy: { userId: user.id, email: user.email },
      approvedAt: new Date().toISOString(),
      lastUsedAt: null,
      revokedAt: null,
    }
    let owned = [acme, { ...acme, id: randomUUID(), slug: 'initech' }]
    const api = routes({
      'GET /consent/requests': { body: view },
      'GET /consent/enterprises': () => ({ body: owned }),
      'POST /consent/approve': { status: 201, body: connection },
      'POST /consent/decline': { body: { ...view, status: 'declined' } },
      'GET /auth/me': { body: { user, enterprise: acme, session } },
      'GET /consent/members': { body: [user] },
    })
    const shown = fakeDeps(api, { target: sessionTarget })
    await showConsent(shown.deps, 'WXYZ-1234')
    expect(api.sent.at(-1)).toMatchObject({
      path: '/consent/requests',
      query: { userCode: 'WXYZ-1234' },
    })
    expect(shown.stdout()).toMatch(/app\s+reports\nscopes\s+tasks:read\nstatus\s+pending/)

    const ambiguous = await rejected(
      approveConsent(fakeDeps(api, { target: sessionTarget }).deps, 'WXYZ-1234', {}),
    )
    expect(ambiguous.exitCode).toBe(exitCodes.usage)
    expect(ambiguous.message).toContain('acme, initech')
    const approve = fakeDeps(api, { target: sessionTarget })
    await approveConsent(approve.deps, 'WXYZ-1234', { enterprise: 'initech' })
    expect(api.sent.at(-1)).toMatchObject({
      method: 'POST',
      path: '/consent/approve',
      body: { userCode: 'WXYZ-1234', enterpriseId: 'initech' },
    })
    expect(approve.stdout()).toBe(`approved reports (tasks:read): connected app ${connection.id}\n`)
    owned = [acme]
    await approveConsent(fakeDeps(api, { target: sessionTarget }).deps, 'WXYZ-1234', {})
    expect(api.sent.at(-1)).toMatchObject({
      body: { userCode: 'WXYZ-1234', enterpriseId: acme.id },
    })
    owned = []
    const none = await rejected(
      approveConsent(fakeDeps(api, { target: sessionTarget }).deps, 'WXYZ-1234', {}),
    )
    expect(none.message).toContain('you own no enterprise')

    const decline = fakeDeps(api, { target: sessionTarget })
    await declineConsent(decline.deps, 'WXYZ-1234')
    expect(api.sent.at(-1)).toMatchObject({
      path: '/consent/decline',
      body: { userCode: 'WXYZ-1234' },
    })
    expect(decline.stdout()).toBe('declined reports (WXYZ-1234)\n')

    const owners = fakeDeps(api, { target: sessionTarget })
    await listConsentOwners(owners.deps, {})
    expect(api.sent.at(-1)).toMatchObject({
      path: '/consent/members',
      query: { enterpriseId: acme.id },
    })
    expect(owners.stdout()).toMatch(/ada@example.com\s+Ada Lovelace/)
    await listConsentOwners(fakeDeps(api, { target: sessionTarget }).deps, { enterprise: 'globex' })
    expect(api.sent.at(-1)).toMatchObject({ query: { enterpriseId: 'globex' } })
  })

  it("an app's request: shows the code, polls with its poll token, prints the token once approved", async () => {
    const id = randomUUID()
    const pollToken = `poll_${randomUUID()}`
    const secret = `osd_${randomUUID()}`
    const states = ['pending', 'pending', 'approved']
    const api = routes({
      'POST /consent/requests': (req) => ({
        status: 201,
        body: { id, userCode: 'WXYZ-1234', pollToken, expiresAt: later, sent: req.body },
      }),
      [`GET /consent/requests/${id}`]: () => {
        const status = states.shift()!
        return { body: status === 'approved' ? { status, token: secret } : { status } }
      },
    })
    const f = fakeDeps(api, { target: { token: undefined, tokenSource: 'none' } })
    await requestConsent(f.deps, { app: 'reports', scopes: 'tasks:read' }, 1)
    expect(f.connected).toEqual([{ url, token: undefined }])
    expect(api.sent[0]).toMatchObject({ body: { appName: 'reports', scopes: ['tasks:read'] } })
    expect(api.sent.slice(1).map((r) => r.headers)).toEqual(
      Array(3).fill({ 'x-osd-poll-token': pollToken }),
    )
    expect(f.stderr()).toContain('osctl consent approve WXYZ-1234')
    expect(f.stdout()).toBe(`${secret}\n`)

    const declined = routes({
      'POST /consent/requests': {
        status: 201,
        body: { id, userCode: 'C', pollToken, expiresAt: later },
      },
      [`GET /consent/requests/${id}`]: { body: { status: 'declined' } },
    })
    const err = await rejected(
      requestConsent(fakeDeps(declined).deps, { app: 'reports', scopes: 'tasks:read' }, 1),
    )
    expect(err).toMatchObject({ exitCode: exitCodes.failed, message: 'request C was declined' })
    const pending = routes({
      'POST /consent/requests': {
        status: 201,
        body: { id, userCode: 'C', pollToken, expiresAt: later },
      },
      [`GET /consent/requests/${id}`]: { body: { status: 'pending' } },
    })
    const waited = await rejected(
      requestConsent(fakeDeps(pending).deps, { app: 'r', scopes: 'tasks:read', timeout: '0' }, 1),
    )
    expect(waited.exitCode).toBe(exitCodes.pending)
  })
})
