import type { Command } from 'commander'
import { setTimeout as sleep } from 'node:timers/promises'
import type {
  Chat,
  ChatDetail,
  ChatMessage,
  ChatReplyStop,
  ChatToolCall,
  ChatToolGrant,
} from '../../shared/schemas/chats.js'
import type { Gate } from '../../shared/schemas/gates.js'
import { chatDecisions } from '../../shared/values.js'
import { maxWaitSeconds, messagesAfter, transcriptLines, turnOver, waitingOn } from '../chat.js'
import { chatMarkdown } from '../chat-export.js'
import { actionOf, confirmDestructive, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { CliError, UsageError, exitCodes, noTokenError } from '../errors.js'
import { unheldPause } from '../follow.js'
import { collect } from '../inputs.js'
import { colour, printFields, printJson, printTable, show } from '../output.js'
import { idRef, memberId, resolveId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { chatInstead, drawEveryFrame, requireTerminal } from '../tui/terminal.js'
import { about } from './about.js'

// `osctl chats` (spec: Concepts "Chat", Endpoints Chats; DESIGN 11): conversations with members, their
// tool calls and questions decided from a pipeline; and `osctl chat`, the ink screen (cli/tui), loaded
// only when it runs.

type ChatDecision = (typeof chatDecisions)[number]

/** A chat by its id or a prefix of it (issue 51). */
const chatRef = (deps: Deps, ref: string) => resolveId(deps.client(), 'chat', ref)
const callRef = (ref: string) => idRef(ref, 'a tool call')
const grantRef = (ref: string) => idRef(ref, 'a tool grant')

/** Member names by id, for what a person reads; ids stand in when the list cannot be read. */
async function memberNames(deps: Deps): Promise<Map<string, string>> {
  const members = await deps
    .client()
    .get<{ id: string; name: string }[]>('/members')
    .catch(() => [])
  return new Map((Array.isArray(members) ? members : []).map((m) => [m.id, m.name]))
}

const chatColumns = (names: Map<string, string>) => [
  { header: 'ID', value: (c: Chat) => c.id },
  { header: 'MEMBER', value: (c: Chat) => names.get(c.memberId) ?? c.memberId },
  { header: 'STATUS', value: (c: Chat) => (c.replying ? 'replying' : c.status) },
  { header: 'UNREAD', value: (c: Chat) => c.unread },
  { header: 'LAST MESSAGE', value: (c: Chat) => c.lastMessageAt },
]

const grantColumns = [
  { header: 'ID', value: (g: ChatToolGrant) => g.id },
  { header: 'MEMBER', value: (g: ChatToolGrant) => g.memberId },
  { header: 'TOOL', value: (g: ChatToolGrant) => g.tool },
  { header: 'CREATED', value: (g: ChatToolGrant) => g.createdAt },
]

function chatFields(deps: Deps, chat: Chat, name: string | undefined): void {
  const out = deps.out
  printFields(out, [
    ['id', chat.id],
    ['member', name ? `${name} (${chat.memberId})` : chat.memberId],
    ['purpose', chat.purpose],
    ['status', chat.status === 'open' ? colour(out, 'green', chat.status) : chat.status],
    ['outcome', chat.outcome],
    ['task', chat.taskId],
    ['replying', chat.replying ? colour(out, 'yellow', 'yes') : 'no'],
    ['unread', chat.unread],
    ['last message', chat.lastMessageAt],
    ['created', chat.createdAt],
    ...('archived' in chat && chat.archived
      ? [['archived', 'yes: read back from the archive; in no list'] as [string, unknown]]
      : []),
  ])
}

function printMessages(
  deps: Deps,
  chatId: string,
  messages: ChatMessage[],
  memberName?: string,
): void {
  for (const message of messages)
    deps.out.write(transcriptLines(message, chatId, memberName).join('\n') + '\n')
}

async function showChat(deps: Deps, chat: Chat | ChatDetail): Promise<void> {
  if (deps.out.json) return show(deps.out, chat, () => {})
  const name = (await memberNames(deps)).get(chat.memberId)
  chatFields(deps, chat, name)
  if ('messages' in chat && Array.isArray(chat.messages)) {
    deps.out.write('\n')
    if (chat.messages.length === 0) deps.out.error('(no messages)\n')
    printMessages(deps, chat.id, chat.messages, name)
  }
}

/** A limit of 1 to 200 (the API's range), checked before it is sent. */
function limitOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1 || n > 200)
    throw new UsageError(`--limit takes a whole number from 1 to 200; got "${value}"`)
  return n
}

