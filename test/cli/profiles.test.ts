import { randomUUID } from 'node:crypto'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { login } from '../../cli/commands/auth.js'
import { listProfiles, removeProfile, useProfile } from '../../cli/commands/profile.js'
import { CliError, exitCodes } from '../../cli/errors.js'
import { loadProfileStore, ProfileStore, resolveTarget } from '../../cli/profiles.js'
import { FakeApi, fakeDeps } from '../helpers/cli.js'

// ProfileStore reads conf, loaded once (cli/profiles.ts).
beforeAll(() => loadProfileStore())

// Profiles of API tokens in process (DESIGN 9): `auth login --url --token` against a fake API, the
// precedence of flag, environment and profile, and `profile use|remove`, on a profile store of the
// test's own. test/cli/base.test.ts keeps one end-to-end login against a daemon.

const url = 'http://osd.test/v1'
const token = `osd_${randomUUID()}`
const enterprise = { id: randomUUID(), slug: 'acme', name: 'Acme' }

async function store(): Promise<ProfileStore> {
  return new ProfileStore(await mkdtemp(join(tmpdir(), 'osctl-profiles-')))
}

/** A daemon that knows one token: GET /enterprise answers it, 401 anything else. */
const daemon = () =>
  new FakeApi(() => ({
    body: { enterprise, token: { scopes: ['enterprise:read'] } },
  }))

const refusing = () =>
  new FakeApi(() => ({ status: 401, body: { message: 'Unauthorized', statusCode: 401 } }))

async function tokenLogin(profiles: ProfileStore, flags: Record<string, string>, api = daemon()) {
  const f = fakeDeps(api, { profiles })
  Object.assign(f.deps.globals, { url, token, ...flags })
  await login(f.deps, { verify: true })
  return f
}

afterEach(() => vi.unstubAllEnvs())

describe('osctl auth login --token', () => {
  it('checks the token with the daemon, then saves it to "default" and makes it current', async () => {
    const profiles = await store()
    const f = await tokenLogin(profiles, {})
    expect(f.connected).toEqual([{ url, token }])
    expect(profiles.get('default')).toEqual({ url, token, kind: 'token' })
    expect(profiles.current).toBe('default')
    expect(f.stdout()).toBe(`logged in to ${url} as profile "default" (enterprise acme)\n`)
  })

  it('saves to the profile every verb would use: --profile, else OSCTL_PROFILE', async () => {
    const profiles = await store()
    await tokenLogin(profiles, { profile: 'prod' })
    vi.stubEnv('OSCTL_PROFILE', 'from-env')
    await tokenLogin(profiles, {})
    expect(profiles.list().map((p) => [p.name, p.current])).toEqual([
      ['prod', false],
      ['from-env', true],
    ])
  })

  it('refuses a token the daemon refuses (exit 4), saving nothing', async () => {
    const profiles = await store()
    const err = await tokenLogin(profiles, {}, refusing()).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(err).toBeInstanceOf(CliError)
    expect((err as CliError).exitCode).toBe(exitCodes.auth)
    expect(profiles.list()).toEqual([])
  })
})

describe('which profile and credential a command uses', () => {
  it('follows flag > environment > the current profile > the default URL', async () => {
    const profiles = await store()
    profiles.save('good', { url, token: 'osd_good' })
    profiles.save('broken', { url: 'http://127.0.0.1:1/v1', token: 'x' }) // current now
    expect(resolveTarget({}, profiles, {})).toMatchObject({
      profile: 'broken',
      url: 'http://127.0.0.1:1/v1',
      token: 'x',
    })
    expect(resolveTarget({}, profiles, { OSCTL_PROFILE: 'good' })).toMatchObject({
      profile: 'good',
      token: 'osd_good',
    })
    expect(resolveTarget({ profile: 'broken' }, profiles, { OSCTL_PROFILE: 'good' })).toMatchObject(
      { profile: 'broken' },
    )
    expect(resolveTarget({}, profiles, { OSCTL_URL: 'http://env/v1' }).url).toBe('http://env/v1')
    expect(
      resolveTarget({ url: 'http://flag/v1' }, profiles, { OSCTL_URL: 'http://env/v1' }).url,
    ).toBe('http://flag/v1')
    expect(resolveTarget({}, profiles, { OSCTL_TOKEN: 'osd_env' })).toMatchObject({
      token: 'osd_env',
      tokenSource: 'env',
    })
    expect(
      resolveTarget({ token: 'osd_flag' }, profiles, { OSCTL_TOKEN: 'osd_env' }),
    ).toMatchObject({ token: 'osd_flag', tokenSource: 'flag' })
    expect(resolveTarget({}, await store(), {})).toMatchObject({
      profile: 'default',
      url: 'http://127.0.0.1:8080/v1',
      tokenSource: 'none',
    })
  })

  it('profile use switches, list shows it, remove deletes; an unknown name is a usage error', async () => {
    const profiles = await store()
    profiles.save('good', { url, token: 'osd_good1234' })
    profiles.save('broken', { url: 'http://127.0.0.1:1/v1', token: 'x' })
    const used = fakeDeps(daemon(), { profiles })
    await useProfile(used.deps, 'good')
    expect(used.stdout()).toBe('now using profile "good"\n')
    const listed = fakeDeps(daemon(), { profiles, json: true })
    await listProfiles(listed.deps)
    expect(JSON.parse(listed.stdout())).toEqual([
      { name: 'good', url, current: true, token: '…1234', kind: 'token', email: null },
      {
        name: 'broken',
        url: 'http://127.0.0.1:1/v1',
        current: false,
        token: '…x',
        kind: 'token',
        email: null,
      },
    ])
    await removeProfile(fakeDeps(daemon(), { profiles }).deps, 'broken')
    const unknown = await useProfile(fakeDeps(daemon(), { profiles }).deps, 'broken').then(
      () => undefined,
      (e: unknown) => e as CliError,
    )
    expect(unknown?.exitCode).toBe(exitCodes.usage)
    expect(profiles.list().map((p) => p.name)).toEqual(['good'])
  })
})
