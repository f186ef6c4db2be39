import type { RunResult } from '../../../shared/schemas/runs.js'
import type { Successor } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import { randomUUID } from 'node:crypto'
import { appendEvents, type NewEvent } from './events.js'
import { type RunRow } from './rows.js'
import { insertRuns, notRunnable, startTarget, type NewRun } from './start.js'
import { maxExecutionRuns } from '../../config.js'

// Successors (spec: Task definition, successors; DESIGN 5): when a run ends, each successor of the
// version it ran is considered, and every decision is an event of the ended run.

/** A bound on any execution, so a loop the definition checks could not see still ends. */
export function maxRunsPerExecution(): number {
  return maxExecutionRuns()
}

/** `on` matches the outcome (default succeeded); terminal matches any end. */
export function outcomeMatches(successor: Pick<Successor, 'on'>, outcome: string): boolean {
  const on = successor.on ?? 'succeeded'
  return on === 'terminal' || on === outcome
}

const present = (value: unknown) =>
  value !== undefined && value !== null && value !== '' && value !== false

/** `when` looks at the result: has_issue, has_pr, no_pr. */
export function whenMatches(successor: Pick<Successor, 'when'>, result: RunResult | null): boolean {
  switch (successor.when) {
    case undefined:
      return true
    case 'has_issue':
      return present(result?.issue)
    case 'has_pr':
      return present(result?.pr)
    case 'no_pr':
      return !present(result?.pr)
    default:
      return false
  }
}

/** The issue a result names, as a key: its id, number or URL if it is an object, else itself. */
export function issueKey(issue: unknown): string | null {
  if (!present(issue)) return null
  if (typeof issue === 'object') {
    const o = issue as Record<string, unknown>
    return String(o.id ?? o.number ?? o.url ?? JSON.stringify(issue))
  }
  return String(issue)
}

/**
 * Follows the successors of runs that just ended, in their transaction: each match starts a pending run
 * in the same execution (delayed by delayMinutes, a timer in the database), whose input is the
 * predecessor's with result.successorInput merged over it. Successors never refuse for overlap. One
 * query finds which of the runs' versions have successors at all. Answers how many runs it started.
 */
export async function followSuccessors(
  tx: Db,
  ended: readonly RunRow[],
  successors?: Promise<Map<string, Successor[]>>,
): Promise<number> {
  if (ended.length === 0) return 0
  const successorsOf = await (successors ?? versionSuccessors(tx, ended))
  let started = 0
  for (const run of ended) {
    const successors = successorsOf.get(run.taskVersionId)
    if (successors) started += await follow(tx, run, successors)
  }
  return started
}

/**
 * The successors of the runs' versions, for those that have any. Only the versions are needed, so a
 * caller can ask before the runs have ended, in the same round trip as the ending.
 */
export async function versionSuccessors(
  tx: Db,
  runs: readonly Pick<RunRow, 'taskVersionId'>[],
): Promise<Map<string, Successor[]>> {
  const versions = await tx<{ id: string; successors: Successor[] }[]>`
    select id, definition -> 'successors' as successors from task_versions
     where id = any(${tx.array([...new Set(runs.map((r) => r.taskVersionId))])}::uuid[])
       and definition @? 'strict $.successors[0]'`
  return new Map(versions.map((v) => [v.id, v.successors]))
}

/** Follows one ended run's successors; answers how many runs it started. */
async function follow(tx: Db, run: RunRow, successors: Successor[]): Promise<number> {
  const outcome = run.result?.outcome ?? run.status
  // Every decision is an event of the ended run, written together once all are made.
  const decisions: NewEvent[] = []
  const decide = (type: string, successor: Successor, extra: Record<string, unknown> = {}) =>
    decisions.push({
      run,
      type: `successor.${type}`,
      payload: { slug: successor.slug, on: successor.on ?? 'succeeded', ...extra },
    })

  const limit = maxRunsPerExecution()
  // The execution's size and the tasks of the successors that match, read together (one round trip).
  const wanted = (successor: Successor) =>
    outcomeMatches(successor, outcome) && whenMatches(successor, run.result)
  const [[execution], targets] = await Promise.all([
    tx<
      { n: number }[]
    >`select count(*)::int as n from runs where execution_id = ${run.executionId}`,
    Promise.all(
      successors.map((successor) =>
        wanted(successor) ? startTarget(tx, run.enterpriseId, { slug: successor.slug }) : undefined,
      ),
    ),
  ])
  let started = 0
  const stopped: string[] = []
  // Runs to start, written together (and with the decisions) unless a count must see them first.
  let starting: NewRun[] = []
  const write = async () => {
    await insertRuns(tx, starting)
    starting = []
  }
  for (const [i, successor] of successors.entries()) {
    if (!outcomeMatches(successor, outcome)) {
      decide('skipped', successor, { because: `outcome ${outcome}` })
      if (run.status === 'failed' && outcomeMatches(successor, 'succeeded'))
        stopped.push(successor.slug)
      continue
    }
    if (!whenMatches(successor, run.result)) {
      decide('skipped', successor, { because: `when ${String(successor.when)}` })
      continue
    }
    const task = targets[i]
    if (!task) {
      decide('unknown_slug', successor, {
        message: `No task has the slug ${successor.slug}; nothing starts.`,
      })
      continue
    }
    const why = notRunnable(task)
    if (why) {
      decide('not_runnable', successor, { message: why })
      continue
    }
    const edge = `${run.taskId}->${successor.slug}`
    const issue = issueKey(run.result?.issue)
    if (typeof successor.maxRunsPerIssue === 'number' && issue !== null) {
      await write() // the count sees the runs started before it
      const [count] = await tx<{ n: number }[]>`
        select count(*)::int as n from runs
         where enterprise_id = ${run.enterpriseId} and successor_edge = ${edge} and issue_key = ${issue}`
      if (count!.n >= successor.maxRunsPerIssue) {
        decide('capped', successor, { issue, maxRunsPerIssue: successor.maxRunsPerIssue })
        continue
      }
    }
    if (execution!.n + started >= limit) {
      decide('execution_limit', successor, { maxRunsPerExecution: limit })
      continue
    }
    const delay = typeof successor.delayMinutes === 'number' ? successor.delayMinutes : undefined
    const next = {
      id: randomUUID(),
      task,
      input: { ...run.input, ...(run.result?.successorInput ?? {}) },
      origin: 'successor',
      status: 'pending',
      executionId: run.executionId,
      previousRunId: run.id,
      notBefore: delay ? new Date(Date.now() + delay * 60_000) : undefined,
      successorEdge: edge,
      issueKey: issue ?? undefined,
      resumeFromRunId: successor.resumeConversation ? run.id : undefined,
      // The predecessor's trace (issue 49): an execution's runs are one trace.
      traceParent: run.traceParent ?? undefined,
    } satisfies NewRun
    starting.push(next)
    started++
    decide('started', successor, {
      runId: next.id,
      ...(delay ? { delayMinutes: delay } : {}),
    })
  }
  await Promise.all([write(), appendEvents(tx, decisions)])
  if (run.status === 'failed' && started === 0 && stopped.length > 0) {
    await tx`update runs set stopped_successors = ${tx.json(stopped)} where id = ${run.id}`
  }
  return started
}
