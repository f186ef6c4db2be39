import type { Key } from 'ink'
import type { Gate, GateDecision } from '../../shared/schemas/gates.js'

// What each key does on the gate review screen, as a pure function of the mode and the key: the
// screen keeps the mode in React state and carries out the action this answers.

export type Decision = GateDecision['decision']

/** What the keyboard is doing: moving through the list, or filling in a decision on one gate. */
export type Mode =
  | { kind: 'browse' }
  /** A note for approve (optional), reject or request_changes (required). */
  | { kind: 'note'; gate: Gate; decision: Decision; text: string; hint: string | null }
  /** A question gate's answer: a choice (index into its choices, -1 for none: a choice is picked on
   *  purpose, never by default) and a text per question, `field` the one being typed in. */
  | {
      kind: 'answer'
      gate: Gate
      choice: number
      field: number
      answers: string[]
      hint: string | null
    }

export type Action =
  | { type: 'move'; delta: number }
  | { type: 'decide'; gate: Gate; body: GateDecision }
  | { type: 'quit' }

export interface KeyResult {
  mode: Mode
  action?: Action
}

export const browse: Mode = { kind: 'browse' }

/** Reject and request changes need a note, approve's is optional: a person refusing should say why
 *  (osctl's rule; the API lets it be left out). */
export function noteRequired(decision: Decision): boolean {
  return decision !== 'approve'
}

/** The questions a question gate asks, or one unnamed answer when it names none. */
export function questionsOf(gate: Gate): string[] {
  return gate.questions?.length ? gate.questions : ['Answer']
}

/** Typed characters, without control characters (a paste may carry line ends). */
function typed(input: string, key: Key): string {
  if (key.ctrl || key.meta) return ''
  return input.replace(/[\x00-\x1f\x7f]/g, '')
}

function edit(text: string, input: string, key: Key): string {
  if (key.backspace || key.delete) return text.slice(0, -1)
  if (key.ctrl && input === 'u') return ''
  return text + typed(input, key)
}

/**
 * One input as the keys it holds. A terminal hands over fast typing and pastes as one string ("Go\r",
 * "jj"); taken a key at a time, Enter in it still sends and each j still moves.
 */
export function splitKeys(input: string, key: Key): [string, Key][] {
  const chars = Array.from(input)
  if (chars.length <= 1 || key.ctrl || key.meta || key.escape) return [[input, key]]
  return chars.map((char) => [
    char,
    {
      ...key,
      return: char === '\r' || char === '\n',
      tab: char === '\t',
      backspace: char === '\x7f' || char === '\b',
    },
  ])
}

/** Handles one key. `selected` is the gate the list points at, `sending` whether a decision is out. */
export function onKey(
  mode: Mode,
  input: string,
  key: Key,
  selected: Gate | undefined,
  sending: boolean,
): KeyResult {
  if (mode.kind === 'browse') {
    if (input === 'q') return { mode, action: { type: 'quit' } }
    if (key.upArrow || input === 'k') return { mode, action: { type: 'move', delta: -1 } }
    if (key.downArrow || input === 'j') return { mode, action: { type: 'move', delta: 1 } }
    if (key.pageUp) return { mode, action: { type: 'move', delta: -10 } }
    if (key.pageDown) return { mode, action: { type: 'move', delta: 10 } }
    if (!selected || sending) return { mode }
    if (input === 'a' && selected.kind === 'question') {
      const answers = questionsOf(selected).map(() => '')
      return { mode: { kind: 'answer', gate: selected, choice: -1, field: 0, answers, hint: null } }
    }
    const decision = ({ a: 'approve', r: 'reject', c: 'request_changes' } as const)[
      input as 'a' | 'r' | 'c'
    ]
    if (decision) return { mode: { kind: 'note', gate: selected, decision, text: '', hint: null } }
    return { mode }
  }

  if (key.escape) return { mode: browse }
  if (sending) return { mode }

  if (mode.kind === 'note') {
    if (key.return) {
      const note = mode.text.trim()
      if (!note && noteRequired(mode.decision)) {
        return { mode: { ...mode, hint: 'A note is needed: say why (Esc cancels).' } }
      }
      const body: GateDecision = { decision: mode.decision, ...(note ? { note } : {}) }
      return { mode: browse, action: { type: 'decide', gate: mode.gate, body } }
    }
    return { mode: { ...mode, text: edit(mode.text, input, key), hint: null } }
  }

  // An answer: arrows pick the choice, typing fills the current question, Tab moves between them.
  const choices = mode.gate.choices ?? []
  const fields = mode.answers.length
  if (key.upArrow || key.downArrow) {
    if (choices.length === 0) {
      const field = (mode.field + (key.upArrow ? fields - 1 : 1)) % fields
      return { mode: { ...mode, field } }
    }
    const choice = Math.min(choices.length - 1, Math.max(-1, mode.choice + (key.upArrow ? -1 : 1)))
    return { mode: { ...mode, choice, hint: null } }
  }
  if (key.tab) {
    const field = (mode.field + (key.shift ? fields - 1 : 1)) % fields
    return { mode: { ...mode, field } }
  }
  if (key.return) {
    const choice = choices[mode.choice]?.key
    const answered = mode.answers.some((a) => a.trim())
    if (!choice && !answered) {
      return { mode: { ...mode, hint: 'Pick a choice or type an answer (Esc cancels).' } }
    }
    const body: GateDecision = {
      decision: 'approve',
      ...(choice ? { choice } : {}),
      ...(answered ? { answers: mode.answers.map((a) => a.trim()) } : {}),
    }
    return { mode: browse, action: { type: 'decide', gate: mode.gate, body } }
  }
  const answers = mode.answers.map((a, i) => (i === mode.field ? edit(a, input, key) : a))
  return { mode: { ...mode, answers, hint: null } }
}
