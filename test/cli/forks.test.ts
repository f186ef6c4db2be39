import { randomBytes, randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl runs steps and runs fork (issue 50) in process against a real daemon whose model is the fake
// provider: a three-step run (a model call writing a plan, the plan, a model call that answers), its
// steps as a table and as JSON, and a fork from its last step that makes only that call again.

let model: FakeModelProvider
let env: Record<string, string>
let json: CliDaemon['json']
const key = `key-${randomUUID()}`
let runId: string

const plan = {
  toolCalls: [
    { name: 'os.write_plan', arguments: { title: 'Launch', items: [{ title: 'Ship' }] } },
  ],
}

beforeAll(async () => {
  model = await startFakeModelProvider()
  const cli = await startCliDaemon('Forks Cli', {
    OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    OSD_PROVIDER_A_BASE_URL: model.url,
  })
  env = cli.env
  json = cli.json
  await json(['api', 'POST', '/llm/bindings', '-d', JSON.stringify({ apiKey: key })])
  await json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: 'Planner',
      assigneeRole: 'ceo',
      // A plan reaches os.ask_ceo, which must be gated.
      tools: ['os.write_plan', 'os.ask_ceo'],
      gates: [{ tool: 'os.ask_ceo' }],
    }),
  ])
  model.script(key, plan, { text: 'Planned.' })
  const run = await json(['runs', 'start', 'planner', '--input', 'region=eu', '--wait'])
  expect(run.status).toBe('succeeded')
  runId = run.id
})

afterAll(async () => {
  await model?.close()
})

describe('osctl runs steps', () => {
  it('prints the steps as a table, and as JSON with --json', async () => {
    const table = await osctl(['runs', 'steps', runId], env)
    expect(table.exitCode, table.stderr).toBe(0)
    const lines = table.stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^STEP\s+KIND\s+NAME\s+STATUS\s+CALLS\s+COST\s+STARTED\s+FORK$/)
    expect(lines.slice(1).map((l) => l.split(/\s{2,}/).slice(0, 4))).toEqual([
      ['1', 'model', 'claude-sonnet-5-5', 'done'],
      ['2', 'tool', 'os.write_plan', 'done'],
      ['3', 'model', 'claude-sonnet-5-5', 'done'],
    ])
    expect(lines[1]).toContain('os.write_plan')
    expect(lines.slice(1).every((l) => l.endsWith('yes'))).toBe(true)
    const steps = await json(['runs', 'steps', runId])
    expect(steps.map((s: { step: number; kind: string }) => [s.step, s.kind])).toEqual([
      [1, 'model'],
      [2, 'tool'],
      [3, 'model'],
    ])
  })
})

describe('osctl runs fork', () => {
  it('--from-step 3 --wait: makes only the last call again and ends with the fork', async () => {
    const before = model.callsWith(key).length
    model.script(key, { text: 'Planned again.' })
    const res = await osctl(
      ['runs', 'fork', runId, '--from-step', '3', '--tier', 'frontier', '--wait', '--json'],
      env,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    const fork = JSON.parse(res.stdout)
    expect(fork).toMatchObject({
      status: 'succeeded',
      origin: 'fork',
      forkedFrom: { runId, step: 3 },
      input: { region: 'eu' },
      result: { summary: 'Planned again.' },
    })
    const calls = model.callsWith(key).slice(before)
    expect(calls.map((c) => c.model)).toEqual(['claude-opus-5-5'])
    const steps = await json(['runs', 'steps', fork.id])
    expect(steps.map((s: { copied: boolean }) => s.copied)).toEqual([true, true, false])

    const shown = await osctl(['runs', 'get', fork.id], env)
    expect(shown.stdout).toMatch(new RegExp(`^forked from\\s+${runId} at step 3$`, 'm'))
    const original = await osctl(['runs', 'get', runId], env)
    expect(original.stdout).toMatch(new RegExp(`^forks\\s+${fork.id} \\(step 3\\)$`, 'm'))
  })

  it('refuses a step out of range (exit 1, the reason on stderr) and a step that is not a number', async () => {
    const out = await osctl(['runs', 'fork', runId, '--from-step', '9'], env)
    expect(out.exitCode).toBe(1)
    expect(out.stderr).toContain('fork_step_invalid')
    expect(out.stderr).toContain('the run has steps 1 to 3')
    const bad = await osctl(['runs', 'fork', runId, '--from-step', 'last'], env)
    expect(bad.exitCode).toBe(2)
    expect(bad.stderr).toContain('--from-step takes a step number')
    const missing = await osctl(['runs', 'fork', runId], env)
    expect(missing.exitCode).toBe(2)
    expect(missing.stderr).toContain('--from-step')
  })
})
