import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Chat, ChatDetail, ChatMessage, ChatReplyStop } from '../../../shared/schemas/chats.js'
import { chatChannel, chatDeltaChannel, deltaReaders } from '../../../server/domain/chats/index.js'
import { createSql } from '../../../server/db/sql.js'
import type { Engine } from '../../../server/engine/index.js'
import { createApp } from '../../../server/http/app.js'
import { ChangeWatch } from '../../../server/db/change-watch.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { keyedEnterprise, startTestEngine } from '../../helpers/runs.js'
import { SseReader } from '../../helpers/sse.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'
import { startFakeMcpServer, type FakeMcpServer } from '../../fakes/mcp-server.js'

// GET /v1/chats/{id}/events (issue 26; DESIGN 13) in one process: the reply streams from the model
// through the engine to the reader, tool calls and questions update in place, the stream resumes from
// Last-Event-ID and leaves nothing behind when its reader goes away. (Across processes:
// test/server/processes/chat-stream.test.ts.)

let t: TestApp
let fake: FakeModelProvider
let mcp: FakeMcpServer
let engine: Engine
let watch: ChangeWatch
let app: ReturnType<typeof createApp>

beforeAll(async () => {
  fake = await startFakeModelProvider()
  mcp = await startFakeMcpServer()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
  // The same app with a chat watch the tests can look into.
  watch = new ChangeWatch(chatChannel)
  app = createApp({ sql: t.sql, config: t.config, log: t.log, sealer: t.sealer, chatWatch: watch })
  engine = await startTestEngine(t)
})
afterAll(async () => {
  await engine?.stop()
  await fake?.close()
  await mcp?.close()
})

async function tenant(provider: 'provider_a' | 'provider_b' = 'provider_a') {
  const { e, key, as } = await keyedEnterprise(t, 'Stream', { provider })
  const res = await t.call('POST', '/v1/members', { ...as, body: { name: 'Grace Stream' } })
  const member = res.body as { id: string }
  const open = async () => {
    const opened = await t.call('POST', '/v1/chats', { ...as, body: { memberId: member.id } })
    expect(opened.status, JSON.stringify(opened.body)).toBe(201)
    return Chat.parse(opened.body)
  }
  const send = async (chatId: string, content: string) => {
    const sent = await t.call('POST', `/v1/chats/${chatId}/messages`, { ...as, body: { content } })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    return ChatMessage.parse(sent.body)
  }
  const events = async (chatId: string, lastEventId?: string, token = e.token) => {
    const res = await app.request(`/v1/chats/${chatId}/events`, {
      headers: {
        authorization: `Bearer ${token}`,
        ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
      },
    })
    // Held against the document: its status and media type (the stream itself is left unread).
    await t.expectDocumented('GET', `/v1/chats/${chatId}/events`, res)
    return res
  }
  const follow = async (chatId: string, lastEventId?: string) => {
    const res = await events(chatId, lastEventId)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
    return new SseReader(res)
  }
  return { e, key, as, member, open, send, events, follow }
}

const named = (name: string) => (e: { event: string; comment?: string }) =>
  !e.comment && e.event === name
const lastChatIs = (replying: boolean) => (events: { event: string; data: any }[]) =>
  events.filter(named('chat')).at(-1)?.data.replying === replying

const markdown =
  '# Plan\n\n- **Monday**: the invoices\n- *Tuesday*: the review\n\n```ts\nconst a = 1\n```\n'

