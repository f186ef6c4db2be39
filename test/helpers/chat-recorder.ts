import { randomUUID } from 'node:crypto'
import { readFileSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { ChatDetail, type ChatMessage } from '../../shared/schemas/chats.js'
import { startFakeMcpServer } from '../fakes/mcp-server.js'
import { startFakeModelProvider, type Reply } from '../fakes/model-provider.js'
import { createTestApp, type TestApp, type TestEnterprise } from './app.js'
import { startTestEngine } from './runs.js'

// Records what the real daemon answers GET /v1/chats/{id} with, at the moments the chat screen draws:
// the daemon runs in this process (createTestApp + startTestEngine, as test/server/engine/chats.test.ts
// does), its member replies through the fake model provider and calls tools of the fake MCP server.
// The answers, their ids and times made stable, are the fixtures of test/fixtures/chat/ that the
// screen's tests draw, so those tests draw what the daemon sends, not shapes written by hand.
// test/cli/tui/chat-fixtures.test.ts fails when the fixtures drift from what the daemon answers now;
// `npm run record:chat` writes them again.

export const fixtureDir = join(import.meta.dirname, '..', 'fixtures', 'chat')

/** The scenes recorded, by fixture name: the chat's detail at that moment. */
export type Recording = Record<string, ChatDetail>

export const memberName = 'Grace'

const markdownReply = [
  '# Plan',
  '',
  'Ship the **login fix** first, then the *docs*:',
  '',
  '1. Merge `fix/login` into `main`',
  '2. Tag the release',
  '   - run the tests',
  '   - write the notes',
  '',
  '> Nothing goes out on a Friday.',
  '',
  '```sh',
  'npm ci && npm test',
  '```',
  '',
  'See [the runbook](https://runbook.example/release).',
].join('\n')

/** Every scene, each in an enterprise of its own, against one daemon. */
export async function recordChats(): Promise<Recording> {
  const model = await startFakeModelProvider()
  const mcp = await startFakeMcpServer()
  const t = await createTestApp({
    providerBaseUrls: { provider_a: model.url, provider_b: model.url },
  })
  const engine = await startTestEngine(t)
  const recording: Recording = {}
  try {
    const scene = async (keyless = false) => {
      const e = await t.createEnterprise(`Chat fixtures ${randomUUID().slice(0, 8)}`)
      const key = `key-${randomUUID()}`
      const as = { token: e.token }
      if (!keyless)
        await ok(t, 'POST', '/v1/llm/bindings', as, { apiKey: key, provider: 'provider_a' })
      const member = await ok(t, 'POST', '/v1/members', as, {
        name: memberName,
        persona: 'You are the release manager.',
      })
      // A connection named vcs starts with vcs.merge_pull_request on its mustGate list.
      await ok(t, 'POST', '/v1/tools/bindings', as, {
        name: 'vcs',
        url: mcp.url,
        layer: 'member',
        layerId: member.id,
      })
      const script = (...replies: Reply[]) => model.script(key, ...replies)
      const open = async (body: Record<string, unknown> = { memberId: member.id }) =>
        (await ok(t, 'POST', '/v1/chats', as, body)).id as string
      const send = (chatId: string, content: string) =>
        ok(t, 'POST', `/v1/chats/${chatId}/messages`, as, { content })
      const until = (chatId: string, done: (d: ChatDetail) => boolean) => follow(t, e, chatId, done)
      return { e, as, script, open, send, until }
    }

    // A plain reply in markdown.
    {
      const s = await scene()
      s.script({ text: markdownReply })
      const chat = await s.open()
      await s.send(chat, 'How do we ship the login fix?')
      recording.reply = await s.until(chat, memberSaid())
    }

    // A tool call: waiting, then allowed, run and done with its result, then the reply.
    {
      const s = await scene()
      s.script(
        {
          text: 'I will open the pull request.',
          toolCalls: [
            {
              name: 'vcs.open_pull_request',
              arguments: { repo: 'acme/web', title: 'Fix the login' },
            },
          ],
        },
        { text: 'Opened **acme/web#1**.' },
      )
      const chat = await s.open()
      await s.send(chat, 'Open a pull request for the login fix')
      const waiting = await s.until(chat, waits('toolCall'))
      recording['tool-call-waiting'] = waiting
      const call = waiting.messages.find((m) => m.toolCall?.status === 'waiting')!
      await ok(t, 'POST', `/v1/chats/${chat}/tool-calls/${call.id}/decision`, s.as, {
        decision: 'allow',
      })
      recording['tool-call-done'] = await s.until(chat, memberSaid('Opened **acme/web#1**.'))
    }

    // A tool on its connection's mustGate list: allow or deny only.
    {
      const s = await scene()
      s.script(
        {
          toolCalls: [
            { name: 'vcs.merge_pull_request', arguments: { repo: 'acme/web', number: 1 } },
          ],
        },
        { text: 'Left it unmerged.' },
      )
      const chat = await s.open()
      await s.send(chat, 'Merge it')
      recording['must-gate-waiting'] = await s.until(chat, waits('toolCall'))
    }

    // A question (os.ask_ceo) with choices: waiting, then answered, then the reply.
    {
      const s = await scene()
      s.script(
        {
          toolCalls: [
            {
              name: 'os.ask_ceo',
              arguments: {
                questions: ['Which day should it ship?'],
                choices: [
                  { key: 'fri', label: 'Friday' },
                  { key: 'mon', label: 'Monday' },
                ],
              },
            },
          ],
        },
        { text: 'Monday it is.' },
      )
      const chat = await s.open()
      await s.send(chat, 'Plan the release')
      recording['question-waiting'] = await s.until(chat, waits('question'))
      await ok(t, 'POST', `/v1/gates/chat/${chat}/decision`, s.as, {
        decision: 'approve',
        choice: 'mon',
        answers: ['after the standup'],
      })
      recording['question-answered'] = await s.until(chat, memberSaid('Monday it is.'))
    }

    // A task proposal of a create-task chat, waiting for the decision.
    {
      const s = await scene()
      s.script({
        text: 'Here is the task:',
        toolCalls: [
          {
            name: 'os.create_task',
            arguments: {
              definition: {
                name: 'Weekly release notes',
                skillMd: 'Collect the merged pull requests of the week and write the notes.',
                assigneeRole: 'ceo',
              },
            },
          },
        ],
      })
      const chat = await s.open({ purpose: 'create_task' })
      await s.send(chat, 'Release notes every Friday')
      recording['create-task-waiting'] = await s.until(chat, waits('toolCall'))
    }

    // No model key: osd says why no reply comes (a notice, not the member speaking).
    {
      const s = await scene(true)
      const chat = await s.open()
      await s.send(chat, 'Anyone there?')
      recording.notice = await s.until(chat, (d) => d.messages.some((m) => m.notice))
    }
  } finally {
    await engine.stop()
    await model.close()
    await mcp.close()
  }
  return recording
}

async function ok(
  t: TestApp,
  method: string,
  path: string,
  as: { token: string },
  body: unknown,
): Promise<any> {
  const res = await t.call(method, path, { ...as, body })
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`)
  return res.body
}

const memberSaid =
  (content?: string) =>
  (d: ChatDetail): boolean => {
    const last = d.messages.at(-1)
    return !d.replying && last?.role === 'member' && (!content || last.content === content)
  }

const waits =
  (what: 'toolCall' | 'question') =>
  (d: ChatDetail): boolean =>
    d.messages.some((m: ChatMessage) => m[what]?.status === 'waiting')

/** Follows the chat with the long-poll until `done` holds; the detail then, read whole. */
async function follow(
  t: TestApp,
  e: TestEnterprise,
  chatId: string,
  done: (d: ChatDetail) => boolean,
  ms = 20_000,
): Promise<ChatDetail> {
  const deadline = Date.now() + ms
  for (;;) {
    const res = await t.call('GET', `/v1/chats/${chatId}`, { token: e.token })
    const detail = ChatDetail.parse(res.body)
    if (done(detail)) return detail
    if (Date.now() > deadline) throw new Error(`chat never got there: ${JSON.stringify(detail)}`)
    const last = detail.messages.at(-1)?.id
    await t.call('GET', `/v1/chats/${chatId}?afterMessageId=${last}&waitSeconds=1`, {
      token: e.token,
    })
  }
}

const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
const isoTime = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

/**
 * The recording with stable ids and times: each id becomes 00000000-0000-4000-8000-<n> in the order
 * ids first appear (also inside text: "Created task <id>"); the times, in their order, become a
 * minute apart from 11:00 on 2 March 2026 (so the same time stays the same, a later one later). With
 * `times: false` every time reads "<time>" (for comparing two recordings, whose times differ).
 */
export function stable(recording: Recording, { times = true } = {}): Recording {
  const ids = new Map<string, string>()
  const seen = new Set<string>()
  const collect = (value: unknown): void => {
    if (typeof value === 'string' && isoTime.test(value)) seen.add(value)
    else if (Array.isArray(value)) value.forEach(collect)
    else if (value && typeof value === 'object') Object.values(value).forEach(collect)
  }
  collect(recording)
  const base = Date.parse('2026-03-02T11:00:00.000Z')
  const stamps = new Map(
    [...seen]
      .sort((a, b) => Date.parse(a) - Date.parse(b))
      .map((time, i) => [time, new Date(base + i * 60_000).toISOString()]),
  )
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') {
      if (isoTime.test(value)) return times ? stamps.get(value) : '<time>'
      return value.replace(uuid, (id) => {
        if (!ids.has(id))
          ids.set(id, `00000000-0000-4000-8000-${String(ids.size + 1).padStart(12, '0')}`)
        return ids.get(id)!
      })
    }
    if (Array.isArray(value)) return value.map(walk)
    if (value && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v)]))
    return value
  }
  return Object.fromEntries(
    Object.keys(recording)
      .sort()
      .map((name) => [name, walk(recording[name]) as ChatDetail]),
  )
}

/** The fixtures as committed. */
export function readFixtures(): Recording {
  const names = readdirSync(fixtureDir).filter((f) => f.endsWith('.json'))
  return Object.fromEntries(
    names.map((f) => [
      f.replace(/\.json$/, ''),
      JSON.parse(readFileSync(join(fixtureDir, f), 'utf8')) as ChatDetail,
    ]),
  )
}

export function writeFixtures(recording: Recording): void {
  mkdirSync(fixtureDir, { recursive: true })
  for (const [name, detail] of Object.entries(stable(recording)))
    writeFileSync(join(fixtureDir, `${name}.json`), JSON.stringify(detail, null, 2) + '\n')
}
