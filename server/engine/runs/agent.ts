import type { Provider } from '../../../shared/schemas/models.js'
import type { RunPause } from '../../../shared/schemas/pauses.js'
import type { RunStatus } from '../../../shared/schemas/runs.js'
import { fixedTools, type VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Sealer } from '../../crypto.js'
import { onCommit, retryConflicts, transaction, type Db, type Sql } from '../../db/sql.js'
import { gateOfStep, openGate } from '../../domain/gates/index.js'
import {
  answerToolStep,
  appendEvent,
  appendWhileHeld,
  assigneeRoleId,
  endModelStep,
  finishRun,
  insertToolDone,
  runGoesOn,
  waitPaused,
  lockHeldRun,
  runContext,
  writeRunLog,
  type JournalEntry,
  markExecuting,
  type NewEvent,
  readJournal,
  type RunRow,
  startToolStep,
  stored,
  type ToolRequest,
  transition,
} from '../../domain/runs/index.js'
import {
  chooseModel,
  type OAuthSettings,
  holdFor,
  type HoldCause,
  releaseInterrupted,
} from '../../domain/models/index.js'
import { mustGateTools, reaches, reachesNamespace } from '../../domain/tasks/index.js'
import { connectionsForRun, type RunConnection } from '../../domain/tools/index.js'
import type { Logger } from '../../log.js'
import { withCallSignal } from '../call-signal.js'
import type { ExecutionContext, Executor } from './executor.js'
import { callModel, type CallOutcome } from '../models/index.js'
import { Conversation } from './conversation.js'
import { requestOf, responseOf, RunJournal } from './journal.js'
import { RunModelCall } from './model-owner.js'
import { finishResult, gateAnswer, systemPrompt } from './text.js'
import {
  actOsTool,
  askCeoArguments,
  interruptedCallResult,
  McpTools,
  type ToolLimits,
  osTools,
  type ToolOutcome,
} from '../tools/index.js'
import { briefingForRun, readRecordedMemory, recallForRun } from './memory.js'
import type { ModelProvider, ToolCall, ToolSpec } from '../models/index.js'
import { usd, usdFromDollars } from '../../../shared/money.js'

// The agent loop of kind llm runs (DESIGN 6): a member carries out the task with a model and tools.
// Every model call and tool call is journaled before the run moves on, so a run that comes back (after a
// gate, a hold, a restart, a takeover) continues from its journal: a model call that answered is never
// made again, and a tool call that may have acted is never made again. A fork (issue 50) is started with
// its original's steps before its fork point copied into its journal, and goes on from them the same way. The journal is read when a run's
// execution starts and kept in memory from then on, with the conversation it stands for: a step writes
// its entries and reads none, so it costs the same late in a long run as early in it.

export interface AgentOptions {
  sql: Sql
  sealer: Sealer
  providers: Record<Provider, ModelProvider>
  log: Logger
  /** The provider_b sign-in, for refreshing a subscription's access token. */
  oauth?: OAuthSettings
  /** Model calls a run may make before it is stopped. */
  maxModelCalls?: number
  /** The most tokens a model call may answer with (what a call's worst case is priced at). */
  maxTokens?: number
  /** The longest a tool server's call may take (OSD_TOOL_TIMEOUT_SECONDS). */
  toolTimeoutMs?: number
  /** Where tool servers may be and how much of a result is read (nothing private, 100 KB unless given). */
  toolLimits?: ToolLimits
}

type Step = 'continue' | 'stop'

export class AgentExecutor implements Executor {
  constructor(private readonly options: AgentOptions) {}

  async execute(row: RunRow, context: ExecutionContext): Promise<RunStatus | undefined> {
    const run = new RunExecution(this.options, row, context)
    try {
      await run.go()
      return run.left
    } finally {
      await run.close()
    }
  }
}

