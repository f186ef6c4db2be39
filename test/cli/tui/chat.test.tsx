import { randomUUID } from 'node:crypto'
import { render } from 'ink-testing-library'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { ApiClient } from '../../../cli/client.js'
import { chatEventSource } from '../../../cli/tui/chat-events.js'
import { ChatController } from '../../../cli/tui/chat-controller.js'
import { ChatApp, renderChat } from '../../../cli/tui/chat.js'
import type { EditorRun } from '../../../cli/tui/external-editor.js'
import { ChatDetail, type ChatMessage } from '../../../shared/schemas/chats.js'
import { readFixtures } from '../../helpers/chat-recorder.js'
import { expectNoRawControls, hostile, hostileShown } from '../../helpers/hostile-text.js'
import { fakeTerminal, typeKeys } from '../../helpers/terminal.js'
import { startFakeChatDaemon, type FakeChatDaemon } from '../../fakes/chat-daemon.js'
import { waitFor } from '../../helpers/wait.js'

// The chat screen over the daemon's real message shapes: test/fixtures/chat, recorded from the real
// daemon (test/helpers/chat-recorder.ts), held by a fake daemon of the chat routes that speaks
// GET /v1/chats/{id}/events (test/fakes/chat-daemon.ts) to the real client and event reader. Each
// test types as a person does (the terminal's bytes) and reads the frames a person sees.

process.env.TZ = 'UTC'
const now = Date.parse('2026-03-02T12:00:00.000Z')
const fixtures = Object.fromEntries(
  Object.entries(readFixtures()).map(([name, detail]) => [name, ChatDetail.parse(detail)]),
)
const fixture = (name: string) => structuredClone(fixtures[name]!)
const grace = (detail: ChatDetail, name = 'Grace') => ({
  id: detail.memberId,
  name,
  email: 'grace@acme.example',
})

const enter = '\r'
const escape = '\x1b'
const up = '\x1b[A'
const down = '\x1b[B'
const ctrlC = '\x03'
const ctrlG = '\x07'
const altEnter = '\x1b\r'

let daemon: FakeChatDaemon
const screens: { stop(): Promise<void>; unmount(): void }[] = []
beforeEach(async () => {
  daemon = await startFakeChatDaemon()
})
afterEach(async () => {
  for (const s of screens.splice(0)) {
    s.unmount()
    await s.stop()
  }
  await daemon.close()
})

/** The screen on a chat (or the picker), with the daemon holding these chats. */
async function open(
  chats: ChatDetail[],
  options: { memberId?: string; editDraft?: (text: string) => EditorRun; memberName?: string } = {},
) {
  for (const chat of chats) daemon.addChat(chat)
  daemon.members = [
    ...new Map(chats.map((c) => [c.memberId, grace(c, options.memberName)])).values(),
  ]
  const client = new ApiClient(daemon.url, daemon.token)
  const controller = new ChatController(client, {
    memberId: options.memberId,
    events: chatEventSource(client),
    retryMs: 50,
    pickerMs: 60_000,
  })
  const ui = render(
    <ChatApp controller={controller} now={() => now} editDraft={options.editDraft} />,
  )
  screens.push({ stop: () => controller.stop(), unmount: ui.unmount })
  void controller.start()
  const frame = () =>
    (ui.lastFrame() ?? '')
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
  // The first screen of a file draws after the modules load: a loaded core has taken over a second.
  await vi.waitFor(() => expect(frame()).not.toMatch(/Reading the chat/), { timeout: 10_000 })
  if (chats.length && options.memberId) await waitFor(() => expect(daemon.streams).toHaveLength(1))
  const press = (...keys: string[]) => typeKeys(ui, keys)
  return { controller, ui, frame, press }
}

const count = (text: string, part: string) => text.split(part).length - 1
const posts = () => daemon.sent.filter((s) => s.method === 'POST')

