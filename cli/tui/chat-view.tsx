import { Box, Static } from 'ink'
import type { ReactNode } from 'react'
import {
  replyStoppable,
  waitingMessage,
  type ChatState,
  type LogItem,
  type PickerEntry,
} from './chat-state.js'
import type { Mode } from './chat-keys.js'
import { DraftView, MessageView, QuestionBox, ToolCallBox, messageRows } from './chat-message.js'
import { Prompt, promptRows } from './chat-prompt.js'
import { age, Footer, NoticeLine } from './gate-view.js'
import { Text } from './text.js'

// The chat screen as pure components: props in, elements out. What is settled goes once into the
// terminal's own scrollback (ink's <Static>), so the terminal scrolls it and the mouse copies it;
// below it only what still changes is drawn again: a call or question waiting, the reply being
// written, the status line, the prompt and the keys. That part is kept shorter than the terminal.

/** A line of the log: a chat opened, or a settled message. */
export function LogLine(props: { item: LogItem; width: number }): ReactNode {
  const { item, width } = props
  if (item.kind === 'unsent')
    return (
      <Box marginBottom={1}>
        <QueuedView text={item.text} why="not sent" />
      </Box>
    )
  if (item.kind === 'chat') {
    const chat = item.chat
    const purpose = chat.purpose === 'create_task' ? ' · create a task' : ''
    return (
      <Box marginTop={1} marginBottom={1}>
        <Text bold>{`── ${item.memberName}${purpose} `}</Text>
        <Text dimColor>{`chat ${chat.id}`}</Text>
      </Box>
    )
  }
  return (
    <Box marginBottom={1}>
      <MessageView message={item.message} memberName={item.memberName} width={width} />
    </Box>
  )
}

/** A message typed while the member replied: queued, sent when the reply ends (issue 51). */
export function QueuedView(props: { text: string; why: string }): ReactNode {
  return (
    <Box flexDirection="column">
      <Text>
        <Text color="green" bold>
          you
        </Text>
        <Text dimColor>{` · ${props.why}`}</Text>
      </Text>
      <Box paddingLeft={2} flexDirection="column">
        {props.text.split('\n').map((line, i) => (
          <Text key={i} dimColor wrap="wrap">
            {line || ' '}
          </Text>
        ))}
      </Box>
    </Box>
  )
}

/** Rows a queued message takes: its head, its lines as wrapped, the line after it. */
function queuedRows(text: string, width: number): number {
  const room = Math.max(1, width - 2)
  return text.split('\n').reduce((sum, line) => sum + Math.max(1, Math.ceil(line.length / room)), 2)
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
        const chat = entry.kind === 'chat' ? entry.chat : null
        const when = chat?.lastMessageAt ? age(chat.lastMessageAt, props.now) : 'no messages'
        return (
          <Box key={id}>
            <Text color={selected ? 'cyan' : undefined} bold={selected}>
              {selected ? '› ' : '  '}
              {entryLabel(entry, members)}
            </Text>
            {chat?.replying && <Text color="cyan">{'  ✎ replying…'}</Text>}
            {chat && chat.unread > 0 && <Text color="yellow">{`  ${chat.unread} unread`}</Text>}
            <Text dimColor>{`  ${chat ? when : 'new chat'}`}</Text>
          </Box>
        )
      })}
    </Box>
  )
}

/** The keys that work now, as `key label` pairs. */
export function footerKeys(state: ChatState): [string, string][] {
  if (state.view === 'picker')
    return [
      ['↑↓', 'select'],
      ['Enter', 'open'],
      ['Ctrl+N', 'new task chat'],
      ['q', 'quit'],
    ]
  const waiting = waitingMessage(state)
  if (waiting?.toolCall)
    return [
      ['a', 'allow'],
      ...(waiting.toolCall.mustGate ? [] : ([['A', 'always']] as [string, string][])),
      ['d', 'deny'],
      ['Esc', 'chats'],
      ['Ctrl+C', 'quit'],
    ]
  if (waiting?.question)
    return [
      ...(waiting.question.choices.length ? ([['↑↓/1-9', 'choice']] as [string, string][]) : []),
      ['Enter', 'answer'],
      ['Alt+Enter', 'new line'],
      ['Esc', 'chats'],
    ]
  if (state.chat?.status === 'closed')
    return [
      ['Esc', 'chats'],
      ['Ctrl+N', 'new task chat'],
      ['Ctrl+C', 'quit'],
    ]
  return [
    ['Enter', 'send'],
    ['Alt+Enter', 'new line'],
    ['↑', 'history'],
    ['Ctrl+G', '$EDITOR'],
    ['Esc', replyStoppable(state) ? 'stop reply' : 'chats'],
    ['Ctrl+C', 'clear/quit'],
  ]
}

