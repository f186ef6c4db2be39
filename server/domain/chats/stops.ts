import { randomUUID } from 'node:crypto'
import { ApiError } from '../../../shared/errors.js'
import type { ChatReplyStop } from '../../../shared/schemas/chats.js'
import { transaction, type Db } from '../../db/sql.js'
import { loadChat, uuidPattern } from './chats.js'
import { insertMessage, stoppedCallResult } from './messages.js'
import { moveTurns, wakeChatTurns, type TurnStatus } from './turns.js'

// Stopping a reply (issue 51 item 16; beyond the spec): the person's stop is recorded on the chat's
// turn, in the database, because the engine streaming the reply may be another process than the one
// that took the request. That engine hears the turn's chat woken (NOTIFY osd_chat_turn, or at its next
// lease renewal should the NOTIFY be lost), aborts its model call, and ends the turn with what it had
// written kept and marked stopped (endStoppedTurn). A turn no engine is making a reply for right now
// (pending, waiting for the person, held) ends here at once.

/** The statuses of a turn whose reply is not over. */
const unfinished: readonly Exclude<TurnStatus, 'done'>[] = [
  'pending',
  'running',
  'waiting',
  'blocked',
  'paused_spend',
]

/**
 * POST /v1/chats/{id}/reply/stop: stops the member's reply in progress ({stopping: true}); with none,
 * nothing changes ({stopping: false}: a stop that comes just after the reply ended is no error). A
 * closed chat answers 409 chat_closed, as sending to it does.
 */
export async function stopReply(db: Db, enterpriseId: string, id: string): Promise<ChatReplyStop> {
  if (!uuidPattern.test(id))
    throw new ApiError('chat_not_found', `No chat ${id} in this enterprise.`)
  return transaction(db, async (tx) => {
    // The chat before its turn (docs/locks.md), as every change of a reply takes them.
    const chat = await loadChat(tx, enterpriseId, id, true)
    if (chat.status === 'closed')
      throw new ApiError('chat_closed', `Chat ${id} is closed: it has no reply to stop.`)
    const [turn] = await tx<{ id: string; status: TurnStatus }[]>`
      select id, status from chat_turns where chat_id = ${id} and status <> 'done' for update`
    if (!turn) return { stopping: false }
    if (turn.status === 'running') {
      // The engine at it ends it, keeping what it wrote; it is told by the wake of the chat's turns.
      await tx`update chat_turns
                  set stop_requested_at = coalesce(stop_requested_at, now()), updated_at = now()
                where id = ${turn.id}`
      wakeChatTurns(tx, id)
    } else await endStoppedTurn(tx, chat, turn.id, { content: '' })
    return { stopping: true }
  })
}

/**
 * Ends a stopped reply's turn, in the caller's transaction, which holds the chat's and the turn's
 * locks: what the reply had written is stored as the member's message marked stopped (an empty one
 * when nothing was: readers see the reply ended stopped), its tool calls not yet begun and its questions
 * end as never run, and the turn is done, so the chat takes the next message at once.
 */
export async function endStoppedTurn(
  tx: Db,
  chat: { id: string; enterpriseId: string },
  turnId: string,
  written: { messageId?: string; content: string },
): Promise<void> {
  await insertMessage(tx, chat, {
    id: written.messageId,
    role: 'member',
    content: written.content,
    turnId,
    // A group of its own: a member message of a turn without one would read as a notice (isNotice).
    replyGroup: randomUUID(),
    stopped: true,
  })
  await tx`
    update chat_messages
       set tool_call = tool_call || ${tx.json({ status: 'denied', result: stoppedCallResult } as never)}
     where chat_id = ${chat.id} and turn_id = ${turnId} and executing_at is null
       and tool_call ->> 'status' in ('waiting', 'allowed')`
  // Its questions are decided by the stop, as a chat's closing decides them (chats.ts endChatWork).
  await tx`
    update gates set status = 'decided', decided_by = 'reply stopped', decided_at = now()
     where chat_id = ${chat.id} and status = 'waiting'
       and id in (select gate_id from chat_messages
                   where chat_id = ${chat.id} and turn_id = ${turnId} and gate_id is not null)`
  await moveTurns(tx, 'done', { ids: [turnId], from: unfinished })
}
