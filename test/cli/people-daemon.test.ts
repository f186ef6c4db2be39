import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { EnterpriseOverview } from '../../shared/schemas/enterprise.js'
import { MyEnterprise } from '../../shared/schemas/people.js'
import { ApiToken, ApiTokenCreated } from '../../shared/schemas/tokens.js'
import { AppConnection, ConsentRequestView } from '../../shared/schemas/consent.js'
import { Person } from '../../shared/schemas/users.js'
import { eventually } from '../helpers/wait.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { osd } from '../helpers/osd.js'
import { hasScript, osctlBin } from '../helpers/processes.js'

// osctl's people side end to end (issue 20): a person made on the server host (osd admin), signing in
// with osctl against a real daemon, the session kept in a profile file of the test's own; tokens the
// person makes and revokes, an invited person, an app's consent, and a token profile refused on the
// portal-only verbs with the hint to sign in. osctl runs in process (issue 28), but for the sign-in
// that types a password on a pseudo-terminal; test/cli/people.test.ts covers every verb with a fake
// API.

let cli: CliDaemon
const email = `ada-${randomBytes(4).toString('hex')}@example.com`
const password = `pw ${randomBytes(12).toString('base64url')}`
let first: { id: string; slug: string }
let second: { id: string; slug: string }

/** osctl as the person: a config dir of its own, the daemon's URL, no token from the environment. */
async function personEnv(): Promise<Record<string, string>> {
  return {
    OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-person-')),
    OSCTL_URL: cli.daemon.url,
    OSCTL_TOKEN: '',
  }
}

async function json(args: string[], env: Record<string, string>, input?: string): Promise<any> {
  const res = await osctl(['--json', ...args], env, input)
  expect(res.exitCode, res.stderr).toBe(0)
  return JSON.parse(res.stdout)
}

