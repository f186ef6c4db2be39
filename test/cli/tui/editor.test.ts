import { describe, expect, it } from 'vitest'
import {
  afterSend,
  cursorPlace,
  editKey,
  emptyEditor,
  withText,
  type Editor,
} from '../../../cli/tui/editor.js'
import { decodeInput, KeyReader, type KeyPress } from '../../../cli/tui/keys.js'
import { editExternally, editorCommand } from '../../../cli/tui/external-editor.js'

// The chat prompt's editor and the keys it reads, as pure functions: each key as the terminal sends
// its bytes (what ink's input parser hands over), through the reader, into the editor.

/** The editor after typing `inputs` (each one input as ink hands it over) from `start`. */
function type(start: Editor, inputs: string[], history: string[] = []) {
  const reader = new KeyReader()
  let editor = start
  const asked: string[] = []
  for (const input of inputs) {
    for (const key of reader.read(input)) {
      const result = editKey(editor, key, history)
      editor = result.editor
      if (result.send) asked.push(`send:${editor.text}`)
      if (result.external) asked.push('external')
      if (!result.handled) asked.push(`unhandled:${key.name}`)
    }
  }
  return { editor, asked }
}

/** The text with the cursor drawn as a bar, for a readable expectation. */
const shown = (e: Editor) => e.text.slice(0, e.cursor) + '|' + e.text.slice(e.cursor)
const at = (text: string): Editor => {
  const cursor = text.indexOf('|')
  return { ...emptyEditor, text: text.replace('|', ''), cursor }
}

const left = '\x1b[D'
const right = '\x1b[C'
const up = '\x1b[A'
const down = '\x1b[B'

describe('decodeInput', () => {
  const named = (input: string) =>
    decodeInput(input).map(
      (k: KeyPress) =>
        `${k.ctrl ? 'C-' : ''}${k.meta ? 'M-' : ''}${k.shift ? 'S-' : ''}${k.name}${k.text ? `(${k.text})` : ''}`,
    )

  it('names the keys of plain, CSI, SS3, CSI u and modifyOtherKeys sequences', () => {
    expect(named('hi\r')).toEqual(['text(hi)', 'return'])
    expect(named('\x1b\r')).toEqual(['M-return'])
    expect(named('\x1b[13;2u')).toEqual(['S-return'])
    expect(named('\x1b[27;2;13~')).toEqual(['S-return'])
    expect(named('\x1b[13;3u')).toEqual(['M-return'])
    expect(named('\x1b[1;3D')).toEqual(['M-left'])
    expect(named('\x1b[1;5C')).toEqual(['C-right'])
    expect(named('\x1b\x1b[D')).toEqual(['M-left'])
    expect(named('\x1bb')).toEqual(['M-b'])
    expect(named('\x1b\x7f')).toEqual(['M-backspace'])
    expect(named('\x1bOH')).toEqual(['home'])
    expect(named('\x1b[F')).toEqual(['end'])
    expect(named('\x1b[1~')).toEqual(['home'])
    expect(named('\x1b[4~')).toEqual(['end'])
    expect(named('\x1b[3~')).toEqual(['delete'])
    expect(named('\x1b[5~')).toEqual(['pageup'])
    expect(named('\x17')).toEqual(['C-w'])
    expect(named('\x03')).toEqual(['C-c'])
    expect(named('\x07')).toEqual(['C-g'])
    expect(named('\n')).toEqual(['C-j'])
    expect(named('\x7f')).toEqual(['backspace'])
    expect(named('\x1b')).toEqual(['escape'])
    expect(named('\x1b[Z')).toEqual(['S-tab'])
    expect(named('é✓😀')).toEqual(['text(é✓😀)'])
    expect(named('\x1b[999X')).toEqual([])
  })
})

