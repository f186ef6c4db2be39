import { beforeAll, describe, expect, it } from 'vitest'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl tasks pause|resume and enterprise pause|resume (issue 50), in process against a real daemon
// (its engine included): a start of a paused task waits, `runs list` and `runs get` say why, and the
// resume lets it go.

let cli: CliDaemon
let slug = ''
beforeAll(async () => {
  cli = await startCliDaemon('Pause Co')
  const task = await cli.json([
    'tasks',
    'create',
    '--name',
    'Mailer',
    '--kind',
    'deterministic',
    '--role',
    'ceo',
  ])
  slug = task.slug
})

describe('osctl tasks pause|resume', () => {
  it('pauses with a reason, shows why a run waits, and resumes', async () => {
    const paused = await osctl(['tasks', 'pause', slug, '--reason', 'sends wrong mail'], cli.env)
    expect(paused.exitCode, paused.stderr).toBe(0)
    expect(paused.stdout).toMatch(
      /^task mailer paused: yes, since \S+ by token:\S+: sends wrong mail\n$/,
    )
    const task = await cli.json(['tasks', 'get', slug])
    expect(task.paused).toMatchObject({
      reason: 'sends wrong mail',
      by: expect.stringMatching(/^token:/),
    })
    expect((await osctl(['tasks', 'get', slug], cli.env)).stdout).toMatch(
      /paused\s+yes, since .* sends wrong mail/,
    )

    const run = await cli.json(['runs', 'start', slug])
    expect(run).toMatchObject({ status: 'pending', paused: { scope: 'task' } })
    const list = await osctl(['runs', 'list', '--task', slug], cli.env)
    expect(list.exitCode, list.stderr).toBe(0)
    expect(list.stdout).toMatch(/WAITS/)
    expect(list.stdout).toContain('task paused: sends wrong mail')
    expect((await osctl(['runs', 'get', run.id], cli.env)).stdout).toMatch(
      /waits\s+task paused: sends wrong mail/,
    )

    const resumed = await osctl(['tasks', 'resume', slug], cli.env)
    expect(resumed.exitCode, resumed.stderr).toBe(0)
    expect(resumed.stdout).toBe(`task ${slug} resumed\n`)
    const waited = await osctl(['runs', 'wait', run.id, '--timeout', '20'], cli.env)
    expect(waited.exitCode, waited.stderr).toBe(0)
    // Nothing waits any more: the column is gone.
    expect((await osctl(['runs', 'list', '--task', slug], cli.env)).stdout).not.toMatch(/WAITS/)
  })

  it('needs --reason to pause (usage, exit 2)', async () => {
    const res = await osctl(['tasks', 'pause', slug], cli.env)
    expect(res.exitCode).toBe(2)
    expect(res.stderr).toContain('--reason')
  })
})

describe('osctl enterprise pause|resume', () => {
  it('pauses everything with a reason and resumes; show says so', async () => {
    const paused = await cli.json(['enterprise', 'pause', '--reason', 'provider outage'])
    expect(paused.paused).toMatchObject({ reason: 'provider outage' })
    expect((await osctl(['enterprise', 'show'], cli.env)).stdout).toMatch(
      /paused\s+yes, since .* provider outage/,
    )
    const run = await cli.json(['runs', 'start', slug])
    expect(run.paused).toMatchObject({ scope: 'enterprise', reason: 'provider outage' })
    const resumed = await osctl(['enterprise', 'resume', '--reason', 'back'], cli.env)
    expect(resumed.exitCode, resumed.stderr).toBe(0)
    expect(resumed.stdout).toBe('enterprise resumed\n')
    expect((await osctl(['enterprise', 'show'], cli.env)).stdout).toMatch(/paused\s+no\n/)
    expect((await osctl(['runs', 'wait', run.id, '--timeout', '20'], cli.env)).exitCode).toBe(0)
  })
})

describe('following a run that waits for a resume', () => {
  it('says once why it waits and what lets it go, then waits as asked', async () => {
    await osctl(['tasks', 'pause', slug, '--reason', 'sends wrong mail'], cli.env)
    try {
      const started = await osctl(['runs', 'start', slug, '--wait', '--timeout', '2'], cli.env)
      expect(started.exitCode, started.stderr).toBe(8)
      const note = `the run waits: its task is paused (sends wrong mail); it goes on once resumed: \`osctl tasks resume ${slug}\`; still waiting`
      expect(started.stderr.split('\n').filter((line) => line === note)).toHaveLength(1)
      const run = JSON.parse(started.stdout)
      await osctl(['enterprise', 'pause', '--reason', 'provider outage'], cli.env)
      const waited = await osctl(['runs', 'wait', run.id, '--timeout', '1'], cli.env)
      expect(waited.exitCode).toBe(8)
      expect(waited.stderr).toContain(
        'the run waits: the enterprise is paused (provider outage); it goes on once resumed: `osctl enterprise resume`; still waiting',
      )
    } finally {
      await osctl(['enterprise', 'resume'], cli.env)
      await osctl(['tasks', 'resume', slug], cli.env)
    }
  })

  it('osctl wait run says it too, once, on stderr, and still answers the run on stdout', async () => {
    await osctl(['tasks', 'pause', slug, '--reason', 'sends wrong mail'], cli.env)
    try {
      const run = await cli.json(['runs', 'start', slug])
      const waited = await osctl(
        ['wait', 'run', run.id, '--for=succeeded', '--timeout', '2'],
        cli.env,
      )
      expect(waited.exitCode, waited.stderr).toBe(8)
      const note = `the run waits: its task is paused (sends wrong mail); it goes on once resumed: \`osctl tasks resume ${slug}\`; still waiting`
      expect(waited.stderr.split('\n').filter((line) => line === note)).toHaveLength(1)
      expect(waited.stdout).not.toContain('the run waits')
      expect(waited.stdout).toMatch(/^status\s+pending$/m)
      await osctl(['enterprise', 'pause', '--reason', 'provider outage'], cli.env)
      const again = await osctl(
        ['wait', 'run', run.id, '--for=succeeded', '--timeout', '1'],
        cli.env,
      )
      expect(again.exitCode).toBe(8)
      expect(again.stderr).toContain(
        'the run waits: the enterprise is paused (provider outage); it goes on once resumed: `osctl enterprise resume`; still waiting',
      )
    } finally {
      await osctl(['enterprise', 'resume'], cli.env)
      await osctl(['tasks', 'resume', slug], cli.env)
    }
  })
})
