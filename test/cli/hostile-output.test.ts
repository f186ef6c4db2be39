import { randomBytes, randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startFakeModelProvider, type FakeModelProvider } from '../fakes/model-provider.js'
import { clearLine } from '../../cli/output.js'
import { expectNoRawControls, hostile, hostileShown } from '../helpers/hostile-text.js'
import { osctl, startCliDaemon, type CliDaemon, type OsctlResult } from '../helpers/osctl.js'
import { eventually } from '../helpers/wait.js'

// Hostile: terminal injection through what osctl prints (issue 41). A tenant names a team, a member
// and a task, and a run's model writes a gate's summary, a failed run's reason and a chat reply, each
// holding ESC[2J (clear the screen), OSC 52 (write the clipboard), CSI as the C1 byte U+009B and a
// right-to-left override. A person reading them with osctl sees each as its escape, and no byte a
// terminal would act on; --json is the API's JSON, unchanged. Against a real daemon, osctl in process.

let model: FakeModelProvider
let cli: CliDaemon
const key = `key-${randomUUID()}`
/** Free text: its line breaks are kept, its control characters are not. */
const freeText = `First line ${hostile}\nsecond line\tafter a tab`
const ids = { team: '', member: '', task: '', run: '', gate: '', chat: '' }

/**
 * osctl as a person runs it: nothing it wrote would act on their terminal (on a terminal, but the
 * spinner's own clearing of its line).
 */
async function human(args: string[], options: { terminal?: boolean } = {}): Promise<OsctlResult> {
  const res = await osctl(args, cli.env, undefined, options)
  expectNoRawControls(res.output.replaceAll(clearLine, ''), `osctl ${args.join(' ')}`)
  return res
}

/** The API's own answer to GET `path`, as a value. */
async function api(path: string): Promise<unknown> {
  const res = await fetch(`${cli.daemon.url}${path}`, {
    headers: { authorization: `Bearer ${cli.enterprise.token}` },
  })
  expect(res.status).toBe(200)
  return res.json()
}

/** `osctl --json ARGS` prints the API's answer as JSON.stringify writes it, control bytes and all. */
async function expectJsonUnchanged(args: string[], path: string): Promise<void> {
  const res = await osctl(['--json', ...args], cli.env)
  expect(res.exitCode, res.stderr).toBe(0)
  const value = await api(path)
  expect(JSON.parse(res.stdout)).toEqual(value)
  expect(res.stdout).toBe(JSON.stringify(JSON.parse(res.stdout), null, 2) + '\n')
  // JSON escapes C0 but leaves C1 and the bidi override as they are: --json is not changed for it.
  expect(res.stdout).toContain('\x9b31m\u202egnp.exe')
}

beforeAll(async () => {
  model = await startFakeModelProvider()
  cli = await startCliDaemon('Hostile Output', {
    OSD_SECRET_KEY: randomBytes(32).toString('hex'),
    OSD_PROVIDER_A_BASE_URL: model.url,
    OSD_PROVIDER_B_BASE_URL: model.url,
  })
  await cli.json(['api', 'POST', '/llm/bindings', '-d', JSON.stringify({ apiKey: key })])
  const team = await cli.json([
    'teams',
    'create',
    '--slug',
    'ops',
    '--name',
    hostile,
    '--charter',
    freeText,
  ])
  ids.team = team.id
  ids.member = (await cli.json(['members', 'create', '--name', hostile, '--persona', freeText])).id
  const task = await cli.json([
    'tasks',
    'create',
    '-d',
    JSON.stringify({
      name: hostile,
      slug: 'mailer',
      teamId: team.id,
      assigneeRole: 'ceo',
      goal: freeText,
      tools: ['os.mail_send', 'os.set_gate_summary'],
      gates: [{ tool: 'os.mail_send' }],
    }),
  ])
  ids.task = task.id

  // The run's model writes the gate's summary, asks to send mail, and once refused ends failed.
  model.script(
    key,
    { toolCalls: [{ name: 'os.set_gate_summary', arguments: { summary: freeText } }] },
    {
      toolCalls: [
        {
          name: 'os.mail_send',
          arguments: { to: 'ada@hostile.osd.local', subject: hostile, body: freeText },
        },
      ],
    },
    { toolCalls: [{ name: 'os.finish', arguments: { outcome: 'failed', summary: freeText } }] },
  )
  ids.run = (await cli.json(['runs', 'start', 'mailer'])).id
  let gates: { id: string }[] = []
  await eventually(
    async () => (gates = await cli.json(['gates', 'list', '--run', ids.run])).length > 0,
    20_000,
    'the gate of the run',
  )
  ids.gate = gates[0]!.id
}, 120_000)

afterAll(async () => {
  await model?.close()
})

