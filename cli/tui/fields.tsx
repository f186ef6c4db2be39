import { Box } from 'ink'
import type { ReactNode } from 'react'
import { Text } from './text.js'

// Pieces both ink screens draw when a person answers a question: a text field, the choices to pick
// from, and a field per question.

/** A line of text being typed; the active one shows a cursor. */
export function Field(props: { active: boolean; text: string; prefix?: string }): ReactNode {
  return (
    <Text>
      <Text color="cyan">{props.active ? (props.prefix ?? '› ') : '  '}</Text>
      {props.text}
      {props.active ? <Text inverse> </Text> : ''}
    </Text>
  )
}

/** "no choice" and each choice; `choice` is the index picked, -1 for none. */
export function ChoiceList(props: {
  choices: readonly { key: string; label: string }[]
  choice: number
}): ReactNode {
  const { choice } = props
  return ['no choice', ...props.choices.map((c) => `${c.label} (${c.key})`)].map((label, row) => (
    <Text key={row} color={row - 1 === choice ? 'cyan' : undefined} bold={row - 1 === choice}>
      {row - 1 === choice ? '  ◉ ' : '  ○ '}
      {label}
    </Text>
  ))
}

/** A field per question, numbered when there are several; `field` is the one being typed in. */
export function QuestionFields(props: {
  questions: readonly string[]
  answers: readonly string[]
  field: number
}): ReactNode {
  const { questions } = props
  return questions.map((question, i) => (
    <Box key={i} flexDirection="column">
      <Text dimColor>{questions.length > 1 ? `${i + 1}. ${question}` : question}</Text>
      <Field active={i === props.field} text={props.answers[i] ?? ''} />
    </Box>
  ))
}