function Status(props: { state: ChatState; memberName: string }): ReactNode {
  const { state, memberName } = props
  const chat = state.chat
  if (state.error)
    return (
      <Text color="red">
        ✗ {state.error}
        {state.link === 'lost' ? ' (trying again)' : ''}
      </Text>
    )
  if (!state.loaded) return <Text dimColor>Reading the chat…</Text>
  if (!chat) return null
  if (chat.status === 'closed')
    return (
      <Text dimColor>
        This chat is closed{chat.outcome ? ` (${chat.outcome})` : ''}
        {chat.taskId ? `: task ${chat.taskId}` : ''}. Esc picks another chat.
      </Text>
    )
  if (state.messages.length === 0 && !chat.replying)
    return <Text dimColor>No messages yet: say something to {memberName}.</Text>
  // While a call or question waits its box says so; after osd's notice, the notice does.
  const quiet = waitingMessage(state) || state.messages.at(-1)?.notice || state.drafts.length
  if (chat.replying && !quiet)
    return (
      <Text color="cyan">
        {memberName} is replying…<Text dimColor> (Enter queues a message)</Text>
      </Text>
    )
  return null
}

export interface ScreenProps {
  state: ChatState
  /** Bumped to print the log again from its first line (after a resize has cleared the terminal). */
  generation?: number
  mode: Mode
  memberName: string
  now: number
  width: number
  /** Terminal rows; 0 when not known (nothing is cut). */
  height: number
}

export function ChatScreen(props: ScreenProps): ReactNode {
  const { state, mode, width, height, memberName } = props
  const log = (
    <Static key={props.generation ?? 0} items={state.log}>
      {(item) => <LogLine key={item.key} item={item} width={width} />}
    </Static>
  )
  if (state.view === 'picker') {
    return (
      <Box flexDirection="column" width={width}>
        {log}
        <Box marginBottom={1}>
          <Text bold>osctl chat</Text>
          <Text dimColor>{'  pick a chat'}</Text>
        </Box>
        {state.error && <Text color="red">✗ {state.error}</Text>}
        {!state.loaded && <Text dimColor>Reading the chats…</Text>}
        {state.loaded && !state.error && (
          <Picker state={state} index={mode.index} now={props.now} height={height} />
        )}
        {state.notice && <NoticeLine notice={state.notice} />}
        <Footer keys={footerKeys(state)} />
      </Box>
    )
  }

  const waiting = waitingMessage(state)
  const live = state.messages.slice(state.logged)
  const boxLines = height > 0 ? Math.max(4, Math.min(16, Math.floor(height / 3))) : 40
  const promptLines = height > 0 ? Math.max(3, Math.floor(height / 4)) : 0
  const showPrompt = !waiting?.toolCall && state.chat?.status !== 'closed'
  // Rows the live area takes besides the reply being written; what is left is the reply's.
  const used =
    live.reduce((sum, m) => sum + messageRows(m, width, boxLines) + 1, 0) +
    2 + // the status and notice lines
    (mode.hint ? 1 : 0) +
    state.queued.reduce((sum, text) => sum + queuedRows(text, width), 0) +
    (showPrompt ? promptRows(mode.editor, promptLines) : 0) +
    3 // the keys, the line above them, the line the cursor rests on
  const draftRows = height > 0 ? Math.max(3, height - used - 1) : 0
  const perDraft = draftRows > 0 ? Math.max(3, Math.floor(draftRows / state.drafts.length)) : 0
  return (
    <Box flexDirection="column" width={width}>
      {log}
      {live.map((message) => (
        <Box key={message.id} marginBottom={1}>
          {message === waiting && message.toolCall ? (
            <ToolCallBox call={message.toolCall} memberName={memberName} maxLines={boxLines} />
          ) : message === waiting && message.question ? (
            <QuestionBox question={message.question} memberName={memberName} form={mode.answer} />
          ) : (
            <MessageView message={message} memberName={memberName} width={width} />
          )}
        </Box>
      ))}
      {state.drafts.map((draft) => (
        <Box key={draft.messageId} marginBottom={1}>
          <DraftView text={draft.text} memberName={memberName} width={width} rows={perDraft} />
        </Box>
      ))}
      {state.queued.map((text, i) => (
        <Box key={`queued-${i}`} marginBottom={1}>
          <QueuedView text={text} why={state.queueStopped ? 'not sent' : 'queued'} />
        </Box>
      ))}
      <Status state={state} memberName={memberName} />
      {state.notice && <NoticeLine notice={state.notice} />}
      {mode.hint && <Text color="yellow">{mode.hint}</Text>}
      {showPrompt && (
        <Prompt
          editor={mode.editor}
          rows={promptLines}
          active={!state.sending}
          color={waiting?.question ? 'magenta' : 'cyan'}
          placeholder={
            waiting?.question
              ? 'your answer'
              : `message ${memberName} (Enter sends, Alt+Enter adds a line)`
          }
        />
      )}
      <Footer keys={footerKeys(state)} />
    </Box>
  )
}

/** What the screen leaves on the terminal when it quits. */
export function Summary(props: { state: ChatState }): ReactNode {
  const chat = props.state.chat
  return (
    <Box flexDirection="column">
      {/* Queued and not sent when the screen closed: left on the terminal to copy, never lost. */}
      {props.state.queued.map((text, i) => (
        <Box key={i} marginBottom={1}>
          <QueuedView text={text} why="not sent (queued when the screen closed)" />
        </Box>
      ))}
      <Text dimColor>
        {chat ? `chat: read it again with osctl chats get ${chat.id}` : 'chat: closed the screen.'}
      </Text>
    </Box>
  )
}
