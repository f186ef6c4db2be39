import { randomBytes, randomUUID } from 'node:crypto'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startFakeMcpServer, type FakeMcpServer } from '../fakes/mcp-server.js'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'
import { hasScript, osctlBin } from '../helpers/processes.js'
import { eventually } from '../helpers/wait.js'

// osctl gates against a real daemon: real waiting gates, opened by runs whose model is the fake
// provider (a question through os.ask_ceo, a tool call through a gated merge on the fake MCP server).
// osctl runs in process (issue 28), but for gates review, the built osctl on a pseudo-terminal.

let model: FakeModelProvider
let mcp: FakeMcpServer
let env: Record<string, string>
let json: CliDaemon['json']
const key = `key-${randomUUID()}`
const mcpToken = `mcp-${randomUUID()}`
const merge = 'vcs.merge_pull_request'

const ask = {
  toolCalls: [
    {
      name: 'os.ask_ceo',
      arguments: {
        questions: ['Go?'],
        choices: [
          { key: 'yes', label: 'Yes' },
          { key: 'no', label: 'No' },
        ],
      },
    },
  ],
}
const finish = {
  toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }],
}

/** Starts a run of `task` and answers the gate it stops at, once listed. */
async function runToGate(task: string) {
  const run = await json(['runs', 'start', task])
  let gates: { id: string; runId: string }[] = []
  await eventually(
    async () => (gates = await json(['gates', 'list', '--run', run.id])).length > 0,
    20_000,
    `a gate of run ${run.id}`,
  )
  expect(gates).toHaveLength(1)
  return { run, gate: gates[0]! as Record<string, any> }
}

/** osctl on a 100x40 pseudo-terminal: what it drew so far (colour left out), and keys to type. */
function onTerminal(args: string[]) {
  const child = execa(
    'script',
    ['-qfec', `stty cols 100 rows 40; exec node ${osctlBin} ${args.join(' ')}`, '/dev/null'],
    // CI set, as on a build machine where someone reviews on a real terminal: the screen still draws.
    { env: { ...env, TERM: 'xterm-256color', CI: 'true' }, reject: false, stdin: 'pipe' },
  )
  let drawn = ''
  child.stdout!.on('data', (chunk: Buffer) => (drawn += chunk.toString()))
  const text = () => drawn.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '')
  return {
    child,
    text,
    /** Types keys, then waits until the screen shows `shows`. */
    async type(keys: string, shows: string) {
      const from = text().length
      child.stdin!.write(keys)
      await eventually(
        () => text().slice(from).includes(shows),
        15_000,
        `the screen to show ${shows}`,
      )
    },
  }
}

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer({ token: mcpToken })
  const cli = await startCliDaemon('Gates Cli', {
    OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    OSD_PROVIDER_A_BASE_URL: model.url,
    OSD_PROVIDER_B_BASE_URL: model.url,
  })
  env = cli.env
  json = cli.json
  await json(['api', 'POST', '/llm/bindings', '-d', JSON.stringify({ apiKey: key })])
  await json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: 'Ask',
      assigneeRole: 'ceo',
      tools: ['os.ask_ceo', 'os.write_plan'],
      gates: [{ tool: 'os.ask_ceo' }],
    }),
  ])
  const [team] = await json(['teams', 'list'])
  await json([
    'api',
    'POST',
    '/tools/bindings',
    '-d',
    JSON.stringify({ name: 'vcs', url: mcp.url, token: mcpToken, layer: 'team', layerId: team.id }),
  ])
  await json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: 'Merger',
      teamId: team.id,
      assigneeRole: 'ceo',
      tools: [merge, 'os.set_gate_summary'],
      gates: [{ tool: merge, owner: 'ceo', approval: 'specific' }],
    }),
  ])
})

afterAll(async () => {
  await mcp?.close()
  await model?.close()
})

