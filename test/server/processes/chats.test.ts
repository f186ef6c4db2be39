import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ChatDetail } from '../../../shared/schemas/chats.js'
import { createChat, getChatDetail, sendMessage } from '../../../server/domain/chats/index.js'
import { bindKey } from '../../../server/domain/models/index.js'
import { createMember } from '../../../server/domain/org/index.js'
import { createToolConnection } from '../../../server/domain/tools/index.js'
import { loadConfig } from '../../../server/config.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { engineHarness } from '../../helpers/engines.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'

// A chat reply in progress when its engine is killed with -9 (DESIGN 11; issue 18): the next engine
// takes the turn over once its lease lapses and finishes the reply, and the tool call the dead engine
// had started is never made again (it is answered as of unknown outcome).

let db: TestDatabase
let model: FakeModelProvider
let mcp: FakeMcpServer
let harness: Awaited<ReturnType<typeof engineHarness>>

beforeAll(async () => {
  db = await createTestDatabase()
  model = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  harness = await engineHarness(db, model.url)
})
afterAll(async () => {
  await harness?.stopAll()
  await model?.close()
  await mcp?.close()
})

it('finishes a reply after kill -9 without making its tool call twice', async () => {
  const enterprise = await harness.enterprise(`Chat crash ${randomUUID().slice(0, 6)}`)
  const key = `key-${randomUUID()}`
  await bindKey(db.sql, harness.sealer, enterprise.id, {
    apiKey: key,
    provider: 'provider_a',
    layer: 'enterprise',
  })
  const member = await createMember(db.sql, enterprise.id, { name: 'Crash Member' }, 'osd.local')
  await createToolConnection(db.sql, harness.sealer, loadConfig().egress, enterprise.id, {
    name: 'vcs',
    url: mcp.url,
    layer: 'member',
    layerId: member.id,
  } as never)
  // The caller granted the tool for good: the call runs unasked.
  const caller = 'token:crash-test'
  await db.sql`insert into chat_tool_grants (enterprise_id, caller, member_id, tool)
               values (${enterprise.id}, ${caller}, ${member.id}, 'vcs.echo')`
  mcp.delay('echo', 60_000)
  model.script(
    key,
    { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'once' } }] },
    { text: 'Finished after all.' },
  )
  const chat = await createChat(db.sql, enterprise.id, { memberId: member.id })

  const first = await harness.engine()
  await sendMessage(db.sql, enterprise.id, chat.id, 'Echo once, please', caller)
  await eventually(() => mcp.callsOf('echo').length === 1, 30_000, 'the tool call to start')
  await first.kill()

  await harness.engine()
  let detail: ChatDetail | undefined
  await eventually(
    async () => {
      detail = await getChatDetail(db.sql, enterprise.id, chat.id, {})
      return detail.messages.at(-1)?.content === 'Finished after all.' && !detail.replying
    },
    45_000,
    'the next engine to finish the reply',
  )
  const call = detail!.messages.find((m) => m.toolCall)!
  expect(call.toolCall).toMatchObject({ name: 'vcs.echo', status: 'failed' })
  expect(call.toolCall!.result).toMatch(/interrupted/)
  expect(mcp.callsOf('echo')).toHaveLength(1)
  expect(detail!.messages.filter((m) => m.role === 'member').map((m) => m.content)).toEqual([
    'Finished after all.',
  ])
  // The turn was done by the second engine, once.
  const turns = await db.sql<{ status: string; modelCalls: number }[]>`
    select status, model_calls from chat_turns where chat_id = ${chat.id}`
  expect(turns).toEqual([{ status: 'done', modelCalls: 2 }])
}, 120_000)

it('releases the spend reservation of a model call the kill -9 interrupted, once', async () => {
  await harness.stopAll() // only the engines of this test: the one killed holds the call
  const enterprise = await harness.enterprise(`Chat spend crash ${randomUUID().slice(0, 6)}`)
  const key = `key-${randomUUID()}`
  await bindKey(db.sql, harness.sealer, enterprise.id, {
    apiKey: key,
    provider: 'provider_a',
    layer: 'enterprise',
  })
  const member = await createMember(db.sql, enterprise.id, { name: 'Spend Member' }, 'osd.local')
  // The first call hangs until its engine dies; the next engine's call answers.
  model.script(
    key,
    { text: 'Never heard.', delayMs: 60_000 },
    { text: 'Answered after all.', usage: { input: 1000, output: 100 } },
  )
  const chat = await createChat(db.sql, enterprise.id, { memberId: member.id })
  const first = await harness.engine()
  await sendMessage(db.sql, enterprise.id, chat.id, 'Anything?', 'token:spend-crash')
  await eventually(() => model.callsWith(key).length === 1, 30_000, 'the model call to start')
  await first.kill()

  await harness.engine()
  await eventually(
    async () => {
      const detail = await getChatDetail(db.sql, enterprise.id, chat.id, {})
      return detail.messages.at(-1)?.content === 'Answered after all.' && !detail.replying
    },
    45_000,
    'the next engine to finish the reply',
  )
  // Nothing stays reserved on any layer (enterprise, member); what was spent is the answered call.
  const days = await db.sql<{ layer: string; reservedUsdMicros: number; spentUsdMicros: number }[]>`
    select layer, reserved_usd_micros, spent_usd_micros from spend_days
     where enterprise_id = ${enterprise.id} order by layer`
  expect(days.map((d) => d.layer)).toEqual(['enterprise', 'member'])
  for (const day of days) {
    expect(day.reservedUsdMicros).toBe(0)
    expect(day.spentUsdMicros).toBeGreaterThan(0)
  }
  const [turn] = await db.sql<{ reservation: unknown }[]>`
    select reservation from chat_turns where chat_id = ${chat.id}`
  expect(turn!.reservation).toBeNull()
}, 120_000)
