import { z } from 'zod'
import {
  chatDecisions,
  chatMessageRoles,
  chatPurposes,
  chatStatuses,
  gateDecisions,
} from '../values.js'
import {
  IsoTime,
  JsonObject,
  Uuid,
  idPrefixParameter,
  queryInteger,
  waitSecondsParameter,
} from './common.js'
export { chatDecisions, chatMessageRoles, chatPurposes, chatStatuses }

// Chats: a conversation with one member (spec: Concepts "Chat", Endpoints Chats; DESIGN 11). The
// person's message is stored at once; the member's reply is made by the engine and follows in the chat.

/** The longest message a person may send, in characters (spec: Limits). */
export const maxChatMessageLength = 20_000

/** How a closed chat ended: a create-task chat is applied or rejected; any chat may be closed. */
export const chatOutcomes = ['applied', 'rejected', 'closed'] as const

/** Where a tool call of a reply stands: waiting for the person, then allowed (and run) or denied. */
export const toolCallStatuses = ['waiting', 'allowed', 'denied', 'done', 'failed'] as const

export const Chat = z
  .object({
    id: Uuid,
    memberId: Uuid,
    purpose: z.enum(chatPurposes).nullable(),
    status: z.enum(chatStatuses),
    /** How a closed chat ended; null while open. */
    outcome: z.enum(chatOutcomes).nullable(),
    /** The task a create-task chat made, once applied. */
    taskId: Uuid.nullable(),
    /** Member replies not yet read by a GET of the chat. */
    unread: z.number().int(),
    /** Whether the member is making a reply now (a message sent meanwhile answers 409 chat_replying). */
    replying: z.boolean(),
    lastMessageAt: IsoTime.nullable(),
    createdAt: IsoTime,
  })
  .meta({ id: 'Chat' })
export type Chat = z.infer<typeof Chat>

/** A tool call the member made in a reply; one that waits is decided by the person. */
export const ChatToolCall = z
  .object({
    id: Uuid,
    name: z.string(),
    arguments: JsonObject,
    status: z.enum(toolCallStatuses),
    /** What the call answered, once it ran (or why it was refused). */
    result: z.string().nullable(),
    mustGate: z.boolean().meta({
      description:
        "The tool is on a tool connection's mustGate list: it is decided each time (allow or deny); always answers 400 gate_required_for_tool",
    }),
  })
  .meta({ id: 'ChatToolCall' })
export type ChatToolCall = z.infer<typeof ChatToolCall>

/** A question the member asked with os.ask_ceo: a gate of kind chat, answered through /gates/chat. */
export const ChatQuestion = z
  .object({
    gateId: Uuid,
    questions: z.array(z.string()),
    choices: z.array(z.object({ key: z.string(), label: z.string() })),
    status: z.enum(['waiting', 'answered']),
    /** How it was answered (null while it waits; decided by the chat closing: decision only). */
    answer: z
      .object({
        decision: z.enum(gateDecisions).nullable(),
        choice: z.string().nullable(),
        answers: z.unknown().nullable(),
        note: z.string().nullable(),
      })
      .nullable(),
  })
  .meta({ id: 'ChatQuestion' })
export type ChatQuestion = z.infer<typeof ChatQuestion>

/**
 * A message of the chat. A member's question (os.ask_ceo) is a message with `question` set and no
 * `toolCall`: it is answered through POST /v1/gates/chat/{chatId}/decision, never as a tool call.
 */
export const ChatMessage = z
  .object({
    id: Uuid,
    role: z.enum(chatMessageRoles),
    content: z.string(),
    toolCall: ChatToolCall.nullable(),
    question: ChatQuestion.nullable(),
    /**
     * osd's own words in the member's place about why the reply is not (yet) made: no key, a spend cap,
     * a provider that did not answer. Not part of the conversation the model sees.
     */
    notice: z.boolean(),
    /**
     * The person stopped the reply while it was made (POST /v1/chats/{id}/reply/stop; beyond the
     * spec): the content is what the member had written by then, possibly nothing.
     */
    stopped: z.boolean().meta({
      description:
        'The person stopped this reply while it was being made (POST /v1/chats/{id}/reply/stop, beyond the spec): the content is what the member had written by then, possibly nothing',
    }),
    createdAt: IsoTime,
  })
  .meta({ id: 'ChatMessage' })
