import { render } from 'ink-testing-library'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Gate, GateDecision } from '../../../shared/schemas/gates.js'
import { apiError } from '../../../cli/client.js'
import { expectNoRawControls, hostile, hostileShown } from '../../helpers/hostile-text.js'
import { fakeTerminal, typeKeys } from '../../helpers/terminal.js'
import { ApiRequestError, CliError } from '../../../cli/errors.js'
import { GateReviewController, type GateReviewClient } from '../../../cli/tui/gate-controller.js'
import { browse } from '../../../cli/tui/gate-keys.js'
import { GateReview, renderGateReview } from '../../../cli/tui/gate-review.js'
import { ReviewScreen, jsonLines } from '../../../cli/tui/gate-view.js'
import { drawEveryFrame } from '../../../cli/tui/terminal.js'
import { waitFor } from '../../helpers/wait.js'

// The gate review screen with a fake client (the methods of ApiClient it uses, answering canned
// gates): what a person sees and what each key sends. The daemon's side is test/cli/gates.test.ts.

const now = Date.parse('2026-03-02T12:00:00.000Z')

function gate(fields: Partial<Gate>): Gate {
  return {
    id: '00000000-0000-4000-8000-000000000000',
    kind: 'tool',
    status: 'waiting',
    tool: null,
    arguments: null,
    owner: 'ceo',
    approval: 'specific',
    summary: null,
    choices: null,
    questions: null,
    runId: '7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
    chatId: null,
    taskId: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b',
    taskSlug: null,
    decision: null,
    note: null,
    answers: null,
    choice: null,
    decidedBy: null,
    decidedByName: null,
    decidedAt: null,
    createdAt: '2026-03-02T11:57:00.000Z',
    ...fields,
  }
}

const merge = gate({
  id: '3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60',
  tool: 'vcs.merge_pull_request',
  arguments: { repo: 'acme/web', number: 7, labels: ['safe', 'tested'] },
  summary: 'Merge acme/web#7: tests pass, one reviewer approved',
  taskSlug: 'merger',
})
const question = gate({
  id: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  kind: 'question',
  tool: 'os.ask_ceo',
  arguments: {
    questions: ['Ship on Friday?', 'Who signs off?'],
    choices: [
      { key: 'yes', label: 'Yes' },
      { key: 'no', label: 'No' },
    ],
  },
  questions: ['Ship on Friday?', 'Who signs off?'],
  choices: [
    { key: 'yes', label: 'Yes' },
    { key: 'no', label: 'No' },
  ],
  taskSlug: 'release-plan',
  createdAt: '2026-03-02T11:59:30.000Z',
})
const mail = gate({
  id: '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e',
  tool: 'os.mail_send',
  arguments: { to: 'ada@acme.osd.local', subject: 'Weekly numbers' },
  taskSlug: 'weekly-mail',
  createdAt: '2026-03-01T09:00:00.000Z',
})

/** A client answering GET /gates with whatever `gates` holds now, and POSTs as told. */
function fakeClient(initial: Gate[]) {
  const fake = {
    gates: initial,
    failure: null as unknown,
    decide: async (id: string, body: GateDecision): Promise<Gate> => ({
      ...fake.gates.find((g) => g.id === id)!,
      status: 'decided',
      decision: body.decision,
      note: body.note ?? null,
    }),
    get: vi.fn(async (path: string) => {
      expect(path).toBe('/gates')
      if (fake.failure) throw fake.failure
      return fake.gates
    }),
    post: vi.fn(async (path: string, body?: unknown) => {
      const id = /^\/gates\/([^/]+)\/decision$/.exec(path)![1]!
      const decided = await fake.decide(id, body as GateDecision)
      fake.gates = fake.gates.filter((g) => g.id !== id)
      return decided
    }),
  }
  return fake
}

type Fake = ReturnType<typeof fakeClient>

const screens: { stop(): void; unmount(): void }[] = []
afterEach(() => {
  for (const s of screens.splice(0)) {
    s.stop()
    s.unmount()
  }
})

