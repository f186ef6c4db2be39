import { mkdtemp } from 'node:fs/promises'
import { createServer } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { exitCodes } from '../../cli/errors.js'
import { createToken } from '../../server/domain/people/index.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { testTls } from '../helpers/tls.js'

// Errors that point the right way, and exit codes a pipeline tells apart (issue 51 items 6 and 7), in
// process against a real daemon: osd out of reach or the URL wrong (3), credentials (4), usage (2), a
// name that matches nothing (1, with "did you mean"); with --json each is one JSON document on stdout.

let cli: CliDaemon
let env: Record<string, string>
let origin: string

beforeAll(async () => {
  cli = await startCliDaemon('Errors Co')
  env = cli.env
  origin = new URL(cli.daemon.url).origin
})

/** stderr holds one line, and nothing of a stack. */
function oneLine(stderr: string): string {
  expect(stderr.split('\n').filter(Boolean)).toHaveLength(1)
  expect(stderr).not.toMatch(/^\s+at /m)
  return stderr.trim()
}

describe('exit 3: osd out of reach, or the URL is wrong', () => {
  it('exits 3 when nothing answers, with the error as JSON on stdout under --json', async () => {
    const res = await osctl(['--json', 'tasks', 'list'], {
      ...env,
      OSCTL_URL: 'http://127.0.0.1:1/v1',
    })
    expect(res.exitCode).toBe(exitCodes.unreachable)
    expect(oneLine(res.stderr)).toBe(
      'error: cannot reach osd at http://127.0.0.1:1/v1: ECONNREFUSED',
    )
    expect(JSON.parse(res.stdout)).toEqual({
      error: 'unreachable',
      message: 'cannot reach osd at http://127.0.0.1:1/v1: ECONNREFUSED',
      exitCode: 3,
    })
  })

  it("says what to do when osd's TLS is not what osctl expects: a CA it lacks, or plain http", async () => {
    const { key, cert } = await testTls()
    const proxy = createHttpsServer({ key, cert }, (_req, res) => res.end('{}'))
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => void proxy.close())
    const { port } = proxy.address() as AddressInfo
    const said = async (url: string) => {
      const res = await osctl(['tasks', 'list'], { ...env, OSCTL_URL: url })
      expect(res.exitCode).toBe(exitCodes.unreachable)
      return oneLine(res.stderr)
    }
    expect(await said(`https://localhost:${port}/v1`)).toBe(
      `error: cannot reach osd at https://localhost:${port}/v1: UNABLE_TO_VERIFY_LEAF_SIGNATURE: ` +
        "osd's certificate is not signed by a CA this machine trusts: give osctl that CA with NODE_EXTRA_CA_CERTS=/path/to/ca.pem",
    )
    expect(await said(`${origin.replace('http:', 'https:')}/v1`)).toMatch(
      /: (EPROTO|ERR_SSL_WRONG_VERSION_NUMBER): is it https there\? osd itself serves http; https comes from a proxy in front of it$/,
    )
  })

  it('adds /v1 to a URL of a host and port alone; refuses another path, naming the URL meant', async () => {
    const bare = await osctl(['tasks', 'list'], { ...env, OSCTL_URL: origin })
    expect(bare.exitCode, bare.stderr).toBe(0)
    const slash = await osctl(['tasks', 'list'], { ...env, OSCTL_URL: `${origin}/` })
    expect(slash.exitCode, slash.stderr).toBe(0)

    const other = await osctl(['tasks', 'list'], { ...env, OSCTL_URL: `${origin}/api` })
    expect(other.exitCode).toBe(exitCodes.unreachable)
    expect(oneLine(other.stderr)).toBe(
      `error: OSCTL_URL "${origin}/api" does not end in /v1, under which osd's API lives: did you mean ${origin}/api/v1?`,
    )
    const route = await osctl(['--url', `${origin}/v1/tasks`, 'tasks', 'list'], env)
    expect(route.stderr).toContain(`did you mean ${origin}/v1?`)
  })

  it('refuses text that is not an http URL in one line, no stack', async () => {
    for (const url of ['not a url', 'localhost:8080/v1', 'ftp://osd.example/v1']) {
      const res = await osctl(['--json', 'tasks', 'list'], { ...env, OSCTL_URL: url })
      expect(res.exitCode, url).toBe(exitCodes.unreachable)
      expect(oneLine(res.stderr)).toMatch(
        new RegExp(
          `^error: OSCTL_URL "${url}" is not (a|an http\\(s\\)) URL: give osd's as http://HOST:PORT/v1$`,
        ),
      )
      expect(JSON.parse(res.stdout)).toMatchObject({ error: 'unreachable', exitCode: 3 })
    }
  })

  it("exits 3 when the URL answers an error that is not osd's (a proxy's 502 page)", async () => {
    const proxy = createServer((_req, res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>502 Bad Gateway</h1>'),
    )
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => proxy.close(() => resolve())))
    const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/v1`
    const res = await osctl(['tasks', 'list'], { ...env, OSCTL_URL: url })
    expect(res.exitCode).toBe(exitCodes.unreachable)
    expect(oneLine(res.stderr)).toBe(
      `error: http_502: ${url} answered 502 without osd's JSON: osd is not reached there (down behind a proxy, or the URL is another server's; osd's API ends in /v1) (502)`,
    )
  })
})

