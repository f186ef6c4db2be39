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
