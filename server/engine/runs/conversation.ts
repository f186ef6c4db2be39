import type { JournalEntry } from '../../domain/runs/index.js'
import type { Message, ToolCall } from '../models/index.js'

/**
 * The messages a run's journal stands for: its input, then each answered model call and, once every call
 * of it has its answer, those answers. Kept in memory for the life of a run's execution and extended with
 * the journal's new entries before each model call, so a step costs the same late in a run as early in it
 * (issue 15): nothing is rebuilt, and the journal is read only when a run (re)starts.
 */
export class Conversation {
  private readonly list: Message[]
  /** JSON.stringify(list).length, kept as messages are added (the prompt's size, for pricing a call). */
  private chars: number
  /** How many journal entries have been taken in. */
  private folded = 0
  /** The calls of the latest answered model call, until they are all answered. */
  private awaiting: ToolCall[] = []

  /**
   * `briefing`: what the run is given with its input, after it in the same first message (a training
   * run's material, memory.ts).
   */
  constructor(input: Record<string, unknown>, prefix: readonly Message[] = [], briefing?: string) {
    this.list = []
    this.chars = 2
    for (const message of prefix) this.add(message)
    const text = `Input:\n${JSON.stringify(input, null, 2)}`
    this.add({ role: 'user', text: briefing ? `${text}\n\n${briefing}` : text })
  }

  /** A finished run's conversation from its whole journal (a successor's resumeConversation prefix). */
  static of(input: Record<string, unknown>, journal: readonly JournalEntry[]): Conversation {
    const answers = answersOf(journal)
    return new Conversation(input).follow(journal, (id) => answers.get(id))
  }

  /**
   * Takes in the entries of `journal` (the same list, only ever appended to) not taken in yet. Entries are
   * taken in once they are model calls ended (done or failed); tool answers are looked up by call id.
   */
  follow(
    journal: readonly JournalEntry[],
    answerOf: (callId: string) => JournalEntry | undefined,
  ): this {
    for (; this.folded < journal.length; this.folded++) {
      const entry = journal[this.folded]!
      if (entry.kind !== 'model' || entry.state !== 'done') continue
      // A model call whose calls were not all answered gets no results message (as the run never
      // goes on to its next model call before they are).
      this.flush(answerOf)
      this.awaiting = []
      const calls = (entry.response?.toolCalls ?? []) as ToolCall[]
      this.add({ role: 'assistant', text: entry.response?.text ?? null, toolCalls: calls })
      this.awaiting = calls
    }
    this.flush(answerOf)
    return this
  }

  get messages(): readonly Message[] {
    return this.list
  }

  /** The size of the messages as JSON, without serialising them again. */
  get size(): number {
    return this.chars
  }

  private flush(answerOf: (callId: string) => JournalEntry | undefined): void {
    if (this.awaiting.length === 0) return
    const results: { callId: string; content: string; isError: boolean }[] = []
    for (const call of this.awaiting) {
      const answer = answerOf(call.id)
      if (answer?.state !== 'done') return
      results.push({
        callId: call.id,
        content: String(answer.response?.content ?? ''),
        isError: Boolean(answer.response?.isError),
      })
    }
    this.add({ role: 'tool', results })
    this.awaiting = []
  }

  private add(message: Message): void {
    this.chars += JSON.stringify(message).length + (this.list.length ? 1 : 0)
    this.list.push(message)
  }
}

/** The first tool entry of each call id: a call's answer. */
export function answersOf(journal: readonly JournalEntry[]): Map<string, JournalEntry> {
  const answers = new Map<string, JournalEntry>()
  for (const entry of journal) {
    if (entry.kind === 'tool' && !answers.has(entry.request.callId))
      answers.set(entry.request.callId, entry)
  }
  return answers
}
