// Text PostgreSQL cannot keep: its text and jsonb hold no U+0000, and no half of a surrogate pair.

const unstorableSource = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const everyUnstorable = new RegExp(unstorableSource.source, 'g')

/** Whether `text` holds U+0000 or an unpaired surrogate, which no column can hold. */
export function unstorable(text: string): boolean {
  return unstorableSource.test(text)
}

/** `text` with U+0000 and unpaired surrogates replaced by U+FFFD: the same text wherever it can be stored. */
export function storable(text: string): string {
  return unstorable(text) ? text.replace(everyUnstorable, '\ufffd') : text
}

// In JSON.stringify's text (well-formed: a lone surrogate is always written as its escape, a pair as
// itself), the escapes of U+0000 and of surrogates, each preceded by an even number of backslashes
// (else its backslash is itself escaped, and it is plain text).
const unstorableEscape = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f])/i
const everyUnstorableEscape = /(?<!\\)((?:\\\\)*)\\u(?:0000|d[89a-f][0-9a-f]{2})/gi

/**
 * `value` (what JSON.parse makes) with every string and every key storable: the same value when none
 * needed it, else a copy. Through JSON's text, not a walk: a value thousands of levels deep (a model's
 * tool call may be) would overflow the stack of a walk.
 */
export function storableJson<T>(value: T): T {
  let json: string | undefined
  try {
    json = JSON.stringify(value)
  } catch {
    return value // too deep even for JSON.stringify: as it came, for whoever stores it to refuse
  }
  if (json === undefined || !unstorableEscape.test(json)) return value
  return JSON.parse(json.replace(everyUnstorableEscape, '$1\\ufffd')) as T
}

/**
 * Where to cut `text` to keep its first `max` characters at most: never between the halves of a
 * surrogate pair (an emoji), which would leave half of one that no column holds and a terminal or a
 * mail shows as a box.
 */
export function cutAt(text: string, max: number): number {
  if (text.length <= max) return text.length
  const code = text.charCodeAt(max - 1)
  return code >= 0xd800 && code <= 0xdbff ? max - 1 : max
}

/** `text` in `max` characters at most, the last an ellipsis when it was cut (never inside a pair). */
export function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, cutAt(text, Math.max(0, max - 1)))}…`
}