describe('the chat screen', () => {
  it('prints the history once into the scrollback, its markdown drawn, and a prompt below', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    expect(frame()).toMatchInlineSnapshot(`
      "
      ── Grace chat 00000000-0000-4000-8000-000000000021

      you 11:01
        How do we ship the login fix?

      Grace 11:02
        Plan

        Ship the login fix first, then the docs:

        1. Merge fix/login into main
        2. Tag the release
           ◦ run the tests
           ◦ write the notes

        ┃ Nothing goes out on a Friday.

        ╭────────────────────────────────────────────────────────────────────────────────────────────────╮
        │ sh                                                                                             │
        │ npm ci && npm test                                                                             │
        ╰────────────────────────────────────────────────────────────────────────────────────────────────╯

        See the runbook (https://runbook.example/release).

      ╭──────────────────────────────────────────────────────────────────────────────────────────────────╮
      │ ›  message Grace (Enter sends, Alt+Enter adds a line)                                            │
      ╰──────────────────────────────────────────────────────────────────────────────────────────────────╯

      Enter send · Alt+Enter new line · ↑ history · Ctrl+G $EDITOR · Esc chats · Ctrl+C clear/quit"
    `)
    await press('a', 'b', '\x7f')
    expect(count(frame(), 'How do we ship the login fix?')).toBe(1)
    expect(daemon.streams).toEqual([chat.messages.at(-1)!.id])
  })

  it('shows the reply as it streams, then the stored message in its place, once', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    const replyId = '99999999-9999-4999-8999-999999999999'
    let go: () => void = () => {}
    daemon.onSend = async (chatId) => {
      daemon.delta(chatId, replyId, '## Status\n\nAll ')
      await new Promise<void>((r) => (go = r))
      daemon.delta(chatId, replyId, 'systems **green**')
    }
    await press('Status?', enter)
    await waitFor(() => expect(frame()).toContain('Grace writing…'))
    expect(frame()).toMatch(/Grace writing…\n {2}Status\n\n {2}All\n/)
    expect(posts().at(-1)).toMatchObject({
      path: `/chats/${chat.id}/messages`,
      body: { content: 'Status?' },
    })
    go()
    await waitFor(() => expect(frame()).toContain('All systems green'))
    daemon.add(chat.id, {
      ...chat.messages.at(-1)!,
      id: replyId,
      content: '## Status\n\nAll systems **green**',
      createdAt: '2026-03-02T11:59:00.000Z',
    })
    daemon.status(chat.id, { replying: false })
    await waitFor(() => expect(frame()).not.toContain('writing…'))
    expect(count(frame(), 'All systems green')).toBe(1)
    expect(frame()).toMatch(/Grace 11:59\n {2}Status\n\n {2}All systems green/)
  })

  it('sends a message typed and entered while osctl started; a line feed later adds a line', async () => {
    const chat = fixture('reply')
    daemon.addChat(chat)
    daemon.members = [grace(chat)]
    const client = new ApiClient(daemon.url, daemon.token)
    const controller = new ChatController(client, {
      memberId: chat.memberId,
      events: chatEventSource(client),
      retryMs: 50,
    })
    const ui = render(<ChatApp controller={controller} now={() => now} />)
    screens.push({ stop: () => controller.stop(), unmount: ui.unmount })
    void controller.start()
    // The terminal was cooked while osctl started: the Enter typed then waits as a line feed, and
    // ink reads it the moment the screen takes the terminal.
    await waitFor(() => expect(ui.stdin.listenerCount('readable')).toBeGreaterThan(0))
    ui.stdin.write('hello\n')
    await waitFor(() => expect(posts()).toHaveLength(1))
    expect(posts()[0]!.body).toEqual({ content: 'hello' })
    // Later, a line feed is Ctrl+J: a new line in the prompt, nothing sent.
    await new Promise((r) => setTimeout(r, 600))
    await typeKeys(ui, ['one', '\n', 'two'])
    expect(posts()).toHaveLength(1)
    await waitFor(() => expect(ui.lastFrame()).toContain('│   two'))
  })

  it('takes a pasted paragraph of three lines whole into the prompt and sends it on Enter', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    await press('Notes: ', '\x1b[200~', 'line one\rline two\rline three', '\x1b[201~')
    expect(posts()).toHaveLength(0)
    expect(frame()).toContain('│ › Notes: line one')
    expect(frame()).toContain('│   line two')
    expect(frame()).toContain('│   line three')
    await press(altEnter, 'and more', enter)
    await waitFor(() => expect(posts()).toHaveLength(1))
    expect(posts()[0]!.body).toEqual({ content: 'Notes: line one\nline two\nline three\nand more' })
    // Sent: the prompt empties, and Up brings the message back.
    await waitFor(() => expect(frame()).toContain('message Grace'))
    await press(up)
    expect(frame()).toContain('│   and more')
  })

  it('decides a tool call in place, then shows it run and its result as the daemon tells', async () => {
    const waiting = fixture('tool-call-waiting')
    const done = fixture('tool-call-done')
    const { frame, press } = await open([waiting], { memberId: waiting.memberId })
    expect(frame()).toContain('Grace wants to call vcs.open_pull_request')
    expect(frame()).toContain('"title": "Fix the login"')
    expect(frame().split('\n').at(-1)).toBe('a allow · A always · d deny · Esc chats · Ctrl+C quit')
    const call = waiting.messages.find((m) => m.toolCall)!
    daemon.onDecision = async (chatId, decided) => {
      await new Promise((r) => setTimeout(r, 100))
      daemon.update(
        chatId,
        done.messages.find((m) => m.id === decided.id)!,
      )
      daemon.add(chatId, done.messages.at(-1)!)
      daemon.status(chatId, { replying: false })
    }
    await press('x')
    expect(frame()).toContain('The member waits on this tool call')
    await press('a')
    await waitFor(() => expect(frame()).toContain('⚙ vcs.open_pull_request · allowed, running…'))
    expect(posts()[0]).toMatchObject({
      path: `/chats/${waiting.id}/tool-calls/${call.id}/decision`,
      body: { decision: 'allow' },
    })
    expect(frame()).not.toContain('wants to call')
    await waitFor(() => expect(frame()).toContain('→ opened acme/web#1'))
    expect(frame()).toContain('Opened acme/web#1.')
    expect(count(frame(), 'vcs.open_pull_request ·')).toBe(1)
    expect(frame()).toContain('message Grace')
  })

  it('offers a must-gate tool allow and deny only, and says why', async () => {
    const chat = fixture('must-gate-waiting')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    expect(frame()).toContain(
      'vcs.merge_pull_request is on the must-gate list of its connection: decided each time.',
    )
    expect(frame()).toContain('a allow once · d deny')
    expect(frame().split('\n').at(-1)).toBe('a allow · d deny · Esc chats · Ctrl+C quit')
    await press('A')
    expect(frame()).toMatch(
      /must-gate list of its connection: decided each time: a allow · d\s+deny\./,
    )
    expect(posts()).toHaveLength(0)
    await press('d')
    await waitFor(() => expect(frame()).toContain('⚙ vcs.merge_pull_request · denied'))
    expect(posts()[0]!.body).toEqual({ decision: 'deny' })
  })

  it('asks a question once, a choice picked by number and a note typed, answered in place', async () => {
    const chat = fixture('question-waiting')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    expect(count(frame(), 'Which day should it ship?')).toBe(1)
    expect(frame()).toContain('│   1. Friday')
    expect(frame()).toContain('│   2. Monday')
    await press(enter)
    expect(frame()).toContain('Type an answer, or pick a choice with ↑↓ or its number, then Enter.')
    await press('2')
    expect(frame()).toContain('› 2. Monday')
    await press('after the standup', enter)
    await waitFor(() => expect(frame()).toContain('→ answered: Monday · after the standup'))
    expect(posts()[0]).toMatchObject({
      path: `/gates/chat/${chat.id}/decision`,
      body: {
        decision: 'approve',
        gateId: chat.messages.find((m) => m.question)!.question!.gateId,
        answers: ['after the standup'],
        choice: 'mon',
      },
    })
    expect(frame()).not.toContain('asks you')
    expect(count(frame(), 'Which day should it ship?')).toBe(1)
  })

  it('takes the box of a question answered elsewhere (gates review) away', async () => {
    const chat = fixture('question-waiting')
    const { frame } = await open([chat], { memberId: chat.memberId })
    expect(frame()).toContain('Grace asks you')
    const answered = fixture('question-answered').messages.find((m) => m.question)!
    daemon.update(chat.id, answered)
    await waitFor(() => expect(frame()).not.toContain('asks you'))
    expect(frame()).toContain(
      '  ? Which day should it ship?\n    → answered: Monday · after the standup',
    )
    expect(posts()).toHaveLength(0)
  })

  it('shows a question rejected elsewhere as rejected, with its note (issue 51)', async () => {
    const chat = fixture('question-waiting')
    const { frame } = await open([chat], { memberId: chat.memberId })
    const asked = fixture('question-answered').messages.find((m) => m.question)!
    const answer = { decision: 'reject' as const, choice: null, answers: null, note: 'Not now' }
    daemon.update(chat.id, { ...asked, question: { ...asked.question!, answer } })
    await waitFor(() => expect(frame()).not.toContain('asks you'))
    expect(frame()).toContain('  ? Which day should it ship?\n    → rejected: Not now')
    expect(frame()).not.toMatch(/→ (answered|approved)/)
  })

  it("draws osd's notice as a status line, not as the member speaking", async () => {
    const chat = fixture('notice')
    const { frame } = await open([chat], { memberId: chat.memberId })
    expect(frame()).toMatch(/^⚠ osd: I cannot reply yet: No model key is connected/m)
    expect(frame()).not.toMatch(/^Grace /m)
  })

  it('shows a task proposal as pretty JSON to allow or deny', async () => {
    const chat = fixture('create-task-waiting')
    const { frame } = await open([chat], { memberId: chat.memberId })
    expect(frame()).toContain('Grace proposes a task: allow creates it')
    expect(frame()).toContain('"name": "Weekly release notes",')
  })

  it('Ctrl+C clears a draft, and quits on an empty prompt; Ctrl+G edits the draft in $EDITOR', async () => {
    const chat = fixture('reply')
    const edited: string[] = []
    const { frame, press } = await open([chat], {
      memberId: chat.memberId,
      editDraft: (text) => (edited.push(text), { text: `${text}\nwritten in the editor` }),
    })
    await press('first draft', ctrlG)
    expect(edited).toEqual(['first draft'])
    expect(frame()).toContain('│   written in the editor')
    await press(ctrlC)
    expect(frame()).not.toContain('first draft')
    expect(frame()).toContain('message Grace')
    await press(ctrlC)
    await waitFor(() =>
      expect(frame()).toContain(`chat: read it again with osctl chats get ${chat.id}`),
    )
    expect(posts()).toHaveLength(0)
  })

  it('follows again after the stream drops, from the newest message, and shows what it missed', async () => {
    const chat = fixture('tool-call-waiting')
    const done = fixture('tool-call-done')
    const { frame } = await open([chat], { memberId: chat.memberId })
    daemon.refuseStreams = 503
    daemon.drop()
    await waitFor(() => expect(frame()).toContain('✗ unavailable: restarting (trying again)'))
    const call = done.messages.find((m) => m.toolCall)!
    daemon.update(chat.id, call)
    daemon.add(chat.id, done.messages.at(-1)!)
    daemon.refuseStreams = null
    await waitFor(() => expect(frame()).toContain('Opened acme/web#1.'))
    // The call is the newest message the screen held: its change comes by the read after a reconnect.
    await waitFor(() => expect(frame()).toContain('→ opened acme/web#1'))
    expect(frame()).not.toContain('trying again')
    expect(new Set(daemon.streams)).toEqual(new Set([chat.messages.at(-1)!.id]))
  })

  it('lists chats with their unread counts and a mark while the member replies', async () => {
    const reply = { ...fixture('reply'), unread: 2 }
    const other = { ...fixture('notice'), replying: true }
    const { frame, press } = await open([reply, other])
    expect(frame()).toMatch(/› Grace {2}2 unread {2}\d+m ago/)
    expect(frame()).toMatch(/^ {2}Grace {2}✎ replying… {2}\d+m ago$/m)
    await press(down, enter)
    await waitFor(() => expect(frame()).toContain('⚠ osd: I cannot reply yet'))
    // The member is replying there: the first Esc stops the reply, the second leaves.
    await press(escape)
    await waitFor(() => expect(frame()).toContain('(stopped)'))
    expect(posts().map((p) => p.path)).toEqual([`/chats/${other.id}/reply/stop`])
    await press(escape)
    await waitFor(() => expect(frame()).toContain('pick a chat'))
  })

  it('says when a chat closes while shown, and sends nothing there', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    daemon.status(chat.id, { status: 'closed', outcome: 'closed', replying: false })
    await waitFor(() =>
      expect(frame()).toContain('This chat is closed (closed). Esc picks another chat.'),
    )
    await press('more', enter)
    expect(frame()).toContain('This chat is closed: Esc picks another')
    expect(posts()).toHaveLength(0)
  })
})