export async function listChats(deps: Deps, opts: { member?: string }): Promise<void> {
  const client = deps.client()
  const query = { memberId: opts.member ? await memberId(client, opts.member) : undefined }
  const chats = await client.get<Chat[]>('/chats', query)
  if (deps.out.json) return show(deps.out, chats, () => {})
  printTable(deps.out, chats, chatColumns(await memberNames(deps)))
}

export async function getChat(deps: Deps, ref: string, opts: { limit?: string }): Promise<void> {
  const limit = limitOf(opts.limit)
  await showChat(
    deps,
    await deps.client().get<ChatDetail>(`/chats/${await chatRef(deps, ref)}`, { limit }),
  )
}

export const exportFormats = ['md', 'json'] as const

/**
 * A chat's whole transcript: md a markdown document (times, speakers, tool calls with their decision
 * and result, questions with their answers), json the API's detail unchanged. To stdout, so it is
 * redirected to a file.
 */
export async function exportChat(
  deps: Deps,
  ref: string,
  opts: { format?: string },
): Promise<void> {
  const format = opts.format ?? (deps.out.json ? 'json' : 'md')
  if (!(exportFormats as readonly string[]).includes(format))
    throw new UsageError(`--format takes md or json; got "${format}"`)
  const detail = await deps.client().get<ChatDetail>(`/chats/${await chatRef(deps, ref)}`)
  if (format === 'json') {
    printJson(deps.out, detail)
    return
  }
  const name = (await memberNames(deps)).get(detail.memberId)
  deps.out.write(chatMarkdown(detail, name ?? 'member'))
}

/**
 * Opens a chat with a member, or with --create-task a chat with the COO that ends in a new task. With
 * --message it says something at once (and with --wait prints the reply): a conversation in one
 * command, where no terminal is at hand for `osctl chat` (issue 35); --json then prints the chat with
 * its messages as the daemon answers it after.
 */
export async function newChat(
  deps: Deps,
  member: string | undefined,
  opts: { createTask?: boolean; message?: string; wait?: boolean; timeout?: string },
): Promise<void> {
  if (!member && !opts.createTask)
    throw new UsageError('name the member to chat with, or give --create-task')
  if ((opts.wait || opts.timeout !== undefined) && opts.message === undefined)
    throw new UsageError('--wait and --timeout go with --message')
  const timeout = seconds(opts.timeout, '--timeout')
  if (timeout !== undefined && !opts.wait) throw new UsageError('--timeout goes with --wait')
  const content = opts.message === undefined ? undefined : await messageText(deps, opts.message)
  const client = deps.client()
  const body = {
    ...(opts.createTask ? { purpose: 'create_task' } : {}),
    ...(member ? { memberId: await memberId(client, member) } : {}),
  }
  const chat = await client.post<Chat | ChatDetail>('/chats', body)
  if (content === undefined) return showChat(deps, chat)

  const sent = await client.post<ChatMessage>(`/chats/${chat.id}/messages`, { content })
  if (!deps.out.json) {
    const name = (await memberNames(deps)).get(chat.memberId) ?? 'member'
    const screen = member
      ? `osctl chat ${/\s/.test(member) ? `'${member}'` : member}`
      : 'osctl chat'
    deps.out.error(
      `chat ${chat.id} with ${safeText(name)}: go on in \`${screen}\`, or with \`osctl chats send ${chat.id} TEXT --wait\`\n`,
    )
    printMessages(deps, chat.id, [sent], name)
  }
  if (opts.wait) await waitForTurn(deps, chat.id, sent.id, timeout)
  if (deps.out.json) printJson(deps.out, await client.get<ChatDetail>(`/chats/${chat.id}`))
}

/** The message's text from its argument; "-" reads it from stdin. */
async function messageText(deps: Deps, text: string): Promise<string> {
  const value = text === '-' ? (await deps.stdin()).replace(/\n$/, '') : text
  if (!value.trim()) throw new UsageError('the message is empty')
  return value
}

function seconds(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined
  const n = value.trim() === '' ? NaN : Number(value)
  if (!Number.isFinite(n) || n < 0)
    throw new UsageError(`${flag} takes a number of seconds; got "${value}"`)
  return n
}