export type ChatMessage = z.infer<typeof ChatMessage>

/** GET /v1/chats/{id}: the chat and its messages, oldest first. */
export const ChatDetail = Chat.extend({
  messages: z.array(ChatMessage),
  archived: z.boolean().optional().meta({
    description:
      'true: the chat left the live tables by retention and is read back from the archive (it is in no list); false: live (beyond the spec; issue 46)',
  }),
}).meta({ id: 'ChatDetail' })
export type ChatDetail = z.infer<typeof ChatDetail>

export const ChatCreateInput = z
  .object({
    memberId: Uuid.optional(),
    purpose: z.string().optional().meta({ description: 'create_task; another purpose is refused' }),
  })
  .meta({ id: 'ChatCreateInput' })

export const ChatMessageInput = z
  .object({
    content: z
      .string()
      .max(maxChatMessageLength)
      .refine((text) => text.trim().length > 0, { message: 'must not be empty' }),
  })
  .meta({ id: 'ChatMessageInput' })

export const ChatToolCallDecision = z
  .object({ decision: z.enum(chatDecisions) })
  .meta({ id: 'ChatToolCallDecision' })

export const ChatToolGrant = z
  .object({ id: Uuid, memberId: Uuid, tool: z.string(), createdAt: IsoTime })
  .meta({ id: 'ChatToolGrant' })
export type ChatToolGrant = z.infer<typeof ChatToolGrant>

/** POST /v1/chats/{id}/reply/stop: whether a reply was in progress, and so is being stopped. */
export const ChatReplyStop = z
  .object({
    stopping: z.boolean().meta({
      description:
        'true (202): a reply was in progress and ends stopped, what it wrote kept as a message marked stopped; false (200): no reply was in progress, nothing changed',
    }),
  })
  .meta({ id: 'ChatReplyStop' })
export type ChatReplyStop = z.infer<typeof ChatReplyStop>

export const ChatUnread = z.object({ count: z.number().int() }).meta({ id: 'ChatUnread' })

// GET /v1/chats/{id}/events (text/event-stream): each event is `event: <name>` and `data: <one JSON
// line>`. `message` (a ChatMessage, with `id:` its id) and `message.updated` (a ChatMessage again,
// changed: a call decided, run, done; a question answered), `delta` (the next text of the reply being
// made), `chat` (the chat closed, or its member started or ended a reply).

/** A piece of the member's reply being made; joined in order, a message's deltas are its content. */
export const ChatDeltaEvent = z
  .object({ messageId: Uuid, text: z.string() })
  .meta({ id: 'ChatDeltaEvent' })
export type ChatDeltaEvent = z.infer<typeof ChatDeltaEvent>

export const ChatStatusEvent = z
  .object({ status: z.enum(chatStatuses), replying: z.boolean() })
  .meta({ id: 'ChatStatusEvent' })
export type ChatStatusEvent = z.infer<typeof ChatStatusEvent>

/** The events of GET /v1/chats/{id}/events, by name. */
export const chatEventNames = ['message', 'message.updated', 'delta', 'chat'] as const
export type ChatEventName = (typeof chatEventNames)[number]

/** GET /v1/chats: memberId narrows; idPrefix names chats by the start of their id (issue 51). */
export const ChatListQuery = z.object({
  memberId: z.string().optional(),
  idPrefix: idPrefixParameter('chats'),
})

/** GET /v1/chats/{id} beyond the spec: wait (up to 30 s) for a message after afterMessageId. */
export const ChatDetailQuery = z.object({
  limit: queryInteger({
    min: 1,
    max: 200,
    description: 'only the newest this many messages, 1..200 (spec: Limits)',
  }),
  afterMessageId: z.string().optional(),
  waitSeconds: waitSecondsParameter(
    'with afterMessageId: hold the answer up to this many seconds, 0..30, until a later message exists (beyond the spec)',
  ),
})
