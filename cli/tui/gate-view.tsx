import { Box } from 'ink'
import type { ReactNode } from 'react'
import type { Gate } from '../../shared/schemas/gates.js'
import { decisionWord } from '../decisions.js'
import { formatTime } from '../output.js'
import type { Notice, ReviewState } from './gate-controller.js'
import { ChoiceList, Field, QuestionFields } from './fields.js'
import { noteRequired, questionsOf, type Decision, type Mode } from './gate-keys.js'
import { screenText, Text } from './text.js'

// The gate review screen as pure components: props in, elements out. The size comes in as props too
// (the screen reads it from the terminal and again on resize), so long JSON is wrapped to the width
// and clipped to the height that is left.

const labelWidth = 11
const decisionWords: Record<Decision, string> = {
  approve: 'Approve',
  reject: 'Reject',
  request_changes: 'Request changes on',
}

/** "3m ago": the age of a gate, as osctl tables show times on a terminal. */
export function age(iso: string, now: number): string {
  return formatTime({ isTTY: true }, iso, now)
}

// What the screen shows of a gate is the server's text (a run's model wrote its summary and its
// arguments): escaped where it is composed (screenText), so widths and rows are counted on what is
// shown, and again by Text.

/** What a list row names a gate by: its tool, or "question". */
export function gateWhat(gate: Gate): string {
  return gate.kind === 'question' ? 'question' : screenText(gate.tool ?? 'tool call')
}

function taskName(gate: Gate): string {
  return gate.taskSlug ? screenText(gate.taskSlug) : gate.runId ? '(run)' : '(chat)'
}

/**
 * Pretty JSON cut into lines of at most `width` characters: a long line goes on under its own
 * indentation, so a long string value is read whole rather than cut off.
 */
export function jsonLines(value: unknown, width: number): string[] {
  // JSON escapes C0 but not C1 or the bidi controls; escaped as \uXXXX the text is still JSON.
  const text = screenText(JSON.stringify(value, null, 2) ?? 'null')
  const room = Math.max(width, 8)
  return text.split('\n').flatMap((line) => {
    if (line.length <= room) return [line]
    const indent = ' '.repeat(Math.min(line.length - line.trimStart().length + 2, room - 4))
    const parts = [line.slice(0, room)]
    for (let at = room; at < line.length; at += room - indent.length) {
      parts.push(indent + line.slice(at, at + room - indent.length))
    }
    return parts
  })
}

/** Rows a text takes when wrapped to `width` (near enough: words may wrap a little earlier). */
function rowsOf(text: string, width: number): number {
  return screenText(text)
    .split('\n')
    .reduce((sum, line) => sum + Math.max(1, Math.ceil(line.length / Math.max(width, 1))), 0)
}

export interface DetailRow {
  label: string
  value: string
  tone?: 'dim'
}

/** The label and value rows of a gate's detail (without its arguments). */
export function detailRows(gate: Gate, now: number): DetailRow[] {
  const rows: DetailRow[] = [
    { label: 'Gate', value: gate.id },
    {
      label: 'Kind',
      value: gate.kind === 'question' ? `question (${gate.tool ?? 'chat'})` : 'tool call',
    },
  ]
  if (gate.kind === 'tool') rows.push({ label: 'Tool', value: gate.tool ?? '-' })
  if (gate.kind === 'tool' || gate.summary) {
    rows.push(
      gate.summary
        ? { label: 'Summary', value: gate.summary }
        : { label: 'Summary', value: '(the run set none)', tone: 'dim' },
    )
  }
  rows.push(
    {
      label: 'Task',
      value: gate.taskId ? `${gate.taskSlug ?? '-'}  ${gate.taskId}` : '(none: a chat asks)',
    },
    gate.chatId
      ? { label: 'Chat', value: `${gate.chatId}  (osctl chats get ${gate.chatId})` }
      : { label: 'Run', value: gate.runId ?? '-' },
    { label: 'Owner', value: `${gate.owner ?? '-'}, approval ${gate.approval ?? '-'}` },
    { label: 'Opened', value: `${age(gate.createdAt, now)}  ${gate.createdAt}` },
  )
  if (gate.kind === 'question') {
    const questions = gate.questions ?? []
    rows.push({
      label: 'Questions',
      value: questions.length ? questions.map((q, i) => `${i + 1}. ${q}`).join('\n') : '(none)',
    })
    if (gate.choices?.length) {
      const keyWidth = Math.max(...gate.choices.map((c) => c.key.length))
      rows.push({
        label: 'Choices',
        value: gate.choices.map((c) => `${c.key.padEnd(keyWidth)}  ${c.label}`).join('\n'),
      })
    }
  }
  return rows.map((row) => ({ ...row, value: screenText(row.value) }))
}

