import { Box, Text } from 'ink'
import type { ReactNode } from 'react'
import type { ChatMessage } from '../../shared/schemas/chats.js'
import { argumentsLine, clockTime } from '../chat.js'
import { waitingMessage, type ChatState, type PickerEntry } from './chat-controller.js'
import type { Mode } from './chat-keys.js'
import { ChoiceList, Field, QuestionFields } from './fields.js'
import { age, Footer, NoticeLine } from './gate-view.js'

// The chat screen as pure components: props in, elements out. The conversation is laid out as lines
// wrapped to the width, and the newest that fit the rows left are shown (PageUp scrolls back).

interface Line {
  text: string
  color?: 'cyan' | 'green' | 'yellow' | 'red' | 'magenta'
  dim?: boolean
  bold?: boolean
}

/** Text cut into lines of at most `width` characters, at spaces where it can. */
export function wrap(text: string, width: number): string[] {
  const room = Math.max(width, 8)
  return text.split('\n').flatMap((line) => {
    const out: string[] = []
    let rest = line
    while (rest.length > room) {
      const space = rest.lastIndexOf(' ', room)
      const cut = space > room / 2 ? space : room
      out.push(rest.slice(0, cut))
      rest = rest.slice(cut).replace(/^ /, '')
    }
    out.push(rest)
    return out
  })
}

/** A message as screen lines: `HH:MM who  text`, then its tool call or question. */
export function messageLines(message: ChatMessage, memberName: string, width: number): Line[] {
  const who = message.role === 'person' ? 'you' : message.role === 'tool' ? 'tool' : memberName
  const head = `${clockTime(message.createdAt)} ${who}`
  const color = message.role === 'person' ? 'green' : message.role === 'tool' ? undefined : 'cyan'
  const lines: Line[] = [{ text: head, color, bold: true }]
  const body = message.content.trimEnd()
  if (body)
    for (const l of wrap(body, width - 2))
      lines.push({ text: `  ${l}`, dim: message.role === 'tool' })
  const call = message.toolCall
  if (call) {
    const waiting = call.status === 'waiting'
    lines.push({
      text: `  ⚙ ${call.name} ${waiting ? '(waits for you)' : `(${call.status})`}`,
      color: waiting ? 'yellow' : undefined,
      bold: waiting,
    })
    for (const l of wrap(argumentsLine(call.arguments, 2000), width - 4))
      lines.push({ text: `    ${l}`, dim: !waiting })
    if (call.result)
      for (const l of wrap(call.result, width - 4).slice(0, 3))
        lines.push({ text: `    → ${l}`, dim: true })
  }
  const question = message.question
  if (question) {
    const waiting = question.status === 'waiting'
    lines.push({
      text: `  ? ${waiting ? 'asks you' : 'answered'}`,
      color: 'magenta',
      bold: waiting,
    })
    question.questions.forEach((q, i) => {
      for (const l of wrap(`${i + 1}. ${q}`, width - 4)) lines.push({ text: `    ${l}` })
    })
    if (question.choices.length)
      lines.push({
        text: `    choices: ${question.choices.map((c) => `${c.label} (${c.key})`).join(', ')}`,
        dim: true,
      })
  }
  return lines
}

function Header(props: { state: ChatState; memberName: string }): ReactNode {
  const { chat, view } = props.state
  let status = ''
  if (view === 'picker') status = 'pick a chat'
  else if (chat?.status === 'closed') status = `closed${chat.outcome ? ` (${chat.outcome})` : ''}`
  else if (chat?.replying) status = `${props.memberName} is replying…`
  else if (chat) status = 'open'
  const title =
    view === 'chat'
      ? `osctl chat · ${props.memberName}${chat?.purpose === 'create_task' ? ' · create a task' : ''}`
      : 'osctl chat'
  return (
    <Box marginBottom={1}>
      <Text bold>{title}</Text>
      <Text dimColor>
        {'  '}
        {status}
        {props.state.sending ? '  sending…' : ''}
      </Text>
    </Box>
  )
}

function entryLabel(entry: PickerEntry, members: ChatState['members']): string {
  if (entry.kind === 'member') return `${entry.member.name} <${entry.member.email}>`
  const member = members.find((m) => m.id === entry.chat.memberId)
  return member ? member.name : entry.chat.memberId
}