class RunExecution {
  private readonly sql: Sql
  private readonly log: Logger
  private journal!: RunJournal
  private definition!: VersionDefinition
  private system = ''
  private tools: ToolSpec[] = []
  /** JSON.stringify(this.tools).length, for pricing a call's prompt. */
  private toolsSize = 0
  /** The run's tool connections, connected only once a model call can be made (or a call made). */
  private wanted: RunConnection[] = []
  private mcp: McpTools | undefined
  private mustGate = new Set<string>()
  /**
   * The built-in tools this run was given: a call is dispatched by where its tool came from, never by
   * its name (DESIGN 15), so no tool server's tool runs as a built-in and no built-in goes to a server.
   */
  private builtins = new Set<string>()
  /** Whom the run's mail is from: its member, or the daemon itself for a run without one. */
  private sender!: string
  private readonly maxModelCalls: number
  private readonly maxTokens: number
  /** The status this execution moved the run to where it stopped (its pass span says it). */
  left: RunStatus | undefined

  constructor(
    private readonly options: AgentOptions,
    private run: RunRow,
    private readonly context: ExecutionContext,
  ) {
    this.sql = options.sql
    // The pass's logger: its lines carry the pass's trace (issue 49).
    this.log = context.log.child({ runId: run.id })
    this.maxModelCalls = options.maxModelCalls ?? 40
    this.maxTokens = options.maxTokens ?? 4096
  }

  async go(): Promise<void> {
    await this.prepare()
    await this.settleInterrupted()
    for (;;) {
      if (this.context.signal.aborted) return
      // Between two steps: a run no longer this engine's stops; a paused one waits (issue 50).
      const goes = await runGoesOn(this.sql, this.context.engineId, this.run.id)
      if (goes === 'lost') return
      if (goes !== 'go') return this.waitPaused(goes)
      const pending = this.journal.pendingCalls()
      const next = pending.length ? await this.toolCalls(pending) : await this.modelCall()
      if (next === 'stop') return
    }
  }

  async close(): Promise<void> {
    await this.mcp?.close()
  }

  // --- what the run works with --------------------------------------------------------------------

  private async prepare(): Promise<void> {
    const { sql, run } = this
    const [context, recorded] = await Promise.all([
      runContext(sql, run),
      readRecordedMemory(sql, run.id),
    ])
    const { definition, member } = context
    this.definition = definition
    // Memory (DESIGN 10): recalled and recorded at the run's first start, read back afterwards.
    const [memory, briefing] = await Promise.all([
      recallForRun(sql, run, definition.goal, recorded, this.context.trace),
      briefingForRun(sql, run, definition, recorded),
    ])
    await this.record([memory.event, briefing.event].filter((e): e is NewEvent => !!e))
    this.sender = member?.email ?? 'osd@localhost'
    const prefix =
      run.resumeFromRunId && context.resumedInput
        ? Conversation.of(context.resumedInput, await readJournal(sql, run.resumeFromRunId))
        : undefined
    this.journal = new RunJournal(run.input, prefix, briefing.text)
    this.journal.remember(await readJournal(sql, run.id))
    // os.mail_send as well: a version saved before "os" reached it in the checks (issue 41) ends at
    // the call, as one without its merge gate does.
    this.mustGate = new Set([...(await mustGateTools(sql, run.enterpriseId)), fixedTools.mailSend])

    const allowed = this.definition.tools
    const roleId = await assigneeRoleId(sql, { id: run.taskId })
    const connections = await connectionsForRun(sql, this.options.sealer, run, roleId)
    // A task may only call the tools its version reaches (domain/tasks/reach.ts, as the checks read it).
    this.wanted = connections.filter((c) => reachesNamespace(allowed, c.name))
    this.tools = [
      osTools['os.finish']!,
      ...Object.values(osTools).filter((t) => t.name !== 'os.finish' && reaches(allowed, t.name)),
    ]
    this.builtins = new Set(this.tools.map((t) => t.name))

    this.system = systemPrompt({
      member,
      taskName: run.taskName,
      enterpriseName: context.enterpriseName,
      definition: this.definition,
      notes: memory.notes,
    })
  }

  /** Appends events while the run is this engine's (one that lost it records nothing for it). */
  private async record(events: NewEvent[]): Promise<void> {
    if (events.length === 0) return
    const row = await retryConflicts(() =>
      appendWhileHeld(this.sql, this.run.id, this.context.engineId, events),
    )
    if (row) this.run = row
  }