describe.each(['provider_a', 'provider_b'] as const)('a reply streamed through %s', (provider) => {
  it('comes as deltas that join to the stored message, between replying and not', async () => {
    const s = await tenant(provider)
    fake.script(s.key, { text: markdown, tokenMs: 10 })
    const chat = await s.open()
    const stream = await s.follow(chat.id)
    await stream.until((events) => events.length >= 1)
    expect(stream.events[0]).toMatchObject({
      event: 'chat',
      data: { status: 'open', replying: false },
    })
    const sent = await s.send(chat.id, 'Plan the week')
    await stream.until(
      (events) =>
        events.some((e) => e.event === 'message' && e.data.role === 'member') &&
        lastChatIs(false)(events),
      15_000,
      'the stored reply and the end of replying',
    )
    const names = stream.named().map((e) => e.event)
    const person = stream.named('message')[0]!
    expect(person.data).toMatchObject({ id: sent.id, role: 'person', content: 'Plan the week' })
    expect(person.id).toBe(sent.id)
    const reply = stream.named('message').find((e) => e.data.role === 'member')!
    ChatMessage.parse(reply.data)
    const deltas = stream.named('delta')
    expect(deltas.length).toBeGreaterThan(2)
    expect(deltas.every((d) => d.data.messageId === reply.data.id)).toBe(true)
    expect(deltas.map((d) => d.data.text).join('')).toBe(markdown)
    expect(reply.data.content).toBe(markdown)
    // In order: replying, the deltas, the message, not replying.
    const at = (i: number) => stream.events.indexOf(stream.named()[i]!)
    const firstDelta = names.indexOf('delta')
    const replyAt = names.lastIndexOf('message')
    expect(names.slice(0, 3)).toEqual(['chat', 'message', 'chat'])
    expect(firstDelta).toBeGreaterThan(2)
    expect(replyAt).toBeGreaterThan(names.lastIndexOf('delta'))
    expect(names.at(-1)).toBe('chat')
    expect(at(replyAt)).toBeGreaterThan(at(firstDelta))
    // The model was asked to stream.
    expect(fake.callsWith(s.key).at(-1)!.body.stream).toBe(true)
    await stream.cancel()
  })
})

