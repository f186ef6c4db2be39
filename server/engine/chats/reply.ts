import { metrics } from '../../metrics.js'
import { randomUUID } from 'node:crypto'
import type { ModelTier, Provider } from '../../../shared/schemas/models.js'
import type { Sealer } from '../../crypto.js'
import { onCommit, retryConflicts, transaction, type Sql, type Tx } from '../../db/sql.js'
import {
  answerToolCall,
  checkProposal,
  countTurnCall,
  DeltaPublisher,
  endStoppedTurn,
  insertMessage,
  isGranted,
  isNotice,
  chatMessages,
  holdsTurn,
  lockChatTurn,
  lockChatTurnLease,
  lockTurn,
  markExecuting,
  type MessageRow,
  moveTurns,
  noticeMessage,
  recordRecall,
  settleInterruptedCalls,
  type StoredToolCall,
  turnPersonMessage,
  type TurnRow,
  waitForPerson,
} from '../../domain/chats/index.js'
import { openChatGate } from '../../domain/gates/index.js'
import {
  chooseModel,
  type OnText,
  type OAuthSettings,
  holdFor,
  releaseInterrupted,
  type RunLayers,
} from '../../domain/models/index.js'
import { recallChatNotes } from '../../domain/learning/index.js'
import { mustGateTools } from '../../domain/tasks/index.js'
import { nearestConnections } from '../../domain/tools/index.js'
import type { Logger } from '../../log.js'
import {
  askCeoArguments,
  interruptedCallResult,
  McpTools,
  osTools,
  type ToolLimits,
} from '../tools/index.js'
import type { ModelProvider, ToolSpec } from '../models/index.js'
import { conversationOf, withMemory } from './conversation.js'
import { memorySection, type PromptNote } from '../runs/index.js'
import { withCallSignal } from '../call-signal.js'
import { callModel, type CallOutcome, type ModelChoice } from '../models/index.js'
import { usd } from '../../../shared/money.js'
import { span, traceLog, type Trace } from '../../traces/index.js'

// A chat turn's reply (DESIGN 11), made by the engine that claimed the turn (loop.ts). The chat's
// messages are the turn's journal: a model call's answer is stored (text and tool calls) before
// anything acts on it, and a tool call is marked executing before it acts, so an engine that takes a
// turn over finishes the reply and never makes a tool call twice (one found executing is answered as of
// unknown outcome). Model calls go through the one model call step (models/call.ts), streamed: the
// reply's text reaches the chat's readers as it is made (domain/chats/deltas.ts).

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
  /** Calls the model with streaming on, the text told as it comes (Config.chatStreaming; default on). */
  streaming?: boolean
  /** The longest a tool server's call may take (OSD_TOOL_TIMEOUT_SECONDS). */
  toolTimeoutMs?: number
  /** Where tool servers may be and how much of a result is read (nothing private, 100 KB unless given). */
  toolLimits?: ToolLimits
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