export function Picker(props: {
  state: ChatState
  index: number
  now: number
  height: number
}): ReactNode {
  const { entries, members } = props.state
  if (entries.length === 0) {
    return (
      <Box flexDirection="column">
        <Text>No chats yet, and no members to chat with.</Text>
        <Text dimColor>
          Add a member (osctl members create), or Ctrl+N to create a task by chat.
        </Text>
      </Box>
    )
  }
  const room = props.height > 0 ? Math.max(3, props.height - 6) : entries.length
  const at = Math.min(props.index, entries.length - 1)
  const first = Math.min(Math.max(0, at - Math.floor(room / 2)), Math.max(0, entries.length - room))
  return (
    <Box flexDirection="column">
      {entries.slice(first, first + room).map((entry, i) => {
        const selected = first + i === at
        const id = entry.kind === 'chat' ? entry.chat.id : entry.member.id
        const detail =
          entry.kind === 'chat'
            ? `${entry.chat.unread ? `${entry.chat.unread} unread · ` : ''}${entry.chat.lastMessageAt ? age(entry.chat.lastMessageAt, props.now) : 'no messages'}`
            : 'new chat'
        return (
          <Box key={id}>
            <Text color={selected ? 'cyan' : undefined} bold={selected}>
              {selected ? '› ' : '  '}
              {entryLabel(entry, members)}
            </Text>
            <Text
              dimColor={!(entry.kind === 'chat' && entry.chat.unread)}
              color={entry.kind === 'chat' && entry.chat.unread ? 'yellow' : undefined}
            >
              {'  '}
              {detail}
            </Text>
          </Box>
        )
      })}
    </Box>
  )
}

function Conversation(props: { lines: Line[]; rows: number; scroll: number }): ReactNode {
  const { lines, rows } = props
  const scroll = Math.min(props.scroll, Math.max(0, lines.length - rows))
  const end = lines.length - scroll
  const shown = rows > 0 ? lines.slice(Math.max(0, end - rows), end) : lines
  const above = rows > 0 ? Math.max(0, end - rows) : 0
  return (
    <Box flexDirection="column">
      {above > 0 && (
        <Text dimColor>{`  ↑ ${above} more line${above === 1 ? '' : 's'} (PgUp)`}</Text>
      )}
      {shown.map((line, i) => (
        <Text key={i} color={line.color} dimColor={line.dim} bold={line.bold} wrap="truncate-end">
          {line.text || ' '}
        </Text>
      ))}
      {scroll > 0 && (
        <Text dimColor>{`  ↓ ${scroll} newer line${scroll === 1 ? '' : 's'} (PgDn)`}</Text>
      )}
    </Box>
  )
}

/** The keys that work now, as `key label` pairs. */
export function footerKeys(state: ChatState): [string, string][] {
  if (state.view === 'picker') {
    return [
      ['↑↓', 'select'],
      ['Enter', 'open'],
      ['Ctrl+N', 'new task chat'],
      ['q', 'quit'],
    ]
  }
  const waiting = waitingMessage(state.messages)
  if (waiting?.toolCall?.status === 'waiting') {
    return [
      ['a', 'allow'],
      ['A', 'always'],
      ['d', 'deny'],
      ['Esc', 'chats'],
      ['Ctrl+D', 'quit'],
    ]
  }
  if (waiting?.question?.status === 'waiting') {
    return [
      ...((waiting.question.choices.length ? [['↑↓', 'choice']] : []) as [string, string][]),
      ...((waiting.question.questions.length > 1 ? [['Tab', 'next']] : []) as [string, string][]),
      ['Enter', 'answer'],
      ['Esc', 'chats'],
      ['Ctrl+D', 'quit'],
    ]
  }
  return [
    ['Enter', 'send'],
    ['PgUp/PgDn', 'scroll'],
    ['Esc', 'chats'],
    ['Ctrl+N', 'new task chat'],
    ['Ctrl+D', 'quit'],
  ]
}