describe('hostile: terminal injection through osctl output (issue 41)', () => {
  it('teams get and teams list show the name escaped, the charter with its line break', async () => {
    const got = await human(['teams', 'get', 'ops'])
    expect(got.exitCode, got.stderr).toBe(0)
    expect(got.stdout).toMatch(new RegExp(`^name\\s+${escape(hostileShown)}$`, 'm'))
    expect(got.stdout).toMatch(/^charter\s+First line .*\n\s+second line\tafter a tab$/m)

    const list = await human(['teams', 'list'])
    expect(list.stdout).toContain(hostileShown)
    // Widths are counted on what is shown: the columns of every row start where the header's do.
    const lines = list.stdout.trimEnd().split('\n')
    const idAt = lines[0]!.indexOf('ID')
    for (const line of lines.slice(1)) expect(line.slice(idAt)).toMatch(/^[0-9a-f]{8}-/)

    await expectJsonUnchanged(['teams', 'get', 'ops'], `/teams/${ids.team}`)
  })

  it('members get, tasks get and tasks workflow show names and free text escaped', async () => {
    const member = await human(['members', 'get', ids.member])
    expect(member.stdout).toContain(hostileShown)
    const task = await human(['tasks', 'get', 'mailer'])
    expect(task.stdout).toMatch(new RegExp(`^name\\s+${escape(hostileShown)}$`, 'm'))
    const version = await human(['tasks', 'workflow', 'mailer'])
    expect(version.stdout).toMatch(/^goal\s+First line .*\n\s+second line\tafter a tab$/m)
    await expectJsonUnchanged(['tasks', 'get', 'mailer'], `/tasks/${ids.task}`)
  })

  it("gates list and get show the model's summary and arguments escaped", async () => {
    const list = await human(['gates', 'list'])
    expect(list.stdout).toContain(ids.gate)
    const got = await human(['gates', 'get', ids.gate])
    expect(got.stdout).toMatch(/^summary\s+First line Ops\\u001b\[2J.*\n\s+second line/m)
    expect(got.stdout).toContain(`"subject": "${hostileShown}"`)
    await expectJsonUnchanged(['gates', 'get', ids.gate], `/gates/${ids.gate}`)
  })

  it("runs wait and runs watch show the failed run's reason escaped, on a pipe and a terminal", async () => {
    await human(['gates', 'reject', ids.gate, '--note', hostile])
    const waited = await human(['runs', 'wait', ids.run, '--timeout', '30'])
    expect(waited.exitCode).toBe(1)
    // Off a terminal the run's JSON goes to stdout: C1 and the override escaped as \uXXXX, it is
    // still JSON, of the same run.
    expect(JSON.parse(waited.stdout)).toEqual(await api(`/runs/${ids.run}`).then((d: any) => d.run))
    expect(waited.stderr).toContain('reason="First line Ops\\u001b[2J')
    expect(waited.stderr).toMatch(/^error: run \S+ failed: First line Ops\\u001b\[2J/m)

    const summary = await human(['runs', 'wait', ids.run], { terminal: true })
    expect(summary.stdout).toMatch(/^reason\s+First line Ops\\u001b\[2J.*\n\s+second line/m)

    const watched = await human(['runs', 'watch', ids.run])
    expect(watched.exitCode).toBe(0)
    expect(watched.stderr).toMatch(/run\.failed\s+.*reason="First line Ops\\u001b\[2J/)
    // Its last line is one line: the reason's line break and tab shown as escapes.
    expect(watched.stdout).toContain(
      `failed  First line ${hostileShown}\\nsecond line\\tafter a tab\n`,
    )
  })

  it('runs start --wait shows the lines of a run that fails at once escaped', async () => {
    model.script(key, {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'failed', summary: hostile } }],
    })
    const started = await human(['runs', 'start', 'mailer', '--wait', '--timeout', '30'])
    expect(started.exitCode).toBe(1)
    expect(started.stderr).toContain(`started run`)
    expect(started.stderr).toContain(`run.failed              reason=${hostileShown}\n`)
  })

  it('chats get and chats export show the reply and the member escaped, line breaks kept', async () => {
    ids.chat = (await cli.json(['chats', 'new', ids.member])).id
    model.script(key, { text: `# Plan ${hostile}\n\n${freeText}` })
    const sent = await human(['chats', 'send', ids.chat, `hello ${hostile}`, '--wait'])
    expect(sent.exitCode, sent.stderr).toBe(0)

    const got = await human(['chats', 'get', ids.chat])
    expect(got.stdout).toContain(`] you: hello ${hostileShown}\n`)
    expect(got.stdout).toContain(`] ${hostileShown}: # Plan ${hostileShown}`)
    expect(got.stdout).toContain('\n  second line\tafter a tab\n')

    const md = await human(['chats', 'export', ids.chat])
    expect(md.stdout).toContain(`# Chat with Ops\\u001b\\[2J\\u001b\\]52;c;aGVsbG8=`)
    expect(md.stdout).toContain(`> # Plan ${hostileShown}\n>\n> First line ${hostileShown}\n`)
    expect(md.stdout).toContain('> second line\tafter a tab\n')
    await expectJsonUnchanged(
      ['chats', 'export', ids.chat, '--format', 'json'],
      `/chats/${ids.chat}`,
    )
  })

  it("errors that echo the server's words show them escaped", async () => {
    // Nothing is left of the slug once cleaned: the refusal quotes it as it was sent.
    const refused = await human(['teams', 'create', '--slug', '\x1b\x07\x9b\u202e', '--name', 'x'])
    expect(refused.exitCode).toBe(1)
    expect(refused.stderr).toMatch(/^error: invalid_slug: .*got "\\u001b\\u0007\\u009b\\u202e"/m)
  })
})

/** `text` as a regular expression that matches it literally. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
