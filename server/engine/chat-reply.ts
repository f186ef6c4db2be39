import { randomUUID } from 'node:crypto'
import { priceOf, type Provider } from '../../shared/schemas/models.js'
import type { ModelTier } from '../../shared/schemas/models.js'
import type { Sealer } from '../crypto.js'
import { pipelinedTransaction, unflushedCommit, transaction, type Db, type Sql } from '../db/sql.js'
import { chatChanged } from '../domain/chat-turns.js'
import {
  checkProposal,
  insertMessage,
  isGranted,
  isNotice,
  type MessageRow,
  type StoredToolCall,
} from '../domain/chats.js'
import { openChatGate } from '../domain/gates.js'
import { chooseModel, type OAuthSettings } from '../domain/llm.js'
import { recallChatNotes } from '../domain/memory/index.js'
import {
  callCostMicros,
  checkRoom,
  countUsage,
  holdReservation,
  settle,
  worstCaseMicros,
  type RunLayers,
} from '../domain/spend.js'
import { mustGateTools } from '../domain/tasks.js'
import { connectionsForRun } from '../domain/tool-connections.js'
import type { Logger } from '../log.js'
import { McpTools } from './agent/mcp.js'
import { osTools } from './agent/os-tools.js'
import {
  ProviderError,
  type Message,
  type ModelProvider,
  type ModelReply,
  type ToolSpec,
} from './agent/providers.js'
import { memorySection, type PromptNote } from './agent/run-memory.js'

// A chat turn's reply (DESIGN 11), made by the engine that claimed the turn (chat-loop.ts). The chat's
// messages are the turn's journal: a model call's answer is stored (text and tool calls) before
// anything acts on it, and a tool call is marked executing before it acts, so an engine that takes a
// turn over finishes the reply and never makes a tool call twice (one found executing is answered as of
// unknown outcome).

export interface ChatReplyOptions {
  sql: Sql
  sealer: Sealer
  providers: Record<Provider, ModelProvider>
  log: Logger
  engineId: string
  oauth?: OAuthSettings
  /** Model calls one reply may make. */
  maxModelCalls?: number
  maxTokens?: number
}

/** The spend reservation of a turn's model call in flight (released once if a crash interrupts it). */
export interface TurnReservation {
  id: string
  day: string
  micros: number
  teamId: string | null
}

export interface TurnRow {
  reservation: TurnReservation | null
  id: string
  enterpriseId: string
  chatId: string
  status: string
  caller: string | null
  modelCalls: number
  recall: 'succeeded' | 'failed' | null
  /** What the reply works with, read by the claim itself (null: the chat is gone). */
  context: ChatContext | null
}

/** The chat, its member, the enterprise and the member's first team, as the claim reads them. */
export interface ChatContext {
  id: string
  enterpriseId: string
  memberId: string
  purpose: string | null
  status: string
  memberName: string | null
  persona: string | null
  enterpriseName: string | null
  chatModelTier: ModelTier | null
  chatMemoryDepth: string | null
  teamId: string | null
}
/** How many notes a reply recalls at each chatMemoryDepth. */
const depthNotes: Record<string, number> = { off: 0, small: 3, medium: 8, large: 20 }

const createTaskTool: ToolSpec = {
  name: 'os.create_task',
  description:
    'Propose the task to create: definition is the body of POST /v1/tasks (name, skillMd, assigneeRole, goal, tools, schedule...). It is checked now; errors come back to you to correct. The person then allows or denies it.',
  parameters: {
    type: 'object',
    properties: { definition: { type: 'object' } },
    required: ['definition'],
  },
}
type Step = 'continue' | 'stop'

/** The turn is no longer this engine's (taken over, closed): what it was doing stops. */
class TurnGone extends Error {}

export class ChatReply {
  private readonly sql: Sql
  private system = ''
  private tools: ToolSpec[] = []
  /** Tools on a tool connection's mustGate list: asked each time, whatever the person granted. */
  private mustGate = new Set<string>()
  private mcp: McpTools | undefined
  private chat!: {
    id: string
    enterpriseId: string
    memberId: string
    purpose: string | null
    status: string
  }
  private layers!: RunLayers
  private tier: ModelTier = 'mid'
  private choice: Awaited<ReturnType<typeof chooseModel>> | undefined
  private modelCalls: number
  /** The chat's messages as prepare read them, for the reply's first look at them. */
  private read: MessageRow[] | undefined

