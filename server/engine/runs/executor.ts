import type { Db, Sql } from '../../db/sql.js'
import { finishAll } from '../../domain/runs/index.js'
import type { RunRow } from '../../domain/runs/index.js'
import type { Logger } from '../../log.js'

/**
 * What executes a run of one kind (DESIGN 5, 6). The engine hands it a run this engine holds the lease
 * of, in status running: first started, or running again after a gate, a hold, a restart or a
 * takeover (`resumed`). The executor moves the run on (to an end, a gate, a hold) through the domain's
 * transitions, and must resume from what it journaled: no model call paid twice, no tool call acted
 * on twice. `signal` aborts when the run is cancelled or the engine stops.
 */
export interface Executor {
  execute(run: RunRow, context: ExecutionContext): Promise<void>
}

export interface ExecutionContext {
  sql: Sql
  log: Logger
  engineId: string
  signal: AbortSignal
  resumed: boolean
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
  return followed
}
