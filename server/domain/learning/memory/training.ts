import { ApiError } from '../../../../shared/errors.js'
import { isUuid } from '../../../../shared/ids.js'
import type { Evidence, MemoryLayer, MemoryNote } from '../../../../shared/schemas/memory.js'
import { underWayStatuses } from '../../../../shared/schemas/runs.js'
import { rememberTool } from '../../tasks/index.js'
import { literalIn, transaction, type Db } from '../../../db/sql.js'
import {
  clip,
  decidedGates,
  laneOf,
  lockLanes,
  type MemoryScope,
  type RunRow,
  startRunsIn,
  tellRun,
} from '../../runs/index.js'
import { requireTeam } from '../../org/index.js'
import { writeNote } from './notes.js'
import { holds } from './rows.js'

// Memory training (DESIGN 10): POST /v1/memory/train starts an os-train-memory run; that run's model is
// given its layer's material (the finished runs since the layer's last training, the gate decisions on
// them, the layer's active notes) and writes each lesson with os.remember.

/** The most finished runs a training run is given, newest first. */
export const trainingRunLimit = 50
/** The most active notes of the layer a training run is given, newest first. */
export const trainingNoteLimit = 100
/** Characters of a run's input, and of its summary or reason, shown to the training model. */
const inputChars = 1000
const resultChars = 600
/** Characters of a run's summary or reason kept as a lesson's evidence excerpt. */
const excerptChars = 300

/**
 * The layer a training run trains and may write, and, optionally, the one task whose runs it looks at:
 * the run's recorded memory scope (issue 41), never its input.
 */
export type TrainingScope = MemoryScope

/**
 * The memory layer a run may write with os.remember and is briefed on (issue 41; DESIGN 15): what its
 * start recorded (POST /v1/memory/train, a trusted caller), else its own task's layer for a task of the
 * enterprise's own (custom, a copy or a clone); a built-in task's run started any other way (an API
 * start, a webhook, a schedule, a retry) has none. Never a field of the run's input: a webhook body, a
 * schedule or an API caller writes that.
 */
export async function memoryScopeOf(
  db: Db,
  run: Pick<RunRow, 'enterpriseId' | 'taskId' | 'memoryScope'>,
): Promise<TrainingScope | undefined> {
  if (run.memoryScope) return run.memoryScope
  const [task] = await db<{ origin: string }[]>`
    select origin from tasks where enterprise_id = ${run.enterpriseId} and id = ${run.taskId}`
  if (!task || task.origin === 'builtin') return undefined
  return { layer: 'task', teamId: null, taskId: run.taskId }
}

// --- starting a training ------------------------------------------------------------------------------

/**
 * POST /v1/memory/train: an os-train-memory run of the layer, started as an API start would (origin
 * api, queued with the coo). A team outside the enterprise is 404 team_not_found. While a training of
 * the same layer (and team) is under way, that run answers instead and nothing is started: the lane is
 * locked while this decides, so two trains at once start one run.
 */
