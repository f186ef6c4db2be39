import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { allScopes } from '../../../shared/scopes.js'
import { createChat, getChatDetail } from '../../../server/domain/chats/index.js'
import { bindKey } from '../../../server/domain/models/index.js'
import { createMember } from '../../../server/domain/org/index.js'
import { createToken } from '../../../server/domain/people/index.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { engineHarness } from '../../helpers/engines.js'
import { startOsd, type OsdProcess } from '../../helpers/processes.js'
import { SseReader } from '../../helpers/sse.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// The chat's event stream when the API and the engine are different processes (issue 26; DESIGN 13):
// the reply's deltas cross from the engine to the API by NOTIFY, in order and before the stored
// message; a reply longer than a NOTIFY carries goes in pieces. A stop asked of the API process reaches
// the engine process making the reply (issue 51 item 16).

let db: TestDatabase
let model: FakeModelProvider
let harness: Awaited<ReturnType<typeof engineHarness>>
let api: OsdProcess

beforeAll(async () => {
  db = await createTestDatabase()
  model = await startFakeModelProvider()
  harness = await engineHarness(db, model.url)
  await harness.engine()
  api = await startOsd(harness.env, ['--role', 'api'])
}, 120_000)
afterAll(async () => {
  await api?.stop()
  await harness?.stopAll()
  await model?.close()
})

it('streams a reply made by another process, long text in pieces, before the stored message', async () => {
  const enterprise = await harness.enterprise(`Split ${randomUUID().slice(0, 6)}`)
  const key = `key-${randomUUID()}`
  await bindKey(db.sql, harness.sealer, enterprise.id, {
    apiKey: key,
    provider: 'provider_b',
    layer: 'enterprise',
  })
  const { token } = await createToken(db.sql, enterprise.id, { name: 'all', scopes: allScopes })
  const member = await createMember(db.sql, enterprise.id, { name: 'Split Member' }, 'osd.local')
  const chat = await createChat(db.sql, enterprise.id, { memberId: member.id })
  // Words, then one piece longer than a NOTIFY can carry (with characters of several bytes).
  const long = 'é☕'.repeat(3_000)
  const tokens = ['Hello ', 'from ', 'the ', 'engine. ', long]
  // 100 ms between pieces: at 20 ms, on one loaded core (`taskset -c 0 npm test`), the engine read
  // every piece in its first chunk, and the first delta held more than the first word (issue 40).
  model.script(key, { text: tokens.join(''), tokens, tokenMs: 100 })

  const headers = { authorization: `Bearer ${token}` }
  const res = await fetch(`${api.url}/chats/${chat.id}/events`, { headers })
  expect(res.status).toBe(200)
  const stream = new SseReader(res)
  await stream.until((events) => events.length >= 1)
  const sent = await fetch(`${api.url}/chats/${chat.id}/messages`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ content: 'Say hello' }),
  })
  expect(sent.status).toBe(201)
  await stream.until(
    (events) => events.some((e) => e.event === 'message' && e.data.role === 'member'),
    30_000,
    'the stored reply',
  )
  const reply = stream.named('message').find((e) => e.data.role === 'member')!
  const deltas = stream.named('delta')
  expect(deltas.map((d) => d.data.text).join('')).toBe(tokens.join(''))
  expect(deltas.every((d) => d.data.messageId === reply.data.id)).toBe(true)
  // The first word came as it was made, on its own; what followed came in NOTIFYs at most 50 ms
  // apart (the long piece split to fit one: joined here again) and events at most 40 ms apart.
  expect(deltas[0]!.data.text).toMatch(/^Hello /)
  expect(deltas[0]!.data.text).not.toContain('é')
  expect(deltas.length).toBeGreaterThanOrEqual(2)
  expect(stream.events.indexOf(reply)).toBeGreaterThan(stream.events.indexOf(deltas.at(-1)!))
  expect(reply.data.content).toBe(tokens.join(''))
  await stream.cancel()
}, 60_000)

it('stops a reply another process makes, at the stop asked of this one', async () => {
  const enterprise = await harness.enterprise(`Stop ${randomUUID().slice(0, 6)}`)
  const key = `key-${randomUUID()}`
  await bindKey(db.sql, harness.sealer, enterprise.id, {
    apiKey: key,
    provider: 'provider_a',
    layer: 'enterprise',
  })
  const { token } = await createToken(db.sql, enterprise.id, { name: 'all', scopes: allScopes })
  const member = await createMember(db.sql, enterprise.id, { name: 'Stop Member' }, 'osd.local')
  const chat = await createChat(db.sql, enterprise.id, { memberId: member.id })
  const words = Array.from({ length: 300 }, (_, i) => `w${i} `)
  // 300 words 100 ms apart: half a minute unstopped.
  model.script(key, { text: words.join(''), tokens: words, tokenMs: 100 })
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const post = (path: string, body?: unknown) =>
    fetch(`${api.url}/chats/${chat.id}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body ?? {}),
    })
  expect((await post('/messages', { content: 'Talk' })).status).toBe(201)
  await eventually(
    () => (model.callsWith(key).at(-1)?.tokenTimes?.length ?? 0) >= 3,
    30_000,
    'the engine process to stream the reply',
  )
  const asked = performance.now()
  const stopped = await post('/reply/stop')
  expect(stopped.status).toBe(202)
  let detail: Awaited<ReturnType<typeof getChatDetail>> | undefined
  await eventually(
    async () => {
      detail = await getChatDetail(db.sql, enterprise.id, chat.id, {})
      return !detail.replying && detail.messages.some((m) => m.stopped)
    },
    15_000,
    'the engine process to end the reply stopped',
  )
  // Well within the half minute the reply would have taken (about a second is the target).
  expect(performance.now() - asked).toBeLessThan(5_000)
  const kept = detail!.messages.at(-1)!
  expect(kept).toMatchObject({ role: 'member', stopped: true })
  expect(kept.content).toMatch(/^w0 w1 /)
  expect(kept.content.length).toBeLessThan(words.join('').length)
  expect(model.callsWith(key).at(-1)!.aborted).toBe(true)
}, 60_000)
