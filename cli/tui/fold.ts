// Long things folded on the chat screen: a tool call's arguments, a task proposal and a result are
// shown as pretty JSON (or their text) up to a number of lines, with a mark saying how many more
// there are. `osctl chats get` and `osctl chats export` print them whole.

/** A value as pretty JSON lines (two spaces, as the gate screen and --json print). */
export function jsonLines(value: unknown): string[] {
  return (JSON.stringify(value ?? null, null, 2) ?? 'null').split('\n')
}

/** A tool's result as lines: pretty JSON when it is JSON (an object or an array), else its text. */
export function resultLines(result: string): string[] {
  const text = result.trimEnd()
  if (/^\s*[[{]/.test(text)) {
    try {
      return jsonLines(JSON.parse(text))
    } catch {
      // not JSON after all: its text
    }
  }
  return text.split('\n')
}

/** "… 3 more lines" */
export function moreLines(count: number): string {
  return `… ${count} more line${count === 1 ? '' : 's'}`
}

/**
 * At most `max` lines: the first ones and, when some are left out, a last line saying how many
 * (so the folded text never takes more than `max` lines).
 */
export function fold(lines: readonly string[], max: number): string[] {
  const room = Math.max(2, Math.floor(max))
  if (lines.length <= room) return [...lines]
  return [...lines.slice(0, room - 1), moreLines(lines.length - (room - 1))]
}