describe('exit 4: credentials', () => {
  it('exits 4 without a token, and for a token refused (401, said once) or refused this (403)', async () => {
    const none = await osctl(['--json', 'tasks', 'list'], {
      ...env,
      OSCTL_TOKEN: undefined,
    })
    expect(none.exitCode).toBe(exitCodes.auth)
    expect(JSON.parse(none.stdout)).toMatchObject({ error: 'credentials', exitCode: 4 })

    const wrong = await osctl(['tasks', 'list'], { ...env, OSCTL_TOKEN: 'osd_wrong' })
    expect(wrong.exitCode).toBe(exitCodes.auth)
    expect(oneLine(wrong.stderr)).toMatch(
      /^error: \w+: the daemon refused the token \(401\): check `osctl auth status`$/,
    )

    const { token } = await createToken(cli.db.sql, cli.enterprise.id, {
      name: 'narrow',
      scopes: ['runs:read'],
    })
    const narrow = await osctl(['--json', 'tasks', 'list'], { ...env, OSCTL_TOKEN: token })
    expect(narrow.exitCode).toBe(exitCodes.auth)
    expect(narrow.stderr).toMatch(/^error: api_token_scope: .* \(403\)$/m)
    expect(JSON.parse(narrow.stdout)).toMatchObject({ error: 'api_token_scope' })
  })
})

describe('exit 2: usage, and profiles', () => {
  it('prints a usage error as JSON on stdout under --json, wherever --json stands', async () => {
    const typo = await osctl(['--json', 'taks'], env)
    expect(typo.exitCode).toBe(exitCodes.usage)
    expect(JSON.parse(typo.stdout)).toEqual({
      error: 'usage',
      message:
        'unknown command "taks" (did you mean "tasks"?)\nrun "osctl --help" for the commands',
      exitCode: 2,
    })
    const missing = await osctl(['runs', 'get', '--json'], env)
    expect(missing.exitCode).toBe(exitCodes.usage)
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: 'usage', exitCode: 2 })
    const value = await osctl(['runs', 'wait', 'x', '--json'], env)
    expect(value.exitCode).toBe(exitCodes.usage)
    expect(JSON.parse(value.stdout)).toEqual({
      error: 'usage',
      message: 'a run is named by its id or its first 8 or more characters; got "x"',
      exitCode: 2,
    })
  })

  it('refuses a --profile or OSCTL_PROFILE that does not exist, naming it and the ones that do', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-'))
    const own = { ...env, OSCTL_CONFIG_DIR: dir, OSCTL_URL: undefined, OSCTL_TOKEN: undefined }
    const none = await osctl(['--profile', 'prod', 'tasks', 'list'], own)
    expect(none.exitCode).toBe(exitCodes.usage)
    expect(oneLine(none.stderr)).toBe(
      'error: no profile "prod" (--profile): there are none yet; make one with `osctl auth login --profile NAME`',
    )
    for (const name of ['prod', 'staging']) {
      const login = await osctl(
        [
          'auth',
          'login',
          '--url',
          cli.daemon.url,
          '--token',
          cli.enterprise.token,
          '--profile',
          name,
        ],
        own,
      )
      expect(login.exitCode, login.stderr).toBe(0)
    }
    const typo = await osctl(['--json', '--profile', 'prd', 'tasks', 'list'], own)
    expect(typo.exitCode).toBe(exitCodes.usage)
    expect(oneLine(typo.stderr)).toBe(
      'error: no profile "prd" (--profile) (did you mean "prod"?): the profiles are "prod", "staging"',
    )
    expect(JSON.parse(typo.stdout)).toMatchObject({ error: 'usage', exitCode: 2 })
    const fromEnv = await osctl(['tasks', 'list'], { ...own, OSCTL_PROFILE: 'qa' })
    expect(fromEnv.stderr).toContain('error: no profile "qa" (OSCTL_PROFILE): the profiles are')
    expect((await osctl(['--profile', 'prod', 'tasks', 'list'], own)).exitCode).toBe(0)
  })
})

describe('a name that matches nothing', () => {
  it('suggests the task or member meant, as a mistyped command does (exit 1, JSON with --json)', async () => {
    await cli.json(['tasks', 'create', '--name', 'Nightly report', '--kind', 'deterministic'])
    const task = await osctl(['--json', 'runs', 'start', 'nightly-reprot'], env)
    expect(task.exitCode).toBe(exitCodes.failed)
    expect(oneLine(task.stderr)).toBe(
      'error: no task "nightly-reprot" (did you mean "nightly-report"?)',
    )
    expect(JSON.parse(task.stdout)).toEqual({
      error: 'failed',
      message: 'no task "nightly-reprot" (did you mean "nightly-report"?)',
      exitCode: 1,
    })
    const far = await osctl(['runs', 'start', 'payroll'], env)
    expect(oneLine(far.stderr)).toBe('error: no task "payroll"')

    await cli.json(['members', 'create', '--name', 'Grace Hopper'])
    const member = await osctl(['members', 'get', 'Grace Hoper'], env)
    expect(member.exitCode).toBe(exitCodes.failed)
    expect(oneLine(member.stderr)).toBe(
      'error: no member "Grace Hoper" (did you mean "Grace Hopper"?)',
    )
  })
})
