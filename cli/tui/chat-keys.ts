import type { ChatMessage } from '../../shared/schemas/chats.js'
import type { ChatDecision, ChatState, PickerEntry } from './chat-state.js'
import { replyStoppable, sentHistory, waitingMessage } from './chat-state.js'
import { editKey, emptyEditor, type Editor } from './editor.js'
import type { KeyPress } from './keys.js'

// What each key does on the chat screen, as a pure function of the mode, the controller's state and the
// key: the screen keeps the mode in React state and carries out the action this answers. The prompt is
// an editor (editor.ts); a waiting tool call takes the keys a, A and d; a waiting question takes ↑↓ and
// the choices' numbers, and its free answer is typed in the prompt.

/** The answer being given to the waiting question: its choice (-1: none yet) and the answers so far. */
export interface AnswerForm {
  gateId: string
  choice: number
  /** Answers to its first questions, when it asks several (the prompt holds the next one's). */
  answers: string[]
}

export interface Mode {
  /** The picker's selected row. */
  index: number
  editor: Editor
  answer: AnswerForm | null
  hint: string | null
}

export const startMode: Mode = { index: 0, editor: emptyEditor, answer: null, hint: null }

export type Action =
  | { type: 'pick'; entry: PickerEntry }
  | { type: 'send'; text: string }
  | { type: 'decide'; message: ChatMessage; decision: ChatDecision }
  | {
      type: 'answer'
      message: ChatMessage
      body: { answers?: string[]; choice?: string }
      text: string
    }
  | { type: 'external' }
  | { type: 'newTask' }
  | { type: 'picker' }
  /** Stop the member's reply being written (POST /v1/chats/{id}/reply/stop; issue 51). */
  | { type: 'stop' }
  | { type: 'quit' }

export interface KeyResult {
  mode: Mode
  action?: Action
}

/** Why a must-gate tool is offered allow and deny only (the chief executive's list wins). */
export const mustGateReason = 'on the must-gate list of its connection: decided each time'

/** The form for a question: the one being filled for it, or a fresh one. */
export function formFor(message: ChatMessage, held: AnswerForm | null): AnswerForm {
  const gateId = message.question!.gateId
  return held?.gateId === gateId ? held : { gateId, choice: -1, answers: [] }
}

const is = (key: KeyPress, name: string) => key.name === name && !key.ctrl && !key.meta

function onToolCall(mode: Mode, key: KeyPress, message: ChatMessage, state: ChatState): KeyResult {
  const call = message.toolCall!
  const decision =
    key.name === 'text' && !key.ctrl && !key.meta ? decisionKeys[key.text] : undefined
  if (decision === 'always' && call.mustGate)
    return { mode: { ...mode, hint: `${call.name} is ${mustGateReason}: a allow · d deny.` } }
  if (decision && !state.sending)
    return { mode: { ...mode, hint: null }, action: { type: 'decide', message, decision } }
  if (key.name === 'text' || key.name === 'paste' || is(key, 'return')) {
    const keys = call.mustGate ? 'a allow · d deny' : 'a allow · A always · d deny'
    return { mode: { ...mode, hint: `The member waits on this tool call: ${keys}.` } }
  }
  return { mode }
}

const decisionKeys: Record<string, ChatDecision> = { a: 'allow', A: 'always', d: 'deny' }

