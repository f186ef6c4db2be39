import { expect } from 'vitest'

// Server text written to attack the terminal of whoever reads it with osctl (issue 41): ESC[2J clears
// the screen, OSC 52 (ESC ] 52 ; c ; BASE64 BEL) writes "hello" to the clipboard, CSI as the one C1
// byte U+009B starts a sequence of its own (31m: red), and U+202E (right-to-left override) turns
// what follows around, so "gnp.exe" reads as "exe.png".

export const hostile = 'Ops\x1b[2J\x1b]52;c;aGVsbG8=\x07\x9b31m\u202egnp.exe'

/** `hostile` as osctl shows it: each control character its escape. */
export const hostileShown = 'Ops\\u001b[2J\\u001b]52;c;aGVsbG8=\\u0007\\u009b31m\\u202egnp.exe'

/**
 * A character a terminal acts on: C0 but line feed and tab, DEL, C1, the bidi embeddings, overrides
 * and isolates.
 */
const acted = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/** The first character of `text` a terminal would act on, with where it is, or null. */
export function firstRawControl(text: string): string | null {
  const at = text.search(acted)
  if (at < 0) return null
  const code = text.charCodeAt(at).toString(16).padStart(4, '0')
  return `U+${code} at ${at}: ${JSON.stringify(text.slice(Math.max(0, at - 30), at + 10))}`
}

/** What a person reads holds no control character but line breaks and tabs. */
export function expectNoRawControls(text: string, what = 'the output'): void {
  expect(firstRawControl(text), `${what} holds a raw control character`).toBeNull()
}
