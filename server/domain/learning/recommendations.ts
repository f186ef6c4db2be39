import { ApiError } from '../../../shared/errors.js'
import { isUuid } from '../../../shared/ids.js'
import {
  RecommendationChanges,
  type FieldChange,
  type Recommendation,
  type RecommendationDecision,
  type RecommendationDetail,
  type RecommendationEvidence,
} from '../../../shared/schemas/recommendations.js'
import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import { storable } from '../../../shared/text.js'
import { transaction, type Db } from '../../db/sql.js'
import {
  checkContext,
  checkDefinition,
  loadTask,
  loadVersion,
  proposeChangeTool,
  publishVersion,
  taskNotFound,
  type TaskRow,
} from '../tasks/index.js'
import { lineDiff } from './line-diff.js'
import { appendEvent, enqueueRun, type RunRow } from '../runs/index.js'
import { archivedRun } from '../retention/index.js'

// Recommendations (spec: Concepts, Recommendations; Endpoints Recommendations; DESIGN 10): an os-improve
// run proposes a change to a task with os.propose_change; a person approves it (a new version on the
// base version, and a run of the task on it) or declines it with a reason. Saving any version of the
// task declines the waiting ones (tasks.ts, publishVersion).

interface RecommendationRow {
  id: string
  enterpriseId: string
  taskId: string
  taskSlug: string
  baseVersionId: string
  proposedByRunId: string | null
  changes: RecommendationChanges
  rationale: string
  evidence: RecommendationEvidence[]
  status: Recommendation['status']
  decision: Recommendation['decision']
  reason: string | null
  decidedBy: string | null
  decidedAt: Date | null
  idempotencyKey: string | null
  versionId: string | null
  runId: string | null
  createdAt: Date
}

function toRecommendation(row: RecommendationRow): Recommendation {
  return {
    id: row.id,
    taskId: row.taskId,
    taskSlug: row.taskSlug,
    status: row.status,
    baseVersionId: row.baseVersionId,
    changes: row.changes,
    rationale: row.rationale,
    evidence: row.evidence,
    proposedByRunId: row.proposedByRunId,
    createdAt: row.createdAt.toISOString(),
    decidedAt: row.decidedAt?.toISOString() ?? null,
    decision: row.decision,
    reason: row.reason,
    decidedBy: row.decidedBy,
    versionId: row.versionId,
    runId: row.runId,
  }
}

export function recommendationNotFound(id: string): ApiError {
  return new ApiError('recommendation_not_found', `No recommendation ${id} in this enterprise.`)
}

async function loadRecommendation(
  db: Db,
  enterpriseId: string,
  id: string,
  lock = false,
): Promise<RecommendationRow> {
  if (!isUuid(id)) throw recommendationNotFound(id)
  const [row] = await db<RecommendationRow[]>`
    select * from recommendations where enterprise_id = ${enterpriseId} and id = ${id}
    ${lock ? db`for update` : db``}`
  if (!row) throw recommendationNotFound(id)
  return row
}

// --- reading ------------------------------------------------------------------------------------------

/** How long decided recommendations stay listed (spec: Limits). */
export const decidedListedDays = 60

/**
 * GET /v1/recommendations: those waiting, newest first; view=decided: those decided in the last 60
 * days, most recently decided first. taskId narrows (one that names nothing: none).
 */
export async function listRecommendations(
  db: Db,
  enterpriseId: string,
  filters: { taskId?: string; view?: 'waiting' | 'decided' },
): Promise<Recommendation[]> {
  const task = filters.taskId
    ? isUuid(filters.taskId)
      ? db`and task_id = ${filters.taskId}`
      : db`and false`
    : db``
  const rows =
    filters.view === 'decided'
      ? await db<RecommendationRow[]>`
          select * from recommendations
           where enterprise_id = ${enterpriseId} and status <> 'waiting'
             and decided_at > now() - ${decidedListedDays} * interval '1 day' ${task}
           order by decided_at desc, id desc`
      : await db<RecommendationRow[]>`
          select * from recommendations
           where enterprise_id = ${enterpriseId} and status = 'waiting' ${task}
           order by created_at desc, id desc`
  return rows.map(toRecommendation)
}

/**
 * GET /v1/tasks/{id}/recommendations: the task's, newest first: every waiting one and those decided in
 * the last 60 days (view narrows to either).
 */
