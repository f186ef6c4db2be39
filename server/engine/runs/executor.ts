import { onCommit, type Db, type Sql } from '../../db/sql.js'
import { finishAll } from '../../domain/runs/index.js'
import type { RunRow } from '../../domain/runs/index.js'
import type { RunStatus } from '../../../shared/schemas/runs.js'
import type { Logger } from '../../log.js'
import { recordSpan, tracingOn, type Trace } from '../../traces/index.js'

/**
 * What executes a run of one kind (DESIGN 5, 6). The engine hands it a run this engine holds the lease
 * of, in status running: first started, or running again after a gate, a hold, a restart or a
 * takeover (`resumed`). The executor moves the run on (to an end, a gate, a hold) through the domain's
 * transitions, and must resume from what it journaled: no model call paid twice, no tool call acted
 * on twice. `signal` aborts when the run is cancelled or the engine stops.
 */
export interface Executor {
  /** Answers the status it left the run in, when it moved it (the pass span says it: issue 49). */
  execute(run: RunRow, context: ExecutionContext): Promise<RunStatus | undefined>
}

export interface ExecutionContext {
  sql: Sql
  /** Its lines carry the pass's trace (issue 49). */
  log: Logger
  engineId: string
  signal: AbortSignal
  resumed: boolean
  /** The pass's span: the parent of the run's model and tool calls and its recall (issue 49). */
  trace: Trace
}

/**
 * A deterministic task runs no model (spec: Task definition, kind): its run succeeds with
 * result.output = its input, then follows its successors. The issue and pull request its input names
 * are passed on in the result, so that successors' `when` can route on them (DESIGN 5: routing and
 * pipeline steps). It acts on nothing outside the database, so its queued runs go through running to
 * succeeded in the transaction that dispatches them (admission.dispatchQueued), in one statement.
 * Answers how many runs their successors started.
 */
export async function completeDeterministic(tx: Db, runs: RunRow[]): Promise<number> {
  const began = tracingOn() ? new Date() : undefined
  const { followed } = await finishAll(
    tx,
    'succeeded',
    runs.map((run) => {
      const { issue, pr } = run.input
      const result = {
        outcome: 'succeeded',
        output: run.input,
        ...(issue !== undefined ? { issue } : {}),
        ...(pr !== undefined ? { pr } : {}),
      }
      return { run, fields: { result } }
    }),
    { through: 'running' },
  )
  // Its pass, in its run's trace (issue 49), once the end is committed.
  if (began)
    onCommit(tx, () => {
      const end = new Date()
      for (const run of runs)
        recordSpan(
          'run pass',
          passAttributes(run, 'succeeded'),
          { start: began, end },
          run.traceParent,
        )
    })
  return followed
}

/** The attributes of a run's pass span (issue 49): which run, and its status after the pass. */
export function passAttributes(run: RunRow, status: RunStatus | undefined) {
  return {
    'osd.run.id': run.id,
    'osd.task.slug': run.taskSlug,
    'osd.task.kind': run.kind,
    'osd.enterprise.id': run.enterpriseId,
    'osd.execution.id': run.executionId,
    'osd.run.status': status,
  }
}
