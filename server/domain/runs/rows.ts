import { ApiError } from '../../../shared/errors.js'
import {
  finishedStatuses,
  type Run,
  type RunResult,
  type RunStatus,
} from '../../../shared/schemas/runs.js'
import type { MemoryLayer } from '../../../shared/schemas/memory.js'
import type { ModelTier } from '../../../shared/schemas/models.js'
import type { RunPause } from '../../../shared/schemas/pauses.js'
import { type Db } from '../../db/sql.js'
import { traceIdOf } from '../../traces/index.js'

// A run as stored and as answered, and reading one.

/**
 * The memory layer a run may write (os.remember), as a trusted start recorded it (issue 41): the layer
 * and its owner. Never read from the run's input, which a webhook, a schedule or an API caller writes.
 */
export interface MemoryScope {
  layer: MemoryLayer
  teamId: string | null
  taskId: string | null
}

/** NOTIFY channel of run events; the payload is the run id. Wakes long-polling readers. */
export const runChannel = 'osd_run'

export interface RunRow {
  id: string
  enterpriseId: string
  taskId: string
  taskVersionId: string
  taskSlug: string
  taskName: string
  teamId: string | null
  kind: 'llm' | 'deterministic'
  overlapPolicy: 'skip' | 'os'
  lane: string
  memberId: string | null
  status: RunStatus
  origin: Run['origin']
  input: Record<string, unknown>
  result: RunResult | null
  reason: string | null
  blockedReason: string | null
  executionId: string
  previousRunId: string | null
  successorEdge: string | null
  issueKey: string | null
  resumeFromRunId: string | null
  stoppedSuccessors: string[] | null
  /** Set by POST /v1/memory/train's start only (MemoryScope). */
  memoryScope: MemoryScope | null
  /** A fork (issue 50): the run it was forked from and the step (from 1) it went on live from. */
  forkedFromRunId: string | null
  forkedFromStep: number | null
  /** The tier its model calls use instead of its version's (a fork's choice), or null. */
  modelTier: ModelTier | null
  /** The W3C traceparent its passes continue (issue 49); null for a run started untraced. */
  traceParent: string | null
  costUsdMicros: number
  /** Model calls of the run that had no price (issue 51): they count $0. Read by `select *`. */
  unpricedCalls?: number
  notBefore: Date | null
  leaseOwner: string | null
  leaseExpiresAt: Date | null
  attempts: number
  /** How many times the run was held (blocked) so far: its back-off grows with it. */
  holds: number
  clearedAt: Date | null
  createdAt: Date
  queuedAt: Date | null
  startedAt: Date | null
  finishedAt: Date | null
  updatedAt: Date
  /** Not a column: the pause that holds the run, where a read asked (withPauses, a start). */
  pause?: RunPause
}

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    status: row.status,
    input: row.input,
    costUsdCents: row.costUsdMicros / 10_000,
    costUnpriced: (row.unpricedCalls ?? 0) > 0,
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
    ...(row.status === 'blocked'
      ? { blockedReason: row.blockedReason ?? 'held for a reason outside the task' }
      : {}),
    taskId: row.taskId,
    taskVersionId: row.taskVersionId,
    taskSlug: row.taskSlug,
    memberId: row.memberId,
    executionId: row.executionId,
    previousRunId: row.previousRunId,
    origin: row.origin,
    ...(row.forkedFromRunId
      ? { forkedFrom: { runId: row.forkedFromRunId, step: row.forkedFromStep ?? 1 } }
      : {}),
    result: row.result,
    reason: row.reason,
    // Read by `select *`; a view that lists columns may leave it out: no trace then.
    traceId: traceIdOf(row.traceParent),
    ...(row.pause && !isFinished(row.status) ? { paused: row.pause } : {}),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

export function runNotFound(id: string): ApiError {
  return new ApiError('run_not_found', `No run ${id} in this enterprise.`)
}

export async function loadRun(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<RunRow> {
  const [row] = await db<RunRow[]>`
    select * from runs where enterprise_id = ${enterpriseId} and id = ${id} ${lock ? db`for no key update` : db``}`
  if (!row) throw runNotFound(id)
  return row
}

export const isFinished = (status: RunStatus) => finishedStatuses.includes(status)
