import { Box } from 'ink'
import type { ReactNode } from 'react'
import type { ChatMessage, ChatQuestion, ChatToolCall } from '../../shared/schemas/chats.js'
import { clockTime } from '../chat.js'
import { decisionLine } from '../decisions.js'
import { mustGateReason, type AnswerForm } from './chat-keys.js'
import { fold, jsonLines, resultLines } from './fold.js'
import { Markdown, markdownRows } from './markdown.js'
import { Text } from './text.js'

// One message of the chat as the screen draws it: the person's words, the member's reply in markdown,
// a tool call with its arguments and result (folded), a question once with its answer, osd's notice
// as a status line rather than the member speaking. And the boxes that decide a waiting call or
// answer a waiting question in place.

/** Lines of arguments and results shown of a settled call (the full text: osctl chats get). */
const settledLines = 8

function Head(props: { who: string; time: string; color?: 'green' | 'cyan' }): ReactNode {
  return (
    <Text>
      <Text color={props.color} bold>
        {props.who}
      </Text>
      <Text dimColor> {clockTime(props.time)}</Text>
    </Text>
  )
}

/** Lines in a column, dim or not, indented under what they belong to. */
function Lines(props: { lines: string[]; dim?: boolean; prefix?: string }): ReactNode {
  return (
    <Box flexDirection="column">
      {props.lines.map((line, i) => (
        <Text key={i} dimColor={props.dim} wrap="wrap">
          {props.prefix ?? ''}
          {line || ' '}
        </Text>
      ))}
    </Box>
  )
}

/** The arguments of a call: a task proposal's definition, or the arguments, as pretty JSON. */
export function callArguments(call: ChatToolCall): unknown {
  if (call.name === 'os.create_task' && call.arguments.definition) return call.arguments.definition
  return call.arguments
}

const statusWords: Record<ChatToolCall['status'], string> = {
  waiting: 'waits for you',
  allowed: 'allowed, running…',
  denied: 'denied',
  done: 'done',
  failed: 'failed',
}

function ToolCallLine(props: { call: ChatToolCall; maxLines: number }): ReactNode {
  const { call } = props
  const proposal = call.name === 'os.create_task'
  const tone = call.status === 'failed' || call.status === 'denied' ? 'red' : undefined
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>⚙ {proposal ? 'task proposal' : call.name}</Text>
        <Text color={tone} dimColor={!tone}>
          {' '}
          · {statusWords[call.status]}
        </Text>
      </Text>
      <Box paddingLeft={2} flexDirection="column">
        <Lines lines={fold(jsonLines(callArguments(call)), props.maxLines)} dim />
        {call.result !== null && (
          <Lines
            lines={fold(resultLines(call.result), props.maxLines)}
            prefix="→ "
            dim={call.status !== 'failed'}
          />
        )}
      </Box>
    </Box>
  )
}

function answerWords(question: ChatQuestion): string {
  const answer = question.answer
  if (!answer || answer.decision === null) return 'closed with the chat, unanswered'
  return decisionLine(answer, question.choices)
}

function QuestionLine(props: { question: ChatQuestion }): ReactNode {
  const { question } = props
  return (
    <Box flexDirection="column">
      {question.questions.map((q, i) => (
        <Text key={i} color="magenta">
          ? {q}
        </Text>
      ))}
      {question.status === 'answered' && (
        <Box paddingLeft={2}>
          <Text dimColor>→ {answerWords(question)}</Text>
        </Box>
      )}
    </Box>
  )
}

/** A message that is settled or shown in the live area (a waiting one is drawn by its box). */
export function MessageView(props: {
  message: ChatMessage
  memberName: string
  width: number
}): ReactNode {
  const { message, memberName, width } = props
  if (message.notice)
    return (
      <Text color="yellow">
        ⚠ osd: {message.content.trim()}
        <Text dimColor> {clockTime(message.createdAt)}</Text>
      </Text>
    )
  const body = message.content.trimEnd()
  // The question's own words are its content too: drawn once, as the question.
  const shownBody =
    message.question && message.question.questions.join('\n') === body.trim() ? '' : body
  if (message.role === 'person')
    return (
      <Box flexDirection="column">
        <Head who="you" time={message.createdAt} color="green" />
        <Box paddingLeft={2}>
          <Text>{body}</Text>
        </Box>
      </Box>
    )
  if (!shownBody && !message.toolCall && !message.question && !message.stopped) return null
  return (
    <Box flexDirection="column">
      {message.role === 'member' && <Head who={memberName} time={message.createdAt} color="cyan" />}
      <Box paddingLeft={2} flexDirection="column">
        {shownBody && <Markdown text={shownBody} width={width - 2} />}
        {/* Stopped by the person (issue 51): what it had written by then, perhaps nothing. */}
        {message.stopped && <Text dimColor>(stopped)</Text>}
        {message.toolCall && <ToolCallLine call={message.toolCall} maxLines={settledLines} />}
        {message.question && <QuestionLine question={message.question} />}
      </Box>
    </Box>
  )
}