  constructor(
    private readonly options: ChatReplyOptions,
    private readonly turn: TurnRow,
    private readonly signal: AbortSignal,
  ) {
    this.sql = options.sql
    this.modelCalls = turn.modelCalls
  }

  async close(): Promise<void> {
    await this.mcp?.close()
  }

  async go(): Promise<void> {
    const prepared = await this.prepare()
    // A turn taken over: the reservation of a model call the crash interrupted is released first,
    // also when the chat was closed meanwhile.
    if (this.turn.reservation && this.layers !== undefined) await this.releaseInterrupted()
    if (!prepared) return
    const max = this.options.maxModelCalls ?? 10
    let first = true
    for (;;) {
      if (this.signal.aborted) return
      let messages = await this.messages()
      if (first && messages.some((m) => this.interrupted(m))) {
        await this.settleInterrupted()
        messages = await this.messages()
      }
      first = false
      const mine = messages.filter((m) => m.turnId === this.turn.id && m.toolCall)
      const allowed = mine.filter((m) => m.toolCall!.status === 'allowed')
      if (allowed.length) {
        for (const message of allowed) if ((await this.runTool(message)) === 'stop') return
        continue
      }
      if (mine.some((m) => m.toolCall!.status === 'waiting')) {
        if (await this.waitForPerson()) return
        continue
      }
      // A notice (no key, a cap) is not the member's answer: the reply is still to be made.
      const last = messages.filter((m) => !isNotice(m)).at(-1)
      if (!last || last.role === 'member') return void (await this.end('done'))
      if (this.modelCalls >= max) {
        await this.notice(`I stopped after ${max} model calls without a final answer.`, 'done')
        return
      }
      if ((await this.modelCall(messages)) === 'stop') return
    }
  }

  // --- what the reply works with -------------------------------------------------------------------

  private async prepare(): Promise<boolean> {
    const { sql } = this
    // What the reply works with (the chat, its member, the enterprise, the team) came with the claim.
    const row = this.turn.context
    if (row)
      this.layers = {
        enterpriseId: row.enterpriseId,
        teamId: row.teamId,
        taskId: null,
        memberId: row.memberId,
      }
    if (!row || row.status === 'closed') {
      await this.end('done')
      return false
    }
    const { id, enterpriseId, memberId, purpose, status } = row
    const chat = (this.chat = { id, enterpriseId, memberId, purpose, status })
    const member =
      row.memberName === null ? undefined : { name: row.memberName, persona: row.persona }
    const enterprise = row.enterpriseName === null ? undefined : { name: row.enterpriseName }
    this.tier = row.chatModelTier ?? 'mid'
    // Together: the memory, the tool connections, the chat's messages and the model (each the pool's).
    const [notes, connections, messages, choice, mustGate] = await Promise.all([
      this.recall(row.chatMemoryDepth ?? 'medium'),
      connectionsForRun(
        sql,
        this.options.sealer,
        { ...this.layers!, taskId: '00000000-0000-0000-0000-000000000000' },
        undefined,
      ),
      this.messages(),
      this.chooseModel(),
      mustGateTools(sql, enterpriseId),
    ])
    this.mustGate = new Set(mustGate)
    this.read = messages
    this.choice = choice

    this.tools = [osTools['os.ask_ceo']!]
    if (chat.purpose === 'create_task') this.tools.push(createTaskTool)
    if (connections.length) {
      this.mcp = new McpTools(connections, this.options.log)
      this.tools.push(...(await this.mcp.connect()))
    }
    const lines = [
      `You are ${member?.name ?? 'a team member'}${member?.persona ? `. ${member.persona}` : ''}.`,
      `You work for ${enterprise?.name ?? 'the enterprise'} and are chatting with one of its people.`,
      'Answer in plain text. Each tool call you make is shown to the person, who allows or denies it.',
      'To ask the person something you need decided, call os.ask_ceo.',
    ]
    if (chat.purpose === 'create_task')
      lines.push(
        '',
        '# Creating a task',
        'The person wants a new task. Ask what you need, then propose it with os.create_task {definition}. If the checks refuse it, correct it and propose again.',
      )
    lines.push(...memorySection(notes))
    this.system = lines.join('\n')
    return true
  }

