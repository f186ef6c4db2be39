import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ApiError } from '../../../shared/errors.js'
import { Chat } from '../../../shared/schemas/chats.js'
import { createSql, type Sql } from '../../../server/db/sql.js'
import { getChatDetail, sendMessage } from '../../../server/domain/chats/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'

// A chat message and the long-poll that reads its reply are what 50 chats replying at once repeat
// (npm run bench:chat): each statement is a round trip to PostgreSQL, and each round trip costs a
// write and a wake-up on both sides, CPU that run dispatch on the same cores then waits for. So the
// message is one statement, a long-poll whose reply is there one, and one that waits for it two.

let t: TestApp
let counted: Sql
/**
 * The statements the counting pool sent, but the NOTIFYs sent after a commit and the array types
 * postgres.js reads when a connection starts (a pool of one, so that one never starts mid-count).
 */
const sent: string[] = []
let memberId: string

beforeAll(async () => {
  t = await createTestApp()
  counted = createSql(t.dbUrl, {
    max: 1,
    onQuery: (query) => {
      if (/pg_notify|pg_catalog\.pg_type/.test(query)) return
      sent.push(query.replace(/\s+/g, ' ').trim())
    },
  })
  await counted`select 1`
  const member = await t.call('POST', '/v1/members', { body: { name: 'Grace Trips' } })
  expect(member.status).toBe(201)
  memberId = member.body.id
})
afterAll(async () => {
  await counted?.end()
})

