import { ApiError } from '../../../shared/errors.js'
import type { Chat, ChatDetail, ChatMessage } from '../../../shared/schemas/chats.js'
import { isUniqueViolation, transaction, unflushedCommit, type Db } from '../../db/sql.js'
import { idPrefixFilter } from '../../db/paging.js'
import { longPoll, type LongPollWait } from '../long-poll/index.js'
import {
  closedCallResult,
  insertMessage,
  messageColumns,
  toChatMessage,
  type MessageRow,
} from './messages.js'
import { chatChanged, insertTurn, moveTurns, wakeChatTurns } from './turns.js'

// Chats (spec: Concepts "Chat", Endpoints Chats; DESIGN 11): opening, listing, reading, sending and
// closing. The folder owns the chat tables: messages (messages.ts), decisions on tool calls
// (decisions.ts), grants (grants.ts), turns (turns.ts), the event stream (events.ts, deltas.ts).

export interface ChatRow {
  id: string
  enterpriseId: string
  memberId: string
  purpose: 'create_task' | null
  status: 'open' | 'closed'
  outcome: Chat['outcome']
  taskId: string | null
  readSeq: string
  lastMessageAt: Date | null
  createdAt: Date
  unread: number
  replying: boolean
}

/** Who decides: the token (or a person's session) that made the call. Grants are the caller's own. */
export type ChatCaller = string

/** Whether the member of chat `c` is still replying: a turn of the chat not done. */
export const replying = (db: Db) =>
  db`exists (select 1 from chat_turns t where t.chat_id = c.id and t.status <> 'done')`

const chatColumns = (db: Db) => db`
  c.*,
  (select count(*)::int from chat_messages m
    where m.chat_id = c.id and m.role = 'member' and m.seq > c.read_seq) as unread,
  ${replying(db)} as replying`

export function toChat(row: ChatRow): Chat {
  return {
    id: row.id,
    memberId: row.memberId,
    purpose: row.purpose,
    status: row.status,
    outcome: row.outcome,
    taskId: row.taskId,
    unread: row.unread,
    replying: row.replying,
    lastMessageAt: row.lastMessageAt?.toISOString() ?? null,
    createdAt: row.createdAt.toISOString(),
  }
}

export function chatNotFound(id: string): ApiError {
  return new ApiError('chat_not_found', `No chat ${id} in this enterprise.`)
}