  /**
   * Connects to the run's tool servers and adds their tools, once per execution, when the run is about to
   * call a model or a tool: a run held for want of a key does not connect at each retry.
   */
  private async connectTools(): Promise<void> {
    if (!this.mcp) {
      this.mcp = new McpTools(
        this.wanted,
        this.log,
        this.context.trace,
        this.options.toolTimeoutMs,
        this.options.toolLimits,
      )
      const connected = this.wanted.length ? await this.mcp.connect() : []
      this.tools.push(
        ...connected.filter(
          (t) => reaches(this.definition.tools, t.name) && !this.builtins.has(t.name),
        ),
      )
      this.toolsSize = JSON.stringify(this.tools).length
    }
  }

  /**
   * Re-reads and locks the run inside `tx`; undefined if it is no longer this engine's to move (it was
   * cancelled, or taken over after this engine's lease lapsed). Everything the loop writes for a run
   * goes through it: a worker that lost its run writes and does nothing more for it. The lock also
   * keeps a run's events in the order they commit, so a follower reading after an event misses none.
   */
  private async lockRun(tx: Db): Promise<RunRow | undefined> {
    const row = await lockHeldRun(tx, this.context.engineId, this.run.id)
    if (row) this.run = row
    return row
  }

  /**
   * Runs `fn` in a transaction of its own with the run locked and still this engine's (lockRun);
   * undefined, having done nothing, when it is not. A transaction PostgreSQL cancels to break a
   * deadlock did nothing: it goes again at once, with the same outcome (retryConflicts), so a run's
   * end, a gate or a hold is never left for a lease takeover to find (issue 42).
   */
  private whileMine<T>(fn: (tx: Db, run: RunRow) => Promise<T>): Promise<T | undefined> {
    return retryConflicts(() =>
      transaction(this.sql, async (tx) => {
        const run = await this.lockRun(tx)
        return run ? fn(tx, run) : undefined
      }),
    )
  }

  // --- what a crash left behind --------------------------------------------------------------------

  /**
   * A model call started but never answered (the process died or was stopped during it): its
   * reservation is released and it is made again. A tool call started and not marked done may have
   * acted: it is answered to the model as of unknown outcome, never made again.
   */
  private async settleInterrupted(): Promise<void> {
    let answeredMeanwhile = false
    const started = this.journal.started()
    const calls = started.filter((entry) => entry.kind === 'model')
    if (calls.length)
      // The calls' reservations are released once, by whoever deletes them (releaseInterrupted),
      // in the transaction that ends their steps.
      await retryConflicts(() =>
        transaction(this.sql, async (tx) => {
          answeredMeanwhile = false
          await releaseInterrupted(tx, { runId: this.run.id })
          for (const entry of calls) {
            const ended = await endModelStep(tx, this.run.id, entry.step, {
              state: 'failed',
              response: { interrupted: true },
            })
            // Not ended here: the worker that made the call settled it since (its answer came
            // after all).
            answeredMeanwhile ||= !ended
          }
        }),
      )
    for (const entry of calls)
      Object.assign(entry, { state: 'failed', response: { interrupted: true } })
    for (const entry of started)
      if (entry.kind === 'tool' && (!entry.request.gateId || entry.request.executing))
        await this.answer(entry, { content: interruptedCallResult, isError: true })
    // A call answered after all is the run's: the journal is read again to go on from it.
    if (answeredMeanwhile) this.journal.replace(await readJournal(this.sql, this.run.id))
  }

  // --- model calls ---------------------------------------------------------------------------------