  /** Memory at chatMemoryDepth for the person's message; the turn records the recall once. */
  private async recall(depth: string): Promise<PromptNote[]> {
    const limit = depthNotes[depth] ?? 8
    if (limit === 0) return []
    const [message] = await this.sql<{ content: string }[]>`
      select content from chat_messages where turn_id = ${this.turn.id} and role = 'person'
       order by seq limit 1`
    const first = this.turn.recall === null
    try {
      const notes = await recallChatNotes(
        this.sql,
        this.chat.enterpriseId,
        this.layers.teamId,
        message?.content ?? '',
        limit,
        first,
      )
      if (first)
        await this.sql`update chat_turns set recall = 'succeeded', recalled_at = now()
                        where id = ${this.turn.id} and recall is null`
      return notes.map(({ id, layer, text }) => ({ id, layer, text }))
    } catch (err) {
      this.options.log.warn({ err }, 'chat recall failed')
      if (first)
        await this.sql`update chat_turns set recall = 'failed', recalled_at = now()
                        where id = ${this.turn.id} and recall is null`
      return []
    }
  }

  /** The model and its key: chosen once per turn, its later calls use the same. */
  private chooseModel(): ReturnType<typeof chooseModel> {
    const { sql, options } = this
    return chooseModel(
      sql,
      options.sealer,
      this.chat.enterpriseId,
      { memberId: this.chat.memberId, teamId: this.layers.teamId },
      { maxModelTier: this.tier },
      options.oauth,
    )
  }

  private async messages(): Promise<MessageRow[]> {
    // The first read came with prepare's.
    const read = this.read
    this.read = undefined
    if (read) return read
    return this.sql<MessageRow[]>`
      select * from chat_messages where chat_id = ${this.chat.id} order by seq`
  }

  /** Locks the turn while it is this engine's to move; false once it is not (taken over, closed). */
  private async lockTurn(tx: Db): Promise<boolean> {
    const [row] = await tx<{ status: string; leaseOwner: string | null }[]>`
      select status, lease_owner from chat_turns where id = ${this.turn.id} for update`
    return row?.status === 'running' && row.leaseOwner === this.options.engineId
  }

  private async end(status: 'done' | 'blocked'): Promise<void> {
    await this.sql`
      update chat_turns set status = ${status}, lease_owner = null, lease_expires_at = null, updated_at = now()
       where id = ${this.turn.id} and status = 'running' and lease_owner = ${this.options.engineId}`
  }

  /** A message of the member about why it cannot reply (no key, a cap, a failed call), once. */
  private async notice(
    content: string,
    status: 'done' | 'blocked' | 'paused_spend',
  ): Promise<void> {
    await transaction(this.sql, async (tx) => {
      await tx`select 1 from chats where id = ${this.chat.id} for no key update`
      if (!(await this.lockTurn(tx))) return
      const [last] = await tx<{ content: string }[]>`
        select content from chat_messages where chat_id = ${this.chat.id} order by seq desc limit 1`
      if (last?.content !== content)
        await insertMessage(tx, this.chat, { role: 'member', content, turnId: this.turn.id })
      await tx`update chat_turns set status = ${status}, lease_owner = null, lease_expires_at = null,
                      updated_at = now() where id = ${this.turn.id}`
    })
  }

  /**
   * The turn waits for the person's decision, unless it came meanwhile: the chat's row lock orders this
   * against the decision, which takes it first.
   */
  private async waitForPerson(): Promise<boolean> {
    return transaction(this.sql, async (tx) => {
      await tx`select 1 from chats where id = ${this.chat.id} for no key update`
      if (!(await this.lockTurn(tx))) return true
      const [row] = await tx<{ waiting: boolean; allowed: boolean }[]>`
        select bool_or(tool_call ->> 'status' = 'waiting') as waiting,
               bool_or(tool_call ->> 'status' = 'allowed') as allowed
          from chat_messages where turn_id = ${this.turn.id} and tool_call is not null`
      if (!row?.waiting || row.allowed) return false
      await tx`update chat_turns set status = 'waiting', lease_owner = null, lease_expires_at = null,
                      updated_at = now() where id = ${this.turn.id}`
      return true
    })
  }

  // --- what a crash left behind ----------------------------------------------------------------------

  private interrupted(m: MessageRow): boolean {
    return m.turnId === this.turn.id && !!m.executingAt && m.toolCall?.status === 'allowed'
  }

