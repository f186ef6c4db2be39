import type { ChatMessage, ChatToolCall } from '../../../shared/schemas/chats.js'
import type { Db } from '../../db/sql.js'
import { chatChanged } from './turns.js'

// A chat's messages (DESIGN 11): how they are stored and read, and what the engine's reply writes of
// them. The messages are the reply's journal: its text and tool calls are stored before anything acts on
// them, and a call is marked executing before it acts.

export interface StoredToolCall {
  callId: string
  name: string
  arguments: Record<string, unknown>
  status: ChatToolCall['status']
  result: string | null
  /** On a tool connection's mustGate list when the call was made: decided each time, never always. */
  mustGate?: boolean
}

export interface MessageRow {
  id: string
  chatId: string
  seq: string
  role: ChatMessage['role']
  content: string
  toolCall: StoredToolCall | null
  executingAt: Date | null
  gateId: string | null
  replyGroup: string | null
  turnId: string | null
  /** The reply was stopped by the person while it was made (undefined: an archive from before). */
  stopped?: boolean
  createdAt: Date
  gateQuestions?: string[] | null
  gateChoices?: { key: string; label: string }[] | null
  gateStatus?: 'waiting' | 'decided' | null
  gateDecision?: 'approve' | 'reject' | 'request_changes' | null
  gateChoice?: string | null
  gateAnswers?: unknown
  gateNote?: string | null
}

/** What the reply's loop said in the member's name about why it could not reply: a notice. */
export const isNotice = (row: Pick<MessageRow, 'role' | 'replyGroup' | 'turnId'>) =>
  row.role === 'member' && !row.replyGroup && !!row.turnId

export function toChatMessage(row: MessageRow): ChatMessage {
  const call = row.toolCall
  // A question (os.ask_ceo) is a question, not a tool call to allow or deny (DESIGN 11).
  const question = row.gateId && row.gateQuestions
  return {
    id: row.id,
    role: row.role,
    content: row.content,
    toolCall:
      call && !question
        ? {
            id: row.id,
            name: call.name,
            arguments: call.arguments,
            status: call.status,
            result: call.result,
            mustGate: call.mustGate === true,
          }
        : null,
    question: question
      ? {
          gateId: row.gateId!,
          questions: row.gateQuestions!,
          choices: row.gateChoices ?? [],
          status: row.gateStatus === 'waiting' ? 'waiting' : 'answered',
          answer:
            row.gateStatus === 'waiting'
              ? null
              : {
                  decision: row.gateDecision ?? null,
                  choice: row.gateChoice ?? null,
                  answers: row.gateAnswers ?? null,
                  note: row.gateNote ?? null,
                },
        }
      : null,
    notice: isNotice(row),
    stopped: row.stopped === true,
    createdAt: row.createdAt.toISOString(),
  }
}

export const messageColumns = (db: Db) => db`
  m.*, g.questions as gate_questions, g.choices as gate_choices, g.status as gate_status,
  g.decision as gate_decision, g.choice as gate_choice, g.answers as gate_answers, g.note as gate_note`

/** Stores a message of a chat and moves its lastMessageAt; readers are woken once it commits. */
export async function insertMessage(
  tx: Db,
  chat: { id: string; enterpriseId: string },
  message: {
    /** The id the message will have (a streamed reply's deltas name it before it is stored). */
    id?: string
    role: ChatMessage['role']
    content: string
    toolCall?: StoredToolCall
    gateId?: string
    replyGroup?: string
    turnId?: string
    /** What a stopped reply had written by then (stops.ts). */
    stopped?: boolean
  },
): Promise<MessageRow> {
  // One round trip: the chat's last_message_at moves in the same statement.
  const [row] = await tx<MessageRow[]>`
    with m as (
      insert into chat_messages (id, enterprise_id, chat_id, role, content, tool_call, gate_id, reply_group, turn_id, stopped)
      values (coalesce(${message.id ?? null}::uuid, gen_random_uuid()), ${chat.enterpriseId}, ${chat.id}, ${message.role}, ${message.content},
              ${message.toolCall ? tx.json(message.toolCall as never) : null}, ${message.gateId ?? null},
              ${message.replyGroup ?? null}, ${message.turnId ?? null}, ${message.stopped === true})
      returning *),
    c as (update chats set last_message_at = (select created_at from m) where id = ${chat.id})
    select * from m`
  chatChanged(tx, chat.id)
  return row!
}

/**
 * A notice of a reply (why it is not made yet, in osd's words), once: the turn's notice that ends the
 * chat so far is brought up to date rather than repeated (a provider still away says so in one line).
 */
export async function noticeMessage(
  tx: Db,
  chat: { id: string; enterpriseId: string },
  turnId: string,
  content: string,
): Promise<void> {
  const [last] = await tx<MessageRow[]>`
    select * from chat_messages where chat_id = ${chat.id} order by seq desc limit 1`
  if (last && isNotice(last) && last.turnId === turnId) {
    if (last.content !== content) {
      await tx`update chat_messages set content = ${content} where id = ${last.id}`
      chatChanged(tx, chat.id)
    }
    return
  }
  await insertMessage(tx, chat, { role: 'member', content, turnId })
}

/**
 * Marks an allowed tool call of the turn as executing, before it acts, while this engine holds the
 * turn: answers false when the call was begun already (or the turn is no longer this engine's).
 */
export async function markExecuting(
  db: Db,
  messageId: string,
  turnId: string,
  engineId: string,
): Promise<boolean> {
  const [marked] = await db<{ id: string }[]>`
    update chat_messages set executing_at = now()
     where id = ${messageId} and executing_at is null and tool_call ->> 'status' = 'allowed'
       and exists (select 1 from chat_turns where id = ${turnId} and status = 'running'
                    and lease_owner = ${engineId})
    returning id`
  return Boolean(marked)
}

/** What a tool call of a reply answered (done) or why it failed. */
export async function answerToolCall(
  db: Db,
  chatId: string,
  messageId: string,
  outcome: { content: string; isError: boolean },
): Promise<void> {
  await db`
    update chat_messages
       set tool_call = tool_call || ${db.json({
         status: outcome.isError ? 'failed' : 'done',
         result: outcome.content,
       } as never)}
     where id = ${messageId}`
  chatChanged(db, chatId)
}

/** Calls of the turn found executing after a crash may have acted: answered, never made again. */
export async function settleInterruptedCalls(
  db: Db,
  chatId: string,
  turnId: string,
  result: string,
): Promise<void> {
  await db`
    update chat_messages
       set tool_call = tool_call || jsonb_build_object('status', 'failed', 'result', ${result}::text)
     where turn_id = ${turnId} and executing_at is not null and tool_call ->> 'status' = 'allowed'`
  chatChanged(db, chatId)
}

/** What a call waiting (or allowed, not yet begun) when its chat closed answers: it was never run. */
export const closedCallResult = 'The chat was closed before this call was decided.'

/** What a call waiting (or allowed, not yet begun) when its reply was stopped answers: never run. */
export const stoppedCallResult = 'The person stopped the reply before this call was run.'

/** The chat's messages, in their order: what a reply reads of the conversation. */
export function chatMessages(db: Db, chatId: string): Promise<MessageRow[]> {
  return db<MessageRow[]>`select * from chat_messages where chat_id = ${chatId} order by seq`
}

/** The person's message a turn answers (what its memory is recalled for). */
export async function turnPersonMessage(db: Db, turnId: string): Promise<string | undefined> {
  const [message] = await db<{ content: string }[]>`
    select content from chat_messages where turn_id = ${turnId} and role = 'person'
     order by seq limit 1`
  return message?.content
}