  private async modelCall(): Promise<Step> {
    const { run } = this
    const calls = this.journal.modelCalls
    if (calls >= this.maxModelCalls)
      return this.fail(`The run stopped after ${calls} model calls without finishing.`)

    const choice = await chooseModel(
      this.sql,
      this.options.sealer,
      run.enterpriseId,
      run,
      // A fork's tier (issue 50) is the one its caller chose, over its version's tier or model.
      run.modelTier
        ? { ...this.definition.spend, model: undefined, maxModelTier: run.modelTier }
        : this.definition.spend,
      this.options.oauth,
    )
    if ('blocked' in choice) return this.hold({ noKey: choice.blocked })
    const { key, model } = choice
    await this.connectTools()
    const conversation = this.journal.messages()
    const step = this.journal.nextStep()
    const request = { provider: key.provider, model }
    const perRun = this.definition.spend?.moneyUsdPerRun
    const mine = new RunModelCall(run, step, request, (tx) => this.lockRun(tx))
    const result = await callModel({
      sql: this.sql,
      providers: this.options.providers,
      choice,
      request: {
        system: this.system,
        messages: [...conversation.messages],
        tools: this.tools,
        maxTokens: this.maxTokens,
      },
      promptChars: this.system.length + conversation.size + this.toolsSize,
      signal: this.context.signal,
      firstCall: calls === 0,
      overLimit: (worst) =>
        perRun !== undefined && run.costUsdMicros + worst > perRun * 1_000_000
          ? `The next model call could cost up to ${usd(worst / 10_000)}; with ${usd(run.costUsdMicros / 10_000)} spent it would exceed spend.moneyUsdPerRun (${usdFromDollars(perRun)}).`
          : undefined,
      owner: mine.owner(),
      trace: this.context.trace,
    })
    if (result.kind === 'over_limit') return this.fail(result.reason)
    // A run taken over meanwhile is the other engine's to log.
    if (result.kind === 'no_room') await this.writeLog()
    if (result.kind === 'gone' && mine.behind && mine.locked) {
      this.journal.replace(await readJournal(this.sql, run.id))
      return 'continue'
    }
    if (result.kind === 'gone' || result.kind === 'no_room') return 'stop'
    if (result.kind === 'throttled') return this.hold(result.failure)
    const ended = (state: 'done' | 'failed', response: Record<string, unknown>, cost = 0) =>
      this.journal.remember([
        {
          step,
          kind: 'model',
          state,
          request,
          response: stored(response),
          costUsdMicros: cost,
          connectionId: key.connectionId,
        },
      ])
    if (result.kind === 'failed') {
      // Cancelled or stopping (aborted), or refused: the step ended failed, its reservation released,
      // whether or not the run is ever resumed (a resumed run makes the call again).
      const { failure } = result
      ended('failed', responseOf({ failure, costMicros: 0 }))
      if (failure.kind === 'aborted') return 'stop'
      if (failure.kind === 'bad_request') return this.fail(failure.message)
      return this.hold(failure)
    }
    if (!result.mine) return 'stop'
    // The next call's spend.moneyUsdPerRun check reads this.run, which lockRun above left as the row
    // before this call's cost: it takes the total the update answered.
    this.run.costUsdMicros = mine.spent
    const { reply } = result
    ended('done', responseOf({ reply, costMicros: result.costMicros }), result.costMicros)

    // An answer without tool calls is the final answer.
    if (reply.toolCalls.length === 0) {
      return this.finish({ outcome: 'succeeded', summary: reply.text ?? '' })
    }
    return 'continue'
  }

  // --- tool calls ----------------------------------------------------------------------------------

  private async toolCalls(calls: ToolCall[]): Promise<Step> {
    await this.connectTools()
    for (const call of calls) {
      if (this.context.signal.aborted) return 'stop'
      const next = await this.toolCall(call)
      if (next === 'stop') return 'stop'
    }
    return 'continue'
  }

  private async toolCall(call: ToolCall): Promise<Step> {
    const entry = this.journal.toolEntry(call.id)
    if (call.name === 'os.finish') {
      if ((await this.answerNew(call, { content: 'Finished.', isError: false })) === 'stop')
        return 'stop'
      return this.finish(finishResult(call.arguments))
    }
    if (!this.tools.some((t) => t.name === call.name)) {
      return this.answerNew(call, {
        content: `${call.name} is not one of this task's tools.`,
        isError: true,
      })
    }
    // The merge rule at run time (spec: Definition checks): a must-gate tool without a gate naming it
    // ends the run at this call, and nothing is done.
    if (this.mustGate.has(call.name) && !this.definition.gates.some((g) => g.tool === call.name)) {
      const answered = await this.answerNew(call, {
        content: 'Refused: this tool must be gated and the task has no gate naming it.',
        isError: true,
      })
      if (answered === 'stop') return 'stop'
      return this.fail(
        `gate_required_for_tool: ${call.name} must be gated and this version has no gate naming it; nothing was done.`,
      )
    }
    const gate = this.gateFor(call.name)
    if (gate || call.name === fixedTools.askCeo) {
      if (!entry) return this.openGateFor(call, gate)
      return this.afterGate(call, entry)
    }
    return this.act(call)
  }

