import { Box } from 'ink'
import type { ReactNode } from 'react'
import { cursorPlace, type Editor } from './editor.js'
import { Text } from './text.js'

// The prompt: the editor's text, line by line, with the cursor as an inverse cell. A long draft (a
// pasted page) shows the lines around the cursor, with a count of those above and below.

/** The lines shown of `total` so the cursor's line is among them: at most `rows`. */
export function window(total: number, cursorLine: number, rows: number): [number, number] {
  if (rows <= 0 || total <= rows) return [0, total]
  const first = Math.min(Math.max(0, cursorLine - rows + 1), total - rows)
  return [first, first + rows]
}

function Line(props: { text: string; column: number | null }): ReactNode {
  const { text, column } = props
  if (column === null) return <Text>{text || ' '}</Text>
  const chars = Array.from(text)
  const at = chars[column]
  return (
    <Text>
      {chars.slice(0, column).join('')}
      <Text inverse>{at ?? ' '}</Text>
      {chars.slice(column + 1).join('')}
    </Text>
  )
}

export function Prompt(props: {
  editor: Editor
  /** Shown dim when there is no text. */
  placeholder: string
  /** Lines of text the prompt may take; 0 for no limit. */
  rows: number
  active: boolean
  color?: 'cyan' | 'magenta'
}): ReactNode {
  const { editor, rows, active } = props
  const lines = editor.text.split('\n')
  const { line, column } = cursorPlace(editor)
  const [first, end] = window(lines.length, line, rows)
  return (
    <Box
      flexDirection="column"
      borderStyle="round"
      borderColor={active ? (props.color ?? 'cyan') : 'gray'}
      paddingX={1}
    >
      {first > 0 && <Text dimColor>{`↑ ${first} more line${first === 1 ? '' : 's'}`}</Text>}
      {editor.text === '' ? (
        <Box>
          <Text color={props.color ?? 'cyan'}>› </Text>
          {active && <Text inverse> </Text>}
          <Text dimColor>{props.placeholder}</Text>
        </Box>
      ) : (
        lines.slice(first, end).map((text, i) => (
          <Box key={first + i}>
            <Text color={props.color ?? 'cyan'}>{first + i === 0 ? '› ' : '  '}</Text>
            <Line text={text} column={active && first + i === line ? column : null} />
          </Box>
        ))
      )}
      {end < lines.length && (
        <Text
          dimColor
        >{`↓ ${lines.length - end} more line${lines.length - end === 1 ? '' : 's'}`}</Text>
      )}
    </Box>
  )
}

/** Rows the prompt takes: its lines (at most `rows`), the more-lines marks and the border. */
export function promptRows(editor: Editor, rows: number): number {
  const total = editor.text.split('\n').length
  const shown = rows > 0 ? Math.min(total, rows) : total
  return shown + (total > shown ? 2 : 0) + 2
}
