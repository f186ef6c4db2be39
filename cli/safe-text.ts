// What osctl shows a person of the server's text (issue 41). A terminal acts on control characters
// rather than showing them: ESC[2J clears the screen, OSC 52 writes the clipboard, CSI (U+009B) starts
// a sequence on its own, a lone carriage return writes over the line. And the bidi overrides and
// isolates reorder what is shown (Trojan Source, CVE-2021-42574), so "approve" may read as another
// word. A team's name, a gate's summary or a member's reply is the server's (or a model's) text: every
// human-readable output shows such characters as escapes and never passes one through. --json stays
// the API's JSON.
//
// The escapes are those of a JSON (and JavaScript) string: \n, \r, \t, else \uXXXX. So JSON text shown
// through here (`osctl api`, a gate's arguments) is still JSON, of the same value. A backslash is left
// as it is: text that spells "\u001b" reads the same as an escaped ESC, and both are harmless.

/** C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F), the bidi embeddings, overrides and isolates. */
const unsafe = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/
const unsafeAll = new RegExp(unsafe.source, 'g')
const named: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' }

function escaped(char: string): string {
  return named[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`
}

export interface SafeTextOptions {
  /**
   * Free text (instructions, a message, a summary, a note): line breaks and tabs stay as they are
   * (a Windows line break becomes a line break). Otherwise they are escaped too.
   */
  multiline?: boolean
}

/** `text` with every character a terminal would act on written as its escape. */
export function safeText(text: string, options: SafeTextOptions = {}): string {
  if (!unsafe.test(text)) return text
  if (!options.multiline) return text.replace(unsafeAll, escaped)
  return text
    .replace(/\r\n/g, '\n')
    .replace(unsafeAll, (char) => (char === '\n' || char === '\t' ? char : escaped(char)))
}

/**
 * What osctl writes for a person, as the last thing before the stream: safeText (line breaks and tabs
 * kept) over all but `own`, the sequences osctl itself writes (its colours, the spinner's clearing of
 * its line), which pass whole. The commands escape the server's text where they format it, so that
 * widths are counted on what is shown; this is what holds if one of them did not.
 */
export function safeOutput(text: string, own: readonly string[] = []): string {
  if (!unsafe.test(text)) return text
  if (own.length === 0) return safeText(text, { multiline: true })
  const sequences = new RegExp(
    own.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'),
    'g',
  )
  let shown = ''
  let at = 0
  for (const match of text.matchAll(sequences)) {
    shown += safeText(text.slice(at, match.index), { multiline: true }) + match[0]
    at = match.index + match[0].length
  }
  return shown + safeText(text.slice(at), { multiline: true })
}
