import { ApiError } from '../../../shared/errors.js'
import { transaction, type Db } from '../../db/sql.js'
import { withPause } from './pausing.js'
import { type RunRow, loadRun } from './rows.js'
import { enqueueRun } from './start.js'

// What people do to runs beyond starting and cancelling them: retry and clear.

/**
 * POST /v1/runs/{id}/retry: a new pending run on the task's current version, in the same execution,
 * whose input carries priorRunId. Repeated while that run is still pending, the same run answers. A
 * paused task's retry waits, and its answer says why (`pause`), as a start's does. Who asked
 * (`startedBy`) is said in the new run's first event, as a bulk retry says it.
 */
export async function retryRun(
  db: Db,
  enterpriseId: string,
  id: string,
  startedBy?: string,
): Promise<{ run: RunRow; created: boolean }> {
  return transaction(db, async (tx) => {
    const original = await loadRun(tx, enterpriseId, id, true)
    const [pending] = await tx<RunRow[]>`
      select * from runs
       where enterprise_id = ${enterpriseId} and previous_run_id = ${id} and origin = 'retry' and status = 'pending'
       order by created_at desc limit 1`
    if (pending) return { run: await withPause(tx, enterpriseId, pending), created: false }
    const run = await enqueueRun(
      tx,
      enterpriseId,
      original.taskId,
      { ...original.input, priorRunId: original.id },
      {
        origin: 'retry',
        executionId: original.executionId,
        previousRunId: original.id,
        // A successor that went on with its predecessor's conversation is retried with it too.
        resumeFromRunId: original.resumeFromRunId ?? undefined,
        startedBy,
        ...(startedBy ? { started: { by: startedBy } } : {}),
      },
    )
    return { run: await withPause(tx, enterpriseId, run), created: true }
  })
}

/** POST /v1/runs/{id}/clear: takes a failed run off Blockers; a second call changes nothing. */
export async function clearRun(db: Db, enterpriseId: string, id: string): Promise<RunRow> {
  const run = await loadRun(db, enterpriseId, id)
  if (run.status !== 'failed') {
    throw new ApiError(
      'illegal_transition',
      `Only a failed run or a stopped pipeline is on Blockers; run ${id} is ${run.status}.`,
    )
  }
  const [row] = await db<RunRow[]>`
    update runs set cleared_at = coalesce(cleared_at, now()) where id = ${id} returning *`
  return row!
}
