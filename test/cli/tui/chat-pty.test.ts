import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatDetail, type ChatMessage } from '../../../shared/schemas/chats.js'
import { readFixtures } from '../../helpers/chat-recorder.js'
import { hasScript, osctlBin } from '../../helpers/processes.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeChatDaemon, type FakeChatDaemon } from '../../fakes/chat-daemon.js'

// `osctl chat` as a person runs it: the built osctl on a real pseudo-terminal (util-linux `script`),
// typing its bytes, reading what it draws. It talks to the fake daemon of the chat routes and their
// events (test/fakes/chat-daemon.ts) holding the real daemon's recorded messages; the run against a
// real daemon is made where the daemon's /events is built.

const fixtures = readFixtures()
const base = ChatDetail.parse(fixtures.reply)
const waitingCall = ChatDetail.parse(fixtures['tool-call-waiting']).messages.find(
  (m) => m.toolCall,
)!
const doneCall = ChatDetail.parse(fixtures['tool-call-done']).messages.find((m) => m.toolCall)!
const question = ChatDetail.parse(fixtures['question-waiting']).messages.find((m) => m.question)!

let daemon: FakeChatDaemon
let member: string
beforeAll(async () => {
  daemon = await startFakeChatDaemon()
  member = base.memberId
  daemon.members = [{ id: member, name: 'Grace', email: 'grace@acme.example' }]
  daemon.addChat({ ...base, messages: base.messages.slice(0, 1) })
})
afterAll(() => daemon?.close())

let clock = Date.parse('2026-03-02T11:30:00.000Z')
const later = () => new Date((clock += 60_000)).toISOString()
const memberSays = (id: string, content: string): ChatMessage => ({
  id,
  role: 'member',
  content,
  toolCall: null,
  question: null,
  notice: false,
  createdAt: later(),
})
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('osctl chat on a real pseudo-terminal', () => {
  it.skipIf(!hasScript)(
    'streams a reply, takes a paste of three lines, answers a question and allows a tool call in place',
    { timeout: 60_000 },
    async () => {
      const chatId = base.id
      const env = {
        ...process.env,
        OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')),
        OSCTL_URL: daemon.url,
        OSCTL_TOKEN: daemon.token,
        TERM: 'xterm-256color',
        CI: 'true',
      }
      const child = execa(
        'script',
        ['-qfec', `stty cols 100 rows 40; exec node ${osctlBin} chat ${member}`, '/dev/null'],
        { env, reject: false, stdin: 'pipe' },
      )
      let drawn = ''
      child.stdout!.on('data', (chunk: Buffer) => (drawn += chunk.toString()))
      const text = () => drawn.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '')
      const type = (bytes: string) => child.stdin!.write(bytes)
      const sent = () => daemon.sent.filter((s) => s.method === 'POST')
      const done = (_id: string) => daemon.status(chatId, { replying: false })

      await eventually(() => text().includes('How do we ship the login fix?'), 15_000, 'the chat')
      expect(drawn).toContain('\x1b[?2004h') // bracketed paste asked for

      // 1. A streamed reply: its first half is drawn before the rest is written.
      let finish: () => void = () => {}
      daemon.onSend = async (id) => {
        const replyId = '77777777-7777-4777-8777-777777777777'
        daemon.delta(id, replyId, 'Streaming **the first** half')
        await new Promise<void>((r) => (finish = r))
        daemon.delta(id, replyId, ', then the rest.')
        await pause(100)
        daemon.add(id, memberSays(replyId, 'Streaming **the first** half, then the rest.'))
        done(id)
      }
      type('hello there')
      await eventually(() => text().includes('hello there'), 10_000, 'the typed text')
      type('\r')
      await eventually(() => text().includes('Streaming the first half'), 10_000, 'the first delta')
      expect(text()).not.toContain('then the rest')
      finish()
      await eventually(
        () => text().includes('Streaming the first half, then the rest.'),
        10_000,
        'the reply',
      )

      // 2. A paste of three lines is inserted whole and sent only on Enter.
      daemon.onSend = async (id, m) => {
        daemon.add(
          id,
          memberSays(
            '66666666-6666-4666-8666-666666666666',
            `Got ${m.content.split('\n').length} lines.`,
          ),
        )
        done(id)
      }
      type('\x1b[200~first line\rsecond line\rthird line\x1b[201~')
      await eventually(() => text().includes('third line'), 10_000, 'the paste in the prompt')
      await pause(300)
      expect(sent()).toHaveLength(1)
      type('\r')
      await eventually(() => text().includes('Got 3 lines.'), 10_000, 'the paste sent')
      expect(sent()[1]!.body).toEqual({ content: 'first line\nsecond line\nthird line' })

      // 3. A question answered in place: a choice by its number, Enter.
      daemon.onSend = async (id) => daemon.add(id, { ...question, createdAt: later() })
      daemon.onAnswer = async (id) => {
        daemon.add(id, memberSays('55555555-5555-4555-8555-555555555555', 'Friday, then.'))
        done(id)
      }
      type('When?\r')
      await eventually(() => text().includes('Grace asks you'), 10_000, 'the question')
      type('1')
      await pause(200)
      type('\r')
      await eventually(() => text().includes('Friday, then.'), 10_000, 'the answer taken')
      expect(sent().at(-1)).toMatchObject({
        path: `/gates/chat/${chatId}/decision`,
        body: { decision: 'approve', gateId: question.question!.gateId, choice: 'fri' },
      })

      // 4. A tool call allowed in place, its run and result shown as the daemon tells them.
      daemon.onSend = async (id) => daemon.add(id, { ...waitingCall, createdAt: later() })
      daemon.onDecision = async (id) => {
        await pause(200)
        daemon.update(id, { ...doneCall, createdAt: waitingCall.createdAt })
        daemon.add(id, memberSays('44444444-4444-4444-8444-444444444444', 'Opened it.'))
        done(id)
      }
      type('Open the pull request\r')
      await eventually(
        () => text().includes('Grace wants to call vcs.open_pull_request'),
        10_000,
        'the call',
      )
      type('a')
      await eventually(() => text().includes('→ opened acme/web#1'), 10_000, 'the result')
      await eventually(() => text().includes('Opened it.'), 10_000, 'the reply after the call')
      expect(sent().at(-1)).toMatchObject({
        path: `/chats/${chatId}/tool-calls/${waitingCall.id}/decision`,
        body: { decision: 'allow' },
      })

      // Ctrl+C on an empty prompt quits, leaving the terminal as it found it.
      type('\x03')
      await eventually(() => text().includes(`osctl chats get ${chatId}`), 10_000, 'the end')
      expect((await child).exitCode).toBe(0)
      expect(drawn).toContain('\x1b[?2004l')
    },
  )
})