function Prompt(props: { state: ChatState; mode: Mode; memberName: string }): ReactNode {
  const { state, mode } = props
  const chat = state.chat
  const waiting = waitingMessage(state.messages)
  if (waiting?.toolCall?.status === 'waiting') {
    const call = waiting.toolCall
    return (
      <Box flexDirection="column" borderStyle="round" borderColor="yellow" paddingX={1}>
        <Text bold>
          {props.memberName} wants to call {call.name}
          <Text dimColor>: a allow once · A always for this tool · d deny</Text>
        </Text>
      </Box>
    )
  }
  if (waiting?.question?.status === 'waiting') {
    const question = waiting.question
    const form = mode.answer?.gateId === question.gateId ? mode.answer : null
    const answers = form?.answers ?? Array(Math.max(1, question.questions.length)).fill('')
    const field = form?.field ?? 0
    const choice = form?.choice ?? -1
    const questions = question.questions.length ? question.questions : ['Answer']
    return (
      <Box flexDirection="column" borderStyle="round" borderColor="magenta" paddingX={1}>
        <Text bold>
          Answer {props.memberName}
          <Text dimColor>
            : type an answer{question.choices.length ? ' and/or pick a choice' : ''}
          </Text>
        </Text>
        {question.choices.length > 0 && <ChoiceList choices={question.choices} choice={choice} />}
        <QuestionFields questions={questions} answers={answers} field={field} />
      </Box>
    )
  }
  if (chat?.status === 'closed') {
    return (
      <Text dimColor>
        This chat is closed{chat.taskId ? ` (task ${chat.taskId})` : ''}. Esc picks another chat,
        Ctrl+N starts a create-task chat.
      </Text>
    )
  }
  return <Field active text={mode.text} />
}

export interface ScreenProps {
  state: ChatState
  mode: Mode
  memberName: string
  now: number
  width: number
  /** Terminal rows; 0 when not known (no clipping). */
  height: number
}

/** Rows the prompt area takes, for the rows left to the conversation. */
function promptRows(state: ChatState): number {
  const waiting = waitingMessage(state.messages)
  if (waiting?.toolCall?.status === 'waiting') return 3
  if (waiting?.question?.status === 'waiting') {
    const q = waiting.question
    return 3 + (q.choices.length ? q.choices.length + 1 : 0) + Math.max(1, q.questions.length) * 2
  }
  return state.chat?.status === 'closed' ? 2 : 1
}

export function ChatScreen(props: ScreenProps): ReactNode {
  const { state, mode, width, height, memberName } = props
  const keys: [string, string][] = footerKeys(state)
  if (state.view === 'picker') {
    return (
      <Box flexDirection="column" width={width}>
        <Header state={state} memberName={memberName} />
        {state.error && <Text color="red">✗ {state.error}</Text>}
        {!state.loaded && <Text dimColor>Reading the chats…</Text>}
        {state.loaded && !state.error && (
          <Picker state={state} index={mode.index} now={props.now} height={height} />
        )}
        {state.notice && <NoticeLine notice={state.notice} />}
        <Footer keys={keys} />
      </Box>
    )
  }
  const lines = state.messages.flatMap((m) => messageLines(m, memberName, width))
  const used =
    2 + // header
    (state.error ? 1 : 0) +
    (state.notice ? 1 : 0) +
    (mode.hint ? 1 : 0) +
    1 + // the line above the prompt
    promptRows(state) +
    2 + // the footer and the line above it
    1 + // the line the cursor rests on
    2 // the "more" lines
  const rows = height > 0 ? Math.max(3, height - used) : 0
  return (
    <Box flexDirection="column" width={width}>
      <Header state={state} memberName={memberName} />
      {state.error && <Text color="red">✗ {state.error} (trying again)</Text>}
      {!state.loaded && <Text dimColor>Reading the chat…</Text>}
      {state.loaded && state.messages.length === 0 && (
        <Text dimColor>No messages yet: say something to {memberName}.</Text>
      )}
      {state.messages.length > 0 && <Conversation lines={lines} rows={rows} scroll={mode.scroll} />}
      <Box marginTop={1} flexDirection="column">
        {state.notice && <NoticeLine notice={state.notice} />}
        {mode.hint && <Text color="yellow">{mode.hint}</Text>}
        <Prompt state={state} mode={mode} memberName={memberName} />
      </Box>
      <Footer keys={keys} />
    </Box>
  )
}

/** What the screen leaves on the terminal when it quits. */
export function Summary(props: { state: ChatState }): ReactNode {
  const chat = props.state.chat
  return (
    <Text dimColor>
      {chat ? `chat: read it again with osctl chats get ${chat.id}` : 'chat: closed the screen.'}
    </Text>
  )
}