// A message typed while a reply streams, Esc while it does, a resize (issue 51 item 16).
describe('the chat screen while the member replies', () => {
  const replyId = '99999999-9999-4999-8999-999999999999'
  /** The member's reply to the first message waits for `go`; replies to later ones come at once. */
  function replyScript(chat: ChatDetail) {
    let go: () => void = () => {}
    let replies = 0
    daemon.onSend = async (chatId, message) => {
      const id = replies++ === 0 ? replyId : randomUUID()
      daemon.delta(chatId, id, `On "${message.content}": `)
      if (id === replyId) await new Promise<void>((r) => (go = r))
      daemon.add(chatId, {
        ...chat.messages.at(-1)!,
        id,
        content: `Done with ${message.content}.`,
        createdAt: '2026-03-02T11:59:00.000Z',
      })
      daemon.status(chatId, { replying: false })
    }
    return { finish: () => go() }
  }

  it('queues what is typed during a reply and sends it when the reply ends, in order', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    const script = replyScript(chat)
    await press('Status?', enter)
    await waitFor(() => expect(frame()).toContain('Grace writing…'))
    await press('first queued', enter, 'second queued', enter)
    // Taken, not refused: shown as queued in order, the prompt empty again, nothing sent yet.
    expect(frame()).toMatch(/you · queued\n {2}first queued\n\nyou · queued\n {2}second queued/)
    expect(frame()).toContain('message Grace (Enter sends')
    expect(frame()).not.toContain('still replying')
    expect(posts()).toHaveLength(1)
    script.finish()
    await waitFor(() => expect(frame()).toContain('Done with second queued.'))
    expect(frame()).not.toContain('· queued')
    // One POST each, none refused with 409 chat_replying (a refused one would be a POST too).
    expect(posts().map((p) => p.body)).toEqual([
      { content: 'Status?' },
      { content: 'first queued' },
      { content: 'second queued' },
    ])
    expect(count(frame(), 'first queued')).toBe(2) // as the person sent it, and in the reply to it
  })

  it('stops the reply on Esc: the partial reply marked stopped, the draft kept, the queue sent after', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    const script = replyScript(chat)
    // osd ends the stopped reply with what it had written, marked, then the chat not replying.
    daemon.onStop = (chatId) => {
      daemon.add(chatId, {
        ...chat.messages.at(-1)!,
        id: replyId,
        content: 'On "Status?": ',
        stopped: true,
        createdAt: '2026-03-02T11:59:00.000Z',
      })
      daemon.status(chatId, { replying: false })
    }
    await press('Status?', enter)
    await waitFor(() => expect(frame()).toContain('Grace writing…'))
    expect(frame()).toContain('Esc stop reply')
    await press('queued after', enter)
    await press('half a thought', escape)
    await waitFor(() => expect(frame()).toContain('(stopped)'))
    expect(frame()).toMatch(/On "Status\?":\n {2}\(stopped\)/)
    expect(frame()).not.toContain('Grace writing…')
    // The draft is kept; the queued message went once the reply had ended, as after any reply.
    expect(frame()).toContain('│ › half a thought')
    await waitFor(() => expect(frame()).toContain('Done with queued after.'))
    expect(posts().map((p) => [p.path.replace(chat.id, 'ID'), p.body])).toEqual([
      ['/chats/ID/messages', { content: 'Status?' }],
      ['/chats/ID/reply/stop', undefined],
      ['/chats/ID/messages', { content: 'queued after' }],
    ])
    // The reply over, Esc is Esc again: it clears the draft, and stops nothing.
    await press(escape)
    expect(frame()).not.toContain('half a thought')
    expect(posts()).toHaveLength(3)
    script.finish()
  })

  it('keeps queued messages the chat closes on, and prints them as not sent on leaving', async () => {
    const chat = fixture('reply')
    const { frame, press } = await open([chat], { memberId: chat.memberId })
    replyScript(chat)
    await press('Status?', enter)
    await waitFor(() => expect(frame()).toContain('Grace writing…'))
    await press('never to be sent', enter)
    daemon.status(chat.id, { status: 'closed', outcome: 'closed', replying: false })
    await waitFor(() => expect(frame()).toContain('you · not sent\n  never to be sent'))
    await press(escape)
    await waitFor(() => expect(frame()).toContain('pick a chat'))
    expect(frame()).toContain('you · not sent\n  never to be sent')
    expect(posts()).toHaveLength(1)
  })
})

