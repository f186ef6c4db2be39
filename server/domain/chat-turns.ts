import { notifyAfterCommit, onCommit, type Db } from '../db/sql.js'

// What a chat's reply waits on and what wakes it (DESIGN 11). Apart from chats.ts so that gates.ts can
// move a chat's reply on when its question is answered, with no import circle (chats.ts opens gates).

/** NOTIFY channel of chat messages (the payload is the chat id): wakes long-polling readers. */
export const chatChannel = 'osd_chat'

/** NOTIFY channel of chat turns to claim (the payload is the chat id): wakes the engines' chat loops. */
export const chatTurnChannel = 'osd_chat_turn'

/** Chat loops of this process, told at the commit itself, before the NOTIFY comes back. */
const local = new Set<(chatId: string) => void>()

export function listenChatTurnsLocally(wake: (chatId: string) => void): () => void {
  local.add(wake)
  return () => local.delete(wake)
}

/** Tells readers of the chat that it has a new message, once `db` commits. */
export function chatChanged(db: Db, chatId: string): void {
  notifyAfterCommit(db, chatChannel, [chatId])
}

/** Tells the engines that a turn of the chat may be claimed, once `db` commits. */
export function wakeChatTurns(db: Db, chatId: string): void {
  notifyAfterCommit(db, chatTurnChannel, [chatId])
  if (local.size > 0)
    onCommit(db, () => {
      for (const wake of local) wake(chatId)
    })
}

/**
 * A question gate of a chat was answered (POST /v1/gates/chat/{chatId}/decision): the os.ask_ceo call
 * that opened it is done with the answer, and the reply goes on.
 */
export async function questionAnswered(
  tx: Db,
  gate: { id: string; chatId: string },
  answer: { decision: string; note?: string; answers?: unknown; choice?: string },
): Promise<void> {
  const result = JSON.stringify({
    decision: answer.decision,
    ...(answer.choice !== undefined ? { choice: answer.choice } : {}),
    ...(answer.answers !== undefined ? { answers: answer.answers } : {}),
    ...(answer.note !== undefined ? { note: answer.note } : {}),
  })
  const [message] = await tx<{ turnId: string | null }[]>`
    update chat_messages
       set tool_call = tool_call || jsonb_build_object('status', 'done', 'result', ${result}::text)
     where chat_id = ${gate.chatId} and gate_id = ${gate.id}
     returning turn_id`
  if (message?.turnId)
    await tx`update chat_turns set status = 'pending', updated_at = now()
              where id = ${message.turnId} and status = 'waiting'`
  chatChanged(tx, gate.chatId)
  wakeChatTurns(tx, gate.chatId)
}
