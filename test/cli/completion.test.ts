import { mkdtemp } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiClient } from '../../cli/client.js'
import { completionScript } from '../../cli/commands/completion.js'
import { completionValues, runComplete } from '../../cli/complete.js'
import { buildProgram } from '../../cli/program.js'
import { FakeApi } from '../helpers/cli.js'

// Completion that knows the daemon (issue 51 item 8): task slugs, member names and waiting gates, read
// with a short timeout and silent when they cannot be read; options offered after an argument too.
// The values in process (cli/complete.ts); the script in bash, with `osctl __complete` standing in.

const gateId = '9a2e4c1d-0000-4000-8000-000000000001'
const daemon = () =>
  new FakeApi((req) => {
    if (req.path === '/tasks')
      return {
        body: {
          data: [{ slug: 'nightly-report' }, { slug: 'weekly-digest' }],
          page: 1,
          limit: 200,
          total: 2,
        },
      }
    if (req.path === '/members')
      return { body: [{ name: 'Grace Hopper' }, { name: 'Ada' }, { name: 'Evil\nName' }] }
    if (req.path === '/gates')
      return { body: req.query.status === 'waiting' ? [{ id: gateId }] : [] }
    return { status: 404, body: { error: 'not_found', message: 'no' } }
  })

describe('the values completion offers', () => {
  it('are the task slugs, member names and waiting gates the daemon has', async () => {
    const api = daemon()
    expect(await completionValues('task', () => api)).toEqual(['nightly-report', 'weekly-digest'])
    // A name with a line break would be two words to the shell: left out.
    expect(await completionValues('member', () => api)).toEqual(['Grace Hopper', 'Ada'])
    expect(await completionValues('gate', () => api)).toEqual([gateId])
    expect(api.sent.find((s) => s.path === '/gates')!.query).toEqual({ status: 'waiting' })
    expect(await completionValues('run', () => api)).toEqual([])
    let printed = ''
    await runComplete(['task'], { write: (t: string) => (printed += t) }, () => api)
    expect(printed).toBe('nightly-report\nweekly-digest\n')
  })

  it('are none, within about a second, when the daemon does not answer', async () => {
    const server = createServer(() => {}) // takes the request, never answers
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
      const started = Date.now()
      expect(await completionValues('task', () => new ApiClient(url, 'a-token'))).toEqual([])
      const took = Date.now() - started
      expect(took).toBeGreaterThanOrEqual(900)
      expect(took).toBeLessThan(3000)
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  it('are none, printed nothing, with no profile, a profile that does not exist, osd down or refusing', async () => {
    const saved = { ...process.env }
    process.env.OSCTL_CONFIG_DIR = await mkdtemp(join(tmpdir(), 'osctl-complete-'))
    try {
      let printed = ''
      const write = { write: (t: string) => (printed += t) }
      await runComplete(['task'], write) // no token anywhere
      process.env.OSCTL_PROFILE = 'nope'
      await runComplete(['member'], write) // a profile that is not there
      delete process.env.OSCTL_PROFILE
      await runComplete(['gate'], write, () => new ApiClient('http://127.0.0.1:9/v1', 't')) // down
      const refusing = new FakeApi(() => ({
        status: 401,
        body: { error: 'unauthorized', message: 'no' },
      }))
      await runComplete(['task'], write, () => refusing)
      expect(printed).toBe('')
    } finally {
      process.env = saved
    }
  })
})

describe('the bash completion script', () => {
  let script: string
  beforeAll(async () => {
    script = completionScript(
      await buildProgram(() => {
        throw new Error('no command runs')
      }),
      'bash',
    )
  })
  afterAll(() => undefined)

  /** What Tab offers after `line` (its last word the one being completed). */
  async function complete(line: string): Promise<string[]> {
    const words = line.split(' ')
    const stub = [
      'osctl() {',
      '  [[ "$1" == __complete ]] || return 1',
      '  case "$2" in',
      "    task) printf 'nightly-report\\nweekly-digest\\n' ;;",
      "    member) printf 'Grace Hopper\\nAda\\n' ;;",
      `    gate) printf '${gateId}\\n' ;;`,
      '  esac',
      '}',
    ].join('\n')
    const probe = `${script}\n${stub}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _osctl; printf '%s\\n' "\${COMPREPLY[@]}"`
    const res = await execa('bash', ['-c', probe], { reject: false })
    expect(res.stderr).toBe('')
    return res.stdout.split('\n').filter(Boolean)
  }

  it('offers task slugs, member names (quoted) and waiting gates where a command takes them', async () => {
    expect(await complete('osctl runs start ')).toEqual(['nightly-report', 'weekly-digest'])
    expect(await complete('osctl runs start we')).toEqual(['weekly-digest'])
    expect(await complete('osctl tasks get nig')).toEqual(['nightly-report'])
    expect(await complete('osctl chat ')).toEqual(['Grace\\ Hopper', 'Ada'])
    expect(await complete('osctl members get G')).toEqual(['Grace\\ Hopper'])
    expect(await complete('osctl gates approve ')).toEqual([gateId])
    expect(await complete('osctl wait gate ')).toEqual([gateId])
    // An option's value: --task takes a task.
    expect(await complete('osctl runs list --task ')).toEqual(['nightly-report', 'weekly-digest'])
    expect(await complete('osctl --profile p runs start -d {} ')).toEqual([
      'nightly-report',
      'weekly-digest',
    ])
  })

  it('offers the options of a command after its argument', async () => {
    const after = await complete('osctl runs start nightly-report ')
    expect(after).toEqual(expect.arrayContaining(['--wait', '--input', '--timeout', '--json']))
    expect(after).not.toContain('nightly-report')
    expect(await complete('osctl runs start nightly-report --wa')).toEqual(['--wait'])
    expect(await complete('osctl runs get 3f1c --')).toEqual(expect.arrayContaining(['--json']))
    // Subcommands as before.
    expect(await complete('osctl enterprise con')).toEqual(['concurrency'])
    expect(await complete('osctl runs sta')).toEqual(['start'])
  })
})