export async function loadChat(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<ChatRow> {
  const [row] = lock
    ? await db<ChatRow[]>`
        select ${chatColumns(db)} from chats c
         where c.enterprise_id = ${enterpriseId} and c.id = ${id} for no key update of c`
    : await db<ChatRow[]>`
        select ${chatColumns(db)} from chats c where c.enterprise_id = ${enterpriseId} and c.id = ${id}`
  if (!row) throw chatNotFound(id)
  return row
}

// --- opening and listing ----------------------------------------------------------------------------

async function requireMember(
  db: Db,
  enterpriseId: string,
  memberId: string,
): Promise<{ id: string; name: string }> {
  const [member] = await db<{ id: string; name: string }[]>`
    select id, name from members
     where enterprise_id = ${enterpriseId} and id = ${memberId}::uuid and removed_at is null`
  if (!member) throw new ApiError('member_not_found', `No member ${memberId} in this enterprise.`)
  return member
}

export const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * POST /v1/chats: a chat with memberId; or purpose create_task, with the coo holder who has held the
 * role longest (or memberId), a greeting already inside.
 */
export async function createChat(
  db: Db,
  enterpriseId: string,
  input: { memberId?: string; purpose?: string },
): Promise<Chat> {
  if (input.purpose !== undefined && input.purpose !== 'create_task')
    throw new ApiError(
      'unknown_purpose',
      `purpose: only create_task is known; got "${input.purpose}".`,
    )
  if (input.memberId !== undefined && !uuidPattern.test(input.memberId))
    throw new ApiError('member_not_found', `No member ${input.memberId} in this enterprise.`)
  return transaction(db, async (tx) => {
    let member: { id: string; name: string }
    if (input.memberId) member = await requireMember(tx, enterpriseId, input.memberId)
    else if (input.purpose === 'create_task') {
      const [coo] = await tx<{ id: string; name: string }[]>`
        select m.id, m.name from role_members rm
          join roles r on r.id = rm.role_id
          join members m on m.id = rm.member_id
         where rm.enterprise_id = ${enterpriseId} and r.slug = 'coo' and m.removed_at is null
         order by rm.granted_at, m.created_at, m.id limit 1`
      if (!coo)
        throw new ApiError('no_coo', 'Nobody holds the coo role: give it to a member first.')
      member = coo
    } else throw new ApiError('invalid_request', 'body: send memberId, or purpose create_task.')
    const [row] = await tx<{ id: string }[]>`
      insert into chats (enterprise_id, member_id, purpose)
      values (${enterpriseId}, ${member.id}, ${input.purpose ?? null}) returning id`
    if (input.purpose === 'create_task')
      await insertMessage(
        tx,
        { id: row!.id, enterpriseId },
        {
          role: 'member',
          content: `Hello, I am ${member.name}. Tell me what the task should do, how often and for whom, and I will propose it for you to approve.`,
        },
      )
    return toChat(await loadChat(tx, enterpriseId, row!.id))
  })
}

/**
 * GET /v1/chats: most recently active first; purpose chats are not listed, nor chats with no message
 * yet (a chat opened and left keeps no empty line in anyone's list).
 */
export async function listChats(
  db: Db,
  enterpriseId: string,
  filters: { memberId?: string; idPrefix?: string },
): Promise<Chat[]> {
  if (filters.memberId !== undefined && !uuidPattern.test(filters.memberId)) return []
  const rows = await db<ChatRow[]>`
    select ${chatColumns(db)} from chats c
     where c.enterprise_id = ${enterpriseId} and c.purpose is null and c.last_message_at is not null
       ${filters.memberId ? db`and c.member_id = ${filters.memberId}` : db``}
       ${idPrefixFilter(db, 'c.id', filters.idPrefix)}
     order by coalesce(c.last_message_at, c.created_at) desc, c.id desc`
  return rows.map(toChat)
}

/**
 * GET /v1/chats/unread: unread member replies in the chats the list shows. Counted chat by chat after
 * its read mark, through chat_messages_chat, as the list counts each chat's: joined, the count hashed
 * every message the enterprise kept, read or not (97 ms at 110,000 messages, growing with them).
 */
export async function countUnread(db: Db, enterpriseId: string): Promise<{ count: number }> {
  const [row] = await db<{ count: number }[]>`
    select coalesce(sum((select count(*) from chat_messages m
                          where m.chat_id = c.id and m.role = 'member' and m.seq > c.read_seq)), 0)::int
           as count
      from chats c where c.enterprise_id = ${enterpriseId} and c.purpose is null`
  return { count: row!.count }
}

/** As ChatDetailQuery reads it: limit 1..200 and waitSeconds 0..30, refused (400) otherwise. */
export interface DetailQuery {
  limit?: number
  afterMessageId?: string
  waitSeconds?: number
}

/** What readDetail reads: a message (all null when there is none) beside its chat. */
type DetailRow = { [K in keyof MessageRow]: MessageRow[K] | null } & {
  chat: Omit<ChatRow, 'lastMessageAt' | 'createdAt' | 'readSeq' | 'enterpriseId'> & {
    lastMessageAt: string | null
    createdAt: string
  }
  afterSeq: string | null
}

/**
 * The chat of the enterprise (chat_not_found if none) and its messages (after afterMessageId's, the
 * newest `limit`), in one statement: a long-poll's read repeats it, and its reply's read is its answer.
 * `mark` marks the chat read: always, or only when messages are there (a long-poll's read that finds
 * none waits and reads again). The read mark commits without waiting for its flush: a crash that loses
 * it shows a reply unread again.
 */
async function readDetail(
  db: Db,
  enterpriseId: string,
  id: string,
  afterMessageId: string | undefined,
  limit: number | undefined,
  mark: 'always' | 'if found',
): Promise<ChatDetail> {
  const after = afterMessageId !== undefined
  const messageId = after && uuidPattern.test(afterMessageId) ? afterMessageId : null
  const rows = await db<DetailRow[]>`
    with c as (
      select c.*,
             (select seq from chat_messages m where m.chat_id = c.id and m.id = ${messageId}::uuid) as after_seq
        from chats c where c.enterprise_id = ${enterpriseId} and c.id = ${id}),
    found as (
      select ${messageColumns(db)}
        from c join chat_messages m on m.chat_id = c.id left join gates g on g.id = m.gate_id
       where ${after ? db`m.seq > c.after_seq` : db`true`}
       order by m.seq desc ${limit ? db`limit ${limit}` : db``}),
    marked as (
      update chats x set read_seq = newest.seq
        from c, (select max(seq) as seq from chat_messages where chat_id = ${id}) newest
       where x.id = c.id and x.read_seq < newest.seq
         and ${after ? db`c.after_seq is not null` : db`true`}
         and ${mark === 'always' ? db`true` : db`exists (select 1 from found)`}
      returning x.id)
    select ${unflushedCommit(db)},
           json_build_object(
             'id', c.id, 'memberId', c.member_id, 'purpose', c.purpose, 'status', c.status,
             'outcome', c.outcome, 'taskId', c.task_id, 'lastMessageAt', c.last_message_at,
             'createdAt', c.created_at, 'unread', 0,
             'replying', ${replying(db)}
           ) as chat,
           c.after_seq, m.*
      from c left join found m on true
     order by m.seq`
  const [first] = rows
  if (!first) throw chatNotFound(id)
  if (after && first.afterSeq === null)
    throw new ApiError(
      'invalid_request',
      `afterMessageId: no message ${afterMessageId} in chat ${id}.`,
    )
  const { chat } = first
  return {
    ...toChat({
      ...chat,
      enterpriseId,
      readSeq: '0',
      lastMessageAt: chat.lastMessageAt === null ? null : new Date(chat.lastMessageAt),
      createdAt: new Date(chat.createdAt),
    }),
    messages: rows.filter((row) => row.id !== null).map((row) => toChatMessage(row as MessageRow)),
  }
}

/**
 * GET /v1/chats/{id}: the chat and its messages oldest first (limit: the newest only); afterMessageId
 * only later ones, and with waitSeconds (up to 30) and a `wait` the answer is held until one exists.
 * Marks it read.
 */
export async function getChatDetail(
  db: Db,
  enterpriseId: string,
  id: string,
  query: DetailQuery,
  wait?: LongPollWait,
): Promise<ChatDetail> {
  const limit = query.limit
  if (!uuidPattern.test(id)) throw chatNotFound(id)
  const after = query.afterMessageId
  return longPoll({
    key: id,
    waitSeconds: after === undefined ? undefined : query.waitSeconds,
    wait,
    // The read is the answer's own: a wait that finds messages needs no other round trip for them. A
    // read that finds none leaves the chat unread while the reply is awaited.
    read: (last) => readDetail(db, enterpriseId, id, after, limit, last ? 'always' : 'if found'),
    answers: (detail) => detail.messages.length > 0,
  })
}

// --- sending, deciding, closing -------------------------------------------------------------------

/**
 * POST /v1/chats/{id}/messages: stores the person's message with a turn for the engine to reply to.
 * A chat whose member still replies answers 409 chat_replying; a closed one 409 chat_closed.
 */
export async function sendMessage(
  db: Db,
  enterpriseId: string,
  id: string,
  content: string,
  caller: ChatCaller,
): Promise<ChatMessage> {
  if (!uuidPattern.test(id)) throw chatNotFound(id)
  try {
    // One statement, one round trip (it is every chat message's): the chat locked and looked at, and
    // when it is open and its member not replying, the turn, the message and the chat's lastMessageAt.
    // A turn inserted meanwhile by another message is found by chat_turns_active (below).
    const [row] = await db<(MessageRow & { chatStatus: string; chatReplying: boolean })[]>`
      with c as (
        select c.id, c.status,
               ${replying(db)} as replying
          from chats c where c.enterprise_id = ${enterpriseId} and c.id = ${id}
           for no key update of c),
      t as (${insertTurn(db, enterpriseId, caller, db`c`)}),
      m as (
        insert into chat_messages (enterprise_id, chat_id, role, content, turn_id)
        select ${enterpriseId}, ${id}, 'person', ${content}, t.id from t
        returning *),
      u as (update chats set last_message_at = (select created_at from m)
             where id = ${id} and exists (select 1 from m))
      select m.*, c.status as chat_status, c.replying as chat_replying from c left join m on true`
    if (!row) throw chatNotFound(id)
    if (row.chatStatus === 'closed')
      throw new ApiError('chat_closed', `Chat ${id} is closed: open another.`)
    if (row.chatReplying || !row.id)
      throw new ApiError(
        'chat_replying',
        `The member is still replying in chat ${id}: wait for the reply (or decide its tool call).`,
      )
    chatChanged(db, id)
    wakeChatTurns(db, id)
    return toChatMessage(row)
  } catch (err) {
    // Two messages at once: the second finds the first one's turn.
    if (isUniqueViolation(err, 'chat_turns_active'))
      throw new ApiError('chat_replying', `The member is still replying in chat ${id}.`)
    throw err
  }
}

/**
 * What a chat's closing ends, in the closing transaction: a reply in progress (its turn is done, so the
 * engine neither stores its answer nor makes another model call), its tool calls not yet begun (never run)
 * and the question gates it waits on (decided by the chat closing, as a run's end closes its gates).
 */
export async function endChatWork(tx: Db, chatId: string): Promise<void> {
  await moveTurns(tx, 'done', {
    chatId,
    from: ['pending', 'running', 'waiting', 'blocked', 'paused_spend'],
  })
  await tx`
    update chat_messages
       set tool_call = tool_call || ${tx.json({ status: 'denied', result: closedCallResult } as never)}
     where chat_id = ${chatId} and executing_at is null
       and tool_call ->> 'status' in ('waiting', 'allowed')`
  await tx`
    update gates set status = 'decided', decided_by = 'chat closed', decided_at = now()
     where chat_id = ${chatId} and status = 'waiting'`
  chatChanged(tx, chatId)
  wakeChatTurns(tx, chatId)
}

/** POST /v1/chats/{id}/close: closed; repeating changes nothing. */
export async function closeChat(db: Db, enterpriseId: string, id: string): Promise<Chat> {
  if (!uuidPattern.test(id)) throw chatNotFound(id)
  return transaction(db, async (tx) => {
    const chat = await loadChat(tx, enterpriseId, id, true)
    if (chat.status === 'open') {
      await tx`update chats set status = 'closed', outcome = 'closed' where id = ${id}`
      await endChatWork(tx, id)
    }
    return toChat(await loadChat(tx, enterpriseId, id))
  })
}
