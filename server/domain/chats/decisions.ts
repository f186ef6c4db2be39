import { ApiError } from '../../../shared/errors.js'
import type { ChatMessage } from '../../../shared/schemas/chats.js'
import { TaskDefinition } from '../../../shared/schemas/tasks.js'
import { transaction, type Db } from '../../db/sql.js'
import { createTask, mustGateTools } from '../tasks/index.js'
import { endChatWork, loadChat, uuidPattern, type ChatCaller } from './chats.js'
import {
  closedCallResult,
  messageColumns,
  toChatMessage,
  type MessageRow,
  type StoredToolCall,
} from './messages.js'
import { chatChanged, moveTurns, wakeChatTurns } from './turns.js'

// A person's decision on a tool call of a reply (DESIGN 11): allow, always (with a grant for the caller)
// or deny; in a create-task chat, the proposed task created or refused.

/**
 * POST /v1/chats/{id}/tool-calls/{callId}/decision: allow runs the call once (the engine runs it),
 * always also stores the caller's grant, deny tells the member it was refused. In a create-task chat,
 * allowing os.create_task creates the task and closes the chat (applied); denying it closes the chat
 * (rejected). A decided call answers 409 already_decided.
 */
export async function decideToolCall(
  db: Db,
  enterpriseId: string,
  chatId: string,
  callId: string,
  decision: 'allow' | 'always' | 'deny',
  caller: ChatCaller,
): Promise<ChatMessage> {
  const outcome = await transaction(db, async (tx) => {
    const chat = await loadChat(tx, enterpriseId, chatId, true)
    const [message] = uuidPattern.test(callId)
      ? await tx<MessageRow[]>`
          select * from chat_messages where chat_id = ${chatId} and id = ${callId} and tool_call is not null
             for update`
      : []
    if (!message)
      throw new ApiError('tool_call_not_found', `No tool call ${callId} in chat ${chatId}.`)
    const call = message.toolCall!
    if (message.gateId)
      throw new ApiError(
        'use_gate_decision',
        `Message ${callId} is a question, not a tool call: answer it with POST /v1/gates/chat/${chatId}/decision.`,
        { gateId: message.gateId, route: `POST /v1/gates/chat/${chatId}/decision` },
      )
    if (chat.status === 'closed' && (call.status === 'waiting' || call.result === closedCallResult))
      throw new ApiError('chat_closed', `Chat ${chatId} is closed: its calls are not run.`)
    if (call.status !== 'waiting')
      throw new ApiError('already_decided', `Tool call ${callId} was already ${call.status}.`, {
        status: call.status,
      })
    // The chief executive's must-gate list wins over a person's convenience: each such call is decided.
    if (decision === 'always' && (await mustGateTools(tx, enterpriseId)).includes(call.name))
      throw new ApiError(
        'gate_required_for_tool',
        `${call.name} is on a tool connection's mustGate list: allow or deny this call; it cannot be allowed always.`,
        { tool: call.name },
      )
    const set = (status: StoredToolCall['status'], result: string | null) => tx`
      update chat_messages set tool_call = tool_call || ${tx.json({ status, result } as never)}
       where id = ${message.id}`
    const goOn = () =>
      message.turnId && moveTurns(tx, 'pending', { ids: [message.turnId], from: ['waiting'] })
    if (decision === 'always')
      await tx`
        insert into chat_tool_grants (enterprise_id, caller, member_id, tool)
        values (${enterpriseId}, ${caller}, ${chat.memberId}, ${call.name}) on conflict do nothing`
    const proposal = chat.purpose === 'create_task' && call.name === 'os.create_task'
    if (decision === 'deny') {
      await set('denied', 'The person refused this call.')
      if (proposal) {
        await tx`update chats set status = 'closed', outcome = 'rejected' where id = ${chatId}`
        await endChatWork(tx, chatId)
      } else await goOn()
    } else if (proposal) {
      const created = await createProposedTask(tx, enterpriseId, call.arguments, chatId)
      if ('taskId' in created) {
        await set('done', `Created task ${created.taskId}.`)
        await tx`update chats set status = 'closed', outcome = 'applied', task_id = ${created.taskId}
                  where id = ${chatId}`
        await endChatWork(tx, chatId)
      } else {
        await set('failed', created.error)
        await goOn()
      }
    } else {
      await set('allowed', null)
      await goOn()
    }
    chatChanged(tx, chatId)
    wakeChatTurns(tx, chatId)
    return message.id
  })
  const [row] = await db<MessageRow[]>`
    select ${messageColumns(db)} from chat_messages m left join gates g on g.id = m.gate_id
     where m.id = ${outcome}`
  return toChatMessage(row!)
}

function definitionOf(args: Record<string, unknown>): TaskDefinition {
  return (args.definition ?? {}) as TaskDefinition
}

/** Creates the task os.create_task proposed, naming the chat; its errors are the member's to correct. */
async function createProposedTask(
  tx: Db,
  enterpriseId: string,
  args: Record<string, unknown>,
  chatId: string,
): Promise<{ taskId: string } | { error: string }> {
  const problem = await checkProposal(tx, enterpriseId, args)
  if (problem) return { error: problem }
  const taskId = await createTask(tx, enterpriseId, definitionOf(args), { sourceChatId: chatId })
  return { taskId }
}

const rollback = new Error('rollback')

/**
 * The definition checks of POST /v1/tasks on a proposed definition, nothing kept: undefined when it would
 * be created, else what is wrong, in words the member can correct it by.
 */
export async function checkProposal(
  db: Db,
  enterpriseId: string,
  args: Record<string, unknown>,
): Promise<string | undefined> {
  const parsed = TaskDefinition.safeParse(args.definition)
  if (!parsed.success)
    return `definition: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'definition'}: ${i.message}`).join('; ')}`
  try {
    await transaction(db, async (tx) => {
      await tx`savepoint proposal`
      try {
        await createTask(tx, enterpriseId, parsed.data)
      } finally {
        await tx`rollback to savepoint proposal`
      }
      throw rollback
    })
  } catch (err) {
    if (err === rollback) return undefined
    if (err instanceof ApiError)
      return `${err.code}: ${err.message}${err.extra ? ` ${JSON.stringify(err.extra)}` : ''}`
    throw err
  }
  return undefined
}
