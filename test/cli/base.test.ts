import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { beforeAll, describe, expect, it } from 'vitest'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { filesLoaded, recordingLoads } from '../helpers/loaded-modules.js'
import { hasScript, osctl as osctlProcess, osctlBin } from '../helpers/processes.js'

// osctl's base verbs against a real daemon, in process (issue 28); the built osctl as a process where
// only a process shows it: that it starts and answers, its exit code, its stdin, a question on a
// terminal.

let daemon: CliDaemon['daemon']
let token: string
let env: Record<string, string>

beforeAll(async () => {
  const cli = await startCliDaemon('Cli Co')
  daemon = cli.daemon
  token = cli.enterprise.token
  env = cli.env
})

describe('osctl health and api', () => {
  it('prints health, and JSON with --json: the built osctl, a process of its own', async () => {
    const human = await osctlProcess(['health'], env)
    expect(human.exitCode).toBe(0)
    expect(human.stdout).toMatch(/^ok\s+osd \d+\.\d+\.\d+ at http/)
    const json = await osctl(['health', '--json'], env)
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'ok' })
  })

  it('exits 3 naming the address when no daemon answers: the process exit code', async () => {
    const res = await osctlProcess(['health'], { ...env, OSCTL_URL: 'http://127.0.0.1:1/v1' })
    expect(res.exitCode).toBe(3)
    expect(res.stderr).toContain('cannot reach osd at http://127.0.0.1:1/v1')
    const inProcess = await osctl(['health'], { ...env, OSCTL_URL: 'http://127.0.0.1:1/v1' })
    const said = `${res.stderr}\n`
    expect(inProcess).toEqual({ exitCode: 3, stdout: '', stderr: said, output: said })
  })

  it('reaches any route with osctl api, with or without the /v1 prefix', async () => {
    const set = await osctl(
      ['api', 'PATCH', '/enterprise/concurrency', '-d', '{"concurrentRunLimit": 6}'],
      env,
    )
    expect(set.exitCode).toBe(0)
    expect(JSON.parse(set.stdout)).toEqual({ concurrentRunLimit: 6 })
    const got = await osctl(['api', 'GET', '/v1/enterprise/concurrency'], env)
    expect(JSON.parse(got.stdout)).toEqual({ concurrentRunLimit: 6 })
  })

  it('sends a body from the process stdin, and from -F fields', async () => {
    const stdin = await osctlProcess(
      ['api', 'PATCH', '/enterprise/metrics', '-d', '-'],
      env,
      '{"metrics":["a"]}',
    )
    expect(JSON.parse(stdin.stdout)).toEqual({ metrics: ['a'] })
    const fields = await osctl(
      ['api', 'PATCH', '/enterprise/concurrency', '-F', 'concurrentRunLimit=9'],
      env,
    )
    expect(JSON.parse(fields.stdout)).toEqual({ concurrentRunLimit: 9 })
  })

  it('exits 1 on a refusal, printing error: code: message (status) on stderr', async () => {
    const res = await osctl(
      ['api', 'PATCH', '/enterprise/concurrency', '-d', '{"concurrentRunLimit": 0}'],
      env,
    )
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toMatch(/^error: invalid_request: concurrentRunLimit: .* \(400\)$/m)
    expect(JSON.parse(res.stdout).error).toBe('invalid_request')
  })

  it('keeps stdout pure JSON with --json, even on failure', async () => {
    const res = await osctl(['--json', 'enterprise', 'chat-model-tier', 'set', 'huge'], env)
    expect(res.exitCode).toBe(1)
    expect(JSON.parse(res.stdout).error).toBe('invalid_request')
    expect(res.stderr).toContain('error: invalid_request')
  })

  it('refuses a body that is not JSON as a usage error', async () => {
    const res = await osctl(
      ['api', 'POST', '/enterprise/webhook-secret/rotate', '-d', '{nope'],
      env,
    )
    expect(res.exitCode).toBe(2)
  })
})

describe('osctl as a process', () => {
  it("draws its screens with React's production build, unless NODE_ENV says otherwise", async () => {
    // What osctl's entry leaves for the screens it loads later: which build `react` resolves to.
    const script = [
      "process.argv.push('--version')",
      `await import(${JSON.stringify(join(osctlBin, '..', '..', 'dist', 'cli', 'main.js'))})`,
      "const { createRequire } = await import('node:module')",
      `const require = createRequire(${JSON.stringify(osctlBin)})`,
      "require('react')",
      "console.error(Object.keys(require.cache).filter((f) => /react\\.(production|development)/.test(f)).map((f) => f.split('/').pop()).join(' '))",
    ].join('\n')
    const build = async (nodeEnv: string | undefined) =>
      (
        await execa('node', ['--input-type=module', '-e', script], {
          env: { NODE_ENV: nodeEnv },
          extendEnv: false,
        })
      ).stderr
    expect(await build(undefined)).toBe('react.production.js')
    expect(await build('development')).toBe('react.development.js')
  })
})