beforeAll(async () => {
  cli = await startCliDaemon('People Cli')
  const dbEnv = { DATABASE_URL: cli.db.url }
  const made = await osd(
    ['admin', 'user', 'create', '--email', email, '--name', 'Ada', '--password-stdin', '--json'],
    dbEnv,
    `${password}\n`,
  )
  expect(made.exitCode, made.stderr).toBe(0)
  const owned = async (name: string) => {
    const res = await osd(
      ['admin', 'enterprise', 'create', '--name', name, '--owner-email', email, '--json'],
      dbEnv,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    return JSON.parse(res.stdout).enterprise as { id: string; slug: string }
  }
  first = await owned('People First')
  second = await owned('People Second')
}, 120_000)

describe('osctl auth login --email against a daemon', () => {
  it('signs in, shows the person, lists and switches enterprises, and signs out', async () => {
    const env = await personEnv()
    const login = await osctl(
      ['auth', 'login', '--email', email, '--password-stdin', '--enterprise', first.slug],
      env,
      `${password}\n`,
    )
    expect(login.exitCode, login.stderr).toBe(0)
    expect(login.stdout).toContain(
      `as Ada <${email}>, profile "${email}", enterprise ${first.slug} (owner)`,
    )

    // The session is in the profile like a token, in a file readable by its owner only; the
    // password is nowhere.
    const file = join(env.OSCTL_CONFIG_DIR!, 'config.json')
    expect((await stat(file)).mode & 0o777).toBe(0o600)
    const text = await readFile(file, 'utf8')
    expect(text).not.toContain(password)
    // No profile named: one named after the email (issue 27).
    const profile = JSON.parse(text).profiles[email]
    expect(profile).toMatchObject({ url: cli.daemon.url, kind: 'session', email })
    expect(profile.token).toMatch(/^osds_/)

    expect(await json(['profile', 'list'], env)).toEqual([
      {
        name: email,
        url: cli.daemon.url,
        current: true,
        token: `…${profile.token.slice(-4)}`,
        kind: 'session',
        email,
      },
    ])

    const status = await json(['auth', 'status'], env)
    expect(status).toMatchObject({
      kind: 'session',
      tokenSource: 'profile',
      user: { email, name: 'Ada' },
      enterprise: { id: first.id, slug: first.slug, role: 'owner' },
    })
    expect(Date.parse(status.session.expiresAt)).toBeGreaterThan(Date.now())
    expect(JSON.stringify(status)).not.toContain(profile.token)
    const human = await osctl(['auth', 'status'], env)
    expect(human.stdout).toMatch(new RegExp(`person\\s+Ada <${email}>`))
    expect(human.stdout).toMatch(new RegExp(`enterprise\\s+${first.slug} \\(owner\\)`))

    const mine = z.array(MyEnterprise).parse(await json(['enterprises', 'list'], env))
    expect(mine.map((e) => [e.slug, e.role]).sort()).toEqual(
      [
        [first.slug, 'owner'],
        [second.slug, 'owner'],
      ].sort(),
    )
    // A session calls the ordinary routes too, in the enterprise it acts in.
    const overview = EnterpriseOverview.parse(await json(['enterprise', 'show'], env))
    expect(overview.enterprise.id).toBe(first.id)
    expect(overview.person).toMatchObject({ email, role: 'owner' })

    const used = await json(['enterprises', 'use', second.slug], env)
    expect(used.enterprise).toMatchObject({ id: second.id, role: 'owner' })
    expect((await json(['auth', 'status'], env)).enterprise.slug).toBe(second.slug)
    const refusedSwitch = await osctl(['enterprises', 'use', cli.enterprise.slug], env)
    expect(refusedSwitch.exitCode).toBe(1)
    expect(refusedSwitch.stderr).toContain('enterprise_not_found')

    // Tokens made by the person: the secret printed once, used, listed, revoked and then refused.
    const made = await osctl(
      ['--json', 'tokens', 'create', '--name', 'ci', '--scopes', 'enterprise:read,tasks:read'],
      env,
    )
    expect(made.exitCode, made.stderr).toBe(0)
    expect(made.stderr).toContain('shown once')
    const created = ApiTokenCreated.parse(JSON.parse(made.stdout))
    expect([...created.scopes].sort()).toEqual(['enterprise:read', 'tasks:read'])
    const tokenEnv = { ...env, OSCTL_TOKEN: created.token }
    const seen = EnterpriseOverview.parse(await json(['enterprise', 'show'], tokenEnv))
    expect(seen.enterprise.id).toBe(second.id) // the enterprise the session acted in
    const plain = await osctl(
      ['tokens', 'create', '--name', 'nightly', '--scopes', 'tasks:read'],
      env,
    )
    expect(plain.exitCode, plain.stderr).toBe(0)
    expect(plain.stdout).toMatch(/^osd_\S+\n$/) // the secret, nothing else on stdout
    const listed = z.array(ApiToken).parse(await json(['tokens', 'list'], env))
    expect(listed.find((t) => t.id === created.id)).toMatchObject({
      name: 'ci',
      lastChars: created.token.slice(-4),
      createdBy: { email },
      revokedAt: null,
    })
    expect(JSON.stringify(listed)).not.toContain(created.token)
    const unasked = await osctl(['tokens', 'revoke', 'ci'], env)
    expect(unasked.exitCode).toBe(2)
    expect((await osctl(['enterprise', 'show'], tokenEnv)).exitCode).toBe(0)
    const revoked = await json(['tokens', 'revoke', 'ci', '--yes'], env)
    expect(revoked).toMatchObject({ id: created.id, revokedAt: expect.any(String) })
    const refused = await osctl(['enterprise', 'show'], tokenEnv)
    expect(refused.exitCode).toBe(4)
    expect(refused.stderr).toContain('401')
    const all = z.array(ApiToken).parse(await json(['tokens', 'list', '--include-revoked'], env))
    expect(all.find((t) => t.id === created.id)?.revokedAt).not.toBeNull()

    // A second session (another terminal): listed, and ended from the first at once.
    const elsewhere = await personEnv()
    await json(['auth', 'login', '--email', email, '--password-stdin'], elsewhere, `${password}\n`)
    const sessions = await json(['auth', 'sessions', 'list'], env)
    expect(sessions).toHaveLength(2)
    const other = sessions.find((s: { current: boolean }) => !s.current)
    expect(other.id).not.toBe(status.session.id)
    await json(['auth', 'sessions', 'revoke', other.id], env)
    expect((await osctl(['auth', 'status'], elsewhere)).exitCode).toBe(4)

    const logout = await osctl(['auth', 'logout'], env)
    expect(logout.exitCode, logout.stderr).toBe(0)
    expect(logout.stdout).toContain('signed out')
    expect(JSON.parse(await readFile(file, 'utf8')).profiles[email]).toEqual({
      url: cli.daemon.url,
      email,
    })
    // The session ended on the daemon, not only in the profile.
    const after = await osctl(['enterprises', 'list'], { ...env, OSCTL_TOKEN: profile.token })
    expect(after.exitCode).toBe(4)
    expect(after.stderr).toContain('401')
    expect(after.stderr).toContain('hint: the session has ended')
    const status401 = await osctl(['auth', 'status'], { ...env, OSCTL_TOKEN: profile.token })
    expect(status401.exitCode).toBe(4)
    expect(status401.stderr).toContain('osctl auth login --email')
  }, 60_000)

  it('refuses a wrong password (exit 4) and a prompt with no terminal (exit 2), saving nothing', async () => {
    const env = await personEnv()
    const wrong = await osctl(
      ['auth', 'login', '--email', email, '--password-stdin'],
      env,
      'not the password\n',
    )
    expect(wrong.exitCode).toBe(4)
    expect(wrong.stderr).toContain('wrong email or password')
    const unknown = await osctl(
      ['auth', 'login', '--email', `nobody-${email}`, '--password-stdin'],
      env,
      `${password}\n`,
    )
    expect(unknown.exitCode).toBe(4)
    expect(unknown.stderr).toBe(wrong.stderr) // the same words, whether the email exists or not
    const noTerminal = await osctl(['auth', 'login', '--email', email], env)
    expect(noTerminal.exitCode).toBe(2)
    expect(noTerminal.stderr).toContain('--password-stdin')
    const status = await osctl(['auth', 'status'], env)
    expect(status.exitCode).toBe(4)
  }, 60_000)

  it.runIf(hasScript)(
    'asks for the password on a terminal without echoing it, beside a token profile it leaves alone',
    async () => {
      // The CI token is in profile "default", current, naming the daemon: no --url, no OSCTL_URL.
      const env: Record<string, string> = { ...(await personEnv()), OSCTL_URL: '' }
      const file = join(env.OSCTL_CONFIG_DIR!, 'config.json')
      const tokenProfile = { url: cli.daemon.url, token: cli.enterprise.token, kind: 'token' }
      await writeFile(
        file,
        JSON.stringify({ current: 'default', profiles: { default: tokenProfile } }),
        { mode: 0o600 },
      )
      const child = execa(
        'script',
        ['-qfec', `node ${osctlBin} auth login --email ${email}`, '/dev/null'],
        { env, reject: false },
      )
      let shown = ''
      let typed = false
      child.stdout!.on('data', (chunk: Buffer) => {
        shown += chunk.toString()
        if (!typed && shown.includes(`password for ${email}: `)) {
          typed = true
          child.stdin!.end(`${password}\r`)
        }
      })
      const result = await child
      expect(result.exitCode, shown).toBe(0)
      expect(shown).toContain(`as Ada <${email}>, profile "${email}"`)
      expect(shown).toContain(
        `profile "${email}" is current now (\`osctl auth logout\` goes back to "default")`,
      )
      expect(shown).not.toContain(password)
      const saved = JSON.parse(await readFile(file, 'utf8'))
      expect(saved.current).toBe(email)
      expect(saved.profiles.default).toEqual(tokenProfile)
      expect(saved.profiles[email]).toMatchObject({
        url: cli.daemon.url,
        kind: 'session',
        email,
        previous: 'default',
      })
    },
    60_000,
  )
})

describe('an owner and the people of the enterprise', () => {
  it('invites a person who accepts with osctl, lists them, and removes them: their session ends', async () => {
    const owner = await personEnv()
    await json(
      ['auth', 'login', '--email', email, '--password-stdin', '--enterprise', first.slug],
      owner,
      `${password}\n`,
    )
    const grace = `grace-${randomBytes(4).toString('hex')}@example.com`
    const invited = await osctl(['users', 'invite', grace], owner)
    expect(invited.exitCode, invited.stderr).toBe(0)
    expect(invited.stderr).toContain('shown once')
    const inviteToken = invited.stdout.trim()
    expect(inviteToken).toMatch(/^osdi_/)
    const pending = await json(['users', 'invites'], owner)
    expect(pending.map((i: { email: string }) => i.email)).toContain(grace)

    const member = await personEnv()
    const accepted = await osctl(
      ['auth', 'accept-invite', inviteToken, '--password-stdin', '--name', 'Grace'],
      member,
      'a new password of grace\n',
    )
    expect(accepted.exitCode, accepted.stderr).toBe(0)
    expect(accepted.stdout).toContain(`as Grace <${grace}>`)
    expect((await json(['auth', 'status'], member)).enterprise).toMatchObject({
      id: first.id,
      role: 'member',
    })
    // A member is not an owner: the API's refusal, and what it means.
    const notOwner = await osctl(['users', 'list'], member)
    expect(notOwner.exitCode).toBe(4) // 403: credentials (issue 51)
    expect(notOwner.stderr).toContain('owner_only')
    expect(notOwner.stderr).toContain('hint: only an owner of the enterprise may do this')

    const people = z.array(Person).parse(await json(['users', 'list'], owner))
    expect(people.map((p) => [p.email, p.role]).sort()).toEqual(
      [
        [email, 'owner'],
        [grace, 'member'],
      ].sort(),
    )
    expect((await osctl(['users', 'remove', grace], owner)).exitCode).toBe(2) // no terminal, no --yes
    await json(['users', 'remove', grace, '--yes'], owner)
    const ended = await osctl(['auth', 'status'], member)
    expect(ended.exitCode).toBe(4)
    const lastOwner = await osctl(['users', 'remove', email, '--yes'], owner)
    expect(lastOwner.exitCode).toBe(1)
    expect(lastOwner.stderr).toContain('last_owner')
  }, 60_000)

  it('an app asks with osctl consent request; the owner reads and approves its code; revoking the connection stops its token', async () => {
    const owner = await personEnv()
    await json(
      ['auth', 'login', '--email', email, '--password-stdin', '--enterprise', first.slug],
      owner,
      `${password}\n`,
    )
    const app = await personEnv() // no credential at all
    const asking = osctl(
      ['consent', 'request', '--app', 'reports', '--scopes', 'enterprise:read', '--timeout', '60'],
      app,
    )
    let ended = false
    void asking.then(() => (ended = true))
    const codeOf = () => /code (\S+):/.exec(asking.printed().stderr)?.[1]
    await eventually(() => ended || codeOf() !== undefined, 10_000, 'the code to approve')
    const code = codeOf()
    expect(code, `consent request ended: ${asking.printed().stderr}`).toBeDefined()
    const view = ConsentRequestView.parse(await json(['consent', 'show', code!], owner))
    expect(view).toMatchObject({
      appName: 'reports',
      scopes: ['enterprise:read'],
      status: 'pending',
    })
    const connection = AppConnection.parse(
      await json(['consent', 'approve', code!, '--enterprise', first.slug], owner),
    )
    const result = await asking
    expect(result.exitCode, result.stderr).toBe(0)
    const appToken = result.stdout.trim()
    const appEnv = { ...app, OSCTL_TOKEN: appToken }
    expect(EnterpriseOverview.parse(await json(['enterprise', 'show'], appEnv)).enterprise.id).toBe(
      first.id,
    )
    const apps = z.array(AppConnection).parse(await json(['connections', 'list'], owner))
    expect(apps.map((a) => a.id)).toContain(connection.id)
    await json(['connections', 'revoke', connection.id, '--yes'], owner)
    expect((await osctl(['enterprise', 'show'], appEnv)).exitCode).toBe(4)
  }, 60_000)
})

/** The owner, signed in to a profile of their own, acting in the first enterprise. */
async function ownerEnv(): Promise<Record<string, string>> {
  const env = await personEnv()
  await json(
    ['auth', 'login', '--email', email, '--password-stdin', '--enterprise', first.slug],
    env,
    `${password}\n`,
  )
  return env
}

describe('tokens that change, rotate, expire and end with their maker (issue 45)', () => {
  it('makes a token that expires, lists its expiry and last use, changes it and rotates it', async () => {
    const owner = await ownerEnv()
    const made = await osctl(
      [
        '--json',
        'tokens',
        'create',
        '--name',
        'deploy',
        '--scopes',
        'enterprise:read,tasks:read',
      ].concat(['--expires-in-days', '30']),
      owner,
    )
    expect(made.exitCode, made.stderr).toBe(0)
    const created = ApiTokenCreated.parse(JSON.parse(made.stdout))
    expect(made.stderr).toContain(`it expires ${created.expiresAt}`)
    const days = (Date.parse(created.expiresAt!) - Date.now()) / 86_400_000
    expect(days).toBeGreaterThan(29.9)
    const asToken = (token: string) => ({ ...owner, OSCTL_TOKEN: token })
    expect((await osctl(['tasks', 'list'], asToken(created.token))).exitCode).toBe(0)
    const badDays = await osctl(
      ['tokens', 'create', '--name', 'x', '--scopes', 'tasks:read', '--expires-in-days', 'soon'],
      owner,
    )
    expect(badDays.exitCode).toBe(2)

    // Its last use is listed a moment after it (written off the request's path).
    await eventually(
      async () =>
        z
          .array(ApiToken)
          .parse(await json(['tokens', 'list'], owner))
          .find((t) => t.id === created.id)?.lastUsedAt != null,
      5000,
      'lastUsedAt',
    )
    const table = await osctl(['tokens', 'list'], owner)
    expect(table.stdout).toMatch(/LAST USED\s+EXPIRES/)
    const row = table.stdout.split('\n').find((line) => line.startsWith(created.id))!
    expect(row).toContain(created.expiresAt)
    expect(row).not.toMatch(/\bnever\b/)

    // Changed: fewer scopes, no expiry; the next call hears it.
    const changed = ApiToken.parse(
      await json(
        ['tokens', 'update', 'deploy', '--scopes', 'enterprise:read', '--expires', 'never'],
        owner,
      ),
    )
    expect(changed).toMatchObject({ id: created.id, scopes: ['enterprise:read'], expiresAt: null })
    const narrowed = await osctl(['tasks', 'list'], asToken(created.token))
    expect(narrowed.exitCode).toBe(4) // 403: credentials (issue 51)
    expect(narrowed.stderr).toContain('api_token_scope')
    const human = await osctl(['tokens', 'update', 'deploy', '--name', 'deployer'], owner)
    expect(human.exitCode, human.stderr).toBe(0)
    expect(human.stdout).toMatch(/name\s+deployer/)
    expect(human.stdout).toMatch(/expires\s+never/)
    expect((await osctl(['tokens', 'update', 'deployer'], owner)).exitCode).toBe(2)
    expect(
      (await osctl(['tokens', 'update', 'deployer', '--expires', 'later'], owner)).exitCode,
    ).toBe(2)

    // Rotated with a grace: the new secret on stdout, the old one still works for now.
    const rolled = await osctl(['tokens', 'rotate', 'deployer', '--grace', '1h'], owner)
    expect(rolled.exitCode, rolled.stderr).toBe(0)
    const second = rolled.stdout.trim()
    expect(rolled.stdout).toMatch(/^osd_[0-9A-Za-z]{49}\n$/)
    expect(rolled.stderr).toContain('the old one works until')
    for (const token of [created.token, second])
      expect((await osctl(['enterprise', 'show'], asToken(token))).exitCode).toBe(0)
    // Without a grace it asks first; --yes rotates, and every older secret stops at once.
    expect((await osctl(['tokens', 'rotate', 'deployer'], owner)).exitCode).toBe(2)
    expect((await osctl(['tokens', 'rotate', 'deployer', '--grace', '8d'], owner)).exitCode).toBe(2)
    const third = ApiTokenCreated.parse(
      await json(['tokens', 'rotate', 'deployer', '--yes'], owner),
    ).token
    for (const token of [created.token, second]) {
      const refused = await osctl(['enterprise', 'show'], asToken(token))
      expect(refused.exitCode).toBe(4)
    }
    expect((await osctl(['enterprise', 'show'], asToken(third))).exitCode).toBe(0)
  }, 90_000)

  it('a removed member’s tokens end with them, and osctl says how many', async () => {
    const owner = await ownerEnv()
    const someone = `leaver-${randomBytes(4).toString('hex')}@example.com`
    const inviteToken = (await osctl(['users', 'invite', someone], owner)).stdout.trim()
    const member = await personEnv()
    const accepted = await osctl(
      ['auth', 'accept-invite', inviteToken, '--password-stdin'],
      member,
      'the password of the leaver\n',
    )
    expect(accepted.exitCode, accepted.stderr).toBe(0)
    const theirs = await osctl(
      ['tokens', 'create', '--name', 'theirs', '--scopes', 'enterprise:read,enterprise:write'],
      member,
    )
    const token = theirs.stdout.trim()
    const asTheirs = { ...member, OSCTL_TOKEN: token }
    // The example: the member's token rotates the webhook secret...
    expect((await osctl(['webhook-secret', 'rotate', '--yes'], asTheirs)).exitCode).toBe(0)
    const removed = await osctl(['users', 'remove', someone, '--yes'], owner)
    expect(removed.exitCode, removed.stderr).toBe(0)
    expect(removed.stdout).toContain(`removed ${someone}`)
    expect(removed.stdout).toContain('revoked the API token they made in it')
    // ... and after their removal it can no more.
    const after = await osctl(['webhook-secret', 'rotate', '--yes'], asTheirs)
    expect(after.exitCode).toBe(4)
    expect(after.stderr).toContain('401')
    const listed = z
      .array(ApiToken)
      .parse(await json(['tokens', 'list', '--include-revoked'], owner))
    expect(listed.find((t) => t.name === 'theirs')?.revokedReason).toBe('creator_removed')
  }, 90_000)

  it('signs in with a token from stdin, warns of --token, and of a token about to expire once a day', async () => {
    const owner = await ownerEnv()
    const expiring = ApiTokenCreated.parse(
      await json(
        [
          'tokens',
          'create',
          '--name',
          'brief',
          '--scopes',
          'enterprise:read',
          '--expires-in-days',
          '3',
        ],
        owner,
      ),
    )
    const env: Record<string, string> = { ...(await personEnv()), OSCTL_URL: '' }
    const url = cli.daemon.url
    const login = await osctl(
      ['auth', 'login', '--url', url, '--with-token'],
      env,
      `${expiring.token}\n`,
    )
    expect(login.exitCode, login.stderr).toBe(0)
    expect(login.stdout).toContain(`logged in to ${url} as profile "default"`)
    expect(login.stderr).not.toContain('history')
    const file = join(env.OSCTL_CONFIG_DIR!, 'config.json')
    expect(JSON.parse(await readFile(file, 'utf8')).profiles.default).toEqual({
      url,
      token: expiring.token,
      kind: 'token',
    })

    // Within 7 days of its end: one warning on stderr, then none for a day.
    const first = await osctl(['enterprise', 'show'], env)
    expect(first.exitCode, first.stderr).toBe(0)
    expect(first.stderr).toContain(
      `warning: the API token of profile "default" expires ${expiring.expiresAt}`,
    )
    const json1 = await osctl(['--json', 'enterprise', 'show'], env)
    expect(json1.stderr).toBe('')
    expect(() => JSON.parse(json1.stdout)).not.toThrow()
    const config = JSON.parse(await readFile(file, 'utf8'))
    const warned = config.lastWarned['token-expiry:default']
    expect(Date.parse(warned)).toBeGreaterThan(Date.now() - 60_000)
    config.lastWarned['token-expiry:default'] = new Date(Date.now() - 25 * 3600_000).toISOString()
    await writeFile(file, JSON.stringify(config), { mode: 0o600 })
    expect((await osctl(['enterprise', 'show'], env)).stderr).toContain('warning: the API token')
    // A token far from its end says nothing.
    const lasting = await osctl(['enterprise', 'show'], {
      ...env,
      OSCTL_TOKEN: cli.enterprise.token,
    })
    expect(lasting.stderr).toBe('')

    // --token still works, and says where the token is left.
    const flagged = await osctl(
      ['auth', 'login', '--url', url, '--token', expiring.token, '--profile', 'flagged'],
      env,
    )
    expect(flagged.exitCode, flagged.stderr).toBe(0)
    expect(flagged.stderr).toContain("stays in the shell's history")
    expect(flagged.stderr).toContain('--with-token')
    const both = await osctl(
      ['auth', 'login', '--url', url, '--token', 'x', '--with-token'],
      env,
      'y',
    )
    expect(both.exitCode).toBe(2)
    const empty = await osctl(['auth', 'login', '--url', url, '--with-token'], env, '')
    expect(empty.exitCode).toBe(2)
    expect(empty.stderr).toContain('no token on stdin')
    const typo = expiring.token.slice(0, -1) + (expiring.token.endsWith('a') ? 'b' : 'a')
    const mistyped = await osctl(['auth', 'login', '--url', url, '--with-token'], env, typo)
    expect(mistyped.exitCode).toBe(4)
    expect(mistyped.stderr).toContain('mistyped')
  }, 90_000)
})

describe('a token profile on the portal-only verbs', () => {
  it('prints the API refusal and a hint that a person must sign in (exit 4: credentials)', async () => {
    for (const [args, code] of [
      [['tokens', 'list'], 'api_token_cannot_manage_tokens'],
      [
        ['tokens', 'create', '--name', 'x', '--scopes', 'tasks:read'],
        'api_token_cannot_manage_tokens',
      ],
      [['connections', 'list'], 'api_token_cannot_manage_connections'],
      [['users', 'list'], 'api_token_scope'],
      [['enterprises', 'list'], 'api_token_scope'],
    ] as const) {
      const res = await osctl([...args], cli.env)
      expect(res.exitCode, `${args.join(' ')}: ${res.stderr}`).toBe(4)
      expect(res.stderr).toMatch(new RegExp(`^error: ${code}: .* \\(403\\)$`, 'm'))
      expect(res.stderr).toContain(
        'hint: API tokens cannot do this: a person must sign in with `osctl auth login --email EMAIL`',
      )
    }
  }, 60_000)
})