/** The screen on a fake client, once its first read has been drawn. */
async function open(client: Fake, intervalMs = 60_000) {
  const controller = new GateReviewController(client as GateReviewClient, { intervalMs })
  const ui = render(<GateReview controller={controller} now={() => now} />)
  screens.push({ stop: () => controller.stop(), unmount: ui.unmount })
  controller.start()
  const frame = () => ui.lastFrame() ?? ''
  await waitFor(() => expect(frame()).not.toContain('Reading the waiting gates'))
  const press = (...keys: string[]) => typeKeys(ui, keys)
  return { controller, ui, frame, press }
}

const enter = '\r'
const escape = '\x1b'
const down = '\x1b[B'
const up = '\x1b[A'

describe('the gate review screen', () => {
  it('lists the waiting gates and shows the selected one in full, keys in the footer', async () => {
    const { frame } = await open(fakeClient([merge, question, mail]))
    expect(frame()).toMatchSnapshot()
    expect(frame()).toMatch(/^› merger\s+vcs\.merge_pull_request\s+3m ago$/m)
    expect(frame()).toMatch(/^ {2}release-plan\s+question\s+30s ago$/m)
    expect(frame()).toMatch(/^Summary {4}Merge acme\/web#7: tests pass, one reviewer approved$/m)
    expect(frame()).toContain(
      [
        'Arguments',
        '  {',
        '    "repo": "acme/web",',
        '    "number": 7,',
        '    "labels": [',
        '      "safe",',
        '      "tested"',
        '    ]',
        '  }',
      ].join('\n'),
    )
    expect(frame().trimEnd().split('\n').at(-1)).toBe(
      '↑↓/j k select · a approve · r reject · c request changes · q quit',
    )
  })

  it('moves the selection with j k and the arrows; a question shows its questions and choices', async () => {
    const { frame, press } = await open(fakeClient([merge, question, mail]))
    await press('j')
    expect(frame()).toMatch(/^› release-plan/m)
    expect(frame()).toContain(
      [
        'Kind       question (os.ask_ceo)',
        'Task       release-plan  5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b',
        'Run        7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
        'Owner      ceo, approval specific',
        'Opened     30s ago  2026-03-02T11:59:30.000Z',
        'Questions  1. Ship on Friday?',
        '           2. Who signs off?',
        'Choices    yes  Yes',
        '           no   No',
      ].join('\n'),
    )
    expect(frame()).not.toContain('Arguments') // a question's arguments are its questions and choices
    expect(frame()).toContain('a answer · r reject')
    await press(down, down) // stops at the last
    expect(frame()).toMatch(/^› weekly-mail\s+os\.mail_send\s+1d ago$/m)
    expect(frame()).toMatch(/^Summary {4}\(the run set none\)$/m)
    await press('k', up, up)
    expect(frame()).toMatch(/^› merger/m)
  })

  it('says when no gate is waiting, with the keys', async () => {
    const { frame } = await open(fakeClient([]))
    expect(frame()).toMatchInlineSnapshot(`
      "osctl gates review  0 waiting

      No gates are waiting.
      New gates show up here as runs open them (the list is read every 60s).

      ↑↓/j k select · a approve · r reject · c request changes · q quit"
    `)
  })

  it('shows an unreachable daemon or a refused token inline, and recovers', async () => {
    const client = fakeClient([merge])
    client.failure = new CliError('cannot reach osd at http://127.0.0.1:9/v1: ECONNREFUSED')
    const { frame, controller } = await open(client)
    expect(frame()).toContain(
      '✗ cannot reach osd at http://127.0.0.1:9/v1: ECONNREFUSED\n  Trying again every 60s.',
    )
    expect(frame()).not.toContain('No gates are waiting')
    expect(frame()).toContain('osctl gates review  not read yet')

    client.failure = null
    await controller.refresh()
    await waitFor(() => expect(frame()).toMatch(/^› merger/m))
    expect(frame()).not.toContain('✗')

    client.failure = apiError(401, { error: 'unauthorized', message: 'Bad token.' })
    await controller.refresh()
    await waitFor(() =>
      expect(frame()).toContain(
        '✗ the daemon refused the token (401): check `osctl auth status`\n' +
          '  The list is from the last read that worked; trying again every 60s.',
      ),
    )
    expect(frame()).toMatch(/^› merger/m) // the last list stays
  })

  it('approves with a then Enter, and the gate leaves the list', async () => {
    const client = fakeClient([merge, mail])
    const { frame, press } = await open(client)
    await press('a')
    expect(frame()).toContain('Approve merger vcs.merge_pull_request: a note (optional)')
    expect(frame().trimEnd().split('\n').at(-1)).toBe('Enter send · Esc cancel')
    await press(enter)
    await waitFor(() => expect(frame()).toContain('✓ Approved merger vcs.merge_pull_request'))
    expect(client.post).toHaveBeenCalledTimes(1)
    expect(client.post).toHaveBeenCalledWith(`/gates/${merge.id}/decision`, {
      decision: 'approve',
    })
    expect(frame()).toContain('osctl gates review  1 waiting')
    expect(frame()).not.toMatch(/^. merger/m)
    expect(frame()).toMatch(/^› weekly-mail/m) // the selection moves to the row that took its place
    await waitFor(() => expect(client.get).toHaveBeenCalledTimes(2)) // read again at once
  })

  it('approves with a note when one is typed', async () => {
    const client = fakeClient([merge])
    const { frame, press } = await open(client)
    await press('a', 'ship', ' it')
    expect(frame()).toContain('› ship it')
    await press(enter)
    await waitFor(() => expect(client.post).toHaveBeenCalled())
    expect(client.post.mock.calls[0]![1]).toEqual({ decision: 'approve', note: 'ship it' })
  })

  it('asks for a note on r, will not send without one, and sends it', async () => {
    const client = fakeClient([merge])
    const { frame, press } = await open(client)
    await press('r')
    expect(frame()).toContain('Reject merger vcs.merge_pull_request: why? (a note is needed)')
    await press(enter)
    expect(frame()).toContain('A note is needed: say why (Esc cancels).')
    expect(client.post).not.toHaveBeenCalled()
    await press('not on a Fridayy', '\x7f')
    expect(frame()).toContain('› not on a Friday')
    expect(frame()).not.toContain('A note is needed')
    await press(enter)
    await waitFor(() => expect(frame()).toContain('✓ Rejected merger vcs.merge_pull_request'))
    expect(client.post).toHaveBeenCalledWith(`/gates/${merge.id}/decision`, {
      decision: 'reject',
      note: 'not on a Friday',
    })
    expect(frame()).toContain('No gates are waiting.')
  })

  it('takes keys typed ahead in one go (a paste, fast typing) one at a time', async () => {
    const client = fakeClient([merge, question, mail])
    const { frame, press } = await open(client)
    await press('jj')
    expect(frame()).toMatch(/^› weekly-mail/m)
    await press('rnot today\r')
    await waitFor(() => expect(client.post).toHaveBeenCalled())
    expect(client.post.mock.calls[0]).toEqual([
      `/gates/${mail.id}/decision`,
      { decision: 'reject', note: 'not today' },
    ])
  })

  it('requests changes on c, and Esc cancels a note without sending', async () => {
    const client = fakeClient([merge])
    const { frame, press } = await open(client)
    await press('c', 'merge #8')
    expect(frame()).toContain('Request changes on merger vcs.merge_pull_request: why?')
    await press(escape)
    await waitFor(() => expect(frame()).not.toContain('Request changes on'))
    expect(frame()).toContain('a approve · r reject')
    expect(client.post).not.toHaveBeenCalled()
    await press('c', 'merge #8 instead', enter)
    await waitFor(() => expect(client.post).toHaveBeenCalled())
    expect(client.post.mock.calls[0]![1]).toEqual({
      decision: 'request_changes',
      note: 'merge #8 instead',
    })
    await waitFor(() => expect(frame()).toContain('✓ Asked for changes on merger'))
  })

  it('answers a question with a choice and answers typed per question', async () => {
    const client = fakeClient([question])
    const { frame, press } = await open(client)
    await press('a')
    expect(frame()).toContain('Answer release-plan question: a choice and/or an answer')
    expect(frame()).toMatch(/◉ no choice +│\n│ {3}○ Yes \(yes\) +│\n│ {3}○ No \(no\)/)
    await press(enter)
    expect(frame()).toContain('Pick a choice or type an answer (Esc cancels).')
    expect(client.post).not.toHaveBeenCalled()
    await press(down, down, up) // to No, back to Yes
    expect(frame()).toContain('◉ Yes (yes)')
    await press('After the freeze', '\t', 'Ada')
    expect(frame()).toMatchSnapshot()
    await press(enter)
    await waitFor(() => expect(client.post).toHaveBeenCalled())
    expect(client.post.mock.calls[0]).toEqual([
      `/gates/${question.id}/decision`,
      { decision: 'approve', choice: 'yes', answers: ['After the freeze', 'Ada'] },
    ])
    await waitFor(() => expect(frame()).toContain('✓ Answered release-plan question'))
  })

  it('tells a gate decided meanwhile (409) inline, and it leaves the list', async () => {
    const client = fakeClient([merge, mail])
    client.decide = async (id) => {
      client.gates = client.gates.filter((g) => g.id !== id)
      throw new ApiRequestError(
        409,
        'gate_not_waiting',
        `Gate ${id} was already decided (approve).`,
        {
          error: 'gate_not_waiting',
          message: `Gate ${id} was already decided (approve).`,
          decision: 'approve',
        },
      )
    }
    const { frame, press } = await open(client)
    await press('r', 'too late', enter)
    await waitFor(() =>
      expect(frame()).toContain(
        '✗ merger vcs.merge_pull_request was already decided (approve) elsewhere; it has left the list',
      ),
    )
    expect(frame()).toMatch(/^› weekly-mail/m)
    expect(frame()).toContain('1 waiting')
    // Still working: the next gate can be decided.
    client.decide = fakeClient([mail]).decide
    await press('a', enter)
    await waitFor(() => expect(frame()).toContain('✓ Approved weekly-mail os.mail_send'))
  })

  it('keeps a gate the daemon refused to decide for another reason, and says why', async () => {
    const client = fakeClient([question])
    client.decide = async () => {
      throw apiError(400, { error: 'invalid_request', message: 'choice: one of yes, no; got "x".' })
    }
    const { frame, press } = await open(client)
    await press('a', 'x', enter)
    await waitFor(() =>
      expect(frame()).toContain(
        '✗ Could not decide release-plan question: invalid_request: choice: one of yes, no; got "x".',
      ),
    )
    expect(frame()).toMatch(/^› release-plan/m)
  })

  it('refreshes as gates arrive and leave, the selection staying on its gate', async () => {
    const client = fakeClient([merge])
    const { frame, press } = await open(client, 25)
    expect(frame()).toContain('1 waiting')
    client.gates = [question, merge]
    await waitFor(() => expect(frame()).toContain('2 waiting'))
    expect(frame()).toMatch(/^ {2}release-plan/m)
    expect(frame()).toMatch(/^› merger/m) // still on the gate it was on, now the second row
    client.gates = [question] // decided elsewhere
    await waitFor(() => expect(frame()).toContain('1 waiting'))
    expect(frame()).toMatch(/^› release-plan/m)
    expect(frame()).not.toContain('merger')
    await press('q')
    expect(frame()).toBe('gates review: nothing decided.')
  })

  it('quits on q, leaving what it decided', async () => {
    const client = fakeClient([merge, question, mail])
    const { frame, press } = await open(client)
    await press('a', enter)
    await waitFor(() => expect(frame()).toContain('✓ Approved merger'))
    await press('j', 'r', 'no', enter)
    await waitFor(() => expect(frame()).toContain('✓ Rejected weekly-mail'))
    await press('q')
    expect(frame()).toBe('gates review: decided 2 gates (1 approved, 1 rejected).')
  })

  it('sums up questions by what was decided: answered, rejected (issue 51)', async () => {
    const other = { ...question, id: '7c6d5e4f-3a2b-4c1d-9e8f-7a6b5c4d3e2f', taskSlug: 'launch' }
    const client = fakeClient([question, other])
    const { frame, press } = await open(client)
    await press('a', down, enter)
    await waitFor(() => expect(frame()).toContain('✓ Answered release-plan question'))
    await press('r', 'not this week', enter)
    await waitFor(() => expect(frame()).toContain('✓ Rejected launch question'))
    await press('q')
    expect(frame()).toBe('gates review: decided 2 gates (1 answered, 1 rejected).')
  })

  it('lays out again when the terminal is resized', async () => {
    const client = fakeClient([
      gate({ ...merge, arguments: { repo: 'acme/web', body: 'word '.repeat(40).trim() } }),
    ])
    const { ui, frame } = await open(client)
    const widest = () =>
      Math.max(
        ...frame()
          .split('\n')
          .map((l) => l.length),
      )
    expect(widest()).toBeGreaterThan(60)
    Object.defineProperty(ui.stdout, 'columns', { value: 60, configurable: true })
    Object.defineProperty(ui.stdout, 'rows', { value: 26, configurable: true })
    ui.stdout.emit('resize')
    await waitFor(() => expect(widest()).toBeLessThanOrEqual(60))
    expect(frame()).toMatchSnapshot()
  })
  it("hostile: shows a gate's terminal injection escaped, never a control byte (issue 41)", async () => {
    // A run's model wrote the summary and the arguments; a tenant named the tool and the task.
    const text = `First line ${hostile}\nsecond line\tafter a tab`
    const tool = gate({
      ...merge,
      id: '6d5c4b3a-2f1e-4d0c-9b8a-7f6e5d4c3b2a',
      tool: `vcs.${hostile}`,
      taskSlug: hostile,
      summary: text,
      arguments: { title: hostile, body: text },
    })
    const ask = gate({
      ...question,
      questions: [hostile, text],
      choices: [{ key: 'yes', label: hostile }],
      arguments: { questions: [hostile, text], choices: [{ key: 'yes', label: hostile }] },
    })
    const client = fakeClient([tool, ask])
    const { frame, press, controller } = await open(client)
    expectNoRawControls(frame(), 'the gate list and a tool gate')
    expect(frame()).toMatch(/^› Ops\\u001b\[2J\\u001b\]52;c;aGV… {2}vcs\.Ops\\u001b\[2J/m)
    expect(frame()).toContain(`Tool       vcs.${hostileShown}`)
    // The summary is free text: its line break kept under the label, its tab two spaces.
    expect(frame()).toContain(
      `Summary    First line ${hostileShown}\n           second line  after a tab\n`,
    )
    // The arguments are JSON: escaped as \uXXXX, they still read as JSON.
    expect(frame()).toContain(`    "title": "${hostileShown}",`)
    expect(frame()).toContain(`    "body": "First line ${hostileShown}\\nsecond line\\ta`)

    await press('j', 'a')
    expectNoRawControls(frame(), 'a question and its answer form')
    expect(frame()).toContain(
      `Questions  1. ${hostileShown}\n           2. First line ${hostileShown}`,
    )
    expect(frame()).toContain(`○ ${hostileShown} (yes)`)

    // The daemon's own words in an error are the server's text too.
    client.failure = apiError(503, { error: 'unavailable', message: hostile })
    await controller.refresh()
    await waitFor(() => expect(frame()).toContain(`✗ unavailable: ${hostileShown}`))
    expectNoRawControls(frame(), 'an error line')
  })
})

describe('the screen, drawn from props alone', () => {
  const state = {
    gates: [merge],
    selectedId: merge.id,
    loaded: true,
    listed: true,
    error: null,
    sending: false,
    notice: null,
    decided: [],
  }

  it('clips long arguments to the rows left and says how to see them all', () => {
    const long = gate({
      ...merge,
      arguments: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`key${i}`, i])),
    })
    const { lastFrame } = render(
      <ReviewScreen
        state={{ ...state, gates: [long] }}
        mode={browse}
        now={now}
        width={80}
        height={30}
        intervalMs={3000}
      />,
    )
    const lines = lastFrame()!.split('\n')
    expect(lines.length).toBeLessThanOrEqual(30)
    expect(lastFrame()).toMatch(
      new RegExp(`^ {2}… \\d+ more lines: osctl gates get ${merge.id}$`, 'm'),
    )
  })

  it('names the chat a chat question belongs to, where a run gate names its run', () => {
    const chatId = '2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a'
    const asked = gate({
      id: '4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8',
      kind: 'question',
      tool: 'os.ask_ceo',
      questions: ['Port or starboard?'],
      runId: null,
      taskId: null,
      owner: null,
      approval: null,
      chatId,
    })
    const draw = (g: Gate) =>
      render(
        <ReviewScreen
          state={{ ...state, gates: [g], selectedId: g.id }}
          mode={browse}
          now={now}
          width={100}
          height={30}
          intervalMs={3000}
        />,
      ).lastFrame()!
    const chatFrame = draw(asked)
    expect(chatFrame).toMatch(new RegExp(`Chat +${chatId}`))
    expect(chatFrame).not.toMatch(/^\s*Run\s/m)
    const runFrame = draw(merge)
    expect(runFrame).toMatch(new RegExp(`Run +${merge.runId}`))
    expect(runFrame).not.toMatch(/Chat +[0-9a-f]{8}-/)
  })

  it('wraps a long JSON line under its own indentation', () => {
    expect(jsonLines({ text: 'abcdefghij'.repeat(3) }, 24)).toEqual([
      '{',
      '  "text": "abcdefghijabc',
      '    defghijabcdefghij"',
      '}',
    ])
  })
})