describe('osctl in a pipeline (OSCTL_URL and OSCTL_TOKEN)', () => {
  it("never loads the profile store (conf: about 200 ms a command) unless the command reads profiles, nor undici's index", async () => {
    // The files each command loaded, as it exits (cli/http.ts loads only what a request needs).
    const dir = await mkdtemp(join(tmpdir(), 'osctl-loads-'))
    let runs = 0
    const run = async (args: string[], extra: Record<string, string | undefined> = {}) => {
      const record = join(dir, String(++runs))
      const result = await execa('node', [...recordingLoads(record), osctlBin, ...args], {
        env: { ...env, NO_COLOR: '1', ...extra },
        reject: false,
      })
      const files = await filesLoaded(record)
      return {
        ...result,
        conf: files.some((f) => f.includes('/node_modules/conf/')),
        undiciIndex: files.some((f) => f.endsWith('/node_modules/undici/index.js')),
      }
    }
    const listed = await run(['tasks', 'list', '--json'])
    expect([listed.exitCode, listed.stderr]).toEqual([0, ''])
    expect(JSON.parse(listed.stdout)).toMatchObject({ data: expect.any(Array) })
    expect([listed.conf, listed.undiciIndex]).toEqual([false, false])
    // What reads a profile still loads it: the record works.
    const profiles = await run(['profile', 'list'])
    expect([profiles.exitCode, profiles.conf]).toEqual([0, true])
    const named = await run(['tasks', 'list'], { OSCTL_PROFILE: 'ci' })
    expect(named.conf).toBe(true)
  })
})

describe('osctl credentials and profiles', () => {
  it('exits 4 with a clear message when no token is configured', async () => {
    const res = await osctl(['enterprise', 'show'], { ...env, OSCTL_TOKEN: '' })
    expect(res.exitCode).toBe(4)
    expect(res.stderr).toContain('osctl auth login')
  })

  it('exits 4 when the daemon answers 401', async () => {
    const res = await osctl(['enterprise', 'show'], { ...env, OSCTL_TOKEN: 'osd_wrong' })
    expect(res.exitCode).toBe(4)
    expect(res.stderr).toContain('401')
  })

  it('logs in to a profile file readable by its owner only, and reports status', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-'))
    const own = { OSCTL_CONFIG_DIR: dir }
    const login = await osctl(['auth', 'login', '--url', daemon.url, '--with-token'], own, token)
    expect(login.exitCode, login.stderr).toBe(0)
    const file = join(dir, 'config.json')
    expect((await stat(file)).mode & 0o777).toBe(0o600)

    const status = await osctl(['auth', 'status', '--json'], own)
    const view = JSON.parse(status.stdout)
    expect(view).toMatchObject({
      url: daemon.url,
      profile: 'default',
      tokenSource: 'profile',
      tokenLastChars: token.slice(-4),
    })
    expect(view.scopes).toHaveLength(40)
    expect(status.stdout).not.toContain(token)
  })

  it('says after the first sign-in on a machine, once, what to do next; never with --json', async () => {
    const own = { OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')) }
    const quiet = await osctl(
      ['auth', 'login', '--url', daemon.url, '--with-token', '--json'],
      own,
      `${token}\n`,
    )
    expect(quiet.exitCode, quiet.stderr).toBe(0)
    expect(quiet.stderr).toBe('')
    const first = await osctl(['auth', 'login', '--url', daemon.url, '--with-token'], own, token)
    expect(first.exitCode, first.stderr).toBe(0)
    expect(first.stdout).toBe(
      `logged in to ${daemon.url} as profile "default" (enterprise cli-co)\n`,
    )
    expect(first.stderr).toBe(
      'next: `osctl catalog roles list` shows the roles you can clone onto a team, each with its ' +
        'tasks; `osctl chat` talks with a member\n',
    )
    const again = await osctl(['auth', 'login', '--url', daemon.url, '--with-token'], own, token)
    expect(again.stdout).toBe(first.stdout)
    expect(again.stderr).toBe('')
  })

  // Saving a token to the profile every verb would use, refusing one the daemon refuses, and the
  // precedence of flag, environment and profile are osctl's own: test/cli/profiles.test.ts.

  it('in process, each run has its own environment, overlapping runs too, and leaves none behind', async () => {
    // A profile of its own in a config dir, with no token in the environment: the profile's token.
    const dir = await mkdtemp(join(tmpdir(), 'osctl-'))
    const profile = { url: daemon.url, token }
    await writeFile(
      join(dir, 'config.json'),
      JSON.stringify({ current: 'own', profiles: { own: profile } }),
    )
    const fromProfile = { OSCTL_CONFIG_DIR: dir, OSCTL_URL: '', OSCTL_TOKEN: '' }
    const wrong = { ...env, OSCTL_TOKEN: 'osd_wrong' }
    const before = { ...process.env }
    // Interleaved: each run reads its environment across its requests to the daemon.
    const runs = await Promise.all(
      [env, wrong, fromProfile, env, wrong, fromProfile].map((e) =>
        osctl(['--json', 'auth', 'status'], e),
      ),
    )
    expect(runs.map((r) => r.exitCode)).toEqual([0, 4, 0, 0, 4, 0])
    expect(runs.map((r) => r.exitCode === 0 && JSON.parse(r.stdout).tokenSource)).toEqual([
      'env',
      false,
      'profile',
      'env',
      false,
      'profile',
    ])
    expect({ ...process.env }).toEqual(before)
    expect(process.env.OSCTL_TOKEN).toBe('') // vitest.config.ts
  })
})

