import { cutAt } from '../../../shared/text.js'
import type { Db } from '../../db/sql.js'

// How finished runs and the gate decisions on them are told to a model that learns from them: the
// os-improve run (learning/briefing.ts) and the os-train-memory run (memory/training.ts), DESIGN 10.

/**
 * `text`, cut to `max` characters with a word of how much was left out; never between the halves of a
 * surrogate pair (an emoji), which jsonb refuses (a lesson's excerpt) and a provider may too (a prompt).
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text
  const end = cutAt(text, max)
  return `${text.slice(0, end)}… (${text.length - end} more characters)`
}

/** A decided gate of a run, as a learning run is told it. */
export interface DecidedGate {
  runId: string
  kind: string
  tool: string | null
  decision: string
  note: string | null
  answers: unknown
  choice: string | null
  summary: string | null
  questions: string[] | null
  decidedBy: string | null
}

/** The decided gates of these runs of the enterprise, in the order they were decided. */
export function decidedGates(
  db: Db,
  enterpriseId: string,
  runIds: string[],
): Promise<DecidedGate[]> {
  if (runIds.length === 0) return Promise.resolve([])
  return db<DecidedGate[]>`
    select run_id, kind, tool, decision, note, answers, choice, summary, questions, decided_by
      from gates
     where enterprise_id = ${enterpriseId} and run_id = any(${db.array(runIds)}::uuid[])
       and status = 'decided' and decision is not null
     order by decided_at, id`
}

/** What of a run is told: its input and how it ended. */
export interface ToldRun {
  id: string
  status: string
  input: Record<string, unknown>
  result: { outcome?: string; summary?: string } | null
  reason: string | null
}

/**
 * One run told as lines under `heading`: its input, its outcome or the reason it failed, and each
 * decided gate on it with its note and answers (`gates` of any runs: those of this run are taken).
 */
export function tellRun(
  heading: string,
  run: ToldRun,
  gates: readonly DecidedGate[],
  chars: { input: number; result: number },
): string[] {
  const lines = ['', heading, `Input: ${clip(JSON.stringify(run.input), chars.input)}`]
  if (run.status === 'failed')
    lines.push(`Failed: ${clip(run.reason ?? '(no reason given)', chars.result)}`)
  else if (run.result)
    lines.push(
      `Outcome: ${run.result.outcome ?? run.status}${run.result.summary ? `: ${clip(run.result.summary, chars.result)}` : ''}`,
    )
  else if (run.reason) lines.push(`Reason: ${clip(run.reason, chars.result)}`)
  for (const g of gates) {
    if (g.runId !== run.id) continue
    const what =
      g.kind === 'question'
        ? `question to the chief executive${g.questions?.length ? ` (${clip(g.questions.join(' / '), chars.result)})` : ''}`
        : `gate on ${g.tool}`
    const parts = [`- ${what}: ${g.decision}`]
    if (g.decidedBy) parts.push(`by ${g.decidedBy}`)
    if (g.summary) parts.push(`(asked: ${clip(g.summary, chars.result)})`)
    if (g.note) parts.push(`note: ${clip(g.note, chars.result)}`)
    if (g.answers) parts.push(`answers: ${clip(JSON.stringify(g.answers), chars.result)}`)
    if (g.choice) parts.push(`choice: ${g.choice}`)
    lines.push(parts.join('; '))
  }
  return lines
}