/**
 * Sends a message. With --wait, follows the chat by long-poll (GET with afterMessageId and
 * waitSeconds) until the member's turn is over, printing each message as it comes; a tool call or a
 * question waiting for the person ends the wait with the verb that decides it.
 */
export async function sendMessage(
  deps: Deps,
  ref: string,
  text: string,
  opts: { wait?: boolean; timeout?: string },
): Promise<void> {
  const timeout = seconds(opts.timeout, '--timeout')
  if (timeout !== undefined && !opts.wait) throw new UsageError('--timeout goes with --wait')
  const id = await chatRef(deps, ref)
  const content = await messageText(deps, text)
  const client = deps.client()
  const sent = await client.post<ChatMessage>(`/chats/${id}/messages`, { content })
  if (!opts.wait) {
    show(deps.out, sent, () => printMessages(deps, id, [sent]))
    return
  }
  const replies = await waitForTurn(deps, id, sent.id, timeout)
  if (deps.out.json) show(deps.out, replies, () => {})
}

async function waitForTurn(
  deps: Deps,
  id: string,
  sentId: string,
  timeout: number | undefined,
): Promise<ChatMessage[]> {
  const client = deps.client()
  const deadline = timeout === undefined ? Infinity : Date.now() + timeout * 1000
  const replies: ChatMessage[] = []
  let name: string | undefined
  let after = sentId
  for (;;) {
    const left = Math.ceil((deadline - Date.now()) / 1000)
    // Once the member has said something but still replies, the next message may never come: ask
    // again soon for the flag rather than hold the whole wait.
    const memberSpoke = replies.some((m) => m.role === 'member')
    const wait = Math.max(0, Math.min(maxWaitSeconds, memberSpoke ? 2 : maxWaitSeconds, left))
    const asked = Date.now()
    const detail = await client.get<ChatDetail>(`/chats/${id}`, {
      afterMessageId: after,
      waitSeconds: wait,
    })
    const fresh = messagesAfter(detail, after).filter((m) => !replies.some((r) => r.id === m.id))
    if (fresh.length) {
      replies.push(...fresh)
      after = fresh.at(-1)!.id
      if (!deps.out.json) {
        name ??= (await memberNames(deps)).get(detail.memberId) ?? 'member'
        printMessages(deps, id, fresh, name)
      }
    }
    if (turnOver(detail, replies)) {
      if (!deps.out.json) {
        if (detail.status === 'closed')
          deps.out.error(`the chat is closed (${safeText(detail.outcome ?? 'closed')})\n`)
        const waiting = replies.filter((m) => waitingOn(m)).at(-1)
        if (waiting)
          deps.out.error(`the member waits for your decision on a ${waitingOn(waiting)}\n`)
      }
      return replies
    }
    if (Date.now() >= deadline) {
      if (deps.out.json) show(deps.out, replies, () => {})
      throw Object.assign(
        new CliError(
          `no reply yet after ${timeout}s; read it later with osctl chats get ${id}`,
          exitCodes.pending,
        ),
        { printed: deps.out.json },
      )
    }
    // A held read answered at once with nothing new was not held (past the token's share).
    const ms = unheldPause(wait > 0, fresh.length, asked, Date.now(), deadline)
    if (ms > 0) await sleep(ms)
  }
}

export async function closeChat(deps: Deps, ref: string): Promise<void> {
  const id = await chatRef(deps, ref)
  const chat = await deps.client().post<Chat>(`/chats/${id}/close`)
  show(deps.out, chat, () => deps.out.write(`closed chat ${id}\n`))
}

/**
 * Stops the member's reply in progress (POST /chats/{id}/reply/stop; issue 51): it ends within about a
 * second, what it wrote kept and marked stopped. No reply in progress is no failure.
 */
export async function stopReply(deps: Deps, ref: string): Promise<void> {
  const id = await chatRef(deps, ref)
  const answer = await deps.client().post<ChatReplyStop>(`/chats/${id}/reply/stop`)
  show(deps.out, answer, () =>
    deps.out.write(
      answer.stopping
        ? `stopping the reply in chat ${id}: what it wrote is kept, marked stopped\n`
        : `no reply in progress in chat ${id}\n`,
    ),
  )
}

export async function unreadChats(deps: Deps): Promise<void> {
  const unread = await deps.client().get<{ count: number }>('/chats/unread')
  show(deps.out, unread, () => deps.out.write(`${unread.count}\n`))
}

