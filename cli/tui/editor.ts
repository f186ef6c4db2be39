import type { KeyPress } from './keys.js'

// The chat screen's prompt as a small text editor: text of one or more lines and a cursor in it, the
// keys of a shell's line editor (readline's Ctrl and Alt keys), new lines with Alt+Enter, and a walk
// through the messages sent before with Up on the first line and Down on the last. Pure functions of
// the state and a key; the screen draws the result (chat-prompt.tsx).

export interface Editor {
  text: string
  /** Where the cursor is: an index into `text`, always between two code points. */
  cursor: number
  /** Which sent message Up has brought back (an index into the history); null while on the draft. */
  recalled: number | null
  /** The draft as it was before Up first brought back a sent message, for Down to return to. */
  stash: string
}

export const emptyEditor: Editor = { text: '', cursor: 0, recalled: null, stash: '' }

/** What a key did: a new state, and whether it asks to send the text or to edit it in $EDITOR. */
export interface EditResult {
  editor: Editor
  /** The key is one the editor knows (a screen may act on the others). */
  handled: boolean
  send?: boolean
  external?: boolean
}

const isWordChar = (char: string) => /[\p{L}\p{N}_]/u.test(char)

/** The index of the code point before `at` (0 at the start). */
function before(text: string, at: number): number {
  if (at <= 0) return 0
  const low = text.charCodeAt(at - 1)
  return at >= 2 && low >= 0xdc00 && low <= 0xdfff ? at - 2 : at - 1
}

/** The index after the code point at `at` (the end at the end). */
function after(text: string, at: number): number {
  if (at >= text.length) return text.length
  const high = text.charCodeAt(at)
  return high >= 0xd800 && high <= 0xdbff && at + 1 < text.length ? at + 2 : at + 1
}

export function lineStart(text: string, at: number): number {
  return text.lastIndexOf('\n', at - 1) + 1
}

export function lineEnd(text: string, at: number): number {
  const end = text.indexOf('\n', at)
  return end === -1 ? text.length : end
}

/** The start of the word before the cursor (spaces first, then the word), as Alt+B moves. */
export function wordLeft(text: string, at: number): number {
  let i = at
  while (i > 0 && !isWordChar(text.slice(before(text, i), i))) i = before(text, i)
  while (i > 0 && isWordChar(text.slice(before(text, i), i))) i = before(text, i)
  return i
}

/** The end of the word after the cursor, as Alt+F moves. */
export function wordRight(text: string, at: number): number {
  let i = at
  while (i < text.length && !isWordChar(text.slice(i, after(text, i)))) i = after(text, i)
  while (i < text.length && isWordChar(text.slice(i, after(text, i)))) i = after(text, i)
  return i
}

/** Where Ctrl+W deletes back to: the spaces before the cursor, then what is not a space (readline). */
export function spaceWordLeft(text: string, at: number): number {
  let i = at
  while (i > 0 && /\s/.test(text[i - 1]!)) i--
  while (i > 0 && !/\s/.test(text[i - 1]!)) i--
  return i
}

/** The line and the column (in code points) the cursor is on, both from 0. */
export function cursorPlace(editor: Pick<Editor, 'text' | 'cursor'>): {
  line: number
  column: number
} {
  const head = editor.text.slice(0, editor.cursor)
  const line = head.split('\n').length - 1
  const column = Array.from(head.slice(head.lastIndexOf('\n') + 1)).length
  return { line, column }
}

/** The index of `column` (in code points) on the line starting at `start`, or the line's end. */
function atColumn(text: string, start: number, column: number): number {
  const end = lineEnd(text, start)
  let i = start
  for (let c = 0; c < column && i < end; c++) i = after(text, i)
  return i
}

function replace(editor: Editor, from: number, to: number, insert: string): Editor {
  const text = editor.text.slice(0, from) + insert + editor.text.slice(to)
  return { ...editor, text, cursor: from + insert.length }
}

const at = (editor: Editor, cursor: number): Editor => ({ ...editor, cursor })

/** The editor holding `text` with the cursor at its end (a sent message brought back, $EDITOR's text). */
export function withText(editor: Editor, text: string): Editor {
  return { ...editor, text, cursor: text.length }
}

/** Inserts text at the cursor (typed, or pasted: new lines kept, tabs as spaces). */
export function insert(editor: Editor, text: string): Editor {
  const clean = text
    .replace(/\r\n?/g, '\n')
    .replace(/\t/g, '  ')
    .replace(/[\x00-\x09\x0b-\x1f\x7f]/g, '')
  return clean ? replace(editor, editor.cursor, editor.cursor, clean) : editor
}

/**
 * Up on the first line: the sent message before the one shown (the newest first). `history` is the
 * messages sent in this chat, oldest first.
 */
