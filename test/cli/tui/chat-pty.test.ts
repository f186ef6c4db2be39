import { mkdtemp } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serve, type ServerType } from '@hono/node-server'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { hasScript, osctlBin } from '../../helpers/processes.js'
import { startTestEngine } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'
import {
  startFakeModelProvider,
  type FakeModelProvider,
  type RecordedRequest,
  type Reply,
} from '../../fakes/model-provider.js'

// `osctl chat` as a person runs it (issue 26): the built osctl on a real pseudo-terminal (util-linux
// `script`), typing its bytes, reading what it draws, against a real daemon: the app served over HTTP
// with its engine, the model a scripted fake provider that streams, the tool a fake tool server.

let t: TestApp
let engine: Engine
let model: FakeModelProvider
let mcp: FakeMcpServer
let server: ServerType
let url: string
let memberId: string

/** The person's last text to the model, and whether the model's last call has been answered. */
function lastAsked(request: RecordedRequest): { text: string; answered: string | undefined } {
  type Block = { type: string; text?: string; content?: unknown }
  const messages = request.body.messages as { role: string; content: string | Block[] }[]
  const last = messages.at(-1)!
  // A message's text: its content, or its text blocks (a message carrying a cache breakpoint).
  const textOf = (content: string | Block[]) =>
    typeof content === 'string'
      ? content
      : content.every((b) => b.type === 'text')
        ? content.map((b) => b.text).join('')
        : undefined
  const texts = messages
    .filter((m) => m.role === 'user')
    .map((m) => textOf(m.content))
    .filter((text) => text !== undefined)
  const results = Array.isArray(last.content)
    ? last.content.filter((b) => b.type === 'tool_result')
    : []
  const answered = results.length ? JSON.stringify(results.map((b) => b.content)) : undefined
  return { text: texts.at(-1) ?? '', answered }
}

/** What the scripted member answers. */
function reply(request: RecordedRequest): Reply {
  const { text, answered } = lastAsked(request)
  if (text.startsWith('hello'))
    return {
      text: 'Streaming **the first** half, then the rest.',
      tokens: ['Streaming ', '**the first** ', 'half', ', then the rest.'],
      tokenMs: 700,
    }
  if (text.includes('\n')) return { text: `Got ${text.split('\n').length} lines.` }
  if (text === 'When?')
    return answered
      ? { text: answered.includes('fri') ? 'Friday, then.' : 'Another day, then.' }
      : {
          toolCalls: [
            {
              name: 'os__ask_ceo',
              arguments: {
                questions: ['Which day do we ship?'],
                choices: [
                  { key: 'fri', label: 'Friday' },
                  { key: 'mon', label: 'Monday' },
                ],
              },
            },
          ],
        }
  if (text === 'Echo it')
    return answered
      ? { text: 'Echoed it.' }
      : { toolCalls: [{ name: 'vcs__echo', arguments: { text: 'pong from the tool' } }] }
  return { text: 'Aye.' }
}

beforeAll(async () => {
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  model.onRequest(reply)
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
  server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' })
  await new Promise<void>((resolve) => server.once('listening', () => resolve()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  const bound = await t.call('POST', '/v1/llm/bindings', { body: { apiKey: 'pty-test-key' } })
  expect(bound.status, JSON.stringify(bound.body)).toBe(201)
  const member = await t.call('POST', '/v1/members', { body: { name: 'Grace Pty' } })
  memberId = member.body.id
  const tool = await t.call('POST', '/v1/tools/bindings', {
    body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: memberId },
  })
  expect(tool.status, JSON.stringify(tool.body)).toBe(201)
}, 60_000)
afterAll(async () => {
  server?.close()
  await engine?.stop()
  await model?.close()
  await mcp?.close()
})

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('osctl chat on a real pseudo-terminal against a real daemon', () => {
  it.skipIf(!hasScript)(
    'streams a reply, takes a paste of three lines, answers a question and allows a tool call in place',
    { timeout: 90_000 },
    async () => {
      const env = {
        ...process.env,
        OSCTL_CONFIG_DIR: await mkdtemp(join(tmpdir(), 'osctl-')),
        OSCTL_URL: url,
        OSCTL_TOKEN: t.acme.token,
        TERM: 'xterm-256color',
        CI: 'true',
      }
      const child = execa(
        'script',
        ['-qfec', `stty cols 100 rows 40; exec node ${osctlBin} chat ${memberId}`, '/dev/null'],
        { env, reject: false, stdin: 'pipe' },
      )
      let drawn = ''
      child.stdout!.on('data', (chunk: Buffer) => (drawn += chunk.toString()))
      const text = () => drawn.replace(/\x1b\[[0-9;?]*[a-zA-Z]/g, '')
      const type = (bytes: string) => child.stdin!.write(bytes)
      const asked = () => model.requests.map((r) => lastAsked(r).text)

      await eventually(() => text().includes('Grace Pty'), 20_000, 'the chat')
      expect(drawn).toContain('\x1b[?2004h') // bracketed paste asked for

      // 1. A streamed reply: its first words are drawn before the model has said the rest.
      type('hello there')
      await eventually(() => text().includes('hello there'), 10_000, 'the typed text')
      type('\r')
      await eventually(() => text().includes('Streaming the first'), 15_000, 'the first deltas')
      expect(text()).not.toContain('then the rest')
      await eventually(
        () => text().includes('Streaming the first half, then the rest.'),
        15_000,
        'the whole reply',
      )
      await pause(300)

      // 2. A paste of three lines is inserted whole and sent only on Enter.
      type('\x1b[200~first line\rsecond line\rthird line\x1b[201~')
      await eventually(() => text().includes('third line'), 10_000, 'the paste in the prompt')
      await pause(300)
      expect(asked().filter((a) => a.includes('first line'))).toEqual([])
      type('\r')
      await eventually(() => text().includes('Got 3 lines.'), 15_000, 'the paste sent')
      expect(asked()).toContain('first line\nsecond line\nthird line')
      await pause(300)

      // 3. A question answered in place: a choice by its number, Enter.
      type('When?\r')
      await eventually(() => text().includes('Which day do we ship?'), 15_000, 'the question')
      type('1')
      await pause(200)
      type('\r')
      await eventually(() => text().includes('Friday, then.'), 15_000, 'the answer taken')
      const [gate] = await t.sql<{ choice: string; decision: string }[]>`
        select choice, decision from gates where kind = 'question' order by created_at desc limit 1`
      expect(gate).toEqual({ choice: 'fri', decision: 'approve' })
      await pause(300)

      // 4. A tool call allowed in place; its result shown as the daemon tells it.
      type('Echo it\r')
      await eventually(() => text().includes('wants to call vcs.echo'), 15_000, 'the call')
      type('a')
      await eventually(() => text().includes('pong from the tool'), 15_000, 'the result')
      await eventually(() => text().includes('Echoed it.'), 15_000, 'the reply after the call')
      expect(mcp.callsOf('echo')).toHaveLength(1)

      // Ctrl+C on an empty prompt quits, leaving the terminal as it found it.
      type('\x03')
      await eventually(() => text().includes('osctl chats get'), 10_000, 'the end')
      expect((await child).exitCode).toBe(0)
      expect(drawn).toContain('\x1b[?2004l')
    },
  )
})