export async function listGrants(deps: Deps, opts: { member: string }): Promise<void> {
  const client = deps.client()
  const grants = await client.get<ChatToolGrant[]>('/chats/tool-grants', {
    memberId: await memberId(client, opts.member),
  })
  show(deps.out, grants, () => printTable(deps.out, grants, grantColumns))
}

export async function revokeGrant(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const id = grantRef(ref)
  await confirmDestructive(
    deps,
    opts.yes,
    `Withdraw tool grant ${id}: the member's calls are asked again`,
  )
  await deps.client().delete(`/chats/tool-grants/${id}`)
  show(deps.out, { revoked: id }, () => deps.out.write(`withdrew tool grant ${id}\n`))
}

const decisionWords: Record<ChatDecision, string> = {
  allow: 'allowed',
  always: 'allowed (always)',
  deny: 'denied',
}

/** The one decision of --allow, --always and --deny. */
function decisionOf(opts: { allow?: boolean; always?: boolean; deny?: boolean }): ChatDecision {
  const given = chatDecisions.filter((d) => opts[d])
  if (given.length !== 1) throw new UsageError('give one decision: --allow, --always or --deny')
  return given[0]!
}

export async function decideToolCall(
  deps: Deps,
  chat: string,
  call: string,
  opts: { allow?: boolean; always?: boolean; deny?: boolean },
): Promise<void> {
  const callId = callRef(call)
  const decision = decisionOf(opts)
  const id = await chatRef(deps, chat)
  // The daemon answers the message holding the call or the call itself: read either.
  const answer = await deps
    .client()
    .post<ChatMessage | ChatToolCall>(`/chats/${id}/tool-calls/${callId}/decision`, { decision })
  const decided =
    answer && typeof answer === 'object' && 'toolCall' in answer ? answer.toolCall : answer
  show(deps.out, answer, () => {
    const name = decided && 'name' in decided ? decided.name : 'the tool call'
    const status = decided && 'status' in decided ? ` (${decided.status})` : ''
    deps.out.write(`${decisionWords[decision]} ${safeText(name)}${safeText(status)}\n`)
  })
}

/** Answers the question (os.ask_ceo) a chat waits on: the newest waiting one unless --gate names it. */
export async function answerQuestion(
  deps: Deps,
  chat: string,
  opts: { gate?: string; answer?: string[]; choice?: string },
): Promise<void> {
  if (opts.choice === undefined && !opts.answer?.length)
    throw new UsageError('give --answer TEXT (one per question) and/or --choice KEY')
  const id = await chatRef(deps, chat)
  const body = {
    decision: 'approve',
    ...(opts.gate ? { gateId: await resolveId(deps.client(), 'gate', opts.gate) } : {}),
    ...(opts.answer?.length ? { answers: opts.answer } : {}),
    ...(opts.choice !== undefined ? { choice: opts.choice } : {}),
  }
  const gate = await deps.client().post<Gate>(`/gates/chat/${id}/decision`, body)
  show(deps.out, gate, () => deps.out.write(`answered question ${gate.id}; the reply goes on\n`))
}

/** The ink screen; off a terminal it refuses (exit 2) and names the verbs above. */
export async function openChatScreen(deps: Deps, member: string | undefined): Promise<void> {
  requireTerminal('chat', chatInstead)
  if (deps.globals.json)
    throw new UsageError('chat is interactive: --json goes with the chats verbs')
  if (!deps.target().token) throw noTokenError()
  const client = deps.client()
  const id = member ? await memberId(client, member) : undefined
  drawEveryFrame()
  // Loaded here, not at the top: ink and React take longer to load than the rest of osctl.
  const { renderChat } = await import('../tui/chat.js')
  await renderChat(client, { memberId: id })
}