describe('renderGateReview', () => {
  it('refuses without a terminal and names the verbs that do the same job', async () => {
    const client = fakeClient([])
    const stream = (isTTY: boolean) =>
      ({ isTTY }) as unknown as NodeJS.ReadStream & NodeJS.WriteStream
    const refused = renderGateReview(client as GateReviewClient, {
      stdin: stream(false),
      stdout: stream(true),
    })
    await expect(refused).rejects.toThrow(
      /^gates review is interactive and needs a terminal, but stdin is not a terminal\./,
    )
    await expect(refused).rejects.toMatchObject({ exitCode: 2 })
    await expect(refused).rejects.toThrow('osctl gates request-changes ID --note TEXT')
    expect(client.get).not.toHaveBeenCalled()
  })

  it('tells ink to draw every frame even where CI is set, before it loads', () => {
    const env: NodeJS.ProcessEnv = { CI: 'true', CONTINUOUS_INTEGRATION: '1', HOME: '/h' }
    drawEveryFrame(env)
    expect(env).toEqual({ CI: 'false', CONTINUOUS_INTEGRATION: 'false', HOME: '/h' })
    const none: NodeJS.ProcessEnv = { HOME: '/h' }
    drawEveryFrame(none)
    expect(none).toEqual({ HOME: '/h' })
  })

  it('runs on a terminal until q, and stops reading the list', async () => {
    const client = fakeClient([merge])
    const terminal = fakeTerminal()
    const done = renderGateReview(client as GateReviewClient, {
      stdin: terminal.stdin,
      stdout: terminal.stdout,
      intervalMs: 20,
    })
    await waitFor(() => expect(terminal.output()).toContain('merger'))
    terminal.press('q')
    await done
    expect(terminal.output()).toContain('gates review: nothing decided.')
    const reads = client.get.mock.calls.length
    await new Promise((r) => setTimeout(r, 60))
    expect(client.get.mock.calls.length).toBe(reads)
  })
})