/** The arguments worth showing: all of a tool call's; a question's beyond its questions and choices. */
export function shownArguments(gate: Gate): Record<string, unknown> | null {
  if (!gate.arguments) return null
  if (gate.kind === 'tool') return gate.arguments
  const { questions: _q, choices: _c, ...rest } = gate.arguments
  return Object.keys(rest).length ? rest : null
}

export function Header(props: {
  count: number
  loaded: boolean
  listed: boolean
  sending: boolean
}): ReactNode {
  return (
    <Box marginBottom={1}>
      <Text bold>osctl gates review</Text>
      <Text dimColor>
        {'  '}
        {props.listed ? `${props.count} waiting` : props.loaded ? 'not read yet' : 'reading…'}
        {props.sending ? '  sending…' : ''}
      </Text>
    </Box>
  )
}

export function GateList(props: {
  gates: Gate[]
  selectedId: string | null
  now: number
  width: number
  /** Rows the list may take, its "more" lines included. */
  maxRows: number
}): ReactNode {
  const { gates, selectedId, now } = props
  const at = Math.max(
    0,
    gates.findIndex((g) => g.id === selectedId),
  )
  // A window of rows around the selection, with a line for what is above and below it.
  let room = Math.max(1, props.maxRows)
  if (gates.length > room) room = Math.max(1, room - 2)
  const first = Math.min(Math.max(0, at - Math.floor(room / 2)), Math.max(0, gates.length - room))
  const shown = gates.slice(first, first + room)
  const below = gates.length - first - shown.length
  const taskWidth = Math.min(28, Math.max(4, ...gates.map((g) => taskName(g).length)))
  const ageWidth = Math.max(...gates.map((g) => age(g.createdAt, now).length))
  const whatWidth = Math.max(8, props.width - taskWidth - ageWidth - 8)
  return (
    <Box flexDirection="column">
      {gates.length > room && <Text dimColor>{first > 0 ? `  ↑ ${first} more` : ' '}</Text>}
      {shown.map((gate) => {
        const selected = gate.id === selectedId
        return (
          <Box key={gate.id}>
            <Text color={selected ? 'cyan' : undefined} bold={selected}>
              {selected ? '› ' : '  '}
            </Text>
            <Box width={taskWidth} marginRight={2}>
              <Text color={selected ? 'cyan' : undefined} bold={selected} wrap="truncate-end">
                {taskName(gate)}
              </Text>
            </Box>
            <Box width={whatWidth} marginRight={2}>
              <Text
                color={selected ? 'cyan' : gate.kind === 'question' ? 'magenta' : undefined}
                wrap="truncate-end"
              >
                {gateWhat(gate)}
              </Text>
            </Box>
            <Text dimColor>{age(gate.createdAt, now)}</Text>
          </Box>
        )
      })}
      {gates.length > room && <Text dimColor>{below > 0 ? `  ↓ ${below} more` : ' '}</Text>}
    </Box>
  )
}

export function GateDetail(props: {
  gate: Gate
  now: number
  width: number
  /** Lines the arguments may take (their heading included); 0 for no limit. */
  maxJsonLines: number
}): ReactNode {
  const { gate } = props
  const args = shownArguments(gate)
  const all = args ? jsonLines(args, props.width - 2) : []
  const limit = props.maxJsonLines > 0 ? Math.max(2, props.maxJsonLines - 1) : Infinity
  const hidden = all.length > limit ? all.length - (limit - 1) : 0
  const lines = hidden ? all.slice(0, limit - 1) : all
  return (
    <Box
      flexDirection="column"
      flexGrow={1}
      borderStyle="single"
      borderLeft={false}
      borderRight={false}
      borderBottom={false}
      borderDimColor
    >
      {detailRows(gate, props.now).map((row) => (
        <Box key={row.label}>
          <Box width={labelWidth} flexShrink={0}>
            <Text bold>{row.label}</Text>
          </Box>
          <Text dimColor={row.tone === 'dim'}>{row.value}</Text>
        </Box>
      ))}
      {args && (
        <Box flexDirection="column">
          <Text bold>Arguments</Text>
          {lines.map((line, i) => (
            <Text key={i} wrap="truncate-end">
              {'  '}
              {line}
            </Text>
          ))}
          {hidden > 0 && (
            <Text dimColor wrap="truncate-end">
              {`  … ${hidden} more line${hidden === 1 ? '' : 's'}: osctl gates get ${gate.id}`}
            </Text>
          )}
        </Box>
      )}
    </Box>
  )
}