export function registerChats(program: Command, makeDeps: MakeDeps): void {
  const chats = program.command('chats').description(about.chats)
  examples(
    chats
      .command('list')
      .option('--member <member>', 'id, email or exact name')
      .description('open and closed chats, most recently active first')
      .action(actionOf(makeDeps, listChats)),
    'osctl chats list',
    'osctl chats list --member ada@acme.example --json',
  )
  examples(
    chats
      .command('get')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .option('--limit <n>', 'only the newest N messages, 1 to 200')
      .description('a chat and its messages, oldest first (reading marks it read)')
      .action(actionOf(makeDeps, getChat)),
    'osctl chats get 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
    'osctl chats get 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f --limit 20 --json',
  )
  examples(
    chats
      .command('export')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .option(
        '--format <format>',
        "md (a markdown document; the default) or json (the API's detail)",
      )
      .description(
        'the whole transcript: times, speakers, tool calls with their decisions and results, questions with their answers',
      )
      .action(actionOf(makeDeps, exportChat)),
    'osctl chats export 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f > chat.md',
    'osctl chats export 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f --format json',
  )
  examples(
    chats
      .command('new')
      .argument('[member]', 'id, email or exact name')
      .option('--create-task', 'a chat with the COO that proposes a task (the member is optional)')
      .option('--message <text>', 'say this at once, 1 to 20,000 characters ("-" reads stdin)')
      .option('--wait', "with --message: wait for the member's reply and print it")
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .description(
        'open a chat with a member, or a create-task chat; with --message, say something',
      )
      .action(actionOf(makeDeps, newChat)),
    'osctl chats new ada@acme.example',
    'osctl chats new Rita --message "What will you do for us?" --wait',
    'osctl chats new --create-task',
  )
  examples(
    chats
      .command('send')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .argument('<text>', 'the message, 1 to 20,000 characters ("-" reads stdin)')
      .option('--wait', "wait for the member's reply and print it")
      .option('--timeout <seconds>', 'with --wait: give up after this long (exit 8)')
      .description("send a message; the member's reply follows in the chat")
      .action(actionOf(makeDeps, sendMessage)),
    'osctl chats send 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f "How did last night\'s report go?" --wait',
    'osctl chats send 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f - < question.txt',
  )
  examples(
    chats
      .command('decide')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .argument('<call>', 'tool call id')
      .option('--allow', 'run the call once')
      .option('--always', 'run it, and do not ask again for this member and tool')
      .option('--deny', 'refuse it; the member is told')
      .description('decide a tool call a reply waits on')
      .action(actionOf(makeDeps, decideToolCall)),
    'osctl chats decide 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f 3f2a9c4e-8b1d-4e6f-a2c3-5d7e9f1b3a60 --allow',
  )
  examples(
    chats
      .command('answer')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .option('--gate <gate>', 'the question gate (the newest waiting one if left out)')
      .option('--answer <text>', 'an answer, one per question (repeat for several)', collect)
      .option('--choice <key>', "the key of one of the question's choices")
      .description('answer the question (os.ask_ceo) a reply waits on')
      .action(actionOf(makeDeps, answerQuestion)),
    'osctl chats answer 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f --choice yes',
    'osctl chats answer 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f --answer "Friday" --answer "Ada"',
  )
  examples(
    chats
      .command('close')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .description('close a chat; repeating it changes nothing')
      .action(actionOf(makeDeps, closeChat)),
    'osctl chats close 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
  )
  examples(
    chats
      .command('stop')
      .argument('<chat>', 'chat id, or its first 8+ characters')
      .description(
        "stop the member's reply in progress; what it wrote is kept, marked stopped (no reply: nothing changes)",
      )
      .action(actionOf(makeDeps, stopReply)),
    'osctl chats stop 7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f',
  )
  examples(
    chats
      .command('unread')
      .description('how many member replies are unread in the chats the list shows')
      .action(actionOf(makeDeps, unreadChats)),
    'osctl chats unread',
  )
  examples(
    chats
      .command('grants')
      .requiredOption('--member <member>', 'id, email or exact name')
      .description("your always-allow answers for a member's tools")
      .action(actionOf(makeDeps, listGrants)),
    'osctl chats grants --member ada@acme.example',
  )
  examples(
    chats
      .command('revoke')
      .argument('<grant>', 'tool grant id')
      .option('-y, --yes', 'do not ask')
      .description("withdraw an always-allow: the member's calls of that tool are asked again")
      .action(actionOf(makeDeps, revokeGrant)),
    'osctl chats revoke 5e1c7a2b-9d3f-4c8e-a1b6-0f2d4e6a8c10 --yes',
  )
}

export function registerChat(program: Command, makeDeps: MakeDeps): void {
  examples(
    program
      .command('chat')
      .argument('[member]', 'id, email or exact name (without: pick a chat)')
      .description(about.chat)
      .action(actionOf(makeDeps, openChatScreen)),
    'osctl chat',
    'osctl chat ada@acme.example',
  )
}
