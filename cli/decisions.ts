import type { GateDecision } from '../shared/schemas/gates.js'

// What a person decided on a gate or a chat's question, in words read from the decision itself (issue
// 51): a question turned down reads "rejected", never "answered" or "approved" because it is no longer
// waiting. Every printer of a decided question or gate says it through here: `chats get`, `chats
// export`, the chat screen and `gates review`. Types only: command modules load this as osctl starts.

/** A decision as the API answers it on a gate or a chat question (null: nobody decided, it closed). */
export interface Decided {
  decision: GateDecision['decision'] | null
  choice?: string | null
  answers?: unknown
  note?: string | null
}

export type DecisionWord = 'answered' | 'approved' | 'rejected' | 'changes requested' | 'closed'

/**
 * The answers given, as texts, one per question in order (the API keeps them as sent: a list, an
 * object or one string).
 */
export function answerTexts(answers: unknown): string[] {
  if (answers === null || answers === undefined) return []
  const list = Array.isArray(answers) ? answers : [answers]
  return list.map((a) => (typeof a === 'string' ? a : JSON.stringify(a)))
}

const given = (answers: unknown) => answerTexts(answers).filter((a) => a.trim() !== '')

/**
 * The word for a decision: an approve that carries a choice or answers is the question answered; an
 * approve without is approved; reject and request_changes are themselves whatever else they carry;
 * no decision at all is a gate closed with its run or chat.
 */
export function decisionWord(decided: Decided): DecisionWord {
  switch (decided.decision) {
    case 'approve':
      return (decided.choice ?? null) !== null || given(decided.answers).length
        ? 'answered'
        : 'approved'
    case 'reject':
      return 'rejected'
    case 'request_changes':
      return 'changes requested'
    default:
      return 'closed'
  }
}

/** The choice picked, by its label where the gate offers one of that key. */
export function choiceText(
  choice: string | null | undefined,
  choices: readonly { key: string; label: string }[] = [],
): string | undefined {
  if (choice === null || choice === undefined) return undefined
  return choices.find((c) => c.key === choice)?.label || choice
}

/**
 * A decided question or gate in one line: "rejected: not now", "answered: Monday · after the standup",
 * "approved", "closed, unanswered".
 */
export function decisionLine(
  decided: Decided,
  choices: readonly { key: string; label: string }[] = [],
): string {
  const word = decisionWord(decided)
  if (word === 'closed') return 'closed, unanswered'
  const choice = choiceText(decided.choice, choices)
  const answers = [...(choice ? [choice] : []), ...given(decided.answers)]
  const note = decided.note?.trim() ? decided.note.trim() : undefined
  const parts =
    word === 'answered'
      ? [...answers, ...(note ? [`note: ${note}`] : [])]
      : [...(note ? [note] : []), ...answers]
  return parts.length ? `${word}: ${parts.join(' · ')}` : word
}

/**
 * Who decided a gate, in words (issue 51): a token by its name, "ci-bot (token)"; a person by their
 * name, or email; else what decidedBy says itself ("webhook", "run cancelled"). The name is the API's
 * (Gate.decidedByName, the gate.decided event's payload): a gates reader holds no scope that reads
 * tokens or people. An osd that answers no name leaves the id.
 */
export function deciderText(
  decidedBy: string | null | undefined,
  decidedByName: string | null | undefined,
): string | null {
  if (!decidedBy) return null
  if (!decidedByName) return decidedBy
  return decidedBy.startsWith('token:') ? `${decidedByName} (token)` : decidedByName
}