export async function startTraining(
  db: Db,
  enterpriseId: string,
  body: { layer: 'team' | 'enterprise'; teamId?: string },
): Promise<{ run: RunRow; started: boolean }> {
  if (body.layer === 'team' && !body.teamId)
    throw new ApiError('invalid_request', 'teamId: the team layer needs a team.')
  if (body.layer === 'enterprise' && body.teamId)
    throw new ApiError('invalid_request', 'teamId: only the team layer takes a team.')
  const input: Record<string, unknown> =
    body.layer === 'team' ? { layer: 'team', teamId: body.teamId } : { layer: 'enterprise' }
  // What the run may write, recorded on it: its input says the same, but the input is not what counts.
  const memoryScope: MemoryScope = { layer: body.layer, teamId: body.teamId ?? null, taskId: null }
  return transaction(db, async (tx) => {
    if (body.teamId) {
      if (!isUuid(body.teamId)) throw new ApiError('team_not_found', `No team ${body.teamId}.`)
      await requireTeam(tx, enterpriseId, body.teamId)
    }
    const [task] = await tx<{ id: string; serializeOn: string[] | null }[]>`
      select id, serialize_on from tasks
       where enterprise_id = ${enterpriseId} and slug = 'os-train-memory' and origin = 'builtin'`
    if (!task) throw new ApiError('task_not_found', 'This enterprise has no os-train-memory task.')
    const lane = laneOf(task, input)
    await lockLanes(tx, [lane])
    const [under] = await tx<RunRow[]>`
      select * from runs
       where lane = ${lane} and ${literalIn(tx, 'status', underWayStatuses)}
       order by created_at desc limit 1`
    if (under) return { run: under, started: false }
    const [outcome] = await startRunsIn(tx, [
      { enterpriseId, task: { id: task.id }, input, origin: 'api', memoryScope },
    ])
    if (outcome instanceof ApiError) throw outcome
    // The lane was free under its lock and the task runs beside other work: never refused here.
    if (outcome!.refusal) throw outcome!.refusal
    return { run: outcome!.run, started: true }
  })
}

// --- what the training model is given ---------------------------------------------------------------

/** What a training run was given, recorded at its first start so a resumed run is given the same. */
export interface TrainingMaterial {
  /** The last training of the layer this one follows, if any. */
  since: { runId: string; startedAt: string } | null
  runIds: string[]
  /** Runs left out past trainingRunLimit. */
  moreRuns: number
  noteIds: string[]
  /** Active notes left out past trainingNoteLimit. */
  moreNotes: number
}

interface MaterialRun {
  id: string
  taskSlug: string
  status: string
  input: Record<string, unknown>
  result: { outcome?: string; summary?: string } | null
  reason: string | null
  finishedAt: Date
}

interface MaterialNote {
  id: string
  source: string
  kind: string
  text: string
}

/**
 * Chooses what a training run of `scope` is given: the layer's runs (of custom tasks; a team's for the
 * team layer, the task's when the scope names one) that succeeded or failed since the last training of
 * the task that succeeded with the same recorded scope (its start), newest first, at most
 * trainingRunLimit; and the layer's active notes, newest first, at most trainingNoteLimit.
 */
export async function chooseTrainingMaterial(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'taskId' | 'memoryScope'>,
  scope: TrainingScope,
): Promise<TrainingMaterial> {
  const { enterpriseId } = run
  // The same recorded scope: a run started with none (an enterprise's own task, its own layer) follows
  // the last run of its task that had none either.
  const [last] = await db<{ id: string; startedAt: Date }[]>`
    select r.id, r.started_at from runs r
     where r.enterprise_id = ${enterpriseId} and r.task_id = ${run.taskId} and r.id <> ${run.id}
       and r.status = 'succeeded' and r.started_at is not null
       and ${run.memoryScope ? db`r.memory_scope = ${db.json(run.memoryScope as never)}::jsonb` : db`r.memory_scope is null`}
     order by r.started_at desc limit 1`
  const validTeam = scope.teamId && isUuid(scope.teamId) ? scope.teamId : null
  const validTask = scope.taskId && isUuid(scope.taskId) ? scope.taskId : null
  // A layer whose owner the scope does not name (or names wrongly) has no runs and no notes.
  const unnamed =
    (scope.layer === 'team' && !validTeam) ||
    (scope.layer === 'task' && !validTask) ||
    (scope.taskId !== null && !validTask)
  if (unnamed)
    return {
      since: last ? { runId: last.id, startedAt: last.startedAt.toISOString() } : null,
      runIds: [],
      moreRuns: 0,
      noteIds: [],
      moreNotes: 0,
    }
  const runScope = db`
    r.enterprise_id = ${enterpriseId} and r.status in ('succeeded', 'failed') and r.id <> ${run.id}
    ${last ? db`and r.finished_at > ${last.startedAt}` : db``}
    ${scope.layer === 'team' ? db`and r.team_id = ${validTeam}` : db``}
    ${validTask ? db`and r.task_id = ${validTask}` : db``}
    and not exists (select 1 from tasks t where t.id = r.task_id and t.origin = 'builtin')`
  const noteScope = db`
    n.enterprise_id = ${enterpriseId} and n.status = 'active' and ${holds(db)} and n.layer = ${scope.layer}
    ${scope.layer === 'team' ? db`and n.team_id = ${validTeam}` : db``}
    ${scope.layer === 'task' ? db`and n.task_id = ${validTask}` : db``}`
  const [runs, [runCount], notes, [noteCount]] = await Promise.all([
    db<{ id: string }[]>`
      select r.id from runs r where ${runScope}
       order by r.finished_at desc, r.id limit ${trainingRunLimit}`,
    db<{ n: number }[]>`select count(*)::int as n from runs r where ${runScope}`,
    db<{ id: string }[]>`
      select n.id from memory_notes n where ${noteScope}
       order by n.created_at desc, n.id limit ${trainingNoteLimit}`,
    db<{ n: number }[]>`select count(*)::int as n from memory_notes n where ${noteScope}`,
  ])
  return {
    since: last ? { runId: last.id, startedAt: last.startedAt.toISOString() } : null,
    runIds: runs.map((r) => r.id),
    moreRuns: runCount!.n - runs.length,
    noteIds: notes.map((n) => n.id),
    moreNotes: noteCount!.n - notes.length,
  }
}