describe('KeyReader', () => {
  it('holds a bracketed paste together, new lines kept, across inputs, and never sends', () => {
    const reader = new KeyReader()
    expect(reader.read('\x1b[200~')).toEqual([])
    expect(reader.inPaste).toBe(true)
    expect(reader.read('first line\r')).toEqual([])
    expect(reader.read('second\r\nthird')).toEqual([])
    const [paste, ...rest] = reader.read('\x1b[201~')
    expect(paste).toMatchObject({ name: 'paste', text: 'first line\nsecond\nthird' })
    expect(rest).toEqual([])
    expect(reader.inPaste).toBe(false)
  })

  it('a paste with escape sequences inside keeps them as text; keys after it are keys', () => {
    const reader = new KeyReader()
    const keys = reader.read('\x1b[200~a\x1b[Db\x1b[201~\r')
    expect(keys.map((k) => [k.name, k.text])).toEqual([
      ['paste', 'a\x1b[Db'],
      ['return', ''],
    ])
  })

  it("reads a line feed typed ahead (a cooked terminal's Enter) as Enter, a raw one as Ctrl+J", () => {
    const reader = new KeyReader()
    expect(reader.readTypeahead('hello\n').map((k) => [k.name, k.text])).toEqual([
      ['text', 'hello'],
      ['return', ''],
    ])
    expect(reader.read('hello\n').map((k) => [k.name, k.ctrl])).toEqual([
      ['text', false],
      ['j', true],
    ])
    // Two lines typed ahead are held as a paste, never sent.
    expect(reader.readTypeahead('one\ntwo\n').map((k) => [k.name, k.text])).toEqual([
      ['paste', 'one\ntwo\n'],
    ])
  })

  it('takes a run of several lines from a terminal that does not bracket pastes as a paste', () => {
    const reader = new KeyReader()
    expect(reader.read('one\rtwo\rthree').map((k) => [k.name, k.text])).toEqual([
      ['paste', 'one\ntwo\nthree'],
    ])
    // Typing fast is not a paste: text, then Enter.
    expect(reader.read('ok\r').map((k) => k.name)).toEqual(['text', 'return'])
  })
})

