import { ApiError } from '../../../shared/errors.js'
import {
  fixedTools,
  knownOutcomes,
  successorWhens,
  type DefinitionIssue,
  type Successor,
  type VersionDefinition,
} from '../../../shared/schemas/tasks.js'
import { reaches } from './reach.js'
import type { Db } from '../../db/sql.js'

// The definition checks (spec: Errors, Definition checks). Run on create and on every version save,
// against the enterprise's other tasks and every tool connection's mustGate list.

export interface CheckedDefinition extends VersionDefinition {
  slug: string
  kind: 'llm' | 'deterministic'
}

export interface CheckContext {
  /** Successors of the enterprise's other tasks, by slug (the graph the loop check walks). */
  tasks: Map<string, { successors: Successor[] | null }>
  /** Tool names that a task must gate by name: the merge tool and every connection's mustGate list. */
  mustGate: string[]
}

/** Whether a gate names this tool itself (a gate on `conn` or `conn.*` does not count here). */
function gated(definition: VersionDefinition, tool: string): boolean {
  return definition.gates.some((g) => g.tool === tool)
}

export function checkDefinition(
  definition: CheckedDefinition,
  context: CheckContext,
): DefinitionIssue[] {
  const issues: DefinitionIssue[] = []
  const error = (code: string, message: string) => issues.push({ severity: 'error', code, message })
  const warning = (code: string, message: string) =>
    issues.push({ severity: 'warning', code, message })
  const { tools } = definition

  // The gate rule: the merge tool (and any tool on a connection's mustGate list), os.mail_send, and
  // os.write_plan (whose plans are asked of the chief executive) may run only behind a gate. Each is
  // reached as a run reaches it (reach.ts): by its name, or through `os`, `os.*`, `vcs`, `vcs.*`.
  for (const tool of context.mustGate) {
    if (reaches(tools, tool) && !gated(definition, tool)) {
      error(
        'gate_required_for_tool',
        `Tools reach ${tool}, which must be gated: add a gate naming ${tool} itself (a gate on its connection does not count).`,
      )
    }
  }
  if (reaches(tools, fixedTools.mailSend) && !gated(definition, fixedTools.mailSend)) {
    error(
      'gate_required_for_tool',
      `Tools reach ${fixedTools.mailSend}: add a gate naming ${fixedTools.mailSend} itself.`,
    )
  }
  if (reaches(tools, fixedTools.writePlan) && !gated(definition, fixedTools.askCeo)) {
    error(
      'gate_required_for_tool',
      `Tools reach ${fixedTools.writePlan}: add a gate on ${fixedTools.askCeo}.`,
    )
  }
  if (reaches(tools, fixedTools.merge) && !reaches(tools, fixedTools.gateSummary)) {
    error(
      'gate_summary_tool_required',
      `Tools reach ${fixedTools.merge}: add ${fixedTools.gateSummary} so the run can summarise what it asks to merge.`,
    )
  }
  if (definition.kind === 'deterministic' && tools.length > 0) {
    error(
      'deterministic_with_tools',
      'A deterministic task runs no model, so it may list no tools.',
    )
  }

  for (const successor of definition.successors ?? []) {
    const name = `Successor ${successor.slug}`
    if (successor.when !== undefined && !successorWhens.includes(successor.when as never)) {
      error('successor_when_unknown', `${name}: when must be one of ${successorWhens.join(', ')}.`)
    }
    const cap = successor.maxRunsPerIssue
    if (cap !== undefined && !(typeof cap === 'number' && Number.isInteger(cap) && cap >= 1)) {
      error(
        'successor_cap_invalid',
        `${name}: maxRunsPerIssue must be a whole number of at least 1.`,
      )
    }
    const delay = successor.delayMinutes
    if (delay !== undefined && !(typeof delay === 'number' && delay > 0 && delay <= 1440)) {
      error('successor_delay_invalid', `${name}: delayMinutes must be above 0 and at most 1440.`)
    }
    if (successor.slug !== definition.slug && !context.tasks.has(successor.slug)) {
      warning(
        'successor_unknown_slug',
        `${name}: no task has the slug ${successor.slug}; it will start nothing.`,
      )
    }
    if (successor.on !== undefined && !knownOutcomes.includes(successor.on as never)) {
      warning(
        'successor_on_unknown',
        `${name}: waits for the outcome "${successor.on}", which the service does not name (${knownOutcomes.join(', ')}).`,
      )
    }
  }

  const loop = terminalLoop(definition, context)
  if (loop) {
    error(
      'unconditional_loop',
      `Successors on terminal lead back to this task: ${loop.join(' -> ')}.`,
    )
  }
  return issues
}

/**
 * A path of `on: terminal` successors from this task back to it, through the other tasks' current
 * successors, or undefined. Such a chain would run forever whatever the runs do.
 */
function terminalLoop(definition: CheckedDefinition, context: CheckContext): string[] | undefined {
  const terminal = (successors: Successor[] | null) =>
    (successors ?? []).filter((s) => s.on === 'terminal').map((s) => s.slug)
  const seen = new Set<string>()
  const walk = (slug: string, path: string[]): string[] | undefined => {
    const next =
      slug === definition.slug
        ? terminal(definition.successors)
        : terminal(context.tasks.get(slug)?.successors ?? null)
    for (const target of next) {
      if (target === definition.slug) return [...path, target]
      if (seen.has(target)) continue
      seen.add(target)
      const found = walk(target, [...path, target])
      if (found) return found
    }
    return undefined
  }
  return walk(definition.slug, [definition.slug])
}

/**
 * Throws the refusal for the errors among `issues` (spec: Codes): gate_required_for_tool when the gate
 * rule is among them, else invalid_task_definition; the message joins every error's sentence.
 */
export function refuseErrors(issues: DefinitionIssue[]): void {
  const errors = issues.filter((i) => i.severity === 'error')
  if (errors.length === 0) return
  const code = errors.some((e) => e.code === 'gate_required_for_tool')
    ? 'gate_required_for_tool'
    : 'invalid_task_definition'
  throw new ApiError(code, errors.map((e) => e.message).join(' '), { issues })
}

// --- what Blockers shows ----------------------------------------------------------------------------

/** Warnings of active tasks (spec: GET /v1/blockers, taskProblems). */
export async function taskProblems(db: Db, enterpriseId: string) {
  const rows = await db<
    { id: string; slug: string; name: string; definitionIssues: DefinitionIssue[] }[]
  >`
    select id, slug, name, definition_issues from tasks
     where enterprise_id = ${enterpriseId} and status = 'active' and jsonb_array_length(definition_issues) > 0
     order by slug`
  return rows.map((r) => ({ taskId: r.id, slug: r.slug, name: r.name, issues: r.definitionIssues }))
}
