import type { Key } from 'ink'
import type { ChatMessage } from '../../shared/schemas/chats.js'
import type { ChatDecision, ChatState, PickerEntry } from './chat-controller.js'
import { waitingMessage } from './chat-controller.js'

// What each key does on the chat screen, as a pure function of the mode, the controller's state and the
// key: the screen keeps the mode in React state and carries out the action this answers.

/** The answer being filled in for a waiting question: a choice (-1: none yet) and a text per question. */
export interface AnswerForm {
  gateId: string
  choice: number
  field: number
  answers: string[]
}

export interface Mode {
  /** The picker's selected row. */
  index: number
  /** The prompt line. */
  text: string
  /** Lines the conversation is scrolled up by (PageUp/PageDown). */
  scroll: number
  answer: AnswerForm | null
  hint: string | null
}

export const startMode: Mode = { index: 0, text: '', scroll: 0, answer: null, hint: null }

export type Action =
  | { type: 'pick'; entry: PickerEntry }
  | { type: 'send'; text: string }
  | { type: 'decide'; message: ChatMessage; decision: ChatDecision }
  | { type: 'answer'; message: ChatMessage; body: { answers?: string[]; choice?: string } }
  | { type: 'newTask' }
  | { type: 'picker' }
  | { type: 'quit' }

export interface KeyResult {
  mode: Mode
  action?: Action
}

function typed(input: string, key: Key): string {
  if (key.ctrl || key.meta) return ''
  return input.replace(/[\x00-\x1f\x7f]/g, '')
}

function edit(text: string, input: string, key: Key): string {
  if (key.backspace || key.delete) return text.slice(0, -1)
  if (key.ctrl && input === 'u') return ''
  return text + typed(input, key)
}

/** The form for a question, fresh, or the one already being filled for the same gate. */
function formFor(message: ChatMessage, held: AnswerForm | null): AnswerForm {
  const question = message.question!
  if (held?.gateId === question.gateId) return held
  const count = Math.max(1, question.questions.length)
  return { gateId: question.gateId, choice: -1, field: 0, answers: Array(count).fill('') }
}

const decisionKeys: Record<string, ChatDecision> = { a: 'allow', A: 'always', d: 'deny' }

/** Handles one key. */
export function onKey(mode: Mode, input: string, key: Key, state: ChatState): KeyResult {
  if (key.ctrl && input === 'd') return { mode, action: { type: 'quit' } }
  if (key.ctrl && input === 'n')
    return { mode: { ...mode, hint: null }, action: { type: 'newTask' } }

  if (state.view === 'picker') {
    const last = state.entries.length - 1
    if (key.escape || input === 'q') return { mode, action: { type: 'quit' } }
    if (key.upArrow || input === 'k')
      return { mode: { ...mode, index: Math.max(0, mode.index - 1) } }
    if (key.downArrow || input === 'j')
      return { mode: { ...mode, index: Math.max(0, Math.min(last, mode.index + 1)) } }
    const entry = state.entries[Math.min(mode.index, last)]
    if (key.return && entry) return { mode: { ...startMode }, action: { type: 'pick', entry } }
    return { mode }
  }

  if (key.pageUp) return { mode: { ...mode, scroll: mode.scroll + 10 } }
  if (key.pageDown) return { mode: { ...mode, scroll: Math.max(0, mode.scroll - 10) } }

  const waiting = waitingMessage(state.messages)
  if (waiting?.toolCall?.status === 'waiting') {
    if (key.escape) return { mode: { ...mode, hint: null }, action: { type: 'picker' } }
    const decision = decisionKeys[input]
    if (decision && !state.sending) {
      return {
        mode: { ...mode, hint: null },
        action: { type: 'decide', message: waiting, decision },
      }
    }
    if (input && !key.return)
      return {
        mode: { ...mode, hint: 'The member waits on this tool call: a allow · A always · d deny.' },
      }
    return { mode }
  }

  if (waiting?.question?.status === 'waiting') {
    if (key.escape)
      return { mode: { ...mode, answer: null, hint: null }, action: { type: 'picker' } }
    const form = formFor(waiting, mode.answer)
    const choices = waiting.question.choices
    const fields = form.answers.length
    if (key.upArrow || key.downArrow) {
      if (choices.length === 0) return { mode: { ...mode, answer: form } }
      const choice = Math.min(
        choices.length - 1,
        Math.max(-1, form.choice + (key.upArrow ? -1 : 1)),
      )
      return { mode: { ...mode, answer: { ...form, choice }, hint: null } }
    }
    if (key.tab) {
      const field = (form.field + (key.shift ? fields - 1 : 1)) % fields
      return { mode: { ...mode, answer: { ...form, field } } }
    }
    if (key.return) {
      const choice = choices[form.choice]?.key
      const answered = form.answers.some((a) => a.trim())
      if (!choice && !answered) {
        return { mode: { ...mode, answer: form, hint: 'Type an answer or pick a choice with ↑↓.' } }
      }
      const body = {
        ...(answered ? { answers: form.answers.map((a) => a.trim()) } : {}),
        ...(choice ? { choice } : {}),
      }
      return {
        mode: { ...mode, answer: form, hint: null },
        action: { type: 'answer', message: waiting, body },
      }
    }
    const answers = form.answers.map((a, i) => (i === form.field ? edit(a, input, key) : a))
    return { mode: { ...mode, answer: { ...form, answers }, hint: null } }
  }

  if (key.escape) {
    if (mode.text) return { mode: { ...mode, text: '', hint: null } }
    return { mode: { ...mode, hint: null }, action: { type: 'picker' } }
  }
  if (key.return) {
    if (!mode.text.trim()) return { mode }
    return { mode: { ...mode, scroll: 0, hint: null }, action: { type: 'send', text: mode.text } }
  }
  return { mode: { ...mode, text: edit(mode.text, input, key), hint: null } }
}

/** After a send landed: the prompt is cleared if it still holds what was sent. */
export function sent(mode: Mode, text: string): Mode {
  return mode.text === text ? { ...mode, text: '' } : mode
}