async function openChat(): Promise<Chat> {
  const res = await t.call('POST', '/v1/chats', { body: { memberId } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return Chat.parse(res.body)
}

/** What fn sent, and its outcome. */
async function counting<T>(fn: () => Promise<T>): Promise<{ statements: string[]; result: T }> {
  sent.length = 0
  const result = await fn()
  return { statements: [...sent], result }
}

const caller = 'token:round-trips'
const noWake = () => ({ ready: new Promise<void>(() => undefined), cancel: () => undefined })

describe('a chat message', () => {
  it('is stored with its turn in one statement', async () => {
    const chat = await openChat()
    const { statements, result } = await counting(() =>
      sendMessage(counted, t.acme.id, chat.id, 'Ahoy', caller),
    )
    expect(statements).toHaveLength(1)
    expect(result).toMatchObject({ role: 'person', content: 'Ahoy', toolCall: null })
    const rows = await t.sql<{ role: string; turnCaller: string; lastMessageAt: Date | null }[]>`
      select m.role, t.caller as turn_caller, c.last_message_at
        from chat_messages m join chat_turns t on t.id = m.turn_id join chats c on c.id = m.chat_id
       where m.id = ${result.id}`
    expect(rows).toHaveLength(1)
    expect(rows[0]!.turnCaller).toBe(caller)
    expect(rows[0]!.lastMessageAt).not.toBeNull()
  })

  it('while the member replies: chat_replying in one statement, nothing stored', async () => {
    const chat = await openChat()
    await sendMessage(counted, t.acme.id, chat.id, 'First', caller)
    const { statements, result } = await counting(() =>
      sendMessage(counted, t.acme.id, chat.id, 'Second', caller).catch((e: unknown) => e),
    )
    expect(statements).toHaveLength(1)
    expect(result).toBeInstanceOf(ApiError)
    expect((result as ApiError).code).toBe('chat_replying')
    const [row] = await t.sql<{ messages: number; turns: number }[]>`
      select (select count(*)::int from chat_messages where chat_id = ${chat.id}) as messages,
             (select count(*)::int from chat_turns where chat_id = ${chat.id}) as turns`
    expect(row).toEqual({ messages: 1, turns: 1 })
  })

  it('in a closed chat: chat_closed; in a chat of another enterprise: chat_not_found', async () => {
    const chat = await openChat()
    expect((await t.call('POST', `/v1/chats/${chat.id}/close`)).status).toBe(200)
    const closed = await sendMessage(counted, t.acme.id, chat.id, 'Hello?', caller).catch(
      (e: unknown) => e,
    )
    expect((closed as ApiError).code).toBe('chat_closed')
    const foreign = await sendMessage(counted, t.other.id, chat.id, 'Hello?', caller).catch(
      (e: unknown) => e,
    )
    expect((foreign as ApiError).code).toBe('chat_not_found')
    const [row] = await t.sql<{ messages: number }[]>`
      select count(*)::int as messages from chat_messages where chat_id = ${chat.id}`
    expect(row!.messages).toBe(0)
  })
})

describe('the long-poll for a reply', () => {
  /** The member's reply, as the engine ends a turn: the turn done and its message stored. */
  async function reply(chatId: string, content: string): Promise<void> {
    const [turn] = await t.sql<{ id: string }[]>`
      update chat_turns set status = 'done' where chat_id = ${chatId} returning id`
    await t.sql`
      insert into chat_messages (enterprise_id, chat_id, role, content, turn_id)
      values (${t.acme.id}, ${chatId}, 'member', ${content}, ${turn!.id})`
  }

  /** The member's messages of the chat after its read mark. */
  async function unread(chatId: string): Promise<number> {
    const [row] = await t.sql<{ unread: number }[]>`
      select count(*)::int as unread from chat_messages m join chats c on c.id = m.chat_id
       where c.id = ${chatId} and m.role = 'member' and m.seq > c.read_seq`
    return row!.unread
  }

  it('answers a reply already there in one statement, and marks the chat read', async () => {
    const chat = await openChat()
    const message = await sendMessage(counted, t.acme.id, chat.id, 'Ahoy', caller)
    await reply(chat.id, 'Aye.')
    const { statements, result } = await counting(() =>
      getChatDetail(
        counted,
        t.acme.id,
        chat.id,
        { afterMessageId: message.id, waitSeconds: 10 },
        { watch: { subscribe: noWake } },
      ),
    )
    expect(statements).toHaveLength(1)
    expect(result.messages.map((m) => [m.role, m.content])).toEqual([['member', 'Aye.']])
    expect(result.unread).toBe(0)
    expect(result.replying).toBe(false)
    expect(await unread(chat.id)).toBe(0)
  })

  it('waits in two statements: one that finds nothing and marks nothing, one that answers', async () => {
    const chat = await openChat()
    const message = await sendMessage(counted, t.acme.id, chat.id, 'Ahoy', caller)
    let woken!: () => void
    const wake = () => ({ ready: new Promise<void>((r) => (woken = r)), cancel: () => undefined })
    const { statements, result } = await counting(async () => {
      const answer = getChatDetail(
        counted,
        t.acme.id,
        chat.id,
        { afterMessageId: message.id, waitSeconds: 10 },
        { watch: { subscribe: wake } },
      )
      // The first read found nothing: the chat is not marked read while the reply is awaited.
      while (sent.length === 0) await new Promise((r) => setTimeout(r, 5))
      await new Promise((r) => setTimeout(r, 20))
      const [waiting] = await t.sql<{ readSeq: string; newest: string }[]>`
        select read_seq, (select max(seq) from chat_messages where chat_id = ${chat.id}) as newest
          from chats where id = ${chat.id}`
      expect(Number(waiting!.readSeq)).toBeLessThan(Number(waiting!.newest))
      await reply(chat.id, 'Aye, waited.')
      woken()
      return answer
    })
    expect(statements, statements.join('\n')).toHaveLength(2)
    expect(result.messages.map((m) => [m.role, m.content])).toEqual([['member', 'Aye, waited.']])
    expect(result).toMatchObject({ id: chat.id, unread: 0, replying: false, status: 'open' })
    expect(await unread(chat.id)).toBe(0)
  })

  it('still refuses a chat of another enterprise and a message of another chat', async () => {
    const chat = await openChat()
    const other = await openChat()
    const message = await sendMessage(counted, t.acme.id, other.id, 'Elsewhere', caller)
    const foreign = await getChatDetail(counted, t.other.id, chat.id, {}).catch((e: unknown) => e)
    expect((foreign as ApiError).code).toBe('chat_not_found')
    const wrong = await getChatDetail(counted, t.acme.id, chat.id, {
      afterMessageId: message.id,
    }).catch((e: unknown) => e)
    expect((wrong as ApiError).code).toBe('invalid_request')
  })
})