  /** The version's gate on a tool: by its exact name, or on its connection as `conn` or `conn.*`. */
  private gateFor(name: string) {
    return this.definition.gates.find((g) => reaches([g.tool], name))
  }

  /** Opens a gate on the call; the run waits on it, the call journaled as started with the gate's id. */
  private async openGateFor(
    call: ToolCall,
    gate: { owner: string; approval: string } | undefined,
  ): Promise<Step> {
    const step = this.journal.nextStep()
    const asking = call.name === fixedTools.askCeo
    const question = asking ? askCeoArguments(call.arguments) : undefined
    const done = await this.whileMine(async (tx, run) => {
      const opened = await openGate(tx, run, {
        kind: asking ? 'question' : 'tool',
        tool: call.name,
        arguments: call.arguments,
        owner: gate?.owner ?? 'ceo',
        approval: gate?.approval ?? 'specific',
        summary: asking ? null : this.journal.gateSummary,
        choices: question && Array.isArray(call.arguments.choices) ? question.choices : null,
        questions: question?.questions ?? null,
        journalStep: step,
      })
      const entry = await startToolStep(tx, run, step, { ...requestOf(call), gateId: opened.id })
      onCommit(tx, () => this.journal.remember([entry]))
      return true
    })
    if (done) {
      this.left = 'waiting_on_gate'
      await this.writeLog()
    }
    return 'stop'
  }

  /** Carries out a decided gate: approve runs the call once; reject and request_changes tell the model. */
  private async afterGate(call: ToolCall, entry: JournalEntry): Promise<Step> {
    const gate = await gateOfStep(this.sql, this.run.id, entry.step)
    if (!gate || gate.status === 'waiting') return 'stop'
    const answer = gateAnswer(gate)
    if (answer !== 'approved') return this.answer(entry, answer)
    // Approved: marked as executing before the call, so a crash during it never makes it twice.
    const mine = await this.whileMine(async (tx) => {
      await markExecuting(tx, this.run.id, entry.step)
      return true
    })
    if (!mine) return 'stop'
    entry.request.executing = true
    const outcome = await this.perform(call)
    if (!outcome) return 'stop'
    return this.answer(entry, outcome)
  }

  /** A call that needs no gate: os tools act in the journal's transaction, tool servers between two writes. */
  private async act(call: ToolCall): Promise<Step> {
    if (call.name === fixedTools.gateSummary)
      return this.answerNew(call, { content: 'Noted.', isError: false })
    if (this.builtins.has(call.name)) {
      const step = this.journal.nextStep()
      const mine = await this.whileMine(async (tx, run) => {
        const outcome = await actOsTool(
          tx,
          run,
          call.name,
          call.arguments,
          this.sender,
          call.id,
          this.context.trace,
        )
        await this.insertDone(tx, step, call, outcome)
        return true
      })
      return mine ? 'continue' : 'stop'
    }
    const step = this.journal.nextStep()
    // Journaled as started, under the run's lock, before the tool server is called: a worker that
    // lost the run never calls, and one that dies during the call never calls again.
    const entry = await this.whileMine(async (tx, run) => {
      const started = await startToolStep(tx, run, step, requestOf(call))
      onCommit(tx, () => this.journal.remember([started]))
      return started
    })
    if (!entry || this.context.signal.aborted) return 'stop'
    const outcome = await this.perform(call)
    if (!outcome || this.context.signal.aborted) return 'stop'
    return this.answer(entry, outcome)
  }

  /**
   * Runs a tool: an os tool in its own transaction, else the tool server's tool. Undefined when the
   * run is no longer this engine's, and the os tool did nothing.
   */
  private async perform(call: ToolCall): Promise<ToolOutcome | undefined> {
    if (this.builtins.has(call.name))
      return this.whileMine((tx, run) =>
        actOsTool(tx, run, call.name, call.arguments, this.sender, call.id, this.context.trace),
      )
    try {
      return await withCallSignal(this.context.signal, (signal) =>
        this.mcp!.call(call.name, call.arguments, signal, call.id),
      )
    } catch (err) {
      return { content: `The tool failed: ${(err as Error).message}`, isError: true }
    }
  }

