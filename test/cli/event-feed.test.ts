import { beforeAll, describe, expect, it } from 'vitest'
import { FeedEvent } from '../../shared/schemas/events.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// osctl events follow (issue 47) against a real daemon and its engine: the feed's events as they
// come, one JSON object per line off a terminal, one readable line on one; a refusal is an error.

let cli: CliDaemon
let taskSlug: string

beforeAll(async () => {
  cli = await startCliDaemon('Event Feed Cli')
  const task = await cli.json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: 'Feed',
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    }),
  ])
  taskSlug = task.slug
})

const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => FeedEvent.parse(JSON.parse(line)))

describe('osctl events follow', () => {
  it('prints one JSON object per event on a pipe, from --after, and stops after --count', async () => {
    await cli.json(['runs', 'start', taskSlug, '--wait'])
    const res = await osctl(['events', 'follow', '--after', '0', '--count', '3'], cli.env)
    expect(res.exitCode, res.stderr).toBe(0)
    const events = lines(res.stdout)
    expect(events.map((e) => e.type)).toEqual(['run.queued', 'run.running', 'run.succeeded'])
    expect(events.map((e) => e.position)).toEqual([1, 2, 3])
  })

  it('follows from now, keeping to --types, and prints a line a person reads on a terminal', async () => {
    const following = osctl(
      ['events', 'follow', '--types', 'run.succeeded', '--count', '1'],
      cli.env,
      undefined,
      { terminal: true },
    )
    // Whether the stream is open yet is not seen from here: runs start until one is after it.
    const runs: string[] = []
    await eventually(
      async () => {
        runs.push((await cli.json(['runs', 'start', taskSlug, '--wait'])).id)
        return following.printed().stdout.length > 0
      },
      30_000,
      'a run.succeeded line',
    )
    const res = await following
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stdout).toMatch(/^\s+\d+ {2}\S+ {2}run\.succeeded\s+runId=/)
    expect(runs.some((id) => res.stdout.includes(`runId=${id}`))).toBe(true)
    expect(res.stdout.trim().split('\n')).toHaveLength(1)
  })

  it('fails on a refusal: a malformed filter, a position that is not one', async () => {
    const bad = await osctl(['events', 'follow', '--types', 'RUN.*'], cli.env)
    expect(bad.exitCode).toBe(1)
    expect(bad.stderr).toContain('types')
    const usage = await osctl(['events', 'follow', '--after', '-3'], cli.env)
    expect(usage.exitCode).toBe(2)
  })
})