describe('the stream', () => {
  it('resumes after Last-Event-ID; an id it does not know streams from now', async () => {
    const s = await tenant()
    fake.script(s.key, { text: 'First answer.' }, { text: 'Second answer.' })
    const chat = await s.open()
    const sent = await s.send(chat.id, 'One')
    const live = await s.follow(chat.id)
    await live.until(lastChatIs(false))
    await eventually(async () => {
      const detail = (await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body
      return detail.messages.length === 2 && !detail.replying
    })
    await live.cancel()
    const resumed = await s.follow(chat.id, sent.id)
    await resumed.until((events) => events.some(named('message')))
    expect(resumed.named('message').map((e) => e.data.content)).toEqual(['First answer.'])
    expect(resumed.named('message')[0]!.id).toBe(resumed.named('message')[0]!.data.id)
    await resumed.cancel()
    // Not a message of this chat: nothing old, then live events.
    const fresh = await s.follow(chat.id, randomUUID())
    await fresh.until((events) => events.length >= 1)
    await s.send(chat.id, 'Two')
    await fresh.until((events) => events.filter(named('message')).length >= 2)
    expect(fresh.named('message').map((e) => e.data.content)).toEqual(['Two', 'Second answer.'])
    await fresh.cancel()
  })

  it('updates a tool call in place as it is decided and done, and a question as it is answered', async () => {
    const s = await tenant()
    const bound = await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: s.member.id },
    })
    expect(bound.status).toBe(201)
    fake.script(
      s.key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'ping' } }] },
      {
        toolCalls: [
          {
            name: 'os.ask_ceo',
            arguments: { questions: ['Ship?'], choices: [{ key: 'y', label: 'Yes' }] },
          },
        ],
      },
      { text: 'Shipped.' },
    )
    const chat = await s.open()
    const stream = await s.follow(chat.id)
    await s.send(chat.id, 'Echo and ship')
    const [call] = await stream
      .until((events) =>
        events.some((e) => e.event === 'message' && e.data.toolCall?.status === 'waiting'),
      )
      .then((events) => events.filter((e) => e.event === 'message' && e.data.toolCall))
    const decided = await t.call(
      'POST',
      `/v1/chats/${chat.id}/tool-calls/${call!.data.id}/decision`,
      {
        ...s.as,
        body: { decision: 'allow' },
      },
    )
    expect(decided.status).toBe(201)
    await stream.until((events) =>
      events.some(
        (e) =>
          e.event === 'message.updated' &&
          e.data.id === call!.data.id &&
          e.data.toolCall.status === 'done',
      ),
    )
    const updates = stream.named('message.updated').filter((e) => e.data.id === call!.data.id)
    // Changes that land together are told once, as the message now is.
    expect(['allowed,done', 'done']).toContain(updates.map((e) => e.data.toolCall.status).join())
    expect(updates.at(-1)!.data.toolCall.result).toBe('ping')
    // The question: answered through its gate (as osctl gates review would), updated in place.
    const question = (
      await stream.until((events) => events.some((e) => e.event === 'message' && e.data.question))
    ).find((e) => e.event === 'message' && e.data.question)!
    expect(question.data).toMatchObject({
      toolCall: null,
      question: { questions: ['Ship?'], status: 'waiting' },
    })
    const answered = await t.call('POST', `/v1/gates/chat/${chat.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', choice: 'y' },
    })
    expect(answered.status, JSON.stringify(answered.body)).toBe(201)
    await stream.until((events) =>
      events.some((e) => e.event === 'message' && e.data.content === 'Shipped.'),
    )
    const answer = stream.named('message.updated').find((e) => e.data.id === question.data.id)!
    expect(answer.data.question).toMatchObject({
      status: 'answered',
      answer: { decision: 'approve', choice: 'y' },
    })
    // Closing ends the stream, after saying so.
    await t.call('POST', `/v1/chats/${chat.id}/close`, s.as)
    await stream.end()
    expect(stream.named().at(-1)).toMatchObject({ event: 'chat', data: { status: 'closed' } })
  })

  it('after Last-Event-ID, a change to that message itself made meanwhile is sent', async () => {
    const s = await tenant()
    await t.call('POST', '/v1/tools/bindings', {
      ...s.as,
      body: { name: 'vcs', url: mcp.url, layer: 'member', layerId: s.member.id },
    })
    fake.script(
      s.key,
      { toolCalls: [{ name: 'vcs.echo', arguments: { text: 'later' } }] },
      { text: 'Echoed.' },
    )
    const chat = await s.open()
    await s.send(chat.id, 'Echo later')
    let waiting: ChatMessage | undefined
    await eventually(async () => {
      const detail = (await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body
      waiting = detail.messages.at(-1)
      return waiting?.toolCall?.status === 'waiting'
    }, 10_000)
    // The reader holds the waiting call as the newest message; it is decided while nobody reads.
    await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${waiting!.id}/decision`, {
      ...s.as,
      body: { decision: 'allow' },
    })
    const resumed = await s.follow(chat.id, waiting!.id)
    await resumed.until((events) =>
      events.some((e) => e.event === 'message.updated' && e.data.id === waiting!.id),
    )
    expect(
      resumed.named('message.updated').find((e) => e.data.id === waiting!.id)!.data.toolCall.status,
    ).not.toBe('waiting')
    await resumed.until((events) =>
      events.some((e) => e.event === 'message' && e.data.content === 'Echoed.'),
    )
    await resumed.cancel()
  })

  it('sends deltas by NOTIFY only while another process reads the chat', async () => {
    const s = await tenant()
    const listener = createSql(t.dbUrl, { max: 1 })
    const heard: string[] = []
    await listener.listen(chatDeltaChannel, (payload) => heard.push(payload))
    try {
      fake.script(
        s.key,
        { text: 'one two three four', tokenMs: 60 },
        { text: 'five six seven', tokenMs: 10 },
      )
      const chat = await s.open()
      const stream = await s.follow(chat.id)
      await s.send(chat.id, 'Count')
      await stream.until((events) =>
        events.some((e) => e.event === 'message' && e.data.role === 'member'),
      )
      // Read only in this process: told here, no NOTIFY.
      expect(stream.named('delta').length).toBeGreaterThan(1)
      expect(heard).toEqual([])
      await stream.until(lastChatIs(false))
      // Another process says it reads the chat: the next reply goes out by NOTIFY too.
      await t.sql`insert into chat_readers (chat_id, process) values (${chat.id}, 'elsewhere')`
      await s.send(chat.id, 'Again')
      await stream.until((events) =>
        events.some((e) => e.event === 'message' && e.data.content === 'five six seven'),
      )
      await eventually(() => heard.length > 0, 3_000, 'a NOTIFY of the deltas')
      expect(heard.map((h) => JSON.parse(h).t).join('')).toBe('five six seven')
      await stream.cancel()
      await eventually(
        async () => {
          const rows = await t.sql`select process from chat_readers where chat_id = ${chat.id}`
          return rows.length === 1 && rows[0]!.process === 'elsewhere'
        },
        3_000,
        'this process to say it no longer reads the chat',
      )
    } finally {
      await listener.end()
    }
  })

  it('answers 404 for a chat of another enterprise; a closed chat ends at once', async () => {
    const s = await tenant()
    const chat = await s.open()
    const other = await t.createEnterprise(`Other ${randomUUID().slice(0, 6)}`)
    const foreign = await s.events(chat.id, undefined, other.token)
    expect(foreign.status).toBe(404)
    expect(await foreign.json()).toMatchObject({ error: 'chat_not_found' })
    expect((await s.events('not-a-uuid')).status).toBe(404)
    await t.call('POST', `/v1/chats/${chat.id}/close`, s.as)
    const closed = await s.follow(chat.id)
    await closed.end(3_000)
    expect(closed.named()).toEqual([
      expect.objectContaining({ event: 'chat', data: { status: 'closed', replying: false } }),
    ])
  })

  it('ends when the daemon stops', async () => {
    const s = await tenant()
    const chat = await s.open()
    const shutdown = new AbortController()
    const stopping = createApp({
      sql: t.sql,
      config: t.config,
      log: t.log,
      sealer: t.sealer,
      shutdown: shutdown.signal,
    })
    const res = await stopping.request(`/v1/chats/${chat.id}/events`, {
      headers: { authorization: `Bearer ${s.e.token}` },
    })
    expect(res.status).toBe(200)
    const stream = new SseReader(res)
    await stream.until((events) => events.length >= 1)
    shutdown.abort()
    await stream.end(3_000)
    expect(stream.ended).toBe(true)
  })

  it("counts toward the credential's OSD_MAX_STREAMS_PER_TOKEN with the event feed (issue 44)", async () => {
    const s = await tenant()
    const [first, second] = [await s.open(), await s.open()]
    const limited = createApp({
      sql: t.sql,
      config: { ...t.config, maxStreamsPerToken: 3 },
      log: t.log,
      sealer: t.sealer,
    })
    const follow = (path: string, token = s.e.token) =>
      limited.request(path, {
        headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      })
    const open = [
      await follow(`/v1/chats/${first.id}/events`),
      await follow(`/v1/chats/${second.id}/events`),
      await follow('/v1/events'),
    ]
    expect(open.map((res) => res.status)).toEqual([200, 200, 200])
    const readers = open.map((res) => new SseReader(res))
    const refused = await follow(`/v1/chats/${first.id}/events`)
    await t.expectDocumented('GET', `/v1/chats/${first.id}/events`, refused)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBeTruthy()
    expect(await refused.json()).toMatchObject({ error: 'too_many_streams' })
    expect((await follow('/v1/events')).status).toBe(429)
    // Another credential of the enterprise has its own.
    const other = await t.tokenWith(['chats:read'], s.e)
    const theirs = await follow(`/v1/chats/${first.id}/events`, other)
    expect(theirs.status).toBe(200)
    await new SseReader(theirs).cancel()
    // A stream that closes gives its slot back.
    await readers[0]!.cancel()
    await eventually(
      async () => {
        const again = await follow(`/v1/chats/${second.id}/events`)
        if (again.status !== 200) return false
        readers.push(new SseReader(again))
        return true
      },
      5_000,
      'a stream again once one closed',
    )
    await Promise.all(readers.slice(1).map((reader) => reader.cancel()))
  })

  it('a reader that goes away mid-reply leaves no listener behind', async () => {
    const s = await tenant()
    fake.script(s.key, { text: 'word '.repeat(100), tokenMs: 20 })
    const chat = await s.open()
    const before = { deltas: deltaReaders().readers, waits: watch.waiting }
    const stream = await s.follow(chat.id)
    await s.send(chat.id, 'Talk a while')
    await stream.until((events) => events.filter(named('delta')).length >= 3)
    expect(deltaReaders().readers).toBe(before.deltas + 1)
    await stream.cancel()
    await eventually(
      () => deltaReaders().readers === before.deltas && watch.waiting === before.waits,
      3_000,
      'the stream to let go of its listeners',
    )
    // The reply goes on without its reader, and is stored whole.
    await eventually(async () => {
      const detail = (await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body
      return detail.messages.at(-1)?.content === 'word '.repeat(100)
    }, 15_000)
  })

  it('a provider that fails says so in a sentence and the reply is tried again', async () => {
    const s = await tenant()
    // Its two tries again in place (retries.ts) fail too: the call fails.
    const down = { status: 503, message: '{"error":"overloaded","detail":"raw"}', retryAfter: 0 }
    fake.script(s.key, down, down, down, { text: 'Back now.' })
    const chat = await s.open()
    const stream = await s.follow(chat.id)
    await s.send(chat.id, 'Hello?')
    const notice = (
      await stream.until((events) => events.some((e) => e.event === 'message' && e.data.notice))
    ).find((e) => e.event === 'message' && e.data.notice)!
    expect(notice.data.content).toBe(
      'The model provider did not answer (503); the reply is retried in 30 s.',
    )
    expect(notice.data.role).toBe('member')
    const [turn] = await t.sql<{ status: string; notBefore: Date }[]>`
      select status, not_before from chat_turns where chat_id = ${chat.id}`
    expect(turn!.status).toBe('blocked')
    expect(turn!.notBefore.getTime() - Date.now()).toBeGreaterThan(20_000)
    // Its time come (not waited for here), the engine tries again and the reply is made.
    await t.sql`update chat_turns set not_before = now() where chat_id = ${chat.id}`
    engine.chats.wake()
    await stream.until(
      (events) =>
        events.some((e) => e.event === 'message' && e.data.content === 'Back now.') &&
        lastChatIs(false)(events),
    )
    // One notice for the outage, no raw answer of the provider anywhere.
    expect(stream.named('message').filter((e) => e.data.notice)).toHaveLength(1)
    expect(JSON.stringify(stream.events)).not.toContain('overloaded')
    await stream.cancel()
  })

  it("a provider down six times in a row holds the reply as a run's: 30 s, 1, 2, 4, 8, then 10 minutes (issue 43)", async () => {
    // The back-off once counted notices by their words, and the notice is updated in place: the wait
    // went 30 s, 60 s, then stayed at 60 s for good. Each failure here is a call and its two tries in
    // place (retries.ts); the clock is moved by bringing not_before to now.
    const s = await tenant()
    const down = { status: 503, message: 'overloaded', retryAfter: 0 }
    fake.script(s.key, ...Array.from({ length: 18 }, () => down), { text: 'Back at last.' })
    const chat = await s.open()
    await s.send(chat.id, 'Hello?')
    const waits: number[] = []
    for (let hold = 1; hold <= 6; hold++) {
      let turn: { holds: number; status: string; notBefore: Date; updatedAt: Date } | undefined
      await eventually(
        async () => {
          ;[turn] = await t.sql<(typeof turn & {})[]>`
            select holds, status, not_before, updated_at from chat_turns where chat_id = ${chat.id}`
          return turn?.status === 'blocked' && turn.holds === hold
        },
        15_000,
        `hold ${hold}`,
      )
      waits.push(Math.round((turn!.notBefore.getTime() - turn!.updatedAt.getTime()) / 1000))
      await t.sql`update chat_turns set not_before = now() where chat_id = ${chat.id}`
      engine.chats.wake()
    }
    // Seconds from the hold's write to its not_before (the engine's clock and the database's may
    // differ by the statement's round trip).
    const expected = [30, 60, 120, 240, 480, 600]
    waits.forEach((w, i) =>
      expect(Math.abs(w - expected[i]!), `wait ${i + 1}: ${waits}`).toBeLessThanOrEqual(2),
    )
    let messages: ChatMessage[] = []
    await eventually(async () => {
      const res = await t.call('GET', `/v1/chats/${chat.id}`, s.as)
      messages = (res.body as { messages: ChatMessage[] }).messages
      return messages.at(-1)?.content === 'Back at last.'
    }, 15_000)
    // One notice for the outage, updated in place to say the last wait.
    expect(messages.filter((m) => m.notice).map((m) => m.content)).toEqual([
      'The model provider did not answer (503); the reply is retried in 10 min.',
    ])
  })

  it("a refused key holds the reply as a run's: the back-off, then tried again by itself (issue 43)", async () => {
    // A chat once waited for good on a refused key (a run waits the back-off and tries again): one
    // rule decides both now (domain/models/holds.ts). A 401 is not tried again in place.
    const s = await tenant()
    const refused = { status: 401, message: 'invalid x-api-key' }
    fake.script(s.key, refused, refused, { text: 'The key works again.' })
    const chat = await s.open()
    await s.send(chat.id, 'Hello?')
    const waits: number[] = []
    for (let hold = 1; hold <= 2; hold++) {
      let turn:
        { holds: number; status: string; notBefore: Date | null; updatedAt: Date } | undefined
      await eventually(
        async () => {
          ;[turn] = await t.sql<(typeof turn & {})[]>`
            select holds, status, not_before, updated_at from chat_turns where chat_id = ${chat.id}`
          return turn?.status === 'blocked' && turn.holds === hold
        },
        15_000,
        `hold ${hold}`,
      )
      expect(turn!.notBefore, 'a refused key is tried again after the back-off').not.toBeNull()
      waits.push(Math.round((turn!.notBefore!.getTime() - turn!.updatedAt.getTime()) / 1000))
      await t.sql`update chat_turns set not_before = now() where chat_id = ${chat.id}`
      engine.chats.wake()
    }
    // As a run's: 30 s, then 60 s (seconds from the hold's write to its not_before).
    waits.forEach((w, i) => expect(Math.abs(w - [30, 60][i]!), `${waits}`).toBeLessThanOrEqual(2))
    let messages: ChatMessage[] = []
    await eventually(async () => {
      const res = await t.call('GET', `/v1/chats/${chat.id}`, s.as)
      messages = (res.body as { messages: ChatMessage[] }).messages
      return messages.at(-1)?.content === 'The key works again.'
    }, 15_000)
    expect(messages.filter((m) => m.notice).map((m) => m.content)).toEqual([
      'I cannot reply yet: the model provider refused the key (401); the reply is retried in 1 min, or at once when a working key is bound.',
    ])
    expect(fake.callsWith(s.key)).toHaveLength(3)
  })

  it('a provider that throttles says so, and the reply comes by itself after its retry-after (issue 34)', async () => {
    const s = await tenant()
    fake.script(s.key, { status: 429, retryAfter: 1 }, { text: 'Here now.' })
    const chat = await s.open()
    const stream = await s.follow(chat.id)
    const sent = Date.now()
    await s.send(chat.id, 'Hello?')
    await stream.until(
      (events) =>
        events.some((e) => e.event === 'message' && e.data.content === 'Here now.') &&
        lastChatIs(false)(events),
      15_000,
      'the reply after the throttle, with nobody waking the engine',
    )
    const notices = stream.named('message').filter((e) => e.data.notice)
    expect(notices.map((e) => e.data.content)).toEqual([
      expect.stringMatching(
        /^The model provider asked for fewer calls \(429\); the reply is retried in [12] s\.$/,
      ),
    ])
    // Not sooner than the provider asked; one call throttled, one answered.
    expect(fake.callsWith(s.key)).toHaveLength(2)
    expect(fake.callsWith(s.key)[1]!.receivedAt - sent).toBeGreaterThanOrEqual(1_000)
    await stream.cancel()
  })

  it('a call not made because its key was throttled a moment ago is not said to have answered 429 (issue 43)', async () => {
    const s = await tenant()
    fake.script(s.key, { status: 429, retryAfter: 60 })
    const notice = async (chatId: string) => {
      let content: string | undefined
      await eventually(async () => {
        const res = await t.call('GET', `/v1/chats/${chatId}`, s.as)
        content = (res.body as { messages: ChatMessage[] }).messages.find((m) => m.notice)?.content
        return content !== undefined
      }, 15_000)
      return content!
    }
    const first = await s.open()
    await s.send(first.id, 'Hello?')
    expect(await notice(first.id)).toMatch(/^The model provider asked for fewer calls \(429\);/)
    // The second chat on the same key is held without a call: no status of the provider's to say.
    const second = await s.open()
    await s.send(second.id, 'Anyone?')
    expect(await notice(second.id)).toMatch(
      /^The model provider asked for fewer calls; the reply is retried in \d+ (s|min)\.$/,
    )
    expect(fake.callsWith(s.key)).toHaveLength(1)
  })
})

