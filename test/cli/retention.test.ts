import { beforeAll, describe, expect, it } from 'vitest'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl enterprise retention get|set (issue 46), in process against a real daemon.

let cli: CliDaemon
beforeAll(async () => {
  cli = await startCliDaemon('Retention Co')
})

describe('osctl enterprise retention', () => {
  it('reads the windows, for ever said as such', async () => {
    const res = await osctl(['enterprise', 'retention'], cli.env)
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stdout).toMatch(/finished runs\s+P90D\n/)
    expect(res.stdout).toMatch(/closed chats\s+P180D\n/)
    expect(res.stdout).toMatch(
      /webhook deliveries\s+P30D \(of calls that never authenticated: 3 days\)\n/,
    )
    expect(res.stdout).toMatch(/archive\s+on/)
  })

  it('sets some, keeps the others, prints what is in force; --json prints the API answer', async () => {
    const set = await osctl(
      ['enterprise', 'retention', 'set', '--finished-runs', 'P30D', '--closed-chats', 'forever'],
      cli.env,
    )
    expect(set.exitCode, set.stderr).toBe(0)
    expect(set.stdout).toMatch(/finished runs\s+P30D\n/)
    expect(set.stdout).toMatch(/closed chats\s+for ever\n/)
    expect(await cli.json(['enterprise', 'retention', 'set', '--archive', 'off'])).toEqual({
      finishedRuns: 'P30D',
      closedChats: null,
      webhookDeliveries: 'P30D',
      archive: false,
    })
    expect(await cli.json(['enterprise', 'retention', 'get'])).toMatchObject({ archive: false })
  })

  it('refuses a window that is not a duration before asking the daemon (exit 2)', async () => {
    const res = await osctl(
      ['enterprise', 'retention', 'set', '--finished-runs', '90 days'],
      cli.env,
    )
    expect(res.exitCode).toBe(2)
    expect(res.stderr).toContain('--finished-runs: an ISO 8601 duration')
    expect(res.stderr).toContain('or forever')
    const nothing = await osctl(['enterprise', 'retention', 'set'], cli.env)
    expect(nothing.exitCode).toBe(2)
    expect(nothing.stderr).toContain('say what to change')
    const archive = await osctl(['enterprise', 'retention', 'set', '--archive', 'maybe'], cli.env)
    expect(archive.exitCode).toBe(2)
    expect(await cli.json(['enterprise', 'retention'])).toMatchObject({ finishedRuns: 'P30D' })
  })
})