/** Rows the detail takes without its arguments, for the room left to them. */
export function detailHeight(gate: Gate, now: number, width: number): number {
  const valueWidth = width - labelWidth
  return 1 + detailRows(gate, now).reduce((sum, row) => sum + rowsOf(row.value, valueWidth), 0)
}

export function EmptyState(props: { intervalMs: number }): ReactNode {
  return (
    <Box flexDirection="column">
      <Text>No gates are waiting.</Text>
      <Text dimColor>
        New gates show up here as runs open them (the list is read every{' '}
        {Math.round(props.intervalMs / 1000)}s).
      </Text>
    </Box>
  )
}

export function NoticeLine(props: { notice: Notice }): ReactNode {
  const { tone, text } = props.notice
  return (
    <Text color={tone === 'success' ? 'green' : 'red'}>
      {tone === 'success' ? '✓ ' : '✗ '}
      {text}
    </Text>
  )
}

export function ErrorLine(props: { error: string; stale: boolean; intervalMs: number }): ReactNode {
  const every = `${Math.round(props.intervalMs / 1000)}s`
  return (
    <Box flexDirection="column" marginBottom={1}>
      <Text color="red">✗ {props.error}</Text>
      <Text dimColor>
        {props.stale
          ? `  The list is from the last read that worked; trying again every ${every}.`
          : `  Trying again every ${every}.`}
      </Text>
    </Box>
  )
}

export function NotePrompt(props: { mode: Extract<Mode, { kind: 'note' }> }): ReactNode {
  const { gate, decision, text, hint } = props.mode
  const required = noteRequired(decision)
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="cyan" paddingX={1}>
      <Text bold>
        {decisionWords[decision]} {taskName(gate)} {gateWhat(gate)}
        <Text dimColor>{required ? ': why? (a note is needed)' : ': a note (optional)'}</Text>
      </Text>
      <Field active text={text} />
      {hint && <Text color="yellow">{hint}</Text>}
    </Box>
  )
}

export function AnswerForm(props: { mode: Extract<Mode, { kind: 'answer' }> }): ReactNode {
  const { gate, choice, field, answers, hint } = props.mode
  const choices = gate.choices ?? []
  const questions = questionsOf(gate)
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="cyan" paddingX={1}>
      <Text bold>
        Answer {taskName(gate)} question
        <Text dimColor>: a choice and/or an answer</Text>
      </Text>
      {choices.length > 0 && (
        <Box flexDirection="column">
          <Text dimColor>Choice (↑↓)</Text>
          <ChoiceList choices={choices} choice={choice} />
        </Box>
      )}
      <QuestionFields questions={questions} answers={answers} field={field} />
      {hint && <Text color="yellow">{hint}</Text>}
    </Box>
  )
}

/** The keys that work in this mode, as `key label` pairs. */
export function footerKeys(mode: Mode, selected: Gate | undefined): [string, string][] {
  if (mode.kind === 'note') {
    return [
      ['Enter', 'send'],
      ['Esc', 'cancel'],
    ]
  }
  if (mode.kind === 'answer') {
    return [
      ...((mode.gate.choices?.length ? [['↑↓', 'choice']] : []) as [string, string][]),
      ...((mode.answers.length > 1 ? [['Tab', 'next question']] : []) as [string, string][]),
      ['Enter', 'send'],
      ['Esc', 'cancel'],
    ]
  }
  return [
    ['↑↓/j k', 'select'],
    ['a', selected?.kind === 'question' ? 'answer' : 'approve'],
    ['r', 'reject'],
    ['c', 'request changes'],
    ['q', 'quit'],
  ]
}

