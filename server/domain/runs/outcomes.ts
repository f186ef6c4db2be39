import type { Db } from '../../db/sql.js'

// A run's outcome: it ended succeeded or failed (a cancelled run has none: a person stopped it, it did
// not do well or badly). Learning counts outcomes against the notes the runs recalled (memory impact,
// DESIGN 10), but runs know nothing of learning (DESIGN 2): learning/ registers its counter at start
// (installLearning), and a run's end reports its outcome here, in the end's own transaction, so the
// counts move with the ends they count.

export interface RunOutcome {
  enterpriseId: string
  taskId: string
  runId: string
  outcome: 'succeeded' | 'failed'
}

export type OutcomeHook = (tx: Db, outcomes: readonly RunOutcome[]) => Promise<void>

const hooks = new Set<OutcomeHook>()

/** Registers what counts outcomes (once per hook, however often it is registered). */
export function onRunOutcomes(hook: OutcomeHook): void {
  hooks.add(hook)
}

/**
 * Reports runs' outcomes in the caller's transaction to what counts them. With nothing registered it
 * fails the caller's end, outcomes or none (issue 43): a process that forgot installLearning would end
 * runs without counting memory impact, and nobody would see it.
 */
export async function reportOutcomes(tx: Db, outcomes: readonly RunOutcome[]): Promise<void> {
  if (hooks.size === 0)
    throw new Error('nothing counts run outcomes: installLearning() was not called at start')
  if (outcomes.length === 0) return
  for (const hook of hooks) await hook(tx, outcomes)
}