describe('the prompt editor', () => {
  it('types at the cursor, moves by character, line end and word', () => {
    let { editor } = type(emptyEditor, ['hello world', left, left, left, left, left, 'big '])
    expect(shown(editor)).toBe('hello big |world')
    editor = type(editor, ['\x01']).editor // Ctrl+A
    expect(shown(editor)).toBe('|hello big world')
    editor = type(editor, ['\x1bf', '\x1bf']).editor // Alt+F twice
    expect(shown(editor)).toBe('hello big| world')
    editor = type(editor, ['\x1b[1;3D']).editor // Alt+Left
    expect(shown(editor)).toBe('hello |big world')
    editor = type(editor, ['\x05']).editor // Ctrl+E
    expect(shown(editor)).toBe('hello big world|')
    editor = type(editor, ['\x1b[H', right, '\x1b[F']).editor
    expect(shown(editor)).toBe('hello big world|')
  })

  it('deletes a word with Ctrl+W and Alt+Backspace, to the line ends with Ctrl+U and Ctrl+K', () => {
    expect(shown(type(at('run the tests.sh now|'), ['\x17']).editor)).toBe('run the tests.sh |')
    expect(shown(type(at('run the tests.sh |'), ['\x17']).editor)).toBe('run the |')
    expect(shown(type(at('run the tests.sh|'), ['\x1b\x7f']).editor)).toBe('run the tests.|')
    expect(shown(type(at('one\ntwo th|ree'), ['\x15']).editor)).toBe('one\n|ree')
    expect(shown(type(at('one\ntwo th|ree'), ['\x0b']).editor)).toBe('one\ntwo th|')
    expect(shown(type(at('one|\ntwo'), ['\x0b']).editor)).toBe('one|two')
    expect(shown(type(at('ab|cd'), ['\x7f', '\x1b[3~']).editor)).toBe('a|d')
    expect(shown(type(at('keep |this word'), ['\x1bd']).editor)).toBe('keep | word')
  })

  it('Enter asks to send; Alt+Enter, Shift+Enter, Ctrl+J and a trailing backslash add a line', () => {
    expect(type(emptyEditor, ['hi', '\r']).asked).toEqual(['send:hi'])
    const { editor, asked } = type(emptyEditor, [
      'one',
      '\x1b\r',
      'two',
      '\x1b[13;2u',
      'three',
      '\n',
      'four\\',
      '\r',
      'five',
    ])
    expect(asked).toEqual([])
    expect(editor.text).toBe('one\ntwo\nthree\nfour\nfive')
    expect(cursorPlace(editor)).toEqual({ line: 4, column: 4 })
  })

  it('a pasted paragraph of three lines is inserted whole at the cursor and not sent', () => {
    const { editor, asked } = type(at('Before: | after'), [
      '\x1b[200~',
      'line one\rline two\rline three',
      '\x1b[201~',
    ])
    expect(asked).toEqual([])
    expect(shown(editor)).toBe('Before: line one\nline two\nline three| after')
  })

  it('Up and Down move between lines, keeping the column', () => {
    let editor = at('first line\nsecond|\nthird line')
    editor = type(editor, [up]).editor
    expect(shown(editor)).toBe('first |line\nsecond\nthird line')
    editor = type(editor, [down, down]).editor
    expect(shown(editor)).toBe('first line\nsecond\nthird |line')
    editor = type(at('a long first line\nab|'), [up]).editor
    expect(shown(editor)).toBe('a |long first line\nab')
    editor = type(at('ab\na long |line'), [up]).editor
    expect(shown(editor)).toBe('ab|\na long line')
  })

  it('Up on the first line walks back the messages sent; Down walks forward to the draft', () => {
    const history = ['first sent', 'second\nsent']
    let editor = at('draft|')
    editor = type(editor, [up], history).editor
    expect(shown(editor)).toBe('second\nsent|')
    editor = type(editor, [up], history).editor // the cursor is on the last line: up a line first
    expect(shown(editor)).toBe('seco|nd\nsent')
    editor = type(editor, [up, up, up], history).editor
    expect(shown(editor)).toBe('first sent|')
    editor = type(editor, [down], history).editor
    expect(shown(editor)).toBe('second\nsent|')
    editor = type(editor, [down], history).editor
    expect(shown(editor)).toBe('draft|')
    expect(editor.recalled).toBeNull()
    expect(type(at('x|'), [up], []).editor.text).toBe('x')
  })

  it('Ctrl+G asks for $EDITOR; keys it does not know come back unhandled', () => {
    expect(type(at('x|'), ['\x07']).asked).toEqual(['external'])
    expect(type(at('x|'), ['\x1b[5~', '\x03']).asked).toEqual(['unhandled:pageup', 'unhandled:c'])
  })

  it('moves over a character outside the basic plane as one', () => {
    const editor = type(at('a😀|b'), [left]).editor
    expect(shown(editor)).toBe('a|😀b')
    expect(shown(type(at('a😀|b'), ['\x7f']).editor)).toBe('a|b')
  })

  it('after a send the prompt empties, unless it changed meanwhile', () => {
    expect(afterSend(withText(emptyEditor, 'hi'), 'hi')).toEqual(emptyEditor)
    expect(afterSend(withText(emptyEditor, 'hi more'), 'hi').text).toBe('hi more')
  })
})

describe('editExternally (Ctrl+G)', () => {
  it('hands the draft to $VISUAL and reads back what it left', () => {
    // An "editor" that appends a line, as a person would; VISUAL wins over EDITOR.
    const run = editExternally('Draft line', {
      ...process.env,
      VISUAL: `sh -c 'printf "\\nsecond line\\n" >> "$0"'`,
      EDITOR: 'false',
    })
    expect(run).toEqual({ text: 'Draft line\nsecond line' })
  })

  it('keeps the draft and says why when the editor fails', () => {
    const run = editExternally('Draft', { ...process.env, VISUAL: '', EDITOR: 'false' })
    expect(run.text).toBeNull()
    expect(run.error).toBe('false exited with 1')
    expect(editorCommand({})).toBe('vi')
  })
})
