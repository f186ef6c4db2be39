import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Gate } from '../../../shared/schemas/gates.js'
import type { ToolOutcome } from '../tools/index.js'
import { memorySection, type PromptNote } from './memory.js'

// What the agent loop says to the model and reads from it, as plain functions of their inputs: the
// system prompt, the result os.finish reports, and the answer a decided gate gives the model.

export function systemPrompt(input: {
  member: { name: string; persona: string } | undefined
  taskName: string
  enterpriseName: string | undefined
  definition: VersionDefinition
  notes: PromptNote[]
}): string {
  const { member, definition } = input
  const lines = [
    `You are ${member?.name ?? 'a team member'}${member?.persona ? `. ${member.persona}` : ''}.`,
    `You carry out the task "${input.taskName}" for ${input.enterpriseName ?? 'the enterprise'}.`,
    '',
    '# Skill',
    definition.skillMd,
  ]
  if (definition.goal) lines.push('', '# Goal', definition.goal)
  if (definition.metric?.text) lines.push('', '# Metric', definition.metric.text)
  if (definition.guardrails.length)
    lines.push('', '# Guardrails', ...definition.guardrails.map((g) => `- ${g}`))
  lines.push(...memorySection(input.notes))
  lines.push(
    '',
    '# Finishing',
    'Work with the tools you have. When you are done, call os.finish with an outcome and a summary.',
  )
  return lines.join('\n')
}

/** The result os.finish reports, from its arguments (an outcome of succeeded unless it says one). */
export function finishResult(
  a: Record<string, unknown>,
): { outcome: string; summary: string } & Record<string, unknown> {
  return {
    outcome: typeof a.outcome === 'string' && a.outcome ? a.outcome : 'succeeded',
    summary: typeof a.summary === 'string' ? a.summary : '',
    ...(a.issue !== undefined ? { issue: a.issue } : {}),
    ...(a.pr !== undefined ? { pr: a.pr } : {}),
    ...(a.output !== undefined ? { output: a.output } : {}),
    ...(a.successorInput && typeof a.successorInput === 'object'
      ? { successorInput: a.successorInput as Record<string, unknown> }
      : {}),
  }
}

/**
 * What a decided gate answers the model: a question's answers (as a refusal unless approved), a
 * refusal or a request for changes; 'approved' when the call is to be made.
 */
export function gateAnswer(gate: Gate): ToolOutcome | 'approved' {
  if (gate.kind === 'question') {
    const answer = {
      decision: gate.decision,
      answers: gate.answers,
      choice: gate.choice,
      note: gate.note,
    }
    // Answers given with a refusal still go to the model, but as a refusal.
    return { content: JSON.stringify(answer), isError: gate.decision !== 'approve' }
  }
  if (gate.decision === 'reject')
    return {
      content: `A person refused this call${gate.note ? `: ${gate.note}` : '.'}`,
      isError: true,
    }
  if (gate.decision === 'request_changes')
    return {
      content: `A person asked for changes before this call${gate.note ? `: ${gate.note}` : '.'} You may propose it again.`,
      isError: true,
    }
  if (gate.decision !== 'approve')
    return { content: 'The gate was closed undecided.', isError: true }
  return 'approved'
}
