import { isUuid } from '../../../shared/ids.js'
import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import { clip, decidedGates, tellRun } from '../runs/index.js'
import type { RunRow } from '../runs/index.js'

// What an os-improve run's model is given with its input (DESIGN 10): the target task's current
// definition with its skill, its recent runs with outcome or reason, the gate decisions on them with
// their notes and answers, and the task's recent recommendations with how they were decided. Chosen at
// the run's first start and recorded (run event `recommendation.material`), so a resumed run is given
// the same task version and runs.

/** The most recent runs of the task an improvement run is given, newest first. */
export const improveRunLimit = 20
/** Characters of a run's input, and of its summary or reason, and of a gate's note, shown. */
const inputChars = 1000
const resultChars = 800
/** Recently decided recommendations of the task shown, so a declined idea is not proposed again. */
const decidedShown = 5

export interface ImproveMaterial {
  taskId: string
  /** The version the run was shown; null when the task was not found. */
  versionId: string | null
  runIds: string[]
  /** Runs left out past improveRunLimit. */
  moreRuns: number
}

/** Chooses what an improvement run of `taskId` is given: the current version and the recent runs. */
export async function chooseImproveMaterial(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId'>,
  taskId: string,
): Promise<ImproveMaterial> {
  const [task] = isUuid(taskId)
    ? await db<{ currentVersionId: string }[]>`
        select current_version_id from tasks
         where enterprise_id = ${run.enterpriseId} and id = ${taskId} and origin <> 'builtin'`
    : []
  if (!task) return { taskId, versionId: null, runIds: [], moreRuns: 0 }
  const scope = db`
    r.enterprise_id = ${run.enterpriseId} and r.task_id = ${taskId} and r.status <> 'skipped_overlap'`
  const [runs, [count]] = await Promise.all([
    db<{ id: string }[]>`
      select r.id from runs r where ${scope} order by r.created_at desc, r.id limit ${improveRunLimit}`,
    db<{ n: number }[]>`select count(*)::int as n from runs r where ${scope}`,
  ])
  return {
    taskId,
    versionId: task.currentVersionId,
    runIds: runs.map((r) => r.id),
    moreRuns: count!.n - runs.length,
  }
}

interface BriefRun {
  id: string
  status: string
  versionNumber: number | null
  input: Record<string, unknown>
  result: { outcome?: string; summary?: string } | null
  reason: string | null
  createdAt: Date
  finishedAt: Date | null
}

/** The briefing text of an improvement run, from the material chosen at its first start. */
export async function improveBriefing(
  db: Db,
  enterpriseId: string,
  material: ImproveMaterial,
): Promise<string> {
  const [[task], [version], runs, gates, decided] = await Promise.all([
    isUuid(material.taskId)
      ? db<{ slug: string; name: string; kind: string; status: string; origin: string }[]>`
          select slug, name, kind, status, origin from tasks
           where enterprise_id = ${enterpriseId} and id = ${material.taskId}`
      : [],
    material.versionId
      ? db<{ id: string; number: number; definition: VersionDefinition }[]>`
          select id, number, definition from task_versions
           where enterprise_id = ${enterpriseId} and id = ${material.versionId}`
      : [],
    material.runIds.length
      ? db<BriefRun[]>`
          select r.id, r.status, v.number as version_number, r.input, r.result, r.reason, r.created_at,
                 r.finished_at
            from runs r left join task_versions v on v.id = r.task_version_id
           where r.enterprise_id = ${enterpriseId} and r.id = any(${db.array(material.runIds)}::uuid[])
           order by r.created_at desc, r.id`
      : [],
    decidedGates(db, enterpriseId, material.runIds),
    isUuid(material.taskId)
      ? db<{ id: string; status: string; rationale: string; reason: string | null }[]>`
          select id, status, rationale, reason from recommendations
           where enterprise_id = ${enterpriseId} and task_id = ${material.taskId}
           order by created_at desc limit ${decidedShown}`
      : [],
  ])
  if (!task || !version)
    return `# Improvement material\n\nNo task ${material.taskId} can be improved in this enterprise: propose nothing, and finish saying so.`
  const { skillMd, ...rest } = version.definition
  const lines = [
    '# Improvement material',
    '',
    `Task ${task.slug} ("${task.name}", ${task.kind}, ${task.status}), id ${material.taskId}; its current version is number ${version.number}.`,
    '',
    '## Current definition (without the skill)',
    '```json',
    JSON.stringify(rest, null, 2),
    '```',
    '',
    '## Current skill (skillMd)',
    '````markdown',
    skillMd,
    '````',
    '',
    `## Recent runs (${runs.length}, newest first${material.moreRuns ? `; ${material.moreRuns} older ones not shown` : ''})`,
  ]
  if (runs.length === 0) lines.push('', 'The task has no runs yet.')
  for (const r of runs)
    lines.push(
      ...tellRun(
        `### Run ${r.id}: ${r.status}, version ${r.versionNumber ?? '?'}, started ${r.createdAt.toISOString()}${r.finishedAt ? `, finished ${r.finishedAt.toISOString()}` : ''}`,
        r,
        gates,
        { input: inputChars, result: resultChars },
      ),
    )
  if (decided.length) {
    lines.push('', '## Recent recommendations for this task (newest first)')
    for (const d of decided)
      lines.push(
        `- ${d.id}: ${d.status}${d.reason ? ` (${clip(d.reason, resultChars)})` : ''}; rationale: ${clip(d.rationale, resultChars)}`,
      )
  }
  return lines.join('\n')
}