describe('stopping a reply (issue 51 item 16)', () => {
  const reserved = async (enterpriseId: string) => {
    const [row] = await t.sql<{ days: string; held: string }[]>`
      select (select coalesce(sum(reserved_usd_micros), 0) from spend_days
               where enterprise_id = ${enterpriseId})::text as days,
             (select count(*) from spend_reservations where enterprise_id = ${enterpriseId})::text as held`
    return { days: Number(row!.days), held: Number(row!.held) }
  }

  it('ends the stream at once, keeps what streamed marked stopped, settles the reservation, takes the next message', async () => {
    const s = await tenant()
    const words = Array.from({ length: 200 }, (_, i) => `word${i} `)
    // 200 words 50 ms apart: 10 s unstopped.
    fake.script(
      s.key,
      { text: words.join(''), tokens: words, tokenMs: 50 },
      { text: 'After the stop.' },
    )
    const chat = await s.open()
    const stream = await s.follow(chat.id)
    await s.send(chat.id, 'Talk for a long time')
    await stream.until(
      (events) => events.filter(named('delta')).length >= 2,
      15_000,
      'the reply to stream',
    )
    // The call's worst case is held while it streams.
    const held = await reserved(s.e.id)
    expect(held.days).toBeGreaterThan(0)
    expect(held.held).toBe(1)

    const asked = performance.now()
    const res = await t.call('POST', `/v1/chats/${chat.id}/reply/stop`, s.as)
    expect(res.status, JSON.stringify(res.body)).toBe(202)
    expect(ChatReplyStop.parse(res.body)).toEqual({ stopping: true })
    await stream.until(
      (events) =>
        events.some((e) => named('message')(e) && e.data.stopped === true) &&
        lastChatIs(false)(events),
      10_000,
      'the stopped reply and the end of replying',
    )
    const took = performance.now() - asked
    // About a second is the target; well under the 10 s the reply would have taken unstopped (a bound
    // a loaded machine keeps).
    expect(took).toBeLessThan(7_000)
    const kept = ChatMessage.parse(stream.named('message').find((e) => e.data.stopped)!.data)
    const deltas = stream.named('delta')
    expect(kept).toMatchObject({ role: 'member', stopped: true, notice: false, toolCall: null })
    expect(deltas.every((d) => d.data.messageId === kept.id)).toBe(true)
    expect(kept.content).toBe(deltas.map((d) => d.data.text).join(''))
    expect(kept.content.length).toBeGreaterThan(0)
    expect(kept.content.length).toBeLessThan(words.join('').length)
    // The model call was aborted, and nothing reserved for it is held any more; what it streamed is
    // paid for (the provider bills it): counted as the worst case counts, within the reservation.
    await eventually(() => fake.callsWith(s.key).at(-1)!.aborted, 5_000, 'the call to be aborted')
    expect(await reserved(s.e.id)).toEqual({ days: 0, held: 0 })
    const [spent] = await t.sql<{ micros: string }[]>`
      select coalesce(max(spent_usd_micros), 0)::text as micros from spend_days
       where enterprise_id = ${s.e.id}`
    expect(Number(spent!.micros)).toBeGreaterThan(0)
    expect(Number(spent!.micros)).toBeLessThan(held.days)
    const turns = await t.sql<{ status: string }[]>`
      select status from chat_turns where chat_id = ${chat.id}`
    expect(turns.map((r) => r.status)).toEqual(['done'])

    // The chat is free at once: the next message is taken, and its reply sees what was kept.
    await s.send(chat.id, 'Thanks, enough')
    await stream.until(
      (events) => events.some((e) => named('message')(e) && e.data.content === 'After the stop.'),
      15_000,
      'the next reply',
    )
    expect(JSON.stringify(fake.callsWith(s.key).at(-1)!.body.messages)).toContain(
      kept.content.trim(),
    )
    await stream.cancel()
  }, 60_000)

  it('stops a reply that waits on its question: the question closed, the turn done', async () => {
    const s = await tenant()
    fake.script(s.key, {
      text: 'Let me ask first.',
      toolCalls: [{ name: 'os.ask_ceo', arguments: { questions: ['Ship it?'] } }],
    })
    const chat = await s.open()
    await s.send(chat.id, 'Ship the release')
    let detail: ChatDetail | undefined
    // The question shown waiting and the turn moved to wait on it (the engine's step ends after the
    // question is stored): a stop then ends the reply itself; before, the engine would (one core saw it).
    await eventually(
      async () => {
        detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
        const [turn] = await t.sql<{ status: string }[]>`
          select status from chat_turns where chat_id = ${chat.id} and status <> 'done'`
        return (
          detail.messages.some((m) => m.question?.status === 'waiting') &&
          turn?.status === 'waiting'
        )
      },
      15_000,
      'the question to wait',
    )
    const gateId = detail!.messages.find((m) => m.question)!.question!.gateId
    const res = await t.call('POST', `/v1/chats/${chat.id}/reply/stop`, s.as)
    expect(res.status, JSON.stringify(res.body)).toBe(202)
    detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, s.as)).body)
    expect(detail.replying).toBe(false)
    expect(detail.messages.at(-1)).toMatchObject({ role: 'member', stopped: true, content: '' })
    // The text the reply stored before its question is not marked: it was whole.
    expect(detail.messages.find((m) => m.content === 'Let me ask first.')!.stopped).toBe(false)
    const [gate] = await t.sql<{ status: string; decidedBy: string }[]>`
      select status, decided_by from gates where id = ${gateId}`
    expect(gate).toEqual({ status: 'decided', decidedBy: 'reply stopped' })
    const answered = await t.call('POST', `/v1/gates/chat/${chat.id}/decision`, {
      ...s.as,
      body: { decision: 'approve', gateId, answers: ['yes'] },
    })
    expect(answered.status).toBe(409)
    // A second stop finds nothing to stop.
    const again = await t.call('POST', `/v1/chats/${chat.id}/reply/stop`, s.as)
    expect(again.status).toBe(200)
    expect(ChatReplyStop.parse(again.body)).toEqual({ stopping: false })
  }, 30_000)
})
