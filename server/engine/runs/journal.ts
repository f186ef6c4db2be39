import { fixedTools } from '../../../shared/schemas/tasks.js'
import type { JournalEntry, ToolRequest } from '../../domain/runs/index.js'
import { Conversation } from './conversation.js'
import type { CallOutcome, ToolCall } from '../models/index.js'

/**
 * A run's journal in memory (DESIGN 6): its entries as read when the execution started and as each of
 * its steps commits, with what the agent loop looks up in them and the conversation they stand for, so
 * a step reads none of it again.
 */
export class RunJournal {
  /** The run's journal as the database has it (the entries this execution wrote, once committed). */
  private entries: JournalEntry[] = []
  /** The journal's tool steps by call id. */
  private readonly answers = new Map<string, JournalEntry>()
  /** The latest model call that answered, whose tool calls the run carries out next. */
  private lastModel: JournalEntry | undefined
  /** Model calls that answered. */
  modelCalls = 0
  /** The summary the run last set with os.set_gate_summary, for the gate it opens next. */
  gateSummary: string | null = null
  private conversation: Conversation | undefined

  constructor(
    private readonly input: Record<string, unknown>,
    /** What the run was told before its own input: a predecessor's conversation (resumeConversation). */
    private readonly prefix: Conversation | undefined,
    /** What the run is given with its input (a training run's material), in its first message. */
    readonly briefing: string | undefined,
  ) {}

  /** Takes journal entries into memory, with what the loop looks up in them. */
  remember(entries: JournalEntry[]): void {
    for (const entry of entries) {
      this.entries.push(entry)
      this.index(entry)
    }
  }

  /** The journal read again (a call answered after all): the lookups start over from it. */
  replace(entries: JournalEntry[]): void {
    this.entries = []
    this.answers.clear()
    this.lastModel = undefined
    this.modelCalls = 0
    this.gateSummary = null
    this.remember(entries)
  }

  /** Adds an entry to the lookups (a tool entry answered later is the same object, changed in place). */
  private index(entry: JournalEntry): void {
    if (entry.kind === 'model') {
      if (entry.state === 'done') {
        this.lastModel = entry
        this.modelCalls++
      }
      return
    }
    if (!this.answers.has(entry.request.callId)) this.answers.set(entry.request.callId, entry)
    if (entry.request.name === fixedTools.gateSummary) {
      const summary = entry.request.arguments?.summary
      this.gateSummary = typeof summary === 'string' ? summary : null
    }
  }

  /** Steps started and never ended (the process died or was stopped during them). */
  started(): JournalEntry[] {
    return this.entries.filter((e) => e.state === 'started')
  }

  /** The conversation so far: the journal's entries not yet in it are added (none is read again). */
  messages(): Conversation {
    this.conversation ??= new Conversation(this.input, this.prefix?.messages, this.briefing)
    return this.conversation.follow(this.entries, (id) => this.answers.get(id))
  }

  /** Calls of the last model reply that have no answer yet. */
  pendingCalls(): ToolCall[] {
    const calls = (this.lastModel?.response?.toolCalls ?? []) as ToolCall[]
    return calls.filter((call) => {
      const entry = this.toolEntry(call.id)
      return !entry || entry.state === 'started'
    })
  }

  toolEntry(callId: string): JournalEntry | undefined {
    return this.answers.get(callId)
  }

  nextStep(): number {
    return (this.entries.at(-1)?.step ?? -1) + 1
  }

  /** The briefing, then every call and its answer, as lines of the run's log. */
  transcript(): string[] {
    const lines: string[] = []
    if (this.briefing) lines.push('', this.briefing)
    for (const entry of this.entries) {
      if (entry.kind === 'model') {
        lines.push('', `# Model call ${entry.step} (${entry.request.model ?? ''}): ${entry.state}`)
        if (entry.response?.text) lines.push(entry.response.text)
        for (const call of (entry.response?.toolCalls ?? []) as ToolCall[])
          lines.push(`-> ${call.name} ${JSON.stringify(call.arguments)}`)
        if (entry.response?.error) lines.push(`error: ${entry.response.error}`)
      } else {
        lines.push(
          '',
          `# Tool ${entry.request.name} (step ${entry.step}): ${entry.state}${entry.request.gateId ? ` (gate ${entry.request.gateId})` : ''}`,
        )
        if (entry.response)
          lines.push(`${entry.response.isError ? 'error: ' : ''}${entry.response.content}`)
      }
    }
    return lines
  }
}

/** What the journal keeps of a model call's outcome: its answer, or why it did not answer. */
export function responseOf(outcome: CallOutcome): Record<string, unknown> {
  if ('reply' in outcome) {
    const { text, toolCalls, usage, model } = outcome.reply
    return { text, toolCalls, usage, model }
  }
  return outcome.failure.kind === 'aborted'
    ? { interrupted: true }
    : { error: outcome.failure.message }
}

/** A tool step's request for a call of the model's. */
export function requestOf(call: ToolCall): ToolRequest {
  return { callId: call.id, name: call.name, arguments: call.arguments }
}
