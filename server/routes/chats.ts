import { z } from 'zod'
import { ArchivedQuery, Uuid } from '../../shared/schemas/common.js'
import {
  Chat,
  ChatCreateInput,
  ChatDetail,
  ChatDetailQuery,
  ChatListQuery,
  ChatMessage,
  ChatMessageInput,
  ChatReplyStop,
  ChatToolCallDecision,
  ChatToolGrant,
  ChatUnread,
} from '../../shared/schemas/chats.js'
import {
  closeChat,
  countUnread,
  createChat,
  decideToolCall,
  deleteGrant,
  followDeltas,
  listChats,
  listGrants,
  openChatEvents,
  sendMessage,
  stopReply,
} from '../domain/chats/index.js'
import { archivedByPrefix, chatDetail } from '../domain/retention/index.js'
import type { AppContext, RouteDeps } from '../http/context.js'
import { longPollBound } from '../http/limits.js'
import { openSse } from '../http/sse.js'
import { createRouter, route } from '../http/router.js'

const ChatParams = z.object({ id: Uuid })
const MemberQuery = z.object({ memberId: z.string().optional() })

/** Who decides and whose grants: the token that calls (DESIGN 11). */
const callerOf = (c: AppContext) => c.var.caller.actor

/** Chats (spec: Endpoints Chats; DESIGN 11). The reply is the engine's; these routes store and read. */
export function chatRoutes({ sql, chatWatch, shutdown, config, limits }: RouteDeps) {
  const app = createRouter()
  const common = { notFound: 'chat_not_found', params: ChatParams } as const

  route(
    app,
    {
      operationId: 'listChats',
      method: 'get',
      path: '/',
      summary:
        'Chats, most recently active first; memberId and idPrefix narrow; purpose chats are not listed',
      query: ChatListQuery,
      response: z.array(Chat),
    },
    async (c, { query }) => listChats(sql, c.var.caller.enterpriseId, query),
  )
  route(
    app,
    {
      operationId: 'createChat',
      method: 'post',
      path: '/',
      summary:
        'Open a chat with memberId; or purpose create_task: with the longest coo holder (or memberId), a greeting inside',
      body: ChatCreateInput,
      status: 201,
      response: Chat,
      errors: ['member_not_found', 'unknown_purpose', 'no_coo'],
    },
    async (c, { body }) => createChat(sql, c.var.caller.enterpriseId, body),
  )
  route(
    app,
    {
      operationId: 'countUnreadChats',
      method: 'get',
      path: '/unread',
      summary: 'How many member replies are unread in the chats the list shows',
      response: ChatUnread,
    },
    async (c) => countUnread(sql, c.var.caller.enterpriseId),
  )
  route(
    app,
    {
      operationId: 'listChatToolGrants',
      method: 'get',
      path: '/tool-grants',
      summary: "The caller's always-allow answers; memberId narrows",
      query: MemberQuery,
      response: z.array(ChatToolGrant),
    },
    async (c, { query }) => listGrants(sql, c.var.caller.enterpriseId, callerOf(c), query.memberId),
  )
  route(
    app,
    {
      operationId: 'deleteChatToolGrant',
      method: 'delete',
      path: '/tool-grants/{grantId}',
      summary: 'Withdraw one of the caller’s grants',
      params: z.object({ grantId: Uuid }),
      notFound: 'grant_not_found',
      status: 204,
    },
    async (c, { params }) => {
      await deleteGrant(sql, c.var.caller.enterpriseId, callerOf(c), params.grantId)
    },
  )
  route(
    app,
    {
      operationId: 'findArchivedChats',
      method: 'get',
      path: '/archived',
      summary:
        'The archived chats whose id starts with idPrefix (20 at most), which no list shows (beyond the spec)',
      description:
        'What osctl names a chat by, its first characters, finds an archived chat here: the list shows live chats only (issue 46).',
      query: ArchivedQuery('archived chats'),
      response: z.array(Chat),
      errors: ['archive_unavailable'],
    },
    async (c, { query }) =>
      archivedByPrefix(sql, config.archiveDir, c.var.caller.enterpriseId, 'chat', query.idPrefix),
  )
  route(
    app,
    {
      ...common,
      operationId: 'getChat',
      method: 'get',
      path: '/{id}',
      summary:
        'The chat and its messages oldest first (limit 1 to 200: the newest only); marks it read; an archived chat too (archived: true)',
      description:
        'afterMessageId returns only later messages. With waitSeconds (up to 30, beyond the spec) the answer is held until such a message exists, so callers follow a reply without polling. ' +
        longPollBound,
      query: ChatDetailQuery,
      response: ChatDetail,
      errors: ['archive_unavailable'],
    },
    // A chat the retention pass archived answers from the archive (archived: true; issue 46).
    async (c, { params, query }) =>
      // Held within the caller's share of long-polls (limits.ts), else answered at once.
      limits.longPoll(c, query.waitSeconds, (waitSeconds) =>
        chatDetail(
          sql,
          config.archiveDir,
          c.var.caller.enterpriseId,
          params.id,
          { ...query, waitSeconds },
          { watch: chatWatch, signal: shutdown },
        ),
      ),
  )
  route(
    app,
    {
      ...common,
      operationId: 'followChatEvents',
      method: 'get',
      path: '/{id}/events',
      summary:
        'The chat as it happens (text/event-stream): message, message.updated, delta and chat events',
      description:
        'Events: `message` (a stored ChatMessage, with `id:` its id), `message.updated` (a stored message changed: a tool call decided or done, a question answered), `delta` (ChatDeltaEvent: the next text of the reply being made; joined in order, the deltas of a message are its content), `chat` (ChatStatusEvent; sent first, then when the chat closes or its member starts or ends a reply). With `Last-Event-ID` (a message id of this chat) the messages after it and the older ones changed since are sent first; without it nothing old. A `: ping` comment every 15 s. The stream ends when the chat closes, the daemon stops, or its token or session stops or changes (revoked, changed, rotated, expired, its person removed). Deltas are not kept: a client that reconnects gets the stored messages, then live deltas again. A token (or session) holds at most OSD_MAX_STREAMS_PER_TOKEN (50) streams open at once in a process, these and the event feed together: one more is 429 too_many_streams.',
      rawResponse: 'text/event-stream',
      errors: ['too_many_streams'],
    },
    async (c, { params }) => {
      // Ends when the client goes away (the stream is cancelled) or the daemon stops. One of the
      // caller's streams, the event feed's included (limits.ts openStream): without a bound, one token
      // could hold connections, wake-ups and delta listeners without end.
      return openSse(
        c,
        shutdown,
        (end) => limits.openStream(c, end),
        (signal) =>
          openChatEvents(sql, c.var.caller.enterpriseId, params.id, c.req.header('last-event-id'), {
            subscribe: (chatId, ms) => chatWatch.subscribe(chatId, ms, signal),
            deltas: (chatId, listener) => followDeltas(sql, chatId, listener),
            signal,
          }),
      )
    },
  )
  route(
    app,
    {
      ...common,
      operationId: 'sendChatMessage',
      method: 'post',
      path: '/{id}/messages',
      summary: "Send a message (1 to 20,000 characters); the member's reply follows in the chat",
      body: ChatMessageInput,
      status: 201,
      response: ChatMessage,
      errors: ['chat_replying', 'chat_closed'],
    },
    async (c, { params, body }) =>
      sendMessage(sql, c.var.caller.enterpriseId, params.id, body.content, callerOf(c)),
  )
  route(
    app,
    {
      ...common,
      operationId: 'stopChatReply',
      method: 'post',
      path: '/{id}/reply/stop',
      summary:
        "Stop the member's reply in progress (beyond the spec): 202 stopping; 200 when none is",
      description:
        "The reply ends within about a second, whichever osd process makes it: what it wrote so far is kept as the member's message with `stopped: true` (empty when nothing was written), its tool calls and questions that wait for the person end as never run, the spend reserved for its model call is settled (what it streamed is paid for: the provider bills a stream cut short, so it is counted as the worst case counts, a token for every three characters, never above what was reserved), and the chat takes the next message at once. The chat's event stream sends that message and a `chat` event with `replying: false`. With no reply in progress nothing changes and the answer is 200 `{stopping: false}`, so a stop that arrives just after the reply ended is not an error.",
      status: 202,
      response: ChatReplyStop,
      otherAnswers: {
        200: { description: 'no reply was in progress: nothing changed', schema: ChatReplyStop },
      },
      errors: ['chat_closed'],
    },
    async (c, { params }) => {
      const answer = await stopReply(sql, c.var.caller.enterpriseId, params.id)
      return answer.stopping ? answer : c.json(answer, 200)
    },
  )
  route(
    app,
    {
      ...common,
      operationId: 'decideChatToolCall',
      method: 'post',
      path: '/{id}/tool-calls/{callId}/decision',
      summary:
        'Decide a waiting tool call: allow, always (and do not ask this caller again) or deny',
      params: z.object({ id: Uuid, callId: z.string() }),
      body: ChatToolCallDecision,
      status: 201,
      response: ChatMessage,
      errors: [
        'tool_call_not_found',
        'already_decided',
        'use_gate_decision',
        'gate_required_for_tool',
        'chat_closed',
      ],
    },
    async (c, { params, body }) =>
      decideToolCall(
        sql,
        c.var.caller.enterpriseId,
        params.id,
        params.callId,
        body.decision,
        callerOf(c),
      ),
  )
  route(
    app,
    {
      ...common,
      operationId: 'closeChat',
      method: 'post',
      path: '/{id}/close',
      summary: 'Close the chat; repeating changes nothing',
      response: Chat,
    },
    async (c, { params }) => closeChat(sql, c.var.caller.enterpriseId, params.id),
  )
  return app
}