  /**
   * The model call a crash interrupted (its reservation still on the turn) is released, once: the turn's
   * row lock orders this against any other engine doing the same.
   */
  private async releaseInterrupted(): Promise<void> {
    await transaction(this.sql, async (tx) => {
      const [row] = await tx<{ reservation: TurnReservation | null }[]>`
        select reservation from chat_turns where id = ${this.turn.id} for update`
      const held = row?.reservation
      if (!held) return
      await Promise.all([
        settle(tx, { ...this.layers, teamId: held.teamId }, held.day, held.micros, 0, false),
        tx`update chat_turns set reservation = null where id = ${this.turn.id}`,
      ])
    })
  }

  /** A call found executing may have acted: it is answered as of unknown outcome, never made again. */
  private async settleInterrupted(): Promise<void> {
    await this.sql`
      update chat_messages
         set tool_call = tool_call || jsonb_build_object('status', 'failed', 'result',
               'This call was interrupted: whether it happened is unknown. Check before trying it again.')
       where turn_id = ${this.turn.id} and executing_at is not null and tool_call ->> 'status' = 'allowed'`
  }

  // --- tool calls -----------------------------------------------------------------------------------

  private async runTool(message: MessageRow): Promise<Step> {
    const call = message.toolCall!
    const [marked] = await this.sql<{ id: string }[]>`
      update chat_messages set executing_at = now()
       where id = ${message.id} and executing_at is null and tool_call ->> 'status' = 'allowed'
         and exists (select 1 from chat_turns where id = ${this.turn.id} and status = 'running'
                      and lease_owner = ${this.options.engineId})
      returning id`
    if (!marked) return (await this.stillMine()) ? 'continue' : 'stop'
    let outcome: { content: string; isError: boolean }
    try {
      outcome = this.mcp
        ? await this.mcp.call(call.name, call.arguments, this.signal)
        : { content: `No tool ${call.name} is connected.`, isError: true }
    } catch (err) {
      outcome = { content: (err as Error).message || String(err), isError: true }
    }
    await transaction(this.sql, async (tx) => {
      await tx`
        update chat_messages
           set tool_call = tool_call || ${tx.json({
             status: outcome.isError ? 'failed' : 'done',
             result: outcome.content,
           } as never)}
         where id = ${message.id}`
      chatChanged(tx, this.chat.id)
    })
    return 'continue'
  }

  /**
   * Settles a model call of this turn (its cost replaces its reservation) under the turn's row lock:
   * the reservation is released only if it is still on the turn (not already by an engine that took
   * the turn over), the cost is counted in any case. Answers whether the turn is still this engine's.
   * `then` gives the statements to send with the settlement's (the commit among them, to end the
   * transaction in the same round trip), knowing whether the turn is still this engine's.
   */
  private async settleCall(
    tx: Db,
    held: TurnReservation,
    costMicros: number,
    lockChat = false,
    then: (mine: boolean) => Promise<unknown>[] = () => [],
  ): Promise<boolean> {
    // The chat's lock before the turn's, as everywhere (notice, waitForPerson): sent in this order.
    const [, [row]] = await Promise.all([
      lockChat ? tx`select 1 from chats where id = ${this.chat.id} for no key update` : undefined,
      tx<{ status: string; leaseOwner: string | null; reservation: TurnReservation | null }[]>`
        select status, lease_owner, reservation from chat_turns where id = ${this.turn.id} for update`,
    ])
    const ours = row?.reservation?.id === held.id
    const mine = row?.status === 'running' && row.leaseOwner === this.options.engineId
    await Promise.all([
      settle(
        tx,
        { ...this.layers, teamId: held.teamId },
        held.day,
        ours ? held.micros : 0,
        costMicros,
        false,
      ),
      ...(ours ? [tx`update chat_turns set reservation = null where id = ${this.turn.id}`] : []),
      ...then(mine),
    ])
    return mine
  }

  private async stillMine(): Promise<boolean> {
    const [row] = await this.sql<{ status: string; leaseOwner: string | null }[]>`
      select status, lease_owner from chat_turns where id = ${this.turn.id}`
    return row?.status === 'running' && row.leaseOwner === this.options.engineId
  }

  // --- model calls ----------------------------------------------------------------------------------

