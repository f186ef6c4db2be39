import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ErrorBody } from '../../../shared/schemas/common.js'
import {
  Chat,
  ChatDetail,
  ChatMessage,
  ChatReplyStop,
  ChatToolGrant,
  ChatUnread,
} from '../../../shared/schemas/chats.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

// Chats, the routes' side (spec: Endpoints Chats; DESIGN 11; issue 18), with no engine running: what is
// stored at once, what is refused and that nothing is stored when it is. The replies are the engine's
// (test/server/engine/chats.test.ts).

let t: TestApp

beforeAll(async () => {
  t = await createTestApp()
})

async function member(e: TestEnterprise, name = `Ada ${randomUUID().slice(0, 6)}`) {
  const res = await t.call('POST', '/v1/members', { token: e.token, body: { name } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body as { id: string }
}

async function open(e: TestEnterprise, body: Record<string, unknown>) {
  const res = await t.call('POST', '/v1/chats', { token: e.token, body })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return Chat.parse(res.body)
}

const count = async (table: string) =>
  (await t.sql<{ n: number }[]>`select count(*)::int as n from ${t.sql(table)}`)[0]!.n

function expectError(res: { status: number; body: unknown }, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expect(ErrorBody.parse(res.body).error).toBe(code)
}

// A chat's detail is a long-poll (waitSeconds) held within its caller's share (http/limits.ts):
// the checks every authenticated route gets come first, as before the share.
describe('route checks', () => {
  let ours = ''
  let theirs = ''
  beforeAll(async () => {
    ours = (await open(t.acme, { memberId: (await member(t.acme)).id })).id
    theirs = (await open(t.other, { memberId: (await member(t.other)).id })).id
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/chats/${ours}?waitSeconds=1`,
    foreign: () => ({ path: `/v1/chats/${theirs}?waitSeconds=1` }),
    notFoundCode: 'chat_not_found',
  })
})

describe('opening chats', () => {
  it('opens a chat with a member; missing, removed and foreign members are 404', async () => {
    const e = await t.createEnterprise(`Chats ${randomUUID().slice(0, 6)}`)
    const m = await member(e)
    const chat = await open(e, { memberId: m.id })
    expect(chat).toMatchObject({
      memberId: m.id,
      purpose: null,
      status: 'open',
      outcome: null,
      unread: 0,
      replying: false,
      lastMessageAt: null,
    })
    const before = await count('chats')
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { memberId: randomUUID() } }),
      404,
      'member_not_found',
    )
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { memberId: 'nope' } }),
      400,
      'invalid_request',
    )
    const foreign = await member(t.other)
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { memberId: foreign.id } }),
      404,
      'member_not_found',
    )
    const removed = await member(e)
    expect((await t.call('DELETE', `/v1/members/${removed.id}`, { token: e.token })).status).toBe(
      204,
    )
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { memberId: removed.id } }),
      404,
      'member_not_found',
    )
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: {} }),
      400,
      'invalid_request',
    )
    expect(await count('chats')).toBe(before)
  })

  it('a create-task chat goes to the longest coo holder, greets, and is not listed', async () => {
    const e = await t.createEnterprise(`Coo ${randomUUID().slice(0, 6)}`)
    const [coo] = await t.sql<{ id: string; memberId: string }[]>`
      select r.id, rm.member_id from roles r join role_members rm on rm.role_id = r.id
       where r.enterprise_id = ${e.id} and r.slug = 'coo'`
    // A second, later holder: the first keeps the chats.
    const later = await member(e)
    expect(
      (
        await t.call('POST', `/v1/members/${later.id}/roles`, {
          token: e.token,
          body: { roleId: coo!.id },
        })
      ).status,
    ).toBeLessThan(300)
    const chat = await open(e, { purpose: 'create_task' })
    expect(chat).toMatchObject({ memberId: coo!.memberId, purpose: 'create_task', status: 'open' })
    const detail = ChatDetail.parse(
      (await t.call('GET', `/v1/chats/${chat.id}`, { token: e.token })).body,
    )
    expect(detail.messages).toHaveLength(1)
    expect(detail.messages[0]).toMatchObject({ role: 'member', toolCall: null })
    expect(detail.messages[0]!.content).toMatch(/propose/)
    // With memberId, that member.
    const m = await member(e)
    expect((await open(e, { purpose: 'create_task', memberId: m.id })).memberId).toBe(m.id)
    // Purpose chats are not listed nor counted.
    const list = await t.call('GET', '/v1/chats', { token: e.token })
    expect(list.status).toBe(200)
    expect(list.body).toEqual([])
    expect(
      ChatUnread.parse((await t.call('GET', '/v1/chats/unread', { token: e.token })).body),
    ).toEqual({ count: 0 })

    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { purpose: 'gossip' } }),
      400,
      'unknown_purpose',
    )
    for (const holder of [coo!.memberId, later.id])
      expect(
        (await t.call('DELETE', `/v1/roles/${coo!.id}/members/${holder}`, { token: e.token }))
          .status,
      ).toBe(204)
    expectError(
      await t.call('POST', '/v1/chats', { token: e.token, body: { purpose: 'create_task' } }),
      409,
      'no_coo',
    )
  })
})

describe('messages, reading, closing', () => {
  it('stores a message at once; a second while replying is 409; lists most recent first', async () => {
    const e = await t.createEnterprise(`Msg ${randomUUID().slice(0, 6)}`)
    const a = await member(e)
    const b = await member(e)
    const first = await open(e, { memberId: a.id })
    const second = await open(e, { memberId: b.id })
    const sent = await t.call('POST', `/v1/chats/${first.id}/messages`, {
      token: e.token,
      body: { content: 'Hello there' },
    })
    expect(sent.status, JSON.stringify(sent.body)).toBe(201)
    expect(ChatMessage.parse(sent.body)).toMatchObject({ role: 'person', content: 'Hello there' })
    expectError(
      await t.call('POST', `/v1/chats/${first.id}/messages`, {
        token: e.token,
        body: { content: 'again?' },
      }),
      409,
      'chat_replying',
    )
    const listed = async () =>
      (await t.call('GET', '/v1/chats', { token: e.token })).body.map((c: unknown) => Chat.parse(c))
    // A chat with no message yet is not listed: opened and left, it leaves no empty line.
    let list = await listed()
    expect(list.map((c: Chat) => c.id)).toEqual([first.id])
    expect(list[0]).toMatchObject({ replying: true })
    await t.sql`insert into chat_messages (enterprise_id, chat_id, role, content)
                values (${e.id}, ${second.id}, 'person', 'Ahoy')`
    await t.sql`update chats set last_message_at = now() - interval '1 minute' where id = ${second.id}`
    list = await listed()
    expect(list.map((c: Chat) => c.id)).toEqual([first.id, second.id])
    const narrowed = await t.call('GET', `/v1/chats?memberId=${b.id}`, { token: e.token })
    expect(narrowed.body.map((c: Chat) => c.id)).toEqual([second.id])

    // A member reply (as the engine writes it) counts unread until the chat is read.
    await t.sql`update chat_turns set status = 'done' where chat_id = ${first.id}`
    await t.sql`insert into chat_messages (enterprise_id, chat_id, role, content)
                values (${e.id}, ${first.id}, 'member', 'Hi!')`
    expect((await t.call('GET', '/v1/chats/unread', { token: e.token })).body).toEqual({ count: 1 })
    const read = ChatDetail.parse(
      (await t.call('GET', `/v1/chats/${first.id}`, { token: e.token })).body,
    )
    expect(read.messages.map((m) => m.content)).toEqual(['Hello there', 'Hi!'])
    expect(read.unread).toBe(0)
    expect((await t.call('GET', '/v1/chats/unread', { token: e.token })).body).toEqual({ count: 0 })
    const newest = ChatDetail.parse(
      (await t.call('GET', `/v1/chats/${first.id}?limit=1`, { token: e.token })).body,
    )
    expect(newest.messages.map((m) => m.content)).toEqual(['Hi!'])
    const after = ChatDetail.parse(
      (
        await t.call('GET', `/v1/chats/${first.id}?afterMessageId=${read.messages[0]!.id}`, {
          token: e.token,
        })
      ).body,
    )
    expect(after.messages.map((m) => m.content)).toEqual(['Hi!'])
  })

  it('refuses bad input and stores nothing', async () => {
    const e = await t.createEnterprise(`Bad ${randomUUID().slice(0, 6)}`)
    const m = await member(e)
    const chat = await open(e, { memberId: m.id })
    const before = await count('chat_messages')
    for (const content of ['', '   ', 'x'.repeat(20_001)])
      expectError(
        await t.call('POST', `/v1/chats/${chat.id}/messages`, {
          token: e.token,
          body: { content },
        }),
        400,
        'invalid_request',
      )
    expectError(
      await t.call('POST', `/v1/chats/${chat.id}/messages`, {
        token: t.acme.token,
        body: { content: 'hi' },
      }),
      404,
      'chat_not_found',
    )
    expectError(
      await t.call('POST', `/v1/chats/${randomUUID()}/messages`, {
        token: e.token,
        body: { content: 'hi' },
      }),
      404,
      'chat_not_found',
    )
    for (const limit of ['0', '201', 'x', '-1'])
      expectError(
        await t.call('GET', `/v1/chats/${chat.id}?limit=${limit}`, { token: e.token }),
        400,
        'invalid_request',
      )
    expectError(
      await t.call('GET', `/v1/chats/${randomUUID()}`, { token: e.token }),
      404,
      'chat_not_found',
    )
    expectError(
      await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${randomUUID()}/decision`, {
        token: e.token,
        body: { decision: 'allow' },
      }),
      404,
      'tool_call_not_found',
    )
    expectError(
      await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${randomUUID()}/decision`, {
        token: e.token,
        body: { decision: 'maybe' },
      }),
      400,
      'invalid_request',
    )
    expect(await count('chat_messages')).toBe(before)
    // Exactly 20,000 characters is accepted.
    const long = await t.call('POST', `/v1/chats/${chat.id}/messages`, {
      token: e.token,
      body: { content: 'y'.repeat(20_000) },
    })
    expect(long.status).toBe(201)
  })

  it('holds a long-poll at most waitSeconds when no message comes', async () => {
    const e = await t.createEnterprise(`Poll ${randomUUID().slice(0, 6)}`)
    const m = await member(e)
    const chat = await open(e, { memberId: m.id })
    const sent = await t.call('POST', `/v1/chats/${chat.id}/messages`, {
      token: e.token,
      body: { content: 'Anyone there?' },
    })
    // No engine replies here: the wait runs out, and the answer has no message.
    const began = Date.now()
    const res = await t.call(
      'GET',
      `/v1/chats/${chat.id}?afterMessageId=${sent.body.id}&waitSeconds=1`,
      { token: e.token },
    )
    expect(res.status).toBe(200)
    expect(ChatDetail.parse(res.body)).toMatchObject({ status: 'open', messages: [] })
    expect(Date.now() - began).toBeGreaterThanOrEqual(900)
    expect(Date.now() - began).toBeLessThan(5000)
  })

  it('closes once; a closed chat refuses messages', async () => {
    const e = await t.createEnterprise(`Close ${randomUUID().slice(0, 6)}`)
    const m = await member(e)
    const chat = await open(e, { memberId: m.id })
    // A call waiting for the person when the chat closes is never run.
    const [call] = await t.sql<{ id: string }[]>`
      insert into chat_messages (enterprise_id, chat_id, role, tool_call)
      values (${e.id}, ${chat.id}, 'tool', ${t.sql.json({ callId: 'c1', name: 'files.rm', arguments: {}, status: 'waiting', result: null })})
      returning id`
    // So is one allowed but not yet begun; one that began keeps its outcome.
    const [allowed, begun] = await t.sql<{ id: string }[]>`
      insert into chat_messages (enterprise_id, chat_id, role, tool_call, executing_at)
      values (${e.id}, ${chat.id}, 'tool', ${t.sql.json({ callId: 'c2', name: 'files.cp', arguments: {}, status: 'allowed', result: null })}, null),
             (${e.id}, ${chat.id}, 'tool', ${t.sql.json({ callId: 'c3', name: 'files.ls', arguments: {}, status: 'allowed', result: null })}, now())
      returning id`
    const closed = await t.call('POST', `/v1/chats/${chat.id}/close`, { token: e.token })
    expect(closed.status).toBe(200)
    expect(Chat.parse(closed.body)).toMatchObject({ status: 'closed', outcome: 'closed' })
    const calls = await t.sql<{ id: string; status: string }[]>`
      select id, tool_call ->> 'status' as status from chat_messages where chat_id = ${chat.id}`
    const statusOf = (id: string) => calls.find((c) => c.id === id)!.status
    expect([statusOf(call!.id), statusOf(allowed!.id), statusOf(begun!.id)]).toEqual([
      'denied',
      'denied',
      'allowed',
    ])
    const again = await t.call('POST', `/v1/chats/${chat.id}/close`, { token: e.token })
    expect(again.body).toEqual(closed.body)
    expectError(
      await t.call('POST', `/v1/chats/${chat.id}/messages`, {
        token: e.token,
        body: { content: 'hi' },
      }),
      409,
      'chat_closed',
    )
    expectError(
      await t.call('POST', `/v1/chats/${chat.id}/tool-calls/${call!.id}/decision`, {
        token: e.token,
        body: { decision: 'allow' },
      }),
      409,
      'chat_closed',
    )
  })
})

describe('stopping a reply (issue 51 item 16)', () => {
  const stop = (e: TestEnterprise, chatId: string, token = e.token) =>
    t.call('POST', `/v1/chats/${chatId}/reply/stop`, { token })

  it('ends a reply no engine makes at once: marked stopped, its waiting call never run, the next message taken', async () => {
    const e = await t.createEnterprise(`Stop ${randomUUID().slice(0, 6)}`)
    const chat = await open(e, { memberId: (await member(e)).id })
    const sent = await t.call('POST', `/v1/chats/${chat.id}/messages`, {
      token: e.token,
      body: { content: 'Delete the old files' },
    })
    expect(sent.status).toBe(201)
    // No engine runs here: the turn is pending, and a tool call of it waits for the person.
    const [turn] = await t.sql<{ id: string }[]>`
      select id from chat_turns where chat_id = ${chat.id} and status = 'pending'`
    const [call] = await t.sql<{ id: string }[]>`
      insert into chat_messages (enterprise_id, chat_id, role, tool_call, turn_id, reply_group)
      values (${e.id}, ${chat.id}, 'tool', ${t.sql.json({ callId: 'c1', name: 'files.rm', arguments: {}, status: 'waiting', result: null })},
              ${turn!.id}, gen_random_uuid())
      returning id`
    const stopped = await stop(e, chat.id)
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(202)
    expect(ChatReplyStop.parse(stopped.body)).toEqual({ stopping: true })

    const detail = ChatDetail.parse((await t.call('GET', `/v1/chats/${chat.id}`, e)).body)
    expect(detail.replying).toBe(false)
    const last = detail.messages.at(-1)!
    expect(last).toMatchObject({ role: 'member', content: '', stopped: true, notice: false })
    const waited = detail.messages.find((m) => m.id === call!.id)!
    expect(waited.toolCall).toMatchObject({ status: 'denied' })
    expect(waited.toolCall!.result).toMatch(/stopped the reply before this call was run/)
    expect(detail.messages.filter((m) => m.stopped)).toHaveLength(1)
    const [row] = await t.sql<
      { status: string }[]
    >`select status from chat_turns where id = ${turn!.id}`
    expect(row!.status).toBe('done')

    // The chat is free at once; the stop of a chat whose reply ended changes nothing.
    const next = await t.call('POST', `/v1/chats/${chat.id}/messages`, {
      token: e.token,
      body: { content: 'Then list them' },
    })
    expect(next.status, JSON.stringify(next.body)).toBe(201)
    expect(ChatMessage.parse(next.body).stopped).toBe(false)
  })

  it('answers 200 with no reply in progress; 404 for a chat of another enterprise; 403 without chats:write; 409 once closed', async () => {
    const e = await t.createEnterprise(`Stop idle ${randomUUID().slice(0, 6)}`)
    const chat = await open(e, { memberId: (await member(e)).id })
    const idle = await stop(e, chat.id)
    expect(idle.status, JSON.stringify(idle.body)).toBe(200)
    expect(ChatReplyStop.parse(idle.body)).toEqual({ stopping: false })
    // Another enterprise's reply in progress is not found, and not stopped.
    const theirs = await open(t.other, { memberId: (await member(t.other)).id })
    const sent = await t.call('POST', `/v1/chats/${theirs.id}/messages`, {
      token: t.other.token,
      body: { content: 'Go on' },
    })
    expect(sent.status).toBe(201)
    expectError(await stop(e, theirs.id), 404, 'chat_not_found')
    expectError(await stop(e, randomUUID()), 404, 'chat_not_found')
    expectError(await stop(e, 'nope'), 404, 'chat_not_found')
    const reader = await t.tokenWith(['chats:read'], t.other)
    expectError(await stop(t.other, theirs.id, reader), 403, 'api_token_scope')
    const [turn] = await t.sql<{ status: string }[]>`
      select status from chat_turns where chat_id = ${theirs.id}`
    expect(turn!.status).toBe('pending')
    expect((await t.call('POST', `/v1/chats/${chat.id}/close`, { token: e.token })).status).toBe(
      200,
    )
    expectError(await stop(e, chat.id), 409, 'chat_closed')
  })
})

describe('tool grants', () => {
  it('lists and withdraws only the caller’s own grants', async () => {
    const e = await t.createEnterprise(`Grants ${randomUUID().slice(0, 6)}`)
    const m = await member(e)
    const [token] = await t.sql<
      { id: string }[]
    >`select id from api_tokens where enterprise_id = ${e.id} limit 1`
    await t.sql`insert into chat_tool_grants (enterprise_id, caller, member_id, tool)
                values (${e.id}, ${`token:${token!.id}`}, ${m.id}, 'files.read'),
                       (${e.id}, 'token:someone-else', ${m.id}, 'files.write')`
    const list = await t.call('GET', `/v1/chats/tool-grants?memberId=${m.id}`, { token: e.token })
    expect(list.status).toBe(200)
    const grants = list.body.map((g: unknown) => ChatToolGrant.parse(g))
    expect(grants.map((g: ChatToolGrant) => g.tool)).toEqual(['files.read'])
    const other = await t.sql<
      { id: string }[]
    >`select id from chat_tool_grants where caller = 'token:someone-else'`
    expectError(
      await t.call('DELETE', `/v1/chats/tool-grants/${other[0]!.id}`, { token: e.token }),
      404,
      'grant_not_found',
    )
    expect(
      (await t.call('DELETE', `/v1/chats/tool-grants/${grants[0]!.id}`, { token: e.token })).status,
    ).toBe(204)
    expect((await t.call('GET', '/v1/chats/tool-grants', { token: e.token })).body).toEqual([])
  })
})

afterAll(async () => undefined)
