import type { Db } from '../../db/sql.js'
import { sendMail } from '../../domain/mail.js'
import { writePlan } from '../../domain/plans.js'
import type { RunRow } from '../../domain/runs.js'
import type { ToolSpec } from './providers.js'
import type { ToolOutcome } from './mcp.js'

// The built-in os.* tools (spec: Task definition, tools; DESIGN 6). os.finish ends the run with an
// outcome; os.ask_ceo opens a question gate; os.set_gate_summary says what the next gate asks for;
// os.mail_send and os.write_plan act, in the transaction that journals the call, so they act once.

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

export const isOsTool = (name: string) => name in osTools

const text = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value ?? ''))

/** Carries out os.mail_send or os.write_plan in `tx` (the transaction that journals the call). */
export async function actOsTool(
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
  return { content: `${name} is not a tool that acts here.`, isError: true }
}