  private async modelCall(history: MessageRow[]): Promise<Step> {
    const { sql, options } = this
    // The model and its key are chosen once per turn: the turn's later calls use the same.
    const choice = (this.choice ??= await this.chooseModel())
    if ('blocked' in choice) {
      this.choice = undefined
      await this.notice(
        `I cannot reply yet: ${choice.blocked} I will reply once one is bound.`,
        'blocked',
      )
      return 'stop'
    }
    const { key, model } = choice
    const maxTokens = options.maxTokens ?? 4096
    const messages = conversationOf(history)
    const price = priceOf(key.provider, model)
    const promptChars =
      this.system.length + JSON.stringify(messages).length + JSON.stringify(this.tools).length
    const worst = worstCaseMicros(price, promptChars, maxTokens)
    // The reservation is kept on the turn until the call is settled: an engine that takes the turn
    // over after a crash releases it (releaseInterrupted), and only one of them does.
    const held: TurnReservation = {
      id: randomUUID(),
      day: '',
      micros: worst,
      teamId: this.layers.teamId,
    }
    // Two round trips: begin, the turn's lock and the spend counters' (checkRoom); then the
    // reservation held on the counters and on the turn, with the commit. The commit does not wait for
    // the WAL flush: every reply of the enterprise locks the same counters, and a flush inside that
    // lock made 50 replies queue behind each other's flushes. A database crash that loses the
    // reservation loses its mark on the turn with it, and an interrupted call is released uncharged
    // either way; only the room it held may then be given to another call before this one settles.
    const reserved = await pipelinedTransaction(sql, async (tx, commit) => {
      const [mine, room] = await Promise.all([this.lockTurn(tx), checkRoom(tx, this.layers, worst)])
      if (!mine) throw new TurnGone()
      if (!room.ok) return room
      held.day = room.day
      await Promise.all([
        holdReservation(tx, this.layers, room.day, worst),
        tx`update chat_turns set reservation = ${tx.json(held as never)} where id = ${this.turn.id}
           returning ${unflushedCommit(tx)}`,
        commit(),
      ])
      return room.day
    }).catch((err: unknown) => {
      if (err instanceof TurnGone) return 'gone' as const
      throw err
    })
    if (reserved === 'gone') return 'stop'
    if (typeof reserved !== 'string') {
      // Held like a paused_spend run: retried when the cap is raised or spend limits are turned off.
      await this.notice(
        `I cannot reply yet: the ${reserved.layer} daily spend cap of ${reserved.capCents} cents has no room for another model call. I will reply once it is raised.`,
        'paused_spend',
      )
      return 'stop'
    }
    let reply: ModelReply
    try {
      reply = await options.providers[key.provider].call(
        { model, system: this.system, messages, tools: this.tools, maxTokens },
        { key: key.key },
        this.signal,
      )
    } catch (err) {
      await pipelinedTransaction(sql, (tx, commit) =>
        this.settleCall(tx, held, 0, false, () => [commit()]),
      )
      const failure =
        err instanceof ProviderError
          ? err
          : new ProviderError('bad_request', (err as Error).message)
      if (failure.kind === 'aborted' || this.signal.aborted) return 'stop'
      await this.notice(`The model could not answer: ${failure.message}`, 'done')
      return 'stop'
    }
    const cost = callCostMicros(price, reply.usage)
    const checked = new Map<string, string | undefined>()
    for (const call of reply.toolCalls)
      if (call.name === 'os.create_task' && this.chat.purpose === 'create_task')
        checked.set(call.id, await checkProposal(sql, this.chat.enterpriseId, call.arguments))
    const granted = new Map<string, boolean>()
    for (const call of reply.toolCalls)
      if (!call.name.startsWith('os.') && !this.mustGate.has(call.name))
        granted.set(call.id, await isGranted(sql, this.turn.caller, this.chat.memberId, call.name))

    // A final answer ends the turn in the same commit: once the reply is readable, so is the next
    // message's turn (no 409 chat_replying in between).
    const final = reply.toolCalls.length === 0
    const step = await pipelinedTransaction(sql, async (tx, commit): Promise<Step> => {
      // The call was made and is paid for in any case; its answer is the turn's only while it holds it.
      // Two round trips for a final answer: begin, the chat's lock and the turn's (settleCall); then
      // the spend settled, the turn ended, the answer stored and the usage counted, with the commit.
      const turnUpdate = () => tx`update chat_turns set model_calls = model_calls + 1,
                      cost_usd_micros = cost_usd_micros + ${cost}, updated_at = now()
                      ${final ? tx`, status = 'done', lease_owner = null, lease_expires_at = null` : tx``}
                where id = ${this.turn.id}`
      // The key's usage row, like the spend counters, is every reply's of the enterprise: it is
      // written in the last round trip, so its lock is held only until the commit that follows.
      const usage = () =>
        countUsage(tx, {
          connectionId: key.connectionId,
          enterpriseId: this.chat.enterpriseId,
          day: reserved,
          model,
          usage: reply.usage,
          costMicros: cost,
        })
      const mine = await this.settleCall(tx, held, cost, true, (mine) => {
        if (!mine) return [usage(), commit()]
        if (!final) return [usage(), turnUpdate()]
        return [
          turnUpdate(),
          insertMessage(tx, this.chat, {
            turnId: this.turn.id,
            replyGroup: randomUUID(),
            role: 'member',
            content: reply.text ?? '',
          }),
          usage(),
          commit(),
        ]
      })
      if (!mine) return 'stop'
      if (final) {
        this.modelCalls++
        return 'stop'
      }
      const group = randomUUID()
      const base = { turnId: this.turn.id, replyGroup: group }
      if (reply.text || reply.toolCalls.length === 0)
        await insertMessage(tx, this.chat, { ...base, role: 'member', content: reply.text ?? '' })
      for (const call of reply.toolCalls) {
        const stored = (
          status: StoredToolCall['status'],
          result: string | null,
        ): StoredToolCall => ({
          callId: call.id,
          name: call.name,
          arguments: call.arguments,
          status,
          result,
          ...(this.mustGate.has(call.name) ? { mustGate: true } : {}),
        })
        if (call.name === 'os.ask_ceo') {
          const questions = Array.isArray(call.arguments.questions)
            ? call.arguments.questions.map(String)
            : [String(call.arguments.questions ?? '')]
          const choices = Array.isArray(call.arguments.choices)
            ? (call.arguments.choices as { key: string; label: string }[])
            : []
          const gate = await openChatGate(tx, this.chat, { questions, choices, summary: null })
          await insertMessage(tx, this.chat, {
            ...base,
            role: 'tool',
            content: questions.join('\n'),
            toolCall: stored('waiting', null),
            gateId: gate.id,
          })
        } else if (!this.tools.some((t) => t.name === call.name)) {
          await insertMessage(tx, this.chat, {
            ...base,
            role: 'tool',
            content: '',
            toolCall: stored('failed', `${call.name} is not one of your tools.`),
          })
        } else if (call.name === 'os.create_task') {
          const problem = checked.get(call.id)
          await insertMessage(tx, this.chat, {
            ...base,
            role: 'tool',
            content: '',
            toolCall: problem ? stored('failed', problem) : stored('waiting', null),
          })
        } else {
          await insertMessage(tx, this.chat, {
            ...base,
            role: 'tool',
            content: '',
            toolCall: stored(granted.get(call.id) ? 'allowed' : 'waiting', null),
          })
        }
      }
      this.modelCalls++
      return final ? 'stop' : 'continue'
    })
    return step
  }
}