describe('hostile: terminal injection on the chat screen (issue 41)', () => {
  // A member's reply is a model's text; a tenant names the member and the tool. Each holds ESC[2J,
  // OSC 52, CSI as U+009B and a right-to-left override, as itself or as an HTML entity.
  const text = `First line ${hostile}\nsecond line\tafter a tab`
  const reply = [
    `# Plan ${hostile}`,
    '',
    `An entity too: &#27;[2J and &#x9b;31m and \`code ${hostile}\``,
    '',
    `- ${hostile}`,
    '',
    '| who | what |',
    '| --- | --- |',
    `| ${hostile} | x |`,
    '',
    '```sh',
    hostile,
    '```',
  ].join('\n')

  it('shows the reply, the member and a tool call escaped, never a control byte', async () => {
    const chat = fixture('tool-call-done')
    chat.messages[0]!.content = `hello ${hostile}`
    chat.messages[1]!.content = reply
    const call = chat.messages[2]!.toolCall!
    call.name = `vcs.${hostile}`
    call.arguments = { title: hostile, body: text }
    call.result = text
    chat.messages[3]!.content = text
    const { frame } = await open([chat], { memberId: chat.memberId, memberName: hostile })
    expectNoRawControls(frame(), 'the chat screen')
    expect(frame()).toContain(`── ${hostileShown} chat ${chat.id}`)
    expect(frame()).toContain(`  hello ${hostileShown}\n`)
    expect(frame()).toContain(`  Plan ${hostileShown}\n`)
    expect(frame()).toContain('An entity too: \\u001b[2J and \\u009b31m and code\n')
    expect(frame()).toContain(`• ${hostileShown}`)
    // Widths are counted on what is shown: the table's columns and the code box line up.
    expect(frame()).toMatch(/^ {2}Ops\\u001b\[2J\S*gnp\.exe {3}x$/m)
    expect(frame()).toMatch(/^ {2}│ Ops\\u001b\[2J\S*gnp\.exe +│$/m)
    expect(frame()).toContain(`⚙ vcs.${hostileShown} · done`)
    expect(frame()).toContain(`"title": "${hostileShown}",`)
    expect(frame()).toContain(`→ First line ${hostileShown}\n`)
    // Free text keeps its line break; its tab is two spaces, which ink can count.
    expect(frame()).toContain('  second line  after a tab\n')
    expect(frame()).toContain(`message ${hostileShown}`)
  })

  it('shows a waiting question and its choices escaped', async () => {
    const chat = fixture('question-waiting')
    const asked = chat.messages[1]!
    asked.content = hostile
    asked.question!.questions = [hostile]
    asked.question!.choices = [{ key: 'fri', label: hostile }]
    const { frame } = await open([chat], { memberId: chat.memberId, memberName: hostile })
    expectNoRawControls(frame(), 'a waiting question')
    expect(frame()).toContain(`${hostileShown} asks you`)
    expect(frame()).toContain(`1. ${hostileShown}`)
  })
})

describe('renderChat', () => {
  it('refuses without a terminal and names the verbs that do the same job', async () => {
    const client = new ApiClient(daemon.url, daemon.token)
    const stream = (isTTY: boolean) =>
      ({ isTTY }) as unknown as NodeJS.ReadStream & NodeJS.WriteStream
    const refused = renderChat(client, { stdin: stream(true), stdout: stream(false) })
    await expect(refused).rejects.toThrow(
      /^chat is interactive and needs a terminal, but stdout is not a terminal\./,
    )
    await expect(refused).rejects.toMatchObject({ exitCode: 2 })
    expect(daemon.sent).toHaveLength(0)
  })

  it('runs on a terminal with bracketed paste on until Ctrl+C, and ends its stream', async () => {
    const chat = fixture('reply')
    daemon.addChat(chat)
    daemon.members = [grace(chat)]
    const terminal = fakeTerminal()
    const done = renderChat(new ApiClient(daemon.url, daemon.token), {
      memberId: chat.memberId,
      stdin: terminal.stdin,
      stdout: terminal.stdout,
    })
    await waitFor(() => expect(terminal.output()).toContain('Nothing goes out on a Friday.'))
    await waitFor(() => expect(daemon.streams).toHaveLength(1))
    expect(terminal.output().startsWith('\x1b[?2004h')).toBe(true)
    terminal.press(ctrlC)
    await done
    expect(terminal.output()).toContain(`osctl chats get ${chat.id}`)
    expect(terminal.output().endsWith('\x1b[?2004l')).toBe(true)
  })

  it('draws itself again whole at the new width after a resize, each settled line once (issue 51)', async () => {
    const chat = fixture('reply')
    daemon.addChat(chat)
    daemon.members = [grace(chat)]
    const terminal = fakeTerminal()
    const done = renderChat(new ApiClient(daemon.url, daemon.token), {
      memberId: chat.memberId,
      stdin: terminal.stdin,
      stdout: terminal.stdout,
    })
    await waitFor(() => expect(terminal.screen()).toContain('message Grace'))
    const wide = terminal.screen()
    expect(count(wide, 'Nothing goes out on a Friday.')).toBe(1)
    // Dragged narrower in steps, as a window edge is.
    for (const columns of [90, 75, 60]) terminal.resize(columns, 30)
    const fits = (screen: string) => screen.split('\n').every((l) => l.length <= 60)
    await waitFor(() => {
      const screen = terminal.screen()
      expect(screen).toMatch(/^ {2}╭─+╮$/m) // the code box, whole, at the new width
      expect(fits(screen)).toBe(true)
    })
    const narrow = terminal.screen()
    for (const line of ['How do we ship the login fix?', 'Nothing goes out on a Friday.', '│ sh'])
      expect(count(narrow, line), line).toBe(1)
    expect(count(narrow, `── Grace chat ${chat.id}`)).toBe(1)
    expect(narrow.match(/^╭─+╮$/gm)).toEqual([`╭${'─'.repeat(58)}╮`]) // one prompt, 60 wide
    expect(count(narrow, 'Enter send · Alt+Enter new line')).toBe(1)
    // What is typed next is drawn at the new width too.
    terminal.press('after the resize')
    await waitFor(() => expect(terminal.screen()).toMatch(/^│ › after the resize +│$/m))
    expect(fits(terminal.screen())).toBe(true)
    terminal.press('\x15') // Ctrl+U: the draft gone, Ctrl+C quits
    terminal.press(ctrlC)
    terminal.press(ctrlC)
    await done
  })
})

export type { ChatMessage }