/** How long a reply waits after its model provider did not answer, before it is tried again. */
function retryWords(ms: number): string {
  return ms < 60_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`
}

export class ChatReply {
  private readonly sql: Sql
  private system = ''
  /**
   * What memory recalled for this turn's person message, said with that message in this turn's calls
   * only: in the system prompt it would change the prefix of every call at each turn, and the
   * provider's cache could keep none of the conversation (DESIGN 13).
   */
  private memory: string[] = []
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
  /** Aborts the reply's calls when the person stops it (stop()); the lease's signal aborts it too. */
  private readonly stopper = new AbortController()
  /** The person asked to stop this reply: it ends stopped, what it wrote kept (stopped()). */
  private stopping = false
  /** Aborts the reply's calls: the lease's signal (lost, engine stopping) or the person's stop. */
  private readonly signal: AbortSignal

  /** Its lines carry the reply's trace (issue 49). */
  private readonly log: Logger

  constructor(
    private readonly options: ChatReplyOptions,
    private readonly turn: TurnRow,
    lease: AbortSignal,
    /** The reply's span: the parent of its recall, model and tool calls (issue 49). */
    private readonly trace: Trace,
  ) {
    this.sql = options.sql
    this.log = traceLog(options.log, trace)
    this.modelCalls = turn.modelCalls
    this.signal = AbortSignal.any([lease, this.stopper.signal])
    if (turn.stopRequestedAt) this.stop()
  }

  async close(): Promise<void> {
    await this.mcp?.close()
  }

  /**
   * The person asked to stop this reply (domain/chats/stops.ts), as the loop heard it: its model or
   * tool call is aborted now, and the reply ends stopped at its next step.
   */
  stop(): void {
    if (this.stopping) return
    this.stopping = true
    this.stopper.abort(new Error('the person stopped the reply'))
  }

  async go(): Promise<void> {
    const prepared = await this.prepare()
    // A turn taken over: the reservation of a model call the crash interrupted is released first,
    // also when the chat was closed meanwhile.
    if (this.turn.reserved && this.layers !== undefined)
      await retryConflicts(() =>
        transaction(this.sql, (tx) => releaseInterrupted(tx, { turnId: this.turn.id })),
      )
    if (!prepared) return
    const max = this.options.maxModelCalls ?? 10
    let first = true
    for (;;) {
      if (this.signal.aborted) return void (this.stopping && (await this.stopped()))
      let messages = await this.messages()
      if (first && messages.some((m) => this.interrupted(m))) {
        await settleInterruptedCalls(this.sql, this.chat.id, this.turn.id, interruptedCallResult)
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
        const next = await this.waitForPerson()
        if (next === 'stopping') return void (await this.stopped())
        if (next === 'stop') return
        continue
      }
      // A notice (no key, a cap) is not the member's answer: the reply is still to be made.
      const last = messages.filter((m) => !isNotice(m)).at(-1)
      if (!last || last.role === 'member') return void (await this.end())
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
      await this.end()
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
      // As a run's (DESIGN 11): the member's, its team's, the enterprise's, and its roles' too.
      nearestConnections(sql, this.options.sealer, { ...this.layers!, roleIds: row.roleIds }),
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
      this.mcp = new McpTools(
        connections,
        this.log,
        this.trace,
        this.options.toolTimeoutMs,
        this.options.toolLimits,
      )
      this.tools.push(...(await this.mcp.connect()))
    }
    const lines = [
      `You are ${member?.name ?? 'a team member'}${member?.persona ? `. ${member.persona}` : ''}.`,
      `You work for ${enterprise?.name ?? 'the enterprise'} and are chatting with one of its people.`,
      'Answer in Markdown. Each tool call you make is shown to the person, who allows or denies it.',
      'To ask the person something you need decided, call os.ask_ceo.',
    ]
    if (chat.purpose === 'create_task')
      lines.push(
        '',
        '# Creating a task',
        'The person wants a new task. Ask what you need, then propose it with os.create_task {definition}. If the checks refuse it, correct it and propose again.',
      )
    this.memory = memorySection(notes)
    this.system = lines.join('\n')
    return true
  }

  /** Memory at chatMemoryDepth for the person's message; the turn records the recall once. */
  private async recall(depth: string): Promise<PromptNote[]> {
    const limit = depthNotes[depth] ?? 8
    if (limit === 0) return []
    const message = await turnPersonMessage(this.sql, this.turn.id)
    const first = this.turn.recall === null
    try {
      // A short span of the reply's (issue 49).
      const notes = await span(
        'memory recall',
        { 'osd.chat.id': this.chat.id },
        async (recall) => {
          const found = await recallChatNotes(
            this.sql,
            this.chat.enterpriseId,
            this.layers.teamId,
            message ?? '',
            limit,
            first,
          )
          recall.set({ 'osd.memory.notes': found.length })
          return found
        },
        { parent: this.trace },
      )
      if (first) await recordRecall(this.sql, this.turn.id, 'succeeded')
      return notes.map(({ id, layer, text }) => ({ id, layer, text }))
    } catch (err) {
      this.log.warn({ err }, 'chat recall failed')
      if (first) await recordRecall(this.sql, this.turn.id, 'failed')
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
    return chatMessages(this.sql, this.chat.id)
  }

  /** The turn, while it is this engine's: ids, statuses it moves from, and the lease it holds. */
  private running() {
    return {
      ids: [this.turn.id],
      from: ['running'] as const,
      owner: this.options.engineId,
    }
  }

  private async end(): Promise<void> {
    await moveTurns(this.sql, 'done', this.running())
    metrics.chatReply('answered')
  }

  /**
   * A notice of the member about why it cannot reply (no key, a cap, a provider that did not answer),
   * once, and the turn moved on (`notBefore`: when a blocked reply is tried again).
   */
  private async notice(
    content: string,
    status: 'done' | 'blocked' | 'paused_spend',
    notBefore?: Date,
  ): Promise<void> {
    const ended = await retryConflicts(() =>
      transaction(this.sql, async (tx) => {
        const lease = await lockChatTurnLease(tx, this.chat.id, this.options.engineId, this.turn.id)
        if (!lease.held) return undefined
        // A stop asked meanwhile ends the reply now: held, it would wait with no engine to end it.
        if (lease.stopping || this.stopping) {
          await endStoppedTurn(tx, this.chat, this.turn.id, { content: '' })
          return 'stopped' as const
        }
        await noticeMessage(tx, this.chat, this.turn.id, content)
        await moveTurns(tx, status, this.running(), { notBefore })
        return status
      }),
    )
    if (ended) metrics.chatReply(ended)
  }

  /**
   * Ends the reply the person stopped: what it had written (the text streamed so far by the model call
   * it aborted, under the id its deltas named) kept as the member's message marked stopped, its calls
   * that wait end as never run, the turn done (domain/chats/stops.ts), while the turn is this engine's.
   * Either in the settlement of the aborted call (`tx`) or on its own.
   */
  private async stopped(
    written: { messageId?: string; content: string } = { content: '' },
    tx?: Tx,
  ) {
    const end = async (tx: Tx) => {
      if (!(await lockChatTurn(tx, this.chat.id, this.options.engineId, this.turn.id))) return false
      await endStoppedTurn(tx, this.chat, this.turn.id, written)
      onCommit(tx, () => metrics.chatReply('stopped'))
      return true
    }
    if (tx) return end(tx)
    return retryConflicts(() => transaction(this.sql, end))
  }

  /**
   * The turn waits for the person's decision, unless it came meanwhile: the chat's row lock orders this
   * against the decision, which takes it first.
   */
  private waitForPerson(): Promise<'stop' | 'go on' | 'stopping'> {
    return retryConflicts(() =>
      waitForPerson(this.sql, this.chat.id, this.options.engineId, this.turn.id),
    )
  }

  // --- what a crash left behind ----------------------------------------------------------------------

  private interrupted(m: MessageRow): boolean {
    return m.turnId === this.turn.id && !!m.executingAt && m.toolCall?.status === 'allowed'
  }

  // --- tool calls -----------------------------------------------------------------------------------

  private async runTool(message: MessageRow): Promise<Step> {
    const call = message.toolCall!
    if (!(await markExecuting(this.sql, message.id, this.turn.id, this.options.engineId)))
      return (await this.stillMine()) ? 'continue' : 'stop'
    let outcome: { content: string; isError: boolean }
    try {
      outcome = this.mcp
        ? await withCallSignal(this.signal, (signal) =>
            this.mcp!.call(call.name, call.arguments, signal, call.callId),
          )
        : { content: `No tool ${call.name} is connected.`, isError: true }
    } catch (err) {
      outcome = { content: (err as Error).message || String(err), isError: true }
    }
    // Cut short by the person's stop: the server may have acted on it all the same.
    if (this.stopping && outcome.isError)
      outcome = {
        content: 'The person stopped the reply while this call ran; it may have acted.',
        isError: true,
      }
    await answerToolCall(this.sql, this.chat.id, message.id, outcome)
    return 'continue'
  }

  private stillMine(): Promise<boolean> {
    return holdsTurn(this.sql, this.options.engineId, this.turn.id)
  }

  // --- model calls ----------------------------------------------------------------------------------

  private async modelCall(history: MessageRow[]): Promise<Step> {
    // The model and its key are chosen once per turn: the turn's later calls use the same.
    const choice = (this.choice ??= await this.chooseModel())
    if ('blocked' in choice) {
      this.choice = undefined
      const hold = holdFor({ noKey: choice.blocked }, this.turn.holds)
      await this.notice(
        `I cannot reply yet: ${choice.blocked} I will reply once one is bound, or try again in ${retryWords(hold.waitMs)}.`,
        hold.status,
        hold.notBefore,
      )
      return 'stop'
    }
    const { messages, stableMessages } = withMemory(conversationOf(history), this.memory)
    // The id the reply's text will be stored with: its deltas name it while it is made.
    const deltas = new DeltaPublisher(this.sql, this.chat.id, randomUUID())
    const checked = new Map<string, string | undefined>()
    const granted = new Set<string>()
    let step: Step = 'stop'
    // The time to the reply's first text, from the step's start (its reservation included): what the
    // person waits before words appear.
    const began = performance.now()
    let first = true
    // What the call has written so far: kept as the member's message if the person stops the reply.
    let written = ''
    // The person's stop as the settlement found it (the chat's lock taken for it), and whether the
    // settlement ended the reply stopped.
    let stoppedAtSettle = false
    let endedStopped = false
    const onText: OnText = (text) => {
      if (first) {
        first = false
        metrics.chatFirstToken((performance.now() - began) / 1000)
      }
      written += text
      deltas.push(text)
    }
    const result = await callModel({
      sql: this.sql,
      providers: this.options.providers,
      choice,
      request: {
        system: this.system,
        messages,
        tools: this.tools,
        maxTokens: this.options.maxTokens ?? 4096,
        stableMessages,
      },
      promptChars:
        this.system.length + JSON.stringify(messages).length + JSON.stringify(this.tools).length,
      signal: this.signal,
      trace: this.trace,
      onText: this.options.streaming === false ? undefined : onText,
      owner: {
        layers: this.layers,
        lock: (tx) => lockTurn(tx, this.options.engineId, this.turn.id),
        // The turn's until the call is settled: an engine that takes the turn over after a crash
        // releases it (releaseInterrupted), and only one of them does. The commit does not wait for the
        // WAL flush: every reply of the enterprise locks the same counters, and a flush inside that lock
        // made 50 replies queue behind each other's flushes. A database crash that loses the
        // reservation loses it with the counters' change, and an interrupted call is released
        // uncharged either way; only the room it held may then go to another call before this one
        // settles (DESIGN 3).
        reservedFor: { turnId: this.turn.id },
        unflushedReservation: true,
        beforeSettle: async (outcome) => {
          // Every piece of the text has gone out before the message is stored: readers see the
          // deltas, then the message.
          await deltas.flush()
          if (!('reply' in outcome)) return
          for (const call of outcome.reply.toolCalls) {
            if (call.name === 'os.create_task' && this.chat.purpose === 'create_task')
              checked.set(
                call.id,
                await checkProposal(this.sql, this.chat.enterpriseId, call.arguments),
              )
            else if (
              !call.name.startsWith('os.') &&
              !this.mustGate.has(call.name) &&
              (await isGranted(this.sql, this.turn.caller, this.chat.memberId, call.name))
            )
              granted.add(call.id)
          }
        },
        // Settled under the turn's lock, and its chat's first when an answer is to be stored (as
        // everywhere: a chat before its turn).
        // A call the person's stop aborted: its text so far is stored, so the chat's lock too.
        claim: async (tx, _held, outcome) => {
          stoppedAtSettle = !('reply' in outcome) && this.stopping
          return {
            mine: await ('reply' in outcome || stoppedAtSettle
              ? lockChatTurn(tx, this.chat.id, this.options.engineId, this.turn.id)
              : lockTurn(tx, this.options.engineId, this.turn.id)),
          }
        },
        record: async (tx, outcome, { mine }, last) => {
          if (mine && stoppedAtSettle) {
            // Settled and ended in one commit: the reservation and the turn are let go together.
            const content = written
            endedStopped = await this.stopped({ messageId: deltas.messageId, content }, tx)
            return void (await last())
          }
          if (!('reply' in outcome) || !mine) return void (await last())
          step = await this.storeAnswer(tx, outcome, deltas.messageId, checked, granted, last)
        },
      },
    })
    if (endedStopped) return 'stop'
    // Stopped before the call was made or settled (the turn is still this engine's to end).
    if (this.stopping && result.kind !== 'answered') {
      await this.stopped()
      return 'stop'
    }
    if (result.kind === 'gone' || result.kind === 'over_limit') return 'stop'
    if (result.kind === 'no_room') {
      // Held like a paused_spend run: retried when the cap is raised or spend limits are turned off.
      const { refusal } = result
      await this.notice(
        `I cannot reply yet: the ${refusal.layer} daily spend cap of ${usd(refusal.capCents)} has no room for another model call. I will reply once it is raised.`,
        'paused_spend',
      )
      return 'stop'
    }
    if (result.kind === 'throttled' || result.kind === 'failed') {
      const { failure } = result
      if (failure.kind === 'aborted' || this.signal.aborted) return 'stop'
      // The provider's status, or where no connection could be made (issue 51).
      const status = failure.status
        ? ` (${failure.status})`
        : failure.unreachable
          ? ` (${failure.message})`
          : ''
      if (failure.kind === 'bad_request') {
        await this.notice(
          `I could not reply: the model provider refused the request${status}.`,
          'done',
        )
        return 'stop'
      }
      // Held as a run is (domain/models/holds.ts): a throttle's own wait, else the back-off that grows
      // with each hold of this turn's; at once when a key is bound.
      const hold = holdFor(failure, this.turn.holds)
      const retried = `the reply is retried in ${retryWords(hold.waitMs)}`
      if (failure.kind === 'refused_key') this.choice = undefined
      await this.notice(
        failure.throttled
          ? `The model provider asked for fewer calls${status}; ${retried}.`
          : failure.kind === 'refused_key'
            ? `I cannot reply yet: the model provider refused the key${status}; ${retried}, or at once when a working key is bound.`
            : `The model provider did not answer${status}; ${retried}.`,
        hold.status,
        hold.notBefore,
      )
      return 'stop'
    }
    if (!result.mine) return 'stop'
    this.modelCalls++
    return step
  }

  /**
   * Stores the model's answer on the turn: a final answer ends the turn in the same commit (once the reply
   * is readable, so is the next message's turn: no 409 chat_replying in between); tool calls are
   * stored waiting for the person (or allowed, when granted), a question opens its gate.
   */
  private async storeAnswer(
    tx: Tx,
    outcome: Extract<CallOutcome, { reply: unknown }>,
    messageId: string,
    checked: Map<string, string | undefined>,
    granted: Set<string>,
    last: () => Promise<unknown>,
  ): Promise<Step> {
    const { reply, costMicros } = outcome
    const group = randomUUID()
    const base = { turnId: this.turn.id, replyGroup: group }
    if (reply.toolCalls.length === 0) {
      // The usual end of a reply, counted once committed as end() counts the others (issue 43: the
      // count of answered replies missed every reply the model ended).
      onCommit(tx, () => metrics.chatReply('answered'))
      await Promise.all([
        moveTurns(tx, 'done', this.running(), { countCall: costMicros }),
        insertMessage(tx, this.chat, {
          ...base,
          id: messageId,
          role: 'member',
          content: reply.text ?? '',
        }),
        last(),
      ])
      return 'stop'
    }
    await countTurnCall(tx, this.turn.id, costMicros)
    if (reply.text)
      await insertMessage(tx, this.chat, {
        ...base,
        id: messageId,
        role: 'member',
        content: reply.text,
      })
    for (const call of reply.toolCalls) {
      const stored = (status: StoredToolCall['status'], result: string | null): StoredToolCall => ({
        callId: call.id,
        name: call.name,
        arguments: call.arguments,
        status,
        result,
        ...(this.mustGate.has(call.name) ? { mustGate: true } : {}),
      })
      const message = (toolCall: StoredToolCall, gateId?: string) =>
        insertMessage(tx, this.chat, { ...base, role: 'tool', content: '', toolCall, gateId })
      if (call.name === 'os.ask_ceo') {
        const { questions, choices } = askCeoArguments(call.arguments)
        const gate = await openChatGate(tx, this.chat, { questions, choices, summary: null })
        await insertMessage(tx, this.chat, {
          ...base,
          role: 'tool',
          content: questions.join('\n'),
          toolCall: stored('waiting', null),
          gateId: gate.id,
        })
      } else if (!this.tools.some((t) => t.name === call.name)) {
        await message(stored('failed', `${call.name} is not one of your tools.`))
      } else if (call.name === 'os.create_task') {
        const problem = checked.get(call.id)
        await message(problem ? stored('failed', problem) : stored('waiting', null))
      } else {
        await message(stored(granted.has(call.id) ? 'allowed' : 'waiting', null))
      }
    }
    await last()
    return 'continue'
  }
}

export type { TurnRow, ModelChoice }