describe('osctl gates on a question', () => {
  it('lists and gets it, answers it with a choice, and refuses a second decision', async () => {
    model.script(key, ask, finish)
    const { run, gate } = await runToGate('ask')
    expect(gate).toMatchObject({
      kind: 'question',
      status: 'waiting',
      tool: 'os.ask_ceo',
      questions: ['Go?'],
      choices: [
        { key: 'yes', label: 'Yes' },
        { key: 'no', label: 'No' },
      ],
      taskSlug: 'ask',
      runId: run.id,
    })

    // --json prints the API's array unchanged, and nothing else; filters narrow it.
    const listed = await osctl(['--json', 'gates', 'list', '--task', 'ask'], env)
    expect(listed.exitCode).toBe(0)
    expect(JSON.parse(listed.stdout)).toEqual([gate])
    expect(listed.stderr).toBe('')
    expect(await json(['gates', 'list', '--task', 'ask', '--kind', 'tool'])).toEqual([])
    expect((await osctl(['gates', 'list', '--kind', 'nope'], env)).exitCode).toBe(2)
    const table = await osctl(['gates', 'list', '--kind', 'question'], env)
    expect(table.stdout).toMatch(/^ID\s+TASK\s+KIND\s+TOOL\s+RUN\s+ASKS\s+CREATED$/m)
    expect(table.stdout).toContain(`${gate.id}  ask   question  os.ask_ceo  ${run.id}  Go?`)

    expect(await json(['gates', 'get', gate.id])).toEqual(gate)
    const human = await osctl(['gates', 'get', gate.id], env)
    expect(human.stdout).toMatch(/^questions\s+Go\?$/m)
    expect(human.stdout).toMatch(/^choices\s+yes \(Yes\), no \(No\)$/m)
    expect(human.stdout).toMatch(/^arguments:\n {2}\{\n {4}"/m)
    expect(human.stdout).toContain('    "questions": [\n      "Go?"\n    ]')

    // An answer needs something to say, and a choice the gate offers (the API's 400).
    expect((await osctl(['gates', 'answer', gate.id], env)).exitCode).toBe(2)
    const wrong = await osctl(['gates', 'answer', gate.id, '--choice', 'maybe'], env)
    expect(wrong.exitCode).toBe(1)
    expect(wrong.stderr).toMatch(/^error: invalid_request: choice: one of yes, no; .*\(400\)$/m)

    const answered = await json(['gates', 'answer', gate.id, '--choice', 'yes', '--answer', 'Go'])
    expect(answered).toMatchObject({
      id: gate.id,
      status: 'decided',
      decision: 'approve',
      choice: 'yes',
      answers: ['Go'],
      decidedBy: expect.stringMatching(/^token:/),
    })
    const done = await osctl(['runs', 'wait', run.id, '--timeout', '30'], env)
    expect(done.exitCode, done.stderr).toBe(0)
    const told = JSON.stringify(model.callsWith(key).at(-1)!.body.messages)
    expect(told).toContain('\\"choice\\":\\"yes\\"')
    expect(await json(['gates', 'list', '--run', run.id])).toEqual([])
    expect(await json(['gates', 'get', gate.id])).toMatchObject({ status: 'decided' })

    // Decided once: a second decision is the API's 409, exit 1, its code on stderr.
    const again = await osctl(['gates', 'approve', gate.id], env)
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toMatch(/^error: gate_not_waiting: .*\(409\)$/m)
    const againJson = await osctl(['--json', 'gates', 'reject', gate.id, '--note', 'late'], env)
    expect(againJson.exitCode).toBe(1)
    expect(JSON.parse(againJson.stdout)).toMatchObject({ error: 'gate_not_waiting' })
  })

  it('rejects only with a note', async () => {
    model.script(key, ask, finish)
    const { run, gate } = await runToGate('ask')
    const bare = await osctl(['gates', 'reject', gate.id], env)
    expect(bare.exitCode).toBe(2)
    expect(bare.stderr).toContain('error: required option "--note <text>" not specified')
    expect((await osctl(['gates', 'reject', gate.id, '--note', '  '], env)).exitCode).toBe(2)
    expect((await osctl(['gates', 'request-changes', gate.id], env)).exitCode).toBe(2)
    expect((await osctl(['gates', 'decide', gate.id, '--decision', 'reject'], env)).exitCode).toBe(
      2,
    )
    expect(await json(['gates', 'get', gate.id])).toMatchObject({ status: 'waiting' })

    const rejected = await json(['gates', 'reject', gate.id, '--note', 'Not now'])
    expect(rejected).toMatchObject({ status: 'decided', decision: 'reject', note: 'Not now' })
    await osctl(['runs', 'wait', run.id, '--timeout', '30'], env)
    expect(JSON.stringify(model.callsWith(key).at(-1)!.body.messages)).toContain('Not now')
  })
})

describe('osctl gates on a tool call', () => {
  it('shows its arguments, will not answer it as a question, and approves it with decide', async () => {
    const repo = `acme/${randomUUID().slice(0, 6)}`
    model.script(
      key,
      { toolCalls: [{ name: 'os.set_gate_summary', arguments: { summary: `Merge ${repo}#7` } }] },
      { toolCalls: [{ name: merge, arguments: { repo, number: 7 } }] },
      finish,
    )
    const { run, gate } = await runToGate('merger')
    expect(gate).toMatchObject({
      kind: 'tool',
      tool: merge,
      arguments: { repo, number: 7 },
      summary: `Merge ${repo}#7`,
      owner: 'ceo',
      approval: 'specific',
    })
    expect((await json(['gates', 'list', '--kind', 'tool'])).map((g: any) => g.id)).toEqual([
      gate.id,
    ])
    // The call with its key argument and the run (issue 51), on a pipe whole.
    const listed = await osctl(['gates', 'list', '--kind', 'tool'], env)
    expect(listed.stdout).toMatch(/^ID\s+TASK\s+KIND\s+TOOL\s+RUN\s+ASKS\s+CREATED$/m)
    expect(listed.stdout).toContain(`  ${merge} repo=${repo}  ${run.id}  Merge ${repo}#7  `)
    const human = await osctl(['gates', 'get', gate.id], env)
    expect(human.stdout).toMatch(new RegExp(`^summary\\s+Merge ${repo}#7$`, 'm'))
    expect(human.stdout).toMatch(/^arguments:\n {2}\{\n {4}"/m)
    expect(human.stdout).toContain(`    "repo": "${repo}"`)

    const answer = await osctl(['gates', 'answer', gate.id, '--answer', 'yes'], env)
    expect(answer.exitCode).toBe(2)
    expect(answer.stderr).toContain('is a tool gate (vcs.merge_pull_request), not a question')
    expect(await json(['gates', 'get', gate.id])).toMatchObject({ status: 'waiting' })
    expect(
      (await osctl(['gates', 'decide', gate.id, '--approve', '--decision', 'reject'], env))
        .exitCode,
    ).toBe(2)

    const approved = await json(['gates', 'decide', gate.id, '--approve', '--note', 'ship it'])
    expect(approved).toMatchObject({ decision: 'approve', note: 'ship it', decidedByName: 'all' })
    // Who decided by the token's name, not its id (issue 51): the token osctl is logged in with.
    const decided = await osctl(['gates', 'get', gate.id], env)
    expect(decided.stdout).toMatch(/^decided by\s+all \(token\)$/m)
    const done = await osctl(['runs', 'wait', run.id, '--timeout', '30'], env)
    expect(done.exitCode, done.stderr).toBe(0)
    expect(mcp.callsOf('merge_pull_request').filter((c) => c.arguments.repo === repo)).toHaveLength(
      1,
    )
  })
})

describe('osctl gates, other verbs', () => {
  it('lists the gates decided above with --status decided, newest decision first, a page at a time', async () => {
    const decided: Record<string, any>[] = await json(['gates', 'list', '--status', 'decided'])
    expect(decided.length).toBeGreaterThanOrEqual(2)
    expect(decided.every((g) => g.status === 'decided')).toBe(true)
    const times = decided.map((g) => g.decidedAt as string)
    expect(times).toEqual([...times].sort().reverse())
    const second = await json([
      'gates',
      'list',
      '--status',
      'decided',
      '--limit',
      '1',
      '--page',
      '2',
    ])
    expect(second.map((g: { id: string }) => g.id)).toEqual([decided[1]!.id])
    const table = await osctl(['gates', 'list', '--status', 'decided', '--limit', '1'], env)
    expect(table.exitCode).toBe(0)
    expect(table.stdout).toMatch(/DECISION\s+BY\s+DECIDED/)
    expect(table.stdout).toMatch(/\s(approve|reject)\s+all \(token\)\s/)
    const wrong = await osctl(['gates', 'list', '--status', 'pending'], env)
    expect(wrong.exitCode).toBe(2)
    expect(wrong.stderr).toContain('waiting, decided')
  })

  it('answers a chat that waits on nothing with the API error', async () => {
    const res = await osctl(
      ['gates', 'chat', randomUUID(), '--decision', 'approve', '--answer', 'yes'],
      env,
    )
    expect(res.exitCode).toBe(1)
    expect(res.stderr).toMatch(/^error: gate_not_found: .*\(404\)$/m)
    expect((await osctl(['gates', 'get', 'not-an-id'], env)).exitCode).toBe(2)
  })

  it.skipIf(!hasScript)('gates review decides a gate with a key on a terminal', async () => {
    model.script(key, ask, finish)
    const { run, gate } = await runToGate('ask')
    const screen = onTerminal(['gates', 'review', '--task', 'ask'])
    await eventually(() => screen.text().includes('1 waiting'), 15_000, 'the list')
    expect(screen.text()).toMatch(/› ask\s+question/)
    expect(screen.text()).toContain('Questions  1. Go?')
    await screen.type('a', 'Answer ask question')
    await screen.type('\x1b[B', '◉ Yes (yes)')
    await screen.type('Go', '› Go')
    // An answer is told as one, not as an approval (issue 51).
    await screen.type('\r', '✓ Answered ask question')
    await screen.type('q', 'gates review: decided 1 gate (1 answered).')
    expect((await screen.child).exitCode).toBe(0)
    expect(await json(['gates', 'get', gate.id])).toMatchObject({
      decision: 'approve',
      choice: 'yes',
      answers: ['Go'],
    })
    expect((await osctl(['runs', 'wait', run.id, '--timeout', '30'], env)).exitCode).toBe(0)
  })

  it('gates review refuses without a terminal and names the verbs that do its job', async () => {
    const res = await osctl(['gates', 'review'], env)
    expect(res.exitCode).toBe(2)
    expect(res.stdout).toBe('')
    expect(res.stderr).toContain('gates review is interactive and needs a terminal')
    for (const verb of ['list', 'get', 'approve', 'reject', 'request-changes', 'answer']) {
      expect(res.stderr).toContain(`osctl gates ${verb} `)
    }
  })
})

describe('osctl wait gate on a gate its run closed', () => {
  it('exits 1 for --for=decided: no decision was made, the run ended', async () => {
    model.script(key, ask, finish)
    const { run, gate } = await runToGate('ask')
    const cancelled = await osctl(['runs', 'cancel', run.id, '--yes'], env)
    expect(cancelled.exitCode, cancelled.stderr).toBe(0)
    expect(await json(['gates', 'get', gate.id])).toMatchObject({
      status: 'decided',
      decision: null,
    })
    for (const target of ['decided', 'approve']) {
      const res = await osctl(['wait', 'gate', gate.id, `--for=${target}`, '--timeout', '5'], env)
      expect(res.exitCode).toBe(1)
      expect(res.stderr).toBe(
        `error: gate ${gate.id} was closed undecided: its run ended (run cancelled), not ${target}\n`,
      )
    }
  })
})
