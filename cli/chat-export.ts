import type {
  ChatDetail,
  ChatMessage,
  ChatQuestion,
  ChatToolCall,
} from '../shared/schemas/chats.js'
import { answerTexts, decisionWord } from './decisions.js'
import { safeText } from './safe-text.js'

// `osctl chats export ID --format md`: a chat's transcript as a markdown document a person reads (and
// any markdown tool renders): who said what and when, each tool call with its arguments, decision
// and result, each question with its answer, osd's notices in italics. A member's reply is markdown
// already: it goes in a block quote, so its own headings and lists stay inside its message. Its text
// and the rest of the server's have their control characters escaped (issue 41): a line's worth (a
// name, a label, an answer) with its line breaks too, so it cannot start a heading of its own. No ink
// and no zod here: command modules load this as osctl starts.

/** "2026-03-02 11:52" in the local time zone. */
export function dateTime(iso: string): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const two = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`
}

/** A fence longer than any run of backticks in the text, so the text cannot close it. */
function fenced(text: string, lang = ''): string[] {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((run) => run.length))
  const fence = '`'.repeat(longest + 1)
  return [`${fence}${lang}`, ...text.split('\n'), fence]
}

/** Lines as a block quote (a blank line inside stays in the quote). */
function quoted(text: string): string[] {
  return text.split('\n').map((line) => (line ? `> ${line}` : '>'))
}

/** Characters markdown would read as marks written as themselves; control characters escaped. */
export function escapeInline(text: string): string {
  return safeText(text.replace(/([\\`*_[\]<>#|~])/g, '\\$1'))
}

/** Pretty JSON; C1 and the bidi controls, which JSON leaves as they are, escaped as \uXXXX. */
function json(value: unknown): string {
  return safeText(JSON.stringify(value, null, 2) ?? 'null', { multiline: true })
}

const decisionOf: Record<ChatToolCall['status'], string> = {
  waiting: 'not decided yet',
  allowed: 'allowed (running)',
  denied: 'denied',
  done: 'allowed',
  failed: 'allowed',
}

function toolCallLines(call: ChatToolCall): string[] {
  const lines = [
    `**Tool call** \`${safeText(call.name)}\`${call.mustGate ? ' (on a must-gate list: decided each time)' : ''}`,
    '',
    `- Decision: ${decisionOf[call.status]}`,
    `- Status: ${call.status}`,
    '',
    ...fenced(json(call.arguments), 'json'),
  ]
  if (call.result !== null) {
    let result: { text: string; lang: string } = {
      text: safeText(call.result, { multiline: true }),
      lang: 'text',
    }
    try {
      if (/^\s*[[{]/.test(call.result))
        result = { text: json(JSON.parse(call.result)), lang: 'json' }
    } catch {
      // not JSON: its text
    }
    lines.push('', 'Result:', '', ...fenced(result.text, result.lang))
  }
  return lines
}

function answerLines(question: ChatQuestion): string[] {
  const answer = question.answer
  if (question.status === 'waiting') return ['**Answer:** not answered yet']
  if (!answer || answer.decision === null) return ['**Answer:** none (the chat closed)']
  const lines: string[] = []
  const choice = question.choices.find((c) => c.key === answer.choice)
  if (answer.choice !== null)
    lines.push(
      `- Choice: ${choice ? `${escapeInline(choice.label)} (\`${safeText(answer.choice)}\`)` : `\`${safeText(answer.choice)}\``}`,
    )
  const answers = answerTexts(answer.answers)
  answers.forEach((a, i) =>
    lines.push(`- Answer${answers.length > 1 ? ` ${i + 1}` : ''}: ${escapeInline(a)}`),
  )
  if (answer.note) lines.push(`- Note: ${escapeInline(answer.note)}`)
  // What was decided (issue 51): an answer is listed as one; a question rejected, sent back or
  // approved without an answer says so, with its note.
  const word = decisionWord(answer)
  const head = word === 'answered' ? '**Answer:**' : `**Decision:** ${word}`
  return lines.length ? [head, '', ...lines] : [head]
}

function questionLines(question: ChatQuestion): string[] {
  const lines = ['**Question**', '']
  question.questions.forEach((q, i) => lines.push(`${i + 1}. ${escapeInline(q)}`))
  if (question.choices.length) {
    lines.push('', 'Choices:', '')
    for (const c of question.choices)
      lines.push(`- \`${safeText(c.key)}\`: ${escapeInline(c.label)}`)
  }
  return [...lines, '', ...answerLines(question)]
}

function speakerOf(message: ChatMessage, memberName: string): string {
  if (message.notice) return 'osd'
  if (message.role === 'person') return 'you'
  if (message.toolCall) return `${memberName} (tool call)`
  if (message.question) return `${memberName} (question)`
  return memberName
}

function messageLines(message: ChatMessage, memberName: string): string[] {
  const lines = [
    `### ${dateTime(message.createdAt)} · ${escapeInline(speakerOf(message, memberName))}`,
    '',
  ]
  const text = message.content.trimEnd()
  if (message.notice) {
    lines.push(
      ...text
        .split('\n')
        .filter(Boolean)
        .map((l) => `*${escapeInline(l)}*`),
    )
    return lines
  }
  // A question's words are its content too: written once, as the question.
  const asked = message.question && message.question.questions.join('\n') === text.trim()
  if (text && !asked) lines.push(...quoted(safeText(text, { multiline: true })), '')
  // Stopped by the person while it was written (issue 51): the text is what it had by then.
  if (message.stopped) lines.push('*(stopped)*', '')
  if (message.toolCall) lines.push(...toolCallLines(message.toolCall), '')
  if (message.question) lines.push(...questionLines(message.question), '')
  while (lines.at(-1) === '') lines.pop()
  return lines
}

/** The transcript of a chat as a markdown document. */
export function chatMarkdown(detail: ChatDetail, memberName = 'member'): string {
  const status =
    detail.status === 'closed'
      ? `closed${detail.outcome ? ` (${escapeInline(detail.outcome)})` : ''}${detail.taskId ? `, task \`${detail.taskId}\`` : ''}`
      : detail.replying
        ? 'open, the member is replying'
        : 'open'
  const lines = [
    `# Chat with ${escapeInline(memberName)}`,
    '',
    `- Chat: \`${detail.id}\``,
    `- Member: ${escapeInline(memberName)} (\`${detail.memberId}\`)`,
    ...(detail.purpose === 'create_task' ? ['- Purpose: create a task'] : []),
    `- Status: ${status}`,
    `- Started: ${dateTime(detail.createdAt)}`,
    `- Messages: ${detail.messages.length}`,
  ]
  for (const message of detail.messages) lines.push('', ...messageLines(message, memberName))
  if (detail.messages.length === 0) lines.push('', '*No messages.*')
  // Each piece of the server's text is escaped where it is put; this holds if one were missed.
  return safeText(lines.join('\n') + '\n', { multiline: true })
}