describe('osctl enterprise', () => {
  it('sets and reads settings', async () => {
    expect((await osctl(['enterprise', 'concurrency', 'set', '3'], env)).exitCode).toBe(0)
    const got = await osctl(['--json', 'enterprise', 'concurrency'], env)
    expect(JSON.parse(got.stdout)).toEqual({ concurrentRunLimit: 3 })
    const metrics = await osctl(['--json', 'enterprise', 'metrics', 'set', 'revenue', 'nps'], env)
    expect(JSON.parse(metrics.stdout)).toEqual({ metrics: ['revenue', 'nps'] })
    const depth = await osctl(['enterprise', 'chat-memory-depth', 'get'], env)
    expect(depth.stdout).toMatch(/chatMemoryDepth\s+medium/)
  })

  it('asks before rotating the webhook secret, and needs --yes without a terminal', async () => {
    const refused = await osctl(['webhook-secret', 'rotate'], env)
    expect(refused.exitCode).toBe(2)
    expect(refused.stderr).toContain('--yes')
    const rotated = await osctl(['webhook-secret', 'rotate', '--yes'], env)
    expect(rotated.exitCode).toBe(0)
    expect(rotated.stdout.trim()).toMatch(/^whsec_/)
    const shown = await osctl(['--json', 'enterprise', 'webhook-secret'], env)
    expect(JSON.parse(shown.stdout)).toMatchObject({
      lastChars: rotated.stdout.trim().slice(-4),
      rotated: true,
    })
  })

  it.runIf(hasScript)(
    'asks on a terminal; with its errors sent elsewhere it cannot ask, and says so',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'osctl-ask-'))
      const onTerminal = (line: string, typed = '') =>
        execa('script', ['-qfec', line, '/dev/null'], { env, input: typed, reject: false })
      const errors = join(dir, 'stderr')
      const unasked = await onTerminal(
        `node ${osctlBin} webhook-secret rotate 2>${errors}; echo "exit=$?"`,
      )
      expect(unasked.stdout).toContain('exit=2')
      expect(await readFile(errors, 'utf8')).toContain('refusing without --yes')
      const declined = await onTerminal(`node ${osctlBin} webhook-secret rotate`, 'n\n')
      expect(declined.stdout).toContain('[y/N]')
      expect(declined.stdout).toContain('cancelled')
      expect(declined.exitCode).toBe(2)
      const accepted = await onTerminal(`node ${osctlBin} webhook-secret rotate`, 'y\n')
      expect(accepted.stdout).toMatch(/whsec_/)
      expect(accepted.exitCode).toBe(0)
    },
  )

  it('sets the picture from an image file and refuses other files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'osctl-img-'))
    const png = join(dir, 'logo.png')
    await writeFile(
      png,
      Buffer.from(
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
        'base64',
      ),
    )
    expect((await osctl(['enterprise', 'avatar', 'set', png], env)).exitCode).toBe(0)
    const text = join(dir, 'notes.txt')
    await writeFile(text, 'hello')
    expect((await osctl(['enterprise', 'avatar', 'set', text], env)).exitCode).toBe(2)
    expect((await osctl(['enterprise', 'avatar', 'clear', '--yes'], env)).exitCode).toBe(0)
  })
})

// Usage errors (unknown commands, missing arguments) are osctl's own: test/cli/usage.test.ts, in
// process.
describe('osctl usage', () => {
  it.each(['bash', 'zsh', 'fish'])(
    'prints a %s completion script naming the commands',
    async (shell) => {
      const res = await osctl(['completion', shell], env)
      expect(res.exitCode).toBe(0)
      expect(res.stdout).toContain('enterprise')
      expect(res.stdout).toContain('webhook-secret')
    },
  )

  it('prints a bash completion script that bash accepts and that completes', async () => {
    const script = (await osctl(['completion', 'bash'], env)).stdout
    const probe = `${script}\nCOMP_WORDS=(osctl enterprise con); COMP_CWORD=2; _osctl; echo "\${COMPREPLY[@]}"`
    const res = await execa('bash', ['-c', probe], { reject: false })
    expect(res.exitCode).toBe(0)
    expect(res.stdout.trim()).toBe('concurrency')
  })
})
