// The keys of a screen, read from the terminal's own bytes. Ink splits what stdin brings into escape
// sequences and runs of text (its input parser), but its useInput drops what a prompt editor needs:
// Alt+Enter and Shift+Enter (CSI u, xterm's modifyOtherKeys) read as a plain Enter, Alt+Backspace as
// Backspace, and a bracketed paste comes as three unrelated inputs. So the chat screen takes ink's
// parsed inputs and names the keys itself here. No ink, no React: a pure function and a small reader.

/** One key as the screen acts on it. */
export interface KeyPress {
  /**
   * `text` (printable characters typed, `text` holds them), `paste` (a whole paste, line ends as
   * \n), `return`, `backspace`, `delete`, `tab`, `escape`, `up`, `down`, `left`, `right`, `home`,
   * `end`, `pageup`, `pagedown`, `insert`, or a letter pressed with Ctrl or Alt (`w` with ctrl).
   */
  name: string
  text: string
  ctrl: boolean
  /** Alt (Meta, Option). */
  meta: boolean
  shift: boolean
}

/** Bracketed paste (xterm): the terminal wraps a paste in these once the screen asks for it. */
export const pasteStart = '\x1b[200~'
export const pasteEnd = '\x1b[201~'
export const bracketedPasteOn = '\x1b[?2004h'
export const bracketedPasteOff = '\x1b[?2004l'

const key = (name: string, mods: Partial<KeyPress> = {}): KeyPress => ({
  name,
  text: '',
  ctrl: false,
  meta: false,
  shift: false,
  ...mods,
})

/** The xterm modifier parameter (1 + shift 1, alt 2, ctrl 4, meta 8) as flags. */
function modifiers(param: string | undefined): Pick<KeyPress, 'ctrl' | 'meta' | 'shift'> {
  const bits = Math.max(0, (Number(param) || 1) - 1)
  return {
    shift: (bits & 1) !== 0,
    meta: (bits & 2) !== 0 || (bits & 8) !== 0,
    ctrl: (bits & 4) !== 0,
  }
}

const csiLetters: Record<string, string> = {
  A: 'up',
  B: 'down',
  C: 'right',
  D: 'left',
  H: 'home',
  F: 'end',
}

const tildeKeys: Record<string, string> = {
  '1': 'home',
  '2': 'insert',
  '3': 'delete',
  '4': 'end',
  '5': 'pageup',
  '6': 'pagedown',
  '7': 'home',
  '8': 'end',
}

/** A key given by its Unicode code point (CSI u, modifyOtherKeys), with its modifiers. */
function codeKey(code: number, mods: Pick<KeyPress, 'ctrl' | 'meta' | 'shift'>): KeyPress {
  if (code === 13) return key('return', mods)
  if (code === 9) return key('tab', mods)
  if (code === 27) return key('escape', mods)
  if (code === 127 || code === 8) return key('backspace', mods)
  const char = String.fromCodePoint(code)
  if (mods.ctrl || mods.meta) return key(char.toLowerCase(), mods)
  return key('text', { ...mods, text: char })
}