describe('the controller', () => {
  it('drops a read that started before a decision (it may still list the decided gate)', async () => {
    let answer!: (gates: Gate[]) => void
    const client = {
      get: vi.fn(() => new Promise<Gate[]>((resolve) => (answer = resolve))),
      post: vi.fn(async () => ({ ...merge, status: 'decided' })),
    }
    const controller = new GateReviewController(client as unknown as GateReviewClient)
    const first = controller.refresh()
    answer([merge, mail])
    await first
    const slow = controller.refresh()
    const release = answer
    await controller.decide(merge, { decision: 'approve' })
    release([merge, mail]) // the slow read answers after the decision landed
    await slow
    expect(controller.getState().gates.map((g) => g.id)).toEqual([mail.id])
    answer([mail]) // the read the decision started
  })

  it('never sends two decisions at once', async () => {
    let land!: () => void
    const client = {
      get: vi.fn(async () => [merge]),
      post: vi.fn(() => new Promise((resolve) => (land = () => resolve({ ...merge })))),
    }
    const controller = new GateReviewController(client as unknown as GateReviewClient)
    await controller.refresh()
    const first = controller.decide(merge, { decision: 'approve' })
    expect(await controller.decide(merge, { decision: 'reject', note: 'x' })).toMatchObject({
      ok: false,
    })
    land()
    expect(await first).toMatchObject({ ok: true })
    expect(client.post).toHaveBeenCalledTimes(1)
  })
})