export async function listTaskRecommendations(
  db: Db,
  enterpriseId: string,
  taskId: string,
  view: 'waiting' | 'decided' | 'all' = 'all',
): Promise<Recommendation[]> {
  await loadTask(db, enterpriseId, taskId)
  const rows = await db<RecommendationRow[]>`
    select * from recommendations
     where enterprise_id = ${enterpriseId} and task_id = ${taskId}
       and (${view !== 'decided'} and status = 'waiting'
            or ${view !== 'waiting'} and status <> 'waiting'
               and decided_at > now() - ${decidedListedDays} * interval '1 day')
     order by created_at desc, id desc`
  return rows.map(toRecommendation)
}

/** The definition fields in the order a person reads them. */
const fieldOrder: (keyof VersionDefinition)[] = [
  'goal',
  'metric',
  'guardrails',
  'skillMd',
  'tools',
  'gates',
  'inputs',
  'spend',
  'workspace',
  'successors',
  'overlapPolicy',
]

/** GET /v1/recommendations/{id}: one in full, its changes against its base version. */
export async function getRecommendation(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<RecommendationDetail> {
  const row = await loadRecommendation(db, enterpriseId, id)
  const [base, [task]] = await Promise.all([
    loadVersion(db, enterpriseId, row.baseVersionId),
    db<{ currentVersionId: string }[]>`
      select current_version_id from tasks where enterprise_id = ${enterpriseId} and id = ${row.taskId}`,
  ])
  const before = (base?.definition ?? {}) as Partial<VersionDefinition>
  const changes = row.changes as Partial<VersionDefinition>
  const fieldChanges: FieldChange[] = fieldOrder
    .filter((field) => changes[field] !== undefined)
    .map((field) => ({ field, before: before[field] ?? null, after: changes[field] }))
  return {
    ...toRecommendation(row),
    baseIsCurrent: task?.currentVersionId === row.baseVersionId,
    baseVersionNumber: base?.number ?? null,
    fieldChanges,
    skillDiff:
      changes.skillMd === undefined ? null : lineDiff(before.skillMd ?? '', changes.skillMd),
  }
}

// --- deciding -----------------------------------------------------------------------------------------

/**
 * The input of the newest of a recommendation's evidence runs, which the run its approval starts is
 * given; {} without evidence. A recommendation outlives its runs' retention window (issue 46), so an
 * evidence run the retention pass moved out is read from the archive.
 */
async function evidenceInput(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  taskId: string,
  runIds: string[],
): Promise<Record<string, unknown>> {
  if (runIds.length === 0) return {}
  const live = await db<{ id: string; input: Record<string, unknown>; createdAt: Date }[]>`
    select id, input, created_at from runs
     where enterprise_id = ${enterpriseId} and task_id = ${taskId}
       and id = any(${db.array(runIds)}::uuid[])`
  const gone = runIds.filter((id) => !live.some((r) => r.id === id))
  const archived = await Promise.all(
    gone.map((id) => archivedRun(db, archiveDir, enterpriseId, id)),
  )
  const runs = [
    ...live.map((r) => ({ input: r.input, at: r.createdAt.getTime() })),
    ...archived.flatMap((r) =>
      r?.taskId === taskId ? [{ input: r.input, at: Date.parse(r.createdAt) }] : [],
    ),
  ]
  return runs.sort((a, b) => b.at - a.at)[0]?.input ?? {}
}

/**
 * POST /v1/recommendations/{id}/decision. Approve publishes the changes as a new version on the base
 * version and starts a run of the task on it (input of the newest evidence run, else {}; origin
 * recommendation; pending until its lane and a member are free, never refused for overlap), in one
 * transaction: a refusal publishes nothing. Decline records the reason. A decided one is 409
 * already_decided, unless the same caller repeats the same idempotencyKey: then the first decision
 * answers again (`repeated`) and nothing more happens.
 *
 * The task is locked before the recommendation, as a person's save locks the task before it declines
 * the task's waiting recommendations, so a save and an approval never wait on each other in a circle.
 */
export async function decideRecommendation(
  db: Db,
  archiveDir: string,
  enterpriseId: string,
  id: string,
  body: RecommendationDecision,
  decidedBy: string,
): Promise<{ recommendation: Recommendation; repeated: boolean }> {
  const first = await loadRecommendation(db, enterpriseId, id)
  return transaction(db, async (tx) => {
    const task =
      body.decision === 'approve'
        ? (
            await tx<TaskRow[]>`
              select * from tasks where enterprise_id = ${enterpriseId} and id = ${first.taskId}
              for update`
          )[0]
        : undefined
    const row = await loadRecommendation(tx, enterpriseId, id, true)
    if (row.status !== 'waiting') {
      if (
        body.idempotencyKey &&
        row.idempotencyKey === body.idempotencyKey &&
        row.decidedBy === decidedBy
      )
        return { recommendation: toRecommendation(row), repeated: true }
      throw new ApiError(
        'already_decided',
        `Recommendation ${id} was already ${row.status}${row.reason ? `: ${row.reason}` : '.'}`,
        { status: row.status, decision: row.decision },
      )
    }
    const decide = (status: 'approved' | 'declined') => tx<RecommendationRow[]>`
      update recommendations
         set status = ${status}, decision = ${body.decision}, reason = ${body.reason?.trim() || null},
             decided_by = ${decidedBy}, decided_at = now(), idempotency_key = ${body.idempotencyKey ?? null}
       where id = ${id}
      returning *`
    if (body.decision === 'decline') {
      const [declined] = await decide('declined')
      return { recommendation: toRecommendation(declined!), repeated: false }
    }
    if (!task)
      throw new ApiError(
        'task_not_found',
        `Task ${row.taskSlug} (${row.taskId}) of this recommendation was deleted: nothing to change.`,
      )
    refuseApproval(task)
    if (task.currentVersionId !== row.baseVersionId)
      throw new ApiError(
        'task_version_conflict',
        `Task ${task.slug} has a newer version than the one this recommendation was proposed on (current: ${task.currentVersionId}); decline it and improve the task again.`,
        { currentVersionId: task.currentVersionId },
      )
    // Approved first, so that the save below declines only the task's other waiting ones.
    await decide('approved')
    const version = await publishVersion(
      tx,
      enterpriseId,
      task.id,
      { ...row.changes, baseVersionId: row.baseVersionId },
      { by: decidedBy, why: `Recommendation ${id} was approved instead.` },
    )
    const input = await evidenceInput(
      tx,
      archiveDir,
      enterpriseId,
      task.id,
      row.evidence.map((e) => e.runId),
    )
    const run = await enqueueRun(tx, enterpriseId, task.id, input, {
      origin: 'recommendation',
    })
    await appendEvent(tx, run, 'recommendation.approved', {
      recommendationId: id,
      versionId: version.id,
    })
    const [approved] = await tx<RecommendationRow[]>`
      update recommendations set version_id = ${version.id}, run_id = ${run.id} where id = ${id}
      returning *`
    return { recommendation: toRecommendation(approved!), repeated: false }
  })
}

/** Why a task's definition cannot take an approved change: 409 recommendation_not_applicable. */
function refuseApproval(task: TaskRow): void {
  const why =
    task.origin === 'builtin'
      ? `${task.slug} is one of the service's own tasks: its definition never changes.`
      : task.origin === 'clone'
        ? `${task.slug} is a clone: its definition belongs to the original's owner. Copy it to change it.`
        : task.status === 'deprecated'
          ? `${task.slug} is deprecated: it starts no new run. Make it active to approve this.`
          : undefined
  if (why) throw new ApiError('recommendation_not_applicable', why, { taskId: task.id })
}

// --- proposing (os.propose_change) --------------------------------------------------------------------

/** The longest rationale and evidence `why` a proposal takes. */
const maxRationale = 4000
const maxWhy = 1000

/** The task an os-improve run's input names, or undefined. */
export function improvedTaskId(input: Record<string, unknown>): string | undefined {
  const id = input.taskId
  return typeof id === 'string' && isUuid(id) ? id : undefined
}

/**
 * os.propose_change for an os-improve run (DESIGN 10): stores a waiting recommendation against the
 * task's current version and records `recommendation.proposed` on the run. Refuses with an ApiError,
 * storing nothing, what the model is to correct: no task in the input, a task that cannot take changes,
 * a second proposal of the run, changes that are not fields of a version publish, change nothing, or
 * fail the definition checks (with the issues), no rationale, evidence that names no run of the task.
 */
export async function proposeChange(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'input'>,
  args: Record<string, unknown>,
): Promise<Recommendation> {
  const taskId = improvedTaskId(run.input)
  if (!taskId)
    throw new ApiError(
      'invalid_request',
      `${proposeChangeTool} proposes a change to the task the run's input names (taskId); this run's input names none.`,
    )
  const task = await loadTask(db, run.enterpriseId, taskId, true).catch(() => {
    throw taskNotFound(taskId)
  })
  if (task.origin === 'builtin' || task.origin === 'clone')
    throw new ApiError(
      'invalid_request',
      `${task.slug} cannot take changes (${task.origin === 'builtin' ? "one of the service's own tasks" : "a clone: its definition is its original owner's"}); propose nothing.`,
    )
  const [already] = await db<{ id: string }[]>`
    select id from recommendations where proposed_by_run_id = ${run.id}`
  if (already)
    throw new ApiError(
      'invalid_request',
      `This run already proposed recommendation ${already.id}; one proposal per run.`,
    )
  const parsed = RecommendationChanges.safeParse(args.changes ?? null)
  if (!parsed.success)
    throw new ApiError(
      'invalid_request',
      `changes: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'changes'}: ${i.message}`).join('; ')}. Send only the fields of the definition you change (${Object.keys(RecommendationChanges.shape).join(', ')}).`,
    )
  const current = (await loadVersion(db, run.enterpriseId, task.currentVersionId))!
  // Only what differs from the current version is a change.
  const changes = Object.fromEntries(
    Object.entries(parsed.data).filter(
      ([key, value]) =>
        value !== undefined &&
        JSON.stringify(value) !==
          JSON.stringify((current.definition as Record<string, unknown>)[key] ?? null),
    ),
  ) as RecommendationChanges
  if (Object.keys(changes).length === 0)
    throw new ApiError(
      'invalid_request',
      'changes: every field you sent is as the current version has it; the proposal changes nothing.',
    )
  const definition = { ...current.definition, ...changes } as VersionDefinition
  if (definition.skillMd.trim() === '')
    throw new ApiError(
      'invalid_request',
      'changes.skillMd: a version needs its skill; it would be empty.',
    )
  const issues = checkDefinition(
    { ...definition, slug: task.slug, kind: task.kind },
    await checkContext(db, run.enterpriseId, task.id),
  )
  const errors = issues.filter((i) => i.severity === 'error')
  if (errors.length)
    throw new ApiError(
      'invalid_task_definition',
      `the changed definition fails the definition checks: ${errors.map((e) => `${e.code}: ${e.message}`).join(' ')}`,
      { issues },
    )
  const rationale = typeof args.rationale === 'string' ? args.rationale.trim() : ''
  if (!rationale || rationale.length > maxRationale)
    throw new ApiError(
      'invalid_request',
      `rationale: why this change, 1 to ${maxRationale} characters, for the person who decides.`,
    )
  const evidence = readEvidence(args.evidence)
  const [found] = await db<{ ids: string[] }[]>`
    select coalesce(array_agg(id), '{}') as ids from runs
     where enterprise_id = ${run.enterpriseId} and task_id = ${task.id}
       and id = any(${db.array(evidence.map((e) => e.runId))}::uuid[])`
  const missing = evidence.find((e) => !found!.ids.includes(e.runId))
  if (missing)
    throw new ApiError(
      'invalid_request',
      `evidence: ${missing.runId} is not a run of task ${task.slug}.`,
    )
  const [row] = await db<RecommendationRow[]>`
    insert into recommendations (enterprise_id, task_id, task_slug, base_version_id, proposed_by_run_id,
                                 changes, rationale, evidence)
    values (${run.enterpriseId}, ${task.id}, ${task.slug}, ${task.currentVersionId}, ${run.id},
            ${db.json(changes as never)}, ${rationale}, ${db.json(evidence as never)})
    returning *`
  await appendEvent(db, run, 'recommendation.proposed', {
    recommendationId: row!.id,
    taskId: task.id,
    baseVersionId: task.currentVersionId,
    fields: Object.keys(changes),
  })
  return toRecommendation(row!)
}

/** A proposal's evidence: at least one {runId, why} (a bare run id is taken as one without a why). */
function readEvidence(value: unknown): RecommendationEvidence[] {
  const items = Array.isArray(value) ? value : []
  const evidence = items.map((item): RecommendationEvidence => {
    if (typeof item === 'string') return { runId: item, why: '' }
    const { runId, why } = (item ?? {}) as { runId?: unknown; why?: unknown }
    return {
      runId: typeof runId === 'string' ? runId : '',
      why: typeof why === 'string' ? why : '',
    }
  })
  if (evidence.length === 0)
    throw new ApiError(
      'invalid_request',
      'evidence: the runs that show the problem, each {runId, why}; propose nothing you cannot show.',
    )
  const bad = evidence.find((e) => !isUuid(e.runId))
  if (bad) throw new ApiError('invalid_request', `evidence: "${bad.runId}" is not a run id.`)
  const seen = new Set<string>()
  // Each why cut at maxWhy characters, perhaps between the halves of a pair (an emoji): the half is
  // replaced, else jsonb refused the proposal.
  return evidence
    .filter((e) => !seen.has(e.runId) && seen.add(e.runId))
    .map((e) => ({ runId: e.runId, why: storable(e.why.trim().slice(0, maxWhy)) }))
}