/** A CSI sequence (`ESC [ params final`), or null when it names no key the screens know. */
function csiKey(body: string): KeyPress | null {
  const final = body.at(-1)!
  const params = body.slice(0, -1).replace(/^\[/, '').split(';')
  if (final in csiLetters) return key(csiLetters[final]!, modifiers(params[1]))
  if (final === 'Z') return key('tab', { shift: true })
  if (final === 'u') return codeKey(Number(params[0]), modifiers(params[1]))
  if (final === '~') {
    // xterm's modifyOtherKeys: ESC [ 27 ; mods ; code ~ (Shift+Enter is ESC [ 27 ; 2 ; 13 ~).
    if (params[0] === '27' && params[2]) return codeKey(Number(params[2]), modifiers(params[1]))
    const name = tildeKeys[params[0] ?? '']
    return name ? key(name, modifiers(params[1])) : null
  }
  return null
}

/** One character typed with nothing else: a control character names its key, others are text. */
function charKey(char: string): KeyPress {
  if (char === '\r') return key('return')
  if (char === '\n') return key('j', { ctrl: true }) // Ctrl+J: a new line in the prompt
  if (char === '\t') return key('tab')
  if (char === '\x7f' || char === '\b') return key('backspace')
  if (char === '\x1b') return key('escape')
  const code = char.codePointAt(0)!
  if (code === 0) return key('space', { ctrl: true })
  if (code < 27) return key(String.fromCharCode(code + 96), { ctrl: true })
  if (code < 32) return key(String.fromCharCode(code + 64).toLowerCase(), { ctrl: true })
  return key('text', { text: char })
}

/**
 * The keys one of ink's parsed inputs holds: an escape sequence is one key; a run of characters is a
 * key per control character and one `text` key per stretch of printable ones ("hi\r" is text, Enter).
 */
export function decodeInput(input: string): KeyPress[] {
  if (input.startsWith('\x1b') && input.length > 1) {
    const rest = input.slice(1)
    if (rest.startsWith('[')) {
      const k = csiKey(rest.slice(1))
      return k ? [k] : []
    }
    if (rest.startsWith('O') && rest.length === 2) {
      const name = csiLetters[rest[1]!]
      return name ? [key(name)] : []
    }
    // Alt with a key: ESC then the key (Alt+Enter is ESC CR, Alt+Backspace ESC DEL, Alt+b ESC b),
    // or ESC before a whole sequence (ESC ESC [ D: Alt+Left on some terminals).
    const inner = rest.startsWith('\x1b') ? decodeInput(rest) : decodeInput(rest).slice(0, 1)
    return inner.map((k) =>
      k.name === 'text'
        ? key(k.text.toLowerCase(), { meta: true, shift: k.text !== k.text.toLowerCase() })
        : { ...k, meta: true },
    )
  }
  const keys: KeyPress[] = []
  let text = ''
  for (const char of input) {
    const k = charKey(char)
    if (k.name === 'text') {
      text += k.text
      continue
    }
    if (text) keys.push(key('text', { text }))
    text = ''
    keys.push(k)
  }
  if (text) keys.push(key('text', { text }))
  return keys
}

/** Line ends of a paste as the prompt keeps them: \n only. */
export function pastedText(raw: string): string {
  return raw.replace(/\r\n?/g, '\n')
}

/**
 * Reads ink's inputs one after another into keys, holding a bracketed paste together: everything
 * between the start and end marks is one `paste` key, line ends and all, so a paste never sends.
 * A terminal that does not bracket pastes hands a paste over as one run of text with line ends in
 * it; such a run (text, a line end, more text) is taken as a paste too.
 */
export class KeyReader {
  private pasting: string | null = null

  read(input: string): KeyPress[] {
    if (this.pasting !== null) {
      const end = input.indexOf(pasteEnd)
      if (end === -1) {
        this.pasting += input
        return []
      }
      const text = pastedText(this.pasting + input.slice(0, end))
      this.pasting = null
      const after = input.slice(end + pasteEnd.length)
      return [key('paste', { text }), ...(after ? this.read(after) : [])]
    }
    const start = input.indexOf(pasteStart)
    if (start !== -1) {
      const before = start > 0 ? this.read(input.slice(0, start)) : []
      this.pasting = ''
      return [...before, ...this.read(input.slice(start + pasteStart.length))]
    }
    if (/[^\r\n]/.test(input) && /[\r\n][^\r\n]/.test(input) && !input.startsWith('\x1b'))
      return [key('paste', { text: pastedText(input) })]
    return decodeInput(input)
  }

  /**
   * Reads what was typed before the screen took the terminal (osctl still starting): the terminal was
   * cooked then, and turned each Enter into a line feed, which a raw terminal sends for Ctrl+J. So a
   * line feed here is Enter: a message typed and sent while osctl starts is sent, not left in the
   * prompt with a new line after it. Several lines typed ahead read as a paste, as ever.
   */
  readTypeahead(input: string): KeyPress[] {
    return this.read(input.replace(/\n/g, '\r'))
  }

  /** Whether a paste has started and not ended (its text is held until it does). */
  get inPaste(): boolean {
    return this.pasting !== null
  }
}
