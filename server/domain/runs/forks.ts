import { ApiError } from '../../../shared/errors.js'
import type { ForkRequest, RunStep, RunSteps } from '../../../shared/schemas/forks.js'
import { transaction, type Db } from '../../db/sql.js'
import { appendEvent } from './events.js'
import { copyJournal, readSteps, type StepRow } from './journal.js'
import { withPause } from './pausing.js'
import { loadRun, type RunRow } from './rows.js'
import { enqueueRun } from './start.js'

// A run's steps and forking a run from one of them (issue 50; DESIGN 15). A step is a journal entry,
// numbered from 1 (the journal numbers from 0). A fork is a new run of the same task and input whose
// journal starts with copies of the original's entries before the fork point: the agent loop replays
// them as it replays a run's own journal after a takeover (no model or tool call made again, nothing
// reserved or counted for them), and goes on live from the fork point.

/** GET /v1/runs/{id}/steps: the run's journal as numbered steps. */
export async function listSteps(db: Db, enterpriseId: string, id: string): Promise<RunSteps> {
  await loadRun(db, enterpriseId, id)
  const rows = await readSteps(db, id)
  return { runId: id, steps: rows.map((row) => toStep(row, whyNotFrom(rows, row.step + 1))) }
}

/** A journal entry as a numbered step; `notForkable` says why no fork may go on from it (or none). */
export function toStep(row: StepRow, notForkable: string | undefined): RunStep {
  const gated = row.kind === 'tool' && typeof row.request.gateId === 'string'
  const response = row.response ?? {}
  return {
    step: row.step + 1,
    kind: row.kind === 'model' ? 'model' : gated ? 'gate' : 'tool',
    name: String((row.kind === 'model' ? row.request.model : row.request.name) ?? ''),
    status: row.state,
    isError: row.kind === 'model' ? row.state === 'failed' : Boolean(response.isError),
    toolCalls:
      row.kind === 'model' && Array.isArray(response.toolCalls)
        ? response.toolCalls.map((call: { name?: unknown }) => String(call?.name ?? ''))
        : [],
    gate: gated
      ? {
          id: row.request.gateId as string,
          // A gate deleted since (its run's retention) reads as decided: the step has its answer.
          status: row.gateStatus ?? 'decided',
          decision: row.gateDecision,
        }
      : null,
    costUsdCents: Number(row.costUsdMicros) / 10_000,
    copied: row.copied,
    startedAt: row.createdAt.toISOString(),
    finishedAt: row.finishedAt?.toISOString() ?? null,
    forkable: notForkable === undefined,
  }
}

/**
 * Why a fork cannot go on live from `fromStep` (from 1), or undefined: the step must be one of the
 * run's, and every step before it, which the fork takes as it was, must have ended. A gated call
 * waiting for its decision cannot be the fork point either: its gate is the original's to decide, and
 * a fork that asked again would hold a second gate on the same call.
 */
function whyNotFrom(steps: StepRow[], fromStep: number): string | undefined {
  if (!Number.isInteger(fromStep) || fromStep < 1 || fromStep > steps.length)
    return steps.length === 0
      ? `fromStep ${fromStep} is out of range: the run has no steps (only a kind llm run journals steps).`
      : `fromStep ${fromStep} is out of range: the run has steps 1 to ${steps.length}.`
  for (const row of steps.slice(0, fromStep)) {
    const n = row.step + 1
    const waiting = row.kind === 'tool' && row.request.gateId && row.gateStatus === 'waiting'
    if (waiting)
      return `step ${n} is a gated call of ${String(row.request.name)} waiting for its decision (gate ${String(row.request.gateId)}): fork from a step before it, or decide the gate first.`
    if (n < fromStep && row.state === 'started')
      return `step ${n} (${row.kind === 'model' ? 'a model call' : `a call of ${String(row.request.name)}`}) has not ended: a fork takes every step before its fork point as it was.`
  }
  return undefined
}

/**
 * POST /v1/runs/{id}/fork: a new pending run of the task and input of run `id`, in its execution, on its
 * version unless another of the task's is given, whose journal begins with the original's steps before
 * `fromStep` (copied, at no cost) and which goes on live from `fromStep`. 400 fork_step_invalid naming
 * why the step cannot be a fork point; 404 for a run of another enterprise or a version of another task.
 * A version other than the task's current one is what the task no longer runs (a gate added since,
 * a tool taken away): `mayRunOtherVersions` false (a token without tasks:write, which alone changes
 * what the task runs) refuses it, 403 api_token_scope.
 */
export async function forkRun(
  db: Db,
  enterpriseId: string,
  id: string,
  body: ForkRequest,
  by: string,
  mayRunOtherVersions = true,
): Promise<RunRow> {
  return transaction(db, async (tx) => {
    // Locked: a gate of the original decided meanwhile, or a step ended, is seen as it is.
    const original = await loadRun(tx, enterpriseId, id, true)
    const why = whyNotFrom(await readSteps(tx, id), body.fromStep)
    if (why) throw new ApiError('fork_step_invalid', why, { fromStep: body.fromStep })
    const versionId = body.versionId ?? original.taskVersionId
    const [version] = await tx<
      { number: number; current: boolean; currentNumber: number | null }[]
    >`
      select v.number, v.id = t.current_version_id as current, c.number as current_number
        from task_versions v
        join tasks t on t.id = v.task_id
        left join task_versions c on c.id = t.current_version_id
       where v.id = ${versionId} and v.task_id = ${original.taskId}`
    if (!version)
      throw new ApiError(
        'version_not_found',
        `No version ${versionId} of the run's task ${original.taskSlug}.`,
      )
    if (!version.current && !mayRunOtherVersions)
      throw new ApiError(
        'api_token_scope',
        `A fork on version ${version.number} of ${original.taskSlug}, not the task's current one (${version.currentNumber ?? 'none'}), also needs the scope tasks:write: it runs what the task no longer runs. Fork on the current version (versionId; osctl's --task-version), or with a token that may change the task.`,
        { needed: 'tasks:write' },
      )
    const forkedFrom = { runId: original.id, step: body.fromStep }
    const started = { by, ...(body.reason ? { why: body.reason } : {}) }
    const run = await enqueueRun(tx, enterpriseId, original.taskId, original.input, {
      origin: 'fork',
      executionId: original.executionId,
      previousRunId: original.id,
      // Its copied steps were made with the predecessor's conversation before them: so is the rest.
      resumeFromRunId: original.resumeFromRunId ?? undefined,
      versionId,
      forkedFrom,
      modelTier: body.modelTier,
      started,
      startedBy: by,
    })
    // In the run's own transaction: no engine finds the fork before its copied steps.
    await copyJournal(tx, original.id, run, body.fromStep - 1)
    await appendEvent(tx, original, 'run.forked', {
      runId: run.id,
      step: body.fromStep,
      ...started,
    })
    // A fork of a paused task waits: its answer says why, as a start's does.
    return withPause(tx, enterpriseId, run)
  })
}

/** The runs forked from a run, oldest first, as its detail lists them. */
export function forksOf(next: RunRow[]) {
  return next
    .filter((r) => r.origin === 'fork' && r.forkedFromRunId)
    .map((r) => ({ runId: r.id, step: r.forkedFromStep ?? 1, status: r.status }))
}