export function Footer(props: { keys: [string, string][] }): ReactNode {
  // Each key with its label stays whole; on a narrow terminal the list wraps between them.
  return (
    <Box marginTop={1} flexWrap="wrap">
      {props.keys.map(([key, label], i) => (
        <Box key={key} flexShrink={0}>
          <Text>
            {i > 0 ? <Text dimColor> · </Text> : ''}
            <Text bold>{key}</Text>
            <Text dimColor> {label}</Text>
          </Text>
        </Box>
      ))}
    </Box>
  )
}

export interface ScreenProps {
  state: ReviewState
  mode: Mode
  now: number
  /** Terminal columns. */
  width: number
  /** Terminal rows; 0 when not known (no clipping). */
  height: number
  intervalMs: number
}

/** The whole screen: header, list, the selected gate, what came of the last decision, a prompt, keys. */
export function ReviewScreen(props: ScreenProps): ReactNode {
  const { state, mode, now, width, height, intervalMs } = props
  const selected = state.gates.find((g) => g.id === state.selectedId)
  const keys: [string, string][] = state.sending ? [['…', 'sending']] : footerKeys(mode, selected)
  const listRows = height > 0 ? Math.max(3, Math.floor(height / 4)) : 10
  const listHeight = Math.min(state.gates.length, listRows)
  const prompt = mode.kind === 'note' ? 4 + (mode.hint ? 1 : 0) : 0
  const answer =
    mode.kind === 'answer'
      ? 3 +
        (mode.gate.choices?.length ? mode.gate.choices.length + 2 : 0) +
        mode.answers.length * 2 +
        (mode.hint ? 1 : 0)
      : 0
  const used =
    2 + // header
    listHeight +
    (state.gates.length > listRows ? 2 : 0) +
    (selected ? detailHeight(selected, now, width) + 1 : 0) +
    (state.error ? rowsOf(state.error, width - 2) + 2 : 0) + // and the two lines under it
    (state.notice ? rowsOf(state.notice.text, width - 2) : 0) +
    prompt +
    answer +
    1 + // the line above the keys
    rowsOf(keys.map(([key, label]) => `${key} ${label}`).join(' · '), width) +
    1 // the line the cursor rests on
  const maxJsonLines = height > 0 ? Math.max(4, height - used) : 0

  return (
    <Box flexDirection="column" width={width}>
      <Header
        count={state.gates.length}
        loaded={state.loaded}
        listed={state.listed}
        sending={state.sending}
      />
      {state.error && (
        <ErrorLine error={state.error} stale={state.gates.length > 0} intervalMs={intervalMs} />
      )}
      {!state.loaded && <Text dimColor>Reading the waiting gates…</Text>}
      {state.loaded && state.gates.length === 0 && !state.error && (
        <EmptyState intervalMs={intervalMs} />
      )}
      {state.gates.length > 0 && (
        <GateList
          gates={state.gates}
          selectedId={state.selectedId}
          now={now}
          width={width}
          maxRows={listRows}
        />
      )}
      {selected && (
        <Box marginTop={1}>
          <GateDetail gate={selected} now={now} width={width} maxJsonLines={maxJsonLines} />
        </Box>
      )}
      {state.notice && (
        <Box marginTop={1}>
          <NoticeLine notice={state.notice} />
        </Box>
      )}
      {mode.kind === 'note' && <NotePrompt mode={mode} />}
      {mode.kind === 'answer' && <AnswerForm mode={mode} />}
      <Footer keys={keys} />
    </Box>
  )
}

/** What the screen leaves on the terminal when it quits: what this session decided. */
export function Summary(props: { decided: ReviewState['decided'] }): ReactNode {
  const counts = new Map<string, number>()
  for (const decided of props.decided) {
    const word = decisionWord(decided)
    counts.set(word, (counts.get(word) ?? 0) + 1)
  }
  const n = props.decided.length
  return (
    <Text dimColor>
      {n === 0
        ? 'gates review: nothing decided.'
        : `gates review: decided ${n} gate${n === 1 ? '' : 's'} (${[...counts]
            .map(([word, count]) => `${count} ${word}`)
            .join(', ')}).`}
    </Text>
  )
}