function recallOlder(editor: Editor, history: readonly string[]): Editor {
  if (history.length === 0) return editor
  const index = editor.recalled === null ? history.length - 1 : Math.max(0, editor.recalled - 1)
  const stash = editor.recalled === null ? editor.text : editor.stash
  return { ...withText(editor, history[index]!), recalled: index, stash }
}

/** Down on the last line: the next sent message, or past the newest the draft Up left. */
function recallNewer(editor: Editor, history: readonly string[]): Editor {
  if (editor.recalled === null) return at(editor, editor.text.length)
  const index = editor.recalled + 1
  if (index >= history.length)
    return { ...withText(editor, editor.stash), recalled: null, stash: '' }
  return { ...withText(editor, history[index]!), recalled: index }
}

function vertical(editor: Editor, delta: -1 | 1, history: readonly string[]): Editor {
  const { text, cursor } = editor
  const start = lineStart(text, cursor)
  const { column } = cursorPlace(editor)
  if (delta < 0) {
    if (start === 0) return recallOlder(editor, history)
    return at(editor, atColumn(text, lineStart(text, start - 1), column))
  }
  const end = lineEnd(text, cursor)
  if (end === text.length) return recallNewer(editor, history)
  return at(editor, atColumn(text, end + 1, column))
}

/**
 * Handles one key. Enter asks to send (a line ending in a backslash takes Enter as a new line, for
 * terminals without Alt+Enter); Alt+Enter, Shift+Enter and Ctrl+J add a new line; Ctrl+G asks for
 * $EDITOR. Keys the editor does not know come back unhandled.
 */
export function editKey(
  editor: Editor,
  key: KeyPress,
  history: readonly string[] = [],
): EditResult {
  const { text, cursor } = editor
  const done = (next: Editor): EditResult => ({ editor: next, handled: true })
  const { name, ctrl, meta } = key

  if (name === 'paste') return done(insert(editor, key.text))
  if (name === 'text' && !ctrl && !meta) return done(insert(editor, key.text))
  if (name === 'return' || (ctrl && name === 'j')) {
    if (meta || key.shift || ctrl) return done(insert(editor, '\n'))
    if (text[cursor - 1] === '\\' && cursor === lineEnd(text, cursor))
      return done(replace(editor, cursor - 1, cursor, '\n'))
    return { editor, handled: true, send: true }
  }
  if (ctrl && name === 'g') return { editor, handled: true, external: true }

  // Moving.
  if (name === 'left' && (meta || ctrl)) return done(at(editor, wordLeft(text, cursor)))
  if (name === 'right' && (meta || ctrl)) return done(at(editor, wordRight(text, cursor)))
  if (name === 'left' || (ctrl && name === 'b')) return done(at(editor, before(text, cursor)))
  if (name === 'right' || (ctrl && name === 'f')) return done(at(editor, after(text, cursor)))
  if (meta && name === 'b') return done(at(editor, wordLeft(text, cursor)))
  if (meta && name === 'f') return done(at(editor, wordRight(text, cursor)))
  if (name === 'home' || (ctrl && name === 'a')) return done(at(editor, lineStart(text, cursor)))
  if (name === 'end' || (ctrl && name === 'e')) return done(at(editor, lineEnd(text, cursor)))
  if (name === 'up') return done(vertical(editor, -1, history))
  if (name === 'down') return done(vertical(editor, 1, history))

  // Deleting.
  if (name === 'backspace' && (meta || ctrl))
    return done(replace(editor, wordLeft(text, cursor), cursor, ''))
  if (ctrl && name === 'w') return done(replace(editor, spaceWordLeft(text, cursor), cursor, ''))
  if (name === 'backspace' || (ctrl && name === 'h'))
    return done(replace(editor, before(text, cursor), cursor, ''))
  if (meta && name === 'd') return done(replace(editor, cursor, wordRight(text, cursor), ''))
  if (name === 'delete' || (ctrl && name === 'd'))
    return done(replace(editor, cursor, after(text, cursor), ''))
  if (ctrl && name === 'u') return done(replace(editor, lineStart(text, cursor), cursor, ''))
  if (ctrl && name === 'k') {
    // At a line's end Ctrl+K joins the next line to it (Emacs, readline).
    const end = lineEnd(text, cursor)
    return done(replace(editor, cursor, end === cursor ? after(text, end) : end, ''))
  }
  return { editor, handled: false }
}

/** After a send landed: the prompt empties if it still holds what was sent, and the walk restarts. */
export function afterSend(editor: Editor, sent: string): Editor {
  return editor.text === sent ? emptyEditor : { ...editor, recalled: null, stash: '' }
}
