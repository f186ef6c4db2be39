import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ChatDetail, ChatMessage } from '../../../shared/schemas/chats.js'
import { createSql, type Sql } from '../../../server/db/sql.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine } from '../../helpers/runs.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Chat replies use a pool of their own (osd serve gives the engine one): every reply of an enterprise
// settles its spend on the same rows, so 50 replies at once wait on each other's locks, and on the run
// loop's pool they held the connections run dispatch needed (npm run bench:chat).

let t: TestApp
let fake: FakeModelProvider
let engine: Engine
let runPool: Sql
let chatPool: Sql
const heard = { runs: [] as string[], chats: [] as string[] }

beforeAll(async () => {
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  runPool = createSql(t.dbUrl, { onQuery: (q) => void heard.runs.push(q) })
  chatPool = createSql(t.dbUrl, { max: 2, onQuery: (q) => void heard.chats.push(q) })
  await Promise.all([runPool`select 1`, chatPool`select 1`])
  engine = await startTestEngine(t, { sql: runPool, chatSql: chatPool })
})
afterAll(async () => {
  await engine?.stop()
  await Promise.all([runPool?.end(), chatPool?.end()])
  await fake?.close()
})

describe('the chat pool', () => {
  it('carries every statement of a reply; the run loop’s pool none of them', async () => {
    const { key, as } = await keyedEnterprise(t, 'Pool')
    const member = await t.call('POST', '/v1/members', { ...as, body: { name: 'Grace Pool' } })
    const chat = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.body.id } })
    fake.script(key, { text: 'Aye, from my own pool.' })
    heard.runs.length = 0
    heard.chats.length = 0
    const sent = await t.call('POST', `/v1/chats/${chat.body.id}/messages`, {
      ...as,
      body: { content: 'Which pool?' },
    })
    const message = ChatMessage.parse(sent.body)
    const waited = await t.call(
      'GET',
      `/v1/chats/${chat.body.id}?afterMessageId=${message.id}&waitSeconds=10`,
      as,
    )
    const detail = ChatDetail.parse(waited.body)
    expect(detail.messages.at(-1)).toMatchObject({
      role: 'member',
      content: 'Aye, from my own pool.',
    })
    const chatWork = /chat_turns|chat_messages|spend_days|llm_usage/
    expect(heard.chats.filter((q) => chatWork.test(q)).length).toBeGreaterThan(3)
    expect(heard.runs.filter((q) => chatWork.test(q))).toEqual([])
  })
})
