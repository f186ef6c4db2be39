import type { Db } from '../../db/sql.js'

// A run's setback: it failed, or a person turned a gate of it down (reject, request_changes). Learning
// answers setbacks (os-improve's trigger, DESIGN 10) but runs know nothing of learning (DESIGN 2):
// learning/ registers its answer at start (installLearning), and the run's end and the gate's decision
// report their setbacks here, in their own transaction.

export interface Setback {
  enterpriseId: string
  taskId: string
  runId: string | null
  /** `run failed` or `gate reject` / `gate request_changes`. */
  because: string
}

export type SetbackHook = (tx: Db, setbacks: readonly Setback[]) => Promise<void>

const hooks = new Set<SetbackHook>()

/** Registers what answers setbacks (once per hook, however often it is registered). */
export function onSetbacks(hook: SetbackHook): void {
  hooks.add(hook)
}

/**
 * Reports setbacks in the caller's transaction to what answers them. With nothing registered it fails
 * the caller's change, none reported or some (issue 43): a process that forgot installLearning would
 * end runs and decide gates without ever calling for an improvement, and nobody would see it.
 */
export async function reportSetbacks(tx: Db, setbacks: readonly Setback[]): Promise<void> {
  if (hooks.size === 0)
    throw new Error('nothing answers setbacks: installLearning() was not called at start')
  if (setbacks.length === 0) return
  for (const hook of hooks) await hook(tx, setbacks)
}
