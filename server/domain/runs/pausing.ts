import type { Pause, RunPause } from '../../../shared/schemas/pauses.js'
import { transaction, type Db, type Sql } from '../../db/sql.js'
import { wakeWaitingTurns } from '../chats/index.js'
import { wakeEngines } from '../engine-wake.js'
import { endPause, insertPause, pauseJson, pausesInForce, toRunPause } from '../pauses/index.js'
import { loadTask, lockTasksOf } from '../tasks/index.js'
import { isFinished, type RunRow } from './rows.js'
import { transitionAll, transition } from './transitions.js'

// Pause and resume of a task or of the whole enterprise (issue 50; docs/usage.md#pause), as runs
// live them. While a pause is in force: starts are accepted and wait pending (start.ts), admission
// passes them over and dispatch leaves a queued one (admission.ts), a queued run goes back to pending
// here, and a running one goes back to pending after its current step (the engine asks runGoesOn
// between steps), leaving its lease and its concurrency slot. Resume wakes the engines: admission then
// takes the runs in their order. The pauses table itself is pauses/'s.

/** Who acts and why, as recorded on the pause (http/caller.ts actor: token:<id> or user:<id>). */
export interface PauseAction {
  by: string
  reason?: string
}

/**
 * Pauses a task: answers the pause in force, this one or (paused already: idempotent, the first one
 * kept with its reason) the earlier one. The task's row is locked first, as a start's share lock
 * takes it: a start decided before commits first and its queued run is sent back below, a start
 * after sees the pause (start.ts).
 */
export async function pauseTask(
  db: Sql,
  enterpriseId: string,
  taskId: string,
  action: PauseAction & { reason: string },
): Promise<Pause> {
  return transaction(db, async (tx) => {
    await loadTask(tx, enterpriseId, taskId, true)
    const { pause, created } = await insertPause(tx, {
      enterpriseId,
      taskId,
      by: action.by,
      reason: action.reason,
    })
    if (created) await sendBackQueued(tx, enterpriseId, taskId, { scope: 'task', ...pause })
    return pause
  })
}

/** Ends a task's pause (none in force: nothing happens, 200 all the same); its runs go on in order. */
export async function resumeTask(
  db: Sql,
  enterpriseId: string,
  taskId: string,
  action: PauseAction,
): Promise<void> {
  await transaction(db, async (tx) => {
    await loadTask(tx, enterpriseId, taskId)
    if (await endPause(tx, { enterpriseId, taskId, ...action })) wakeEngines(tx)
  })
}

/**
 * Pauses every task and chat of the enterprise; idempotent as pauseTask is. Every task's row is
 * locked first, as a task's pause locks its own: a start decided before commits first and its
 * queued run is sent back below, a start after sees the pause.
 */
export async function pauseEnterprise(
  db: Sql,
  enterpriseId: string,
  action: PauseAction & { reason: string },
): Promise<Pause> {
  return transaction(db, async (tx) => {
    await lockTasksOf(tx, enterpriseId)
    const { pause, created } = await insertPause(tx, {
      enterpriseId,
      taskId: null,
      by: action.by,
      reason: action.reason,
    })
    if (created) await sendBackQueued(tx, enterpriseId, null, { scope: 'enterprise', ...pause })
    return pause
  })
}

/** Ends the enterprise's pause: its runs go on in order, and its chats' replies are made. */
export async function resumeEnterprise(
  db: Sql,
  enterpriseId: string,
  action: PauseAction,
): Promise<void> {
  await transaction(db, async (tx) => {
    if (!(await endPause(tx, { enterpriseId, taskId: null, ...action }))) return
    wakeEngines(tx)
    await wakeWaitingTurns(tx, enterpriseId)
  })
}

/**
 * Queued runs of the paused task (or enterprise) go back to pending: a queued run holds its member,
 * and waits pending like the rest. Locked skip locked, in id order: one a dispatch holds now is either
 * started (and sent back by the engine after its first step check) or left queued by the next dispatch,
 * which sees the pause.
 */
async function sendBackQueued(
  tx: Db,
  enterpriseId: string,
  taskId: string | null,
  pause: RunPause,
): Promise<void> {
  const queued = await tx<RunRow[]>`
    select * from runs
     where enterprise_id = ${enterpriseId} and status = 'queued'
       ${taskId ? tx`and task_id = ${taskId}` : tx``}
     order by id
     for no key update skip locked`
  await transitionAll(
    tx,
    'pending',
    queued.map((run) => ({ run, event: pausedEvent(pause) })),
  )
}

function pausedEvent(pause: RunPause): Record<string, unknown> {
  return { because: `its ${pause.scope} was paused`, paused: pause }
}

/**
 * What the engine asks between two steps of a run it executes: `lost` when the run is no longer its
 * (cancelled, taken over), the pause that holds it, or `go`. One read.
 */
export async function runGoesOn(
  db: Db,
  engineId: string,
  runId: string,
): Promise<'go' | 'lost' | RunPause> {
  const [row] = await db<
    { status: string; leaseOwner: string | null; pause: Parameters<typeof toRunPause>[0] | null }[]
  >`
    select r.status, r.lease_owner, ${pauseJson(db, db`r.enterprise_id`, db`r.task_id`)} as pause
      from runs r where r.id = ${runId}`
  if (row?.status !== 'running' || row.leaseOwner !== engineId) return 'lost'
  return row.pause ? toRunPause(row.pause) : 'go'
}

/**
 * A running run held by a pause goes back to pending (in the engine's transaction, the run locked as
 * its): its lease and its slot are given up, its member kept, and admission takes it again after the
 * resume. Its journal keeps every step made: nothing is made again.
 */
export async function waitPaused(tx: Db, run: RunRow, pause: RunPause): Promise<RunRow> {
  return transition(tx, run, 'pending', { notBefore: null }, pausedEvent(pause))
}

/** The pauses that hold these runs of one enterprise (runs not finished), set on them for toRun. */
export async function withPauses<T extends RunRow>(
  db: Db,
  enterpriseId: string,
  runs: T[],
): Promise<T[]> {
  if (!runs.some((run) => !isFinished(run.status))) return runs
  const pauses = await pausesInForce(db, enterpriseId)
  if (pauses.length === 0) return runs
  const own = pauses.find((p) => p.taskId === null)
  const byTask = new Map(pauses.filter((p) => p.taskId).map((p) => [p.taskId, p]))
  for (const run of runs) {
    const pause = own ?? byTask.get(run.taskId)
    if (pause && !isFinished(run.status))
      run.pause = {
        scope: pause.taskId ? 'task' : 'enterprise',
        at: pause.pausedAt.toISOString(),
        by: pause.pausedBy,
        reason: pause.reason,
      }
  }
  return runs
}

/** withPauses for one run: a run answered on its own (a retry, a fork) says why it waits too. */
export async function withPause<T extends RunRow>(
  db: Db,
  enterpriseId: string,
  run: T,
): Promise<T> {
  return (await withPauses(db, enterpriseId, [run]))[0]!
}
