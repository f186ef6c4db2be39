import { metrics } from '../../metrics.js'
import { ApiError } from '../../../shared/errors.js'
import type { Db, Tx } from '../../db/sql.js'
import { proposeChangeTool, rememberTool } from '../../domain/tasks/index.js'
import { proposeChange, rememberLesson } from '../../domain/learning/index.js'
import { sendMail } from '../../domain/org/index.js'
import { writePlan } from '../../domain/runs/index.js'
import type { RunRow } from '../../domain/runs/index.js'
import type { ToolSpec } from '../models/index.js'
import type { ToolOutcome } from './mcp.js'
import { toolSpan, type Trace } from '../../traces/index.js'

// The built-in os.* tools (spec: Task definition, tools; DESIGN 6). os.finish ends the run with an
// outcome; os.ask_ceo opens a question gate; os.set_gate_summary says what the next gate asks for;
// os.mail_send, os.write_plan, os.remember and os.propose_change act, in the transaction that journals the call, so they
// act once.

const object = (properties: Record<string, unknown>, required: string[]) => ({
  type: 'object',
  properties,
  required,
})

export const osTools: Record<string, ToolSpec> = {
  'os.finish': {
    name: 'os.finish',
    description:
      'End the task. outcome names how it ended ("succeeded" if it did what was asked, "failed" if it could not, or another outcome name your instructions give); summary says what happened.',
    parameters: object(
      {
        outcome: { type: 'string' },
        summary: { type: 'string' },
        issue: { description: 'the issue this run was about (an id, number or URL), if any' },
        pr: { description: 'the pull request it opened or worked on, if any' },
        output: { description: 'any result worth keeping, as JSON' },
        successorInput: {
          type: 'object',
          description: 'input to merge into the input of the tasks that follow',
        },
      },
      ['outcome', 'summary'],
    ),
  },
  'os.set_gate_summary': {
    name: 'os.set_gate_summary',
    description:
      'Say, in a sentence or two, what your next gated action will do; the person deciding reads it.',
    parameters: object({ summary: { type: 'string' } }, ['summary']),
  },
  'os.mail_send': {
    name: 'os.mail_send',
    description: "Send an email. To a team member's address it lands in their inbox.",
    parameters: object(
      { to: { type: 'string' }, subject: { type: 'string' }, body: { type: 'string' } },
      ['to', 'subject', 'body'],
    ),
  },
  'os.write_plan': {
    name: 'os.write_plan',
    description: 'Write down a plan: a title and its items.',
    parameters: object(
      {
        title: { type: 'string' },
        items: {
          type: 'array',
          items: object({ title: { type: 'string' }, detail: { type: 'string' } }, ['title']),
        },
      },
      ['title', 'items'],
    ),
  },
  [rememberTool]: {
    name: rememberTool,
    description:
      "Remember one lesson at the layer you train: later runs and chats of that layer recall it. With correctsId, the lesson corrects that active note (a person's note is corrected only once a person agrees). A lesson that says nearly what an active note says is refused: correct that note instead. With validUntil, a fact that goes stale (a release date, who is on call) stops being recalled then.",
    parameters: object(
      {
        text: { type: 'string', description: 'the lesson, one or two plain sentences' },
        evidence: {
          type: 'array',
          items: { type: 'string' },
          description: 'the ids of the runs that teach it',
        },
        correctsId: { type: 'string', description: 'the id of the active note this corrects' },
        validUntil: {
          type: 'string',
          description: 'ISO 8601 time with a zone, in the future: the lesson holds until then',
        },
      },
      ['text', 'evidence'],
    ),
  },
  [proposeChangeTool]: {
    name: proposeChangeTool,
    description:
      'Propose one change to the definition of the task you improve, for a person to approve or decline. changes: only the fields you change, as a version publish takes them (skillMd, goal, guardrails, tools, gates, inputs, spend, successors, metric, workspace, overlapPolicy); rationale: why, in a few sentences; evidence: the runs that show it, each {runId, why}.',
    parameters: object(
      {
        changes: {
          type: 'object',
          description: 'the changed fields only, e.g. {"skillMd": "<the whole new skill>"}',
        },
        rationale: { type: 'string' },
        evidence: {
          type: 'array',
          items: object({ runId: { type: 'string' }, why: { type: 'string' } }, ['runId', 'why']),
        },
      },
      ['changes', 'rationale', 'evidence'],
    ),
  },
  'os.ask_ceo': {
    name: 'os.ask_ceo',
    description:
      'Ask the chief executive questions and wait for the answers (optionally offering choices).',
    parameters: object(
      {
        questions: { type: 'array', items: { type: 'string' } },
        choices: {
          type: 'array',
          items: object({ key: { type: 'string' }, label: { type: 'string' } }, ['key', 'label']),
        },
      },
      ['questions'],
    ),
  },
}

/**
 * What a tool call found started but not answered after a crash or a takeover is answered: it may have
 * acted, so it is never made again (DESIGN 5, 11).
 */
export const interruptedCallResult =
  'This call was interrupted: whether it happened is unknown. Check before trying it again.'

/** A choice os.ask_ceo offers. */
export interface AskChoice {
  key: string
  label: string
}

/**
 * os.ask_ceo's arguments as a question gate holds them, in runs and chats alike: its questions (one
 * string is one question) and the choices that have a key (a choice without a label shows its key).
 */