/**
 * The text a training run's model is given with its input (DESIGN 10), from the material chosen at its
 * first start: each run with its task, input and result or reason, the gate decisions on it with their
 * notes and answers, and the layer's notes with their ids. Runs and notes are read by id, so a resumed
 * run is given the same runs and notes (a note tombstoned meanwhile is left out: it is never answered
 * again).
 */
export async function trainingBriefing(
  db: Db,
  enterpriseId: string,
  scope: TrainingScope,
  material: TrainingMaterial,
): Promise<string> {
  const [runs, gates, notes, team] = await Promise.all([
    material.runIds.length
      ? db<MaterialRun[]>`
          select id, task_slug, status, input, result, reason, finished_at from runs
           where enterprise_id = ${enterpriseId} and id = any(${db.array(material.runIds)}::uuid[])
           order by finished_at desc, id`
      : [],
    decidedGates(db, enterpriseId, material.runIds),
    material.noteIds.length
      ? db<MaterialNote[]>`
          select id, source, kind, text from memory_notes
           where enterprise_id = ${enterpriseId} and id = any(${db.array(material.noteIds)}::uuid[])
             and status <> 'tombstoned'
           order by created_at desc, id`
      : [],
    scope.teamId && isUuid(scope.teamId)
      ? db<{ name: string }[]>`
          select name from teams where enterprise_id = ${enterpriseId} and id = ${scope.teamId}`
      : [],
  ])
  const layer =
    scope.layer === 'team'
      ? `team ${team[0]?.name ?? '(unknown)'} (teamId ${scope.teamId})`
      : scope.layer === 'task'
        ? `task ${scope.taskId}`
        : 'enterprise'
  const lines = [
    '# Training material',
    '',
    `Layer: ${layer}${scope.taskId && scope.layer !== 'task' ? `; only the runs of task ${scope.taskId}` : ''}.`,
    material.since
      ? `Since the last training of this layer (run ${material.since.runId}, started ${material.since.startedAt}).`
      : 'This layer has not been trained before: the newest finished runs.',
    '',
    `## Finished runs (${runs.length}, newest first${material.moreRuns ? `; ${material.moreRuns} older ones not shown` : ''})`,
  ]
  if (runs.length === 0) lines.push('', 'No run of this layer finished since.')
  for (const r of runs)
    lines.push(
      ...tellRun(
        `### Run ${r.id}: task ${r.taskSlug}, ${r.status}, finished ${r.finishedAt.toISOString()}`,
        r,
        gates,
        { input: inputChars, result: resultChars },
      ),
    )
  lines.push(
    '',
    `## Active notes of this layer (${notes.length}, newest first${material.moreNotes ? `; ${material.moreNotes} older ones not shown` : ''})`,
    'Correct a note by its id (correctsId) rather than writing a note beside it.',
  )
  if (notes.length === 0) lines.push('', 'None yet.')
  else lines.push('', ...notes.map((n) => `- ${n.id} (${n.source} ${n.kind}): ${n.text}`))
  return lines.join('\n')
}