/** The model's view of the chat: the person's messages, the member's replies and their tool calls. */
export function conversationOf(rows: readonly MessageRow[]): Message[] {
  const messages: Message[] = []
  const groups = new Map<
    string,
    { assistant: Extract<Message, { role: 'assistant' }>; tool: Extract<Message, { role: 'tool' }> }
  >()
  for (const row of rows) {
    if (row.role === 'person') {
      messages.push({ role: 'user', text: row.content })
      continue
    }
    if (!row.replyGroup) {
      if (row.role === 'member' && !isNotice(row))
        messages.push({ role: 'assistant', text: row.content, toolCalls: [] })
      continue
    }
    let group = groups.get(row.replyGroup)
    if (!group) {
      group = {
        assistant: { role: 'assistant', text: null, toolCalls: [] },
        tool: { role: 'tool', results: [] },
      }
      groups.set(row.replyGroup, group)
      messages.push(group.assistant, group.tool)
    }
    if (row.role === 'member') group.assistant.text = row.content || null
    const call = row.toolCall
    if (call) {
      group.assistant.toolCalls.push({
        id: call.callId,
        name: call.name,
        arguments: call.arguments,
      })
      group.tool.results.push({
        callId: call.callId,
        content: call.result ?? (call.status === 'waiting' ? 'Waiting for the person.' : ''),
        isError: call.status === 'failed' || call.status === 'denied',
      })
    }
  }
  return messages.filter((m) => m.role !== 'tool' || m.results.length > 0)
}
