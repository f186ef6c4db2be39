import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Text PostgreSQL cannot store (U+0000, half a surrogate pair) in what a model answers: the API refuses
// it in a body (http/body.ts), but a model's text and its tool calls' arguments come from outside and
// are written into the journal, the run's result and a chat's messages. Before, each such write
// failed: the run stayed running until its lease lapsed, and the engine that took it over paid for
// the call again and failed again, for good; a chat reply likewise. They are kept with U+FFFD instead.

let t: TestApp
let model: FakeModelProvider
let engine: Engine

beforeAll(async () => {
  model = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: model.url, provider_b: model.url } })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await model?.close()
})

describe('a model answer holding U+0000 or half a surrogate pair', () => {
  it.each(['provider_a', 'provider_b'] as const)(
    'in a run (%s): kept with U+FFFD; the run ends as the model said, the call paid once',
    async (provider) => {
      const { e, key, as } = await keyedEnterprise(t, 'Bytes', { provider })
      const task = await t.call('POST', '/v1/tasks', {
        ...as,
        body: { name: `Bytes ${randomUUID().slice(0, 8)}`, assigneeRole: 'ceo' },
      })
      expect(task.status, JSON.stringify(task.body)).toBe(201)
      model.script(key, {
        text: 'Done\u0000 \ud800',
        toolCalls: [
          {
            name: 'os.finish',
            arguments: { summary: 'a\u0000b', output: { 'k\u0000': ['v\udc00', 1] } },
          },
        ],
      })
      const run = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, { ...as, body: {} })
      expect(run.status).toBe(201)
      const done = await waitForRun(t, run.body.id, ['succeeded', 'failed'], 10_000, e.token)
      expect(done.run.status).toBe('succeeded')
      expect(done.run.result).toEqual({
        outcome: 'succeeded',
        summary: 'a\ufffdb',
        output: { 'k\ufffd': ['v\ufffd', 1] },
      })
      expect(model.callsWith(key)).toHaveLength(1)
      const [step] = await t.sql<{ response: { text: string } }[]>`
        select response from run_journal where run_id = ${run.body.id} and kind = 'model'`
      expect(step!.response.text).toBe('Done\ufffd \ufffd')
    },
  )

  it('in a chat reply, streamed: the message is stored with U+FFFD and the reply ends', async () => {
    const { key, as } = await keyedEnterprise(t, 'Bytes chat')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Bytes' } })
    expect(member.status).toBe(201)
    model.script(key, { text: 'Hello\u0000 there \udbff' })
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      ...as,
      body: { content: 'Hi' },
    })
    expect(sent.status).toBe(201)
    let detail!: ChatDetail
    await eventually(async () => {
      detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.body.id}`, as)).body)
      return !detail.replying && detail.messages.at(-1)?.role === 'member'
    }, 10_000)
    expect(detail.messages.at(-1)!.content).toBe('Hello\ufffd there \ufffd')
    expect(model.callsWith(key)).toHaveLength(1)
  })
})