export function askCeoArguments(args: Record<string, unknown>): {
  questions: string[]
  choices: AskChoice[]
} {
  const asked = args.questions
  const questions = (Array.isArray(asked) ? asked : asked === undefined ? [] : [asked])
    .map((q) => (typeof q === 'string' ? q : JSON.stringify(q)))
    .filter((q) => q.trim() !== '')
  const choices = (Array.isArray(args.choices) ? args.choices : []).flatMap((c: unknown) => {
    const choice = c as { key?: unknown; label?: unknown } | null
    if (!choice || typeof choice !== 'object' || choice.key === undefined) return []
    const key = String(choice.key)
    return [{ key, label: typeof choice.label === 'string' ? choice.label : key }]
  })
  return { questions, choices }
}

const text = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value ?? ''))

/**
 * Carries out os.mail_send, os.write_plan or os.remember in `tx` (the transaction that journals the
 * call). What the call is refused for is answered to the model as an error, for it to correct.
 */
export function actOsTool(
  tx: Db,
  run: RunRow,
  name: string,
  args: Record<string, unknown>,
  from: string,
  callId: string | undefined,
  trace: Trace,
): Promise<ToolOutcome> {
  // Its `execute_tool` span (issue 49), as a tool server's call has; `callId` is the model's.
  return toolSpan({ name, callId, source: 'os', arguments: args, trace }, async (span) => {
    const began = performance.now()
    let outcome: ToolOutcome | undefined
    try {
      outcome = await actOn(tx, run, name, args, from)
      span.result(outcome)
      return outcome
    } finally {
      metrics.toolCall('os', outcome?.isError === false, (performance.now() - began) / 1000)
    }
  })
}

async function actOn(
  tx: Db,
  run: RunRow,
  name: string,
  args: Record<string, unknown>,
  from: string,
): Promise<ToolOutcome> {
  if (name === 'os.mail_send') {
    const to = text(args.to).trim()
    if (!/^[^@\s]+@[^@\s]+$/.test(to))
      return { content: `"${to}" is not an email address.`, isError: true }
    const sent = await sendMail(tx, run.enterpriseId, run.id, {
      from,
      to,
      subject: text(args.subject),
      body: text(args.body),
    })
    return {
      content: sent.delivered === 'inbox' ? `Delivered to ${to}'s inbox.` : `Sent to ${to}.`,
      isError: false,
    }
  }
  if (name === 'os.write_plan') {
    const items = Array.isArray(args.items)
      ? (args.items as { title: string; detail?: string }[])
      : []
    const plan = await writePlan(tx, run.enterpriseId, run.id, { title: text(args.title), items })
    return { content: `Plan ${plan.id} written with ${items.length} item(s).`, isError: false }
  }
  if (name === rememberTool) return remember(tx, run, args)
  if (name === proposeChangeTool) return propose(tx, run, args)
  return { content: `${name} is not a tool that acts here.`, isError: true }
}

/**
 * os.remember: the lesson is written in a savepoint, so a refusal (a bad correctsId, a run of another
 * enterprise, no text) leaves the journal's transaction whole and is answered to the model.
 */
async function remember(tx: Db, run: RunRow, args: Record<string, unknown>): Promise<ToolOutcome> {
  try {
    const note = await (tx as Tx).savepoint((sp) => rememberLesson(sp, run, args))
    if (note.status === 'proposed')
      return {
        content: `Proposed note ${note.id} as a correction of note ${note.correctsId}, a person's note: it applies once a person agrees in the review queue.`,
        isError: false,
      }
    return {
      content: note.correctsId
        ? `Remembered note ${note.id}; it replaces note ${note.correctsId}.`
        : `Remembered note ${note.id}.`,
      isError: false,
    }
  } catch (err) {
    // A near-duplicate (issue 31): the model is told which note, and to correct it instead.
    if (err instanceof ApiError && err.code === 'note_duplicate')
      return {
        content: `${rememberTool} refused: ${err.message} To change what it says, call ${rememberTool} again with correctsId "${String(err.extra?.duplicateOf)}" and the corrected text; if it already says what you meant, remember nothing.`,
        isError: true,
      }
    if (err instanceof ApiError)
      return { content: `${rememberTool} refused: ${err.message}`, isError: true }
    // A value PostgreSQL cannot store (a NUL character in the text): the model's to correct. Anything
    // else (the database away) is the run's to stop on.
    if (isDataError(err))
      return { content: `${rememberTool} refused: ${(err as Error).message}`, isError: true }
    throw err
  }
}

/**
 * os.propose_change: the recommendation is stored in a savepoint, so a refusal (changes that fail the
 * definition checks, with the issues; a second proposal; evidence of another task) stores nothing and
 * is answered to the model, which may correct itself.
 */
async function propose(tx: Db, run: RunRow, args: Record<string, unknown>): Promise<ToolOutcome> {
  try {
    const rec = await (tx as Tx).savepoint((sp) => proposeChange(sp, run, args))
    return {
      content: `Proposed recommendation ${rec.id} (changes ${Object.keys(rec.changes).join(', ')}) against version ${rec.baseVersionId} of task ${rec.taskSlug}: a person approves or declines it.`,
      isError: false,
    }
  } catch (err) {
    if (err instanceof ApiError || isDataError(err))
      return { content: `${proposeChangeTool} refused: ${(err as Error).message}`, isError: true }
    throw err
  }
}

/** A PostgreSQL data exception or integrity violation (SQLSTATE classes 22 and 23). */
function isDataError(err: unknown): boolean {
  const code = (err as { name?: unknown; code?: unknown } | null)?.code
  return (
    (err as { name?: unknown })?.name === 'PostgresError' &&
    typeof code === 'string' &&
    /^2[23]/.test(code)
  )
}
