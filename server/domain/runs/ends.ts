import { ApiError } from '../../../shared/errors.js'
import { transaction, type Db } from '../../db/sql.js'
import { isFinished, loadRun, type RunRow } from './rows.js'
import { transitionAll, type Move, type TransitionFields } from './transitions.js'
import { reportOutcomes } from './outcomes.js'
import { reportSetbacks } from './setbacks.js'
import { followSuccessors, versionSuccessors } from './successors.js'

// Ending runs (spec: States and transitions; DESIGN 3, 5): an end and the runs its successors start are
// one change. Above transitions.ts (the status change) and successors.ts (which starts runs), so that
// neither of those imports the other's caller.

type End = 'succeeded' | 'failed' | 'cancelled'

/**
 * Ends runs (succeeded, failed or cancelled) and follows their successors, in the caller's
 * transaction: the end of a run and what it starts are one change (DESIGN 3). A run ended without a
 * result gets the plain one of its outcome. Answers the ended runs and how many runs their successors
 * started; `through` as transitionAll has it.
 */
export async function finishAll(
  tx: Db,
  to: End,
  moves: readonly Move[],
  options: { stopping?: boolean; through?: 'running' } = {},
): Promise<{ ended: RunRow[]; followed: number }> {
  // Which of their versions have successors: asked now, answered in the ending's round trip.
  const successors =
    options.stopping || moves.length === 0
      ? undefined
      : versionSuccessors(
          tx,
          moves.map((m) => m.run),
        )
  successors?.catch(() => undefined) // a failure fails the transaction, which the ending reports
  const ended = await transitionAll(
    tx,
    to,
    moves.map((m) => ({
      ...m,
      fields: {
        ...m.fields,
        result:
          m.fields?.result ??
          (to === 'succeeded'
            ? { outcome: 'succeeded' }
            : { outcome: to, summary: m.fields?.reason }),
      },
    })),
    { through: options.through },
  )
  const followed = successors ? await followSuccessors(tx, ended, successors) : 0
  // A failed run of a custom task calls for its improvement (DESIGN 10), in the same change.
  if (to === 'failed')
    await reportSetbacks(
      tx,
      ended.map((run) => ({
        enterpriseId: run.enterpriseId,
        taskId: run.taskId,
        runId: run.id,
        because: 'run failed',
      })),
    )
  // Its outcome counts for the notes it recalled (memory impact, DESIGN 10), in the same change. Only
  // an llm run recalls notes, and a task's runs are all of its kind: a deterministic run's outcome
  // counts for no note, and is not reported (a round trip and a task's counter row locked at each
  // end of a pipeline's steps; issue 30).
  const reported = ended.filter((run) => run.kind === 'llm')
  if (to !== 'cancelled')
    await reportOutcomes(
      tx,
      reported.map((run) => ({
        enterpriseId: run.enterpriseId,
        taskId: run.taskId,
        runId: run.id,
        outcome: to,
      })),
    )
  return { ended, followed }
}

/** One run's end (finishAll with one move). */
export async function finishRun(
  tx: Db,
  run: RunRow,
  to: End,
  fields: TransitionFields = {},
  options: { stopping?: boolean } = {},
): Promise<RunRow> {
  const { ended } = await finishAll(tx, to, [{ run, fields }], options)
  return ended[0]!
}

/**
 * POST /v1/runs/{id}/cancel: any unfinished run is cancelled; a finished one is 409 illegal_transition.
 * `by` (the caller's actor: token:<id> or user:<id>) is said in its event, as a bulk cancel says it.
 */
export async function cancelRun(
  db: Db,
  enterpriseId: string,
  id: string,
  by?: string,
  reason = 'Cancelled.',
): Promise<RunRow> {
  return transaction(db, async (tx) => {
    const run = await loadRun(tx, enterpriseId, id, true)
    if (isFinished(run.status)) {
      throw new ApiError(
        'illegal_transition',
        `Run ${id} already ended ${run.status}; it cannot be cancelled.`,
        {
          status: run.status,
        },
      )
    }
    const { ended } = await finishAll(tx, 'cancelled', [
      { run, fields: { reason }, event: by ? { by } : {} },
    ])
    return ended[0]!
  })
}