// --- os.remember ---------------------------------------------------------------------------------------

/**
 * os.remember for a training run (DESIGN 10): one lesson at the run's memory layer (memoryScopeOf: what
 * a trusted start recorded, else its own task's; never its input's, issue 41), source training, its
 * evidence the runs named, each with an excerpt of its summary or reason; with correctsId a correction
 * of a note of that same layer and owner (of a person's note: proposed, and a conflict review item
 * opens); with validUntil, a fact that goes stale then. Refuses with an ApiError, writing nothing: a
 * run of a built-in task not started by a training, no text, no evidence, a run not of the enterprise,
 * and what writeNote refuses (a correctsId of another layer, owner or enterprise; a near-duplicate of an
 * active note of the layer: note_duplicate, whose message tells the model to correct that note).
 */
export async function rememberLesson(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'taskId' | 'memoryScope'>,
  args: Record<string, unknown>,
): Promise<MemoryNote> {
  const scope = await memoryScopeOf(db, run)
  if (!scope)
    throw new ApiError(
      'invalid_request',
      `${rememberTool} writes only at the layer a training was started for (POST /v1/memory/train); this run was not started by one, so it writes no note.`,
    )
  const text = typeof args.text === 'string' ? args.text : ''
  if (!text.trim())
    throw new ApiError('invalid_request', 'text: the lesson, 1 to 4,000 characters.')
  const named = Array.isArray(args.evidence) ? args.evidence : []
  const runIds = [
    ...new Set(
      named.map((e) =>
        typeof e === 'string' ? e : String((e as { runId?: unknown } | null)?.runId ?? ''),
      ),
    ),
  ]
  if (runIds.length === 0)
    throw new ApiError('invalid_request', 'evidence: the ids of the runs that teach the lesson.')
  const bad = runIds.find((id) => !isUuid(id))
  if (bad) throw new ApiError('invalid_request', `evidence: "${bad}" is not a run id.`)
  const found = await db<{ id: string; summary: string | null; reason: string | null }[]>`
    select id, result ->> 'summary' as summary, reason from runs
     where enterprise_id = ${run.enterpriseId} and id = any(${db.array(runIds)}::uuid[])`
  const byId = new Map(found.map((r) => [r.id, r]))
  const missing = runIds.find((id) => !byId.has(id))
  if (missing)
    throw new ApiError('invalid_request', `evidence: no run ${missing} in this enterprise.`)
  const evidence: Evidence[] = runIds.map((id) => {
    const r = byId.get(id)!
    const excerpt = r.summary || r.reason
    return excerpt ? { runId: id, excerpt: clip(excerpt, excerptChars) } : { runId: id }
  })
  const correctsId =
    typeof args.correctsId === 'string' && args.correctsId ? args.correctsId : undefined
  if (
    args.validUntil !== undefined &&
    args.validUntil !== null &&
    typeof args.validUntil !== 'string'
  )
    throw new ApiError(
      'invalid_request',
      'validUntil: an ISO 8601 time with a zone, in the future.',
    )
  const validUntil =
    typeof args.validUntil === 'string' && args.validUntil ? args.validUntil : undefined
  return writeNote(db, run.enterpriseId, {
    layer: scope.layer,
    ...(scope.layer === 'team' && scope.teamId ? { teamId: scope.teamId } : {}),
    ...(scope.layer === 'task' && scope.taskId ? { taskId: scope.taskId } : {}),
    text,
    source: 'training',
    evidence,
    ...(correctsId ? { correctsId } : {}),
    ...(validUntil ? { validUntil } : {}),
    createdBy: `run:${run.id}`,
  })
}