function onQuestion(mode: Mode, key: KeyPress, message: ChatMessage): KeyResult {
  const question = message.question!
  const form = formFor(message, mode.answer)
  const choices = question.choices
  const text = mode.editor.text
  const asked = Math.max(1, question.questions.length)
  if ((is(key, 'up') || is(key, 'down')) && choices.length > 0) {
    const choice = Math.min(
      choices.length - 1,
      Math.max(-1, form.choice + (is(key, 'up') ? -1 : 1)),
    )
    return { mode: { ...mode, answer: { ...form, choice }, hint: null } }
  }
  if (key.name === 'text' && !key.ctrl && !key.meta && !text && /^[1-9]$/.test(key.text)) {
    const choice = Number(key.text) - 1
    if (choice < choices.length)
      return { mode: { ...mode, answer: { ...form, choice }, hint: null } }
  }
  if (is(key, 'return') && !key.shift) {
    const typed = text.trim()
    const choice = choices[form.choice]?.key
    if (!typed && !choice)
      return {
        mode: {
          ...mode,
          answer: form,
          hint: choices.length
            ? 'Type an answer, or pick a choice with ↑↓ or its number, then Enter.'
            : 'Type an answer, then Enter.',
        },
      }
    const answers = typed ? [...form.answers, typed] : form.answers
    // Several questions: each Enter answers the next one, the last sends them all.
    if (typed && answers.length < asked)
      return { mode: { ...mode, editor: emptyEditor, answer: { ...form, answers }, hint: null } }
    const body = { ...(answers.length ? { answers } : {}), ...(choice ? { choice } : {}) }
    return {
      mode: { ...mode, editor: emptyEditor, answer: form, hint: null },
      action: { type: 'answer', message, body, text },
    }
  }
  if (is(key, 'escape')) {
    if (form.choice >= 0) return { mode: { ...mode, answer: { ...form, choice: -1 } } }
    if (text) return { mode: { ...mode, editor: emptyEditor } }
    return { mode: { ...mode, answer: null, hint: null }, action: { type: 'picker' } }
  }
  const edited = editKey(mode.editor, key)
  if (edited.external) return { mode: { ...mode, answer: form }, action: { type: 'external' } }
  return { mode: { ...mode, answer: form, editor: edited.editor, hint: null } }
}

/** Handles one key. */
export function onKey(mode: Mode, key: KeyPress, state: ChatState): KeyResult {
  const draft = mode.editor.text
  if (key.ctrl && key.name === 'c') {
    // Ctrl+C clears a draft; with none it quits (as a shell's prompt does).
    if (state.view === 'chat' && draft)
      return { mode: { ...mode, editor: emptyEditor, hint: null } }
    return { mode, action: { type: 'quit' } }
  }
  if (key.ctrl && key.name === 'd' && !draft) return { mode, action: { type: 'quit' } }
  if (key.ctrl && key.name === 'n')
    return { mode: { ...mode, hint: null }, action: { type: 'newTask' } }

  if (state.view === 'picker') {
    const last = state.entries.length - 1
    const typed = key.name === 'text' ? key.text : ''
    if (is(key, 'escape') || typed === 'q') return { mode, action: { type: 'quit' } }
    if (is(key, 'up') || typed === 'k')
      return { mode: { ...mode, index: Math.max(0, mode.index - 1) } }
    if (is(key, 'down') || typed === 'j')
      return { mode: { ...mode, index: Math.max(0, Math.min(last, mode.index + 1)) } }
    const entry = state.entries[Math.min(mode.index, last)]
    if (is(key, 'return') && entry)
      return { mode: { ...startMode }, action: { type: 'pick', entry } }
    return { mode }
  }

  const waiting = waitingMessage(state)
  if (waiting?.toolCall) {
    if (is(key, 'escape')) return { mode: { ...mode, hint: null }, action: { type: 'picker' } }
    return onToolCall(mode, key, waiting, state)
  }
  if (waiting?.question) return onQuestion(mode, key, waiting)

  if (is(key, 'escape')) {
    // While a reply is written, Esc stops it (issue 51): the draft and the queued messages stay, and
    // the queue goes once the reply has ended, as after any reply. A stop on its way takes no second.
    if (replyStoppable(state))
      return state.stopping ? { mode } : { mode: { ...mode, hint: null }, action: { type: 'stop' } }
    if (draft) return { mode: { ...mode, editor: emptyEditor, hint: null } }
    return { mode: { ...mode, hint: null }, action: { type: 'picker' } }
  }
  if (state.chat?.status === 'closed') {
    if (key.name === 'text' || key.name === 'paste' || is(key, 'return'))
      return {
        mode: {
          ...mode,
          hint: 'This chat is closed: Esc picks another, Ctrl+N starts a create-task chat.',
        },
      }
    return { mode }
  }
  const edited = editKey(mode.editor, key, sentHistory(state.messages))
  const next = { ...mode, editor: edited.editor, hint: edited.handled ? null : mode.hint }
  if (edited.external) return { mode: next, action: { type: 'external' } }
  if (edited.send) {
    if (!draft.trim()) return { mode: next }
    return { mode: next, action: { type: 'send', text: draft } }
  }
  return { mode: next }
}