/** The reply being written, as far as it has come: its newest rows when it is longer than `rows`. */
export function DraftView(props: {
  text: string
  memberName: string
  width: number
  /** Rows it may take; 0 for no limit. */
  rows: number
}): ReactNode {
  const { text, width, rows } = props
  const needed = markdownRows(text, width - 2) + 1
  const clip = rows > 0 && needed > rows
  return (
    <Box flexDirection="column">
      <Text>
        <Text color="cyan" bold>
          {props.memberName}
        </Text>
        <Text dimColor> writing…</Text>
      </Text>
      <Box
        paddingLeft={2}
        flexDirection="column"
        justifyContent="flex-end"
        {...(clip ? { height: Math.max(1, rows - 1), overflow: 'hidden' as const } : {})}
      >
        {/* Not shrunk to the box: it keeps its height and the box shows its newest rows. */}
        <Box flexShrink={0} flexDirection="column">
          <Markdown text={text} width={width - 2} />
        </Box>
      </Box>
    </Box>
  )
}

/** A waiting tool call, decided in place: a allow, A always (never for a must-gate tool), d deny. */
export function ToolCallBox(props: {
  call: ChatToolCall
  memberName: string
  maxLines: number
}): ReactNode {
  const { call } = props
  const proposal = call.name === 'os.create_task'
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="yellow" paddingX={1}>
      <Text bold>
        {proposal
          ? `${props.memberName} proposes a task: allow creates it`
          : `${props.memberName} wants to call ${call.name}`}
      </Text>
      <Lines lines={fold(jsonLines(callArguments(call)), props.maxLines)} />
      {call.mustGate && <Text color="yellow">{`${call.name} is ${mustGateReason}.`}</Text>}
      <Text>
        <Text bold>a</Text>
        <Text dimColor> allow once</Text>
        {!call.mustGate && (
          <>
            <Text dimColor> · </Text>
            <Text bold>A</Text>
            <Text dimColor> always for this tool</Text>
          </>
        )}
        <Text dimColor> · </Text>
        <Text bold>d</Text>
        <Text dimColor> deny</Text>
      </Text>
    </Box>
  )
}

/** A waiting question: its words once, its choices to pick, the answer typed in the prompt below. */
export function QuestionBox(props: {
  question: ChatQuestion
  memberName: string
  form: AnswerForm | null
}): ReactNode {
  const { question } = props
  const form = props.form?.gateId === question.gateId ? props.form : null
  const answered = form?.answers.length ?? 0
  const asked = question.questions.length
  const choice = form?.choice ?? -1
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="magenta" paddingX={1}>
      <Text bold>{props.memberName} asks you</Text>
      {question.questions.map((q, i) => (
        <Text key={i} color={i === answered ? 'magenta' : undefined} dimColor={i < answered}>
          {asked > 1 ? `${i + 1}. ` : ''}
          {q}
          {i < answered ? `  → ${form!.answers[i]}` : ''}
        </Text>
      ))}
      {question.choices.map((c, i) => (
        <Text key={c.key} color={i === choice ? 'cyan' : undefined} bold={i === choice}>
          {i === choice ? '› ' : '  '}
          {i + 1}. {c.label}
        </Text>
      ))}
      <Text dimColor>
        {question.choices.length
          ? 'Pick a choice (↑↓ or its number) and/or type an answer below; Enter answers.'
          : 'Type the answer below; Enter answers.'}
      </Text>
    </Box>
  )
}

/** Rows a message takes in the live area, a little more rather than less. */
export function messageRows(message: ChatMessage, width: number, maxLines: number): number {
  const text = message.content.trim()
  let rows = text ? markdownRows(text, width - 2) + 1 : 1
  if (message.stopped) rows += 1
  const call = message.toolCall
  if (call) {
    const args = Math.min(jsonLines(callArguments(call)).length, maxLines)
    rows += args + 5 + (call.result ? Math.min(resultLines(call.result).length, maxLines) : 0)
  }
  const question = message.question
  if (question) rows += question.questions.length + question.choices.length + 4
  return rows
}