  /** Records the answer of a journaled call and says so in the run's events. */
  private async answer(entry: JournalEntry, outcome: ToolOutcome): Promise<Step> {
    // The engine that holds the run now answers this call itself (as interrupted, on resuming).
    const mine = await this.whileMine(async (tx) => {
      await answerToolStep(tx, this.run.id, entry.step, outcome)
      await appendEvent(tx, this.run, 'tool.called', {
        name: entry.request.name,
        isError: outcome.isError,
      })
      onCommit(tx, () => Object.assign(entry, { state: 'done', response: stored(outcome) }))
      return true
    })
    return mine ? 'continue' : 'stop'
  }

  /** Journals a call that acted on nothing outside (or was refused) together with its answer. */
  private async answerNew(call: ToolCall, outcome: ToolOutcome): Promise<Step> {
    const step = this.journal.nextStep()
    const mine = await this.whileMine(async (tx) => {
      await this.insertDone(tx, step, call, outcome)
      return true
    })
    return mine ? 'continue' : 'stop'
  }

  private async insertDone(
    tx: Db,
    step: number,
    call: ToolCall,
    outcome: ToolOutcome,
  ): Promise<void> {
    const entry = await insertToolDone(tx, this.run, step, requestOf(call), outcome)
    await appendEvent(tx, this.run, 'tool.called', { name: call.name, isError: outcome.isError })
    // The journal in memory follows the database's once this commits, instead of reading it again.
    onCommit(tx, () => this.journal.remember([entry]))
  }

  // --- how the run moves on --------------------------------------------------------------------------

  private async finish(
    result: { outcome: string; summary: string } & Record<string, unknown>,
  ): Promise<Step> {
    const to = result.outcome === 'failed' ? 'failed' : 'succeeded'
    const ended = await this.whileMine(async (tx, run) => {
      await finishRun(tx, run, to, {
        result,
        ...(to === 'failed' ? { reason: result.summary || 'The run reported it failed.' } : {}),
      })
      return true
    })
    if (ended) {
      this.left = to
      await this.writeLog()
    }
    return 'stop'
  }

  private async fail(reason: string): Promise<Step> {
    const ended = await this.whileMine(async (tx, run) => {
      await finishRun(tx, run, 'failed', {
        reason,
        result: { outcome: 'failed', summary: reason },
      })
      return true
    })
    if (ended) {
      this.left = 'failed'
      await this.writeLog()
    }
    return 'stop'
  }

  /**
   * Holds the run (blocked: no key, a refused key, an outage, a throttle): it leaves its concurrency
   * slot and comes back by itself when the hold is over (domain/models/holds.ts, the same rule as a
   * chat reply's), or at once when a key is bound. A throttle's event says so, with when it tries again.
   */
  private async hold(why: HoldCause): Promise<Step> {
    const held = await this.whileMine(async (tx, run) => {
      const hold = holdFor(why, run.holds)
      this.left = hold.status
      await transition(
        tx,
        run,
        hold.status,
        { blockedReason: hold.reason, notBefore: hold.notBefore },
        hold.throttled ? { throttled: true, retryAt: hold.notBefore.toISOString() } : {},
      )
      return true
    })
    if (held) await this.writeLog()
    return 'stop'
  }

  /**
   * Its task or enterprise is paused: the run goes back to pending after the step it made, leaving its
   * lease and slot; admission takes it again after the resume and it goes on from its journal.
   */
  private async waitPaused(pause: RunPause): Promise<void> {
    const waiting = await this.whileMine((tx, run) => waitPaused(tx, run, pause))
    if (waiting) {
      this.left = 'pending'
      await this.writeLog()
    }
  }

  /**
   * The transcript as the run's log (GET /v1/runs/{id}/log): prompt, messages, calls and answers, from
   * the journal in memory. Written where the run stops (an end, a gate, a hold) while it is still this
   * engine's: one that lost the run leaves its log to the engine that holds it now.
   */
  private async writeLog(): Promise<void> {
    const lines = ['# System', this.system, '', '# Input', JSON.stringify(this.run.input, null, 2)]
    lines.push(...this.journal.transcript())
    await writeRunLog(this.sql, this.run, lines.join('\n'))
  }
}
