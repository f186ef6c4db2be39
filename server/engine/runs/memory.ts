import type { MemoryLayer } from '../../../shared/schemas/memory.js'
import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import { proposeChangeTool, rememberTool } from '../../domain/tasks/index.js'
import {
  activeNotesByIds,
  chooseImproveMaterial,
  chooseTrainingMaterial,
  defaultRecallLimit,
  improveBriefing,
  improvedTaskId,
  type ImproveMaterial,
  recallNotes,
  trainingBriefing,
  type TrainingMaterial,
  memoryScopeOf,
} from '../../domain/learning/index.js'
import { eventsOfTypes, type NewEvent, type RunRow } from '../../domain/runs/index.js'
import { span, type Trace } from '../../traces/index.js'

// What memory gives an llm run (DESIGN 10): every run recalls at its first start (query: goal + input)
// and has the notes in its prompt; a training run (one that may call os.remember) is also given its
// layer's material with its input. Both are recorded as run events at the first start, and a run that
// starts again (after a gate, a hold, a restart, a takeover) reads them back instead of asking again:
// its prompt is the one it had, and recall health counts one recall per run.
//
// - `memory.recalled` {noteIds}: the notes recalled, best first. A resumed run reads those notes back by
//   id (a note's text never changes) and keeps those still active: a note tombstoned, superseded or
//   expired meanwhile is never answered again, so it leaves the prompt; every other note is as it was.
// - `memory.recall_failed` {reason}: the recall threw; the run goes on without notes, resumed too.
// - `memory.training_material` {since, runIds, moreRuns, noteIds, moreNotes}: the runs and notes a
//   training run was given, read back by id when it resumes.

export const memoryEvents = {
  recalled: 'memory.recalled',
  recallFailed: 'memory.recall_failed',
  training: 'memory.training_material',
  /** An improvement run's material: {taskId, versionId, runIds, moreRuns} (DESIGN 10). */
  improve: 'recommendation.material',
} as const

/** A note as a run's prompt shows it. */
export interface PromptNote {
  id: string
  layer: MemoryLayer
  text: string
}

/** What a run recorded of memory at its first start (nothing yet on a first start). */
export interface RecordedMemory {
  recall?: { type: string; payload: Record<string, unknown> }
  training?: TrainingMaterial
  improve?: ImproveMaterial
}

/** The memory events of a run: its recall and its training material, if it recorded them. */
export async function readRecordedMemory(db: Db, runId: string): Promise<RecordedMemory> {
  const rows = await eventsOfTypes(db, runId, Object.values(memoryEvents))
  const recorded: RecordedMemory = {}
  for (const row of rows) {
    if (row.type === memoryEvents.training) recorded.training ??= row.payload as never
    else if (row.type === memoryEvents.improve) recorded.improve ??= row.payload as never
    else recorded.recall ??= row
  }
  return recorded
}

/** The longest text a run recalls for: its goal and the start of its input. */
export const maxRecallText = 2000

/**
 * What a run recalls for: its goal, then its input as words (keys and values, without JSON's quotes,
 * which websearch_to_tsquery would read as phrases), at most maxRecallText characters.
 */
export function recallText(goal: string | undefined, input: Record<string, unknown>): string {
  const words: string[] = []
  const walk = (value: unknown): void => {
    if (value === null || value === undefined) return
    if (Array.isArray(value)) value.forEach(walk)
    else if (typeof value === 'object')
      for (const [key, v] of Object.entries(value)) {
        words.push(key)
        walk(v)
      }
    else words.push(String(value))
  }
  walk(input)
  return [goal ?? '', ...words]
    .join(' ')
    .replace(/["\s]+/g, ' ')
    .trim()
    .slice(0, maxRecallText)
}

/**
 * The notes a run has in its prompt. At its first start: recalled now (goal + input, defaultRecallLimit
 * notes), with the event that records it (memory.recalled, or memory.recall_failed when the recall
 * threw: the run goes on without notes). Afterwards: the notes of its recorded recall, read back.
 */
export async function recallForRun(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'taskId' | 'input'>,
  goal: string | undefined,
  recorded: RecordedMemory,
  /** The pass: the recall's span is its child (issue 49). */
  trace: Trace,
): Promise<{ notes: PromptNote[]; event?: NewEvent }> {
  if (recorded.recall) {
    const ids = recorded.recall.payload.noteIds
    if (recorded.recall.type !== memoryEvents.recalled || !Array.isArray(ids) || ids.length === 0)
      return { notes: [] }
    return { notes: await activeNotesByIds(db, run.enterpriseId, ids as string[]) }
  }
  try {
    // Recall at the run's first start, a short span of its pass (issue 49).
    const recalled = await span(
      'memory recall',
      { 'osd.run.id': run.id },
      async (recall) => {
        const notes = await recallNotes(
          db,
          run.enterpriseId,
          run.taskId,
          recallText(goal, run.input),
          defaultRecallLimit,
        )
        recall.set({ 'osd.memory.notes': notes.length })
        return notes
      },
      { parent: trace },
    )
    return {
      notes: recalled.map(({ id, layer, text }) => ({ id, layer, text })),
      event: { run, type: memoryEvents.recalled, payload: { noteIds: recalled.map((n) => n.id) } },
    }
  } catch (err) {
    return {
      notes: [],
      event: {
        run,
        type: memoryEvents.recallFailed,
        payload: { reason: (err as Error).message || String(err) },
      },
    }
  }
}

/** The prompt's section of recalled notes, each with its layer; none when nothing was recalled. */
export function memorySection(notes: readonly PromptNote[]): string[] {
  if (notes.length === 0) return []
  return [
    '',
    '# What the company has learned',
    "Notes from the company's memory that bear on this run, each with the layer it comes from. Follow them unless your task's own instructions say otherwise.",
    ...notes.map((n) => `- [${n.layer}] ${n.text.replace(/\s*\n\s*/g, ' ')}`),
  ]
}

/**
 * What a run is given with its input besides the input itself: a training run (its version lists
 * os.remember and it has a memory layer: recorded by POST /v1/memory/train, or its own task's, never
 * one its input names; issue 41) gets its layer's material (DESIGN 10), chosen at its first start (with
 * the event that records the choice) and read back by id afterwards.
 */
export async function briefingForRun(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'taskId' | 'input' | 'memoryScope'>,
  definition: Pick<VersionDefinition, 'tools'>,
  recorded: RecordedMemory,
): Promise<{ text?: string; event?: NewEvent }> {
  if (definition.tools.includes(proposeChangeTool)) return improveBriefingForRun(db, run, recorded)
  if (!definition.tools.includes(rememberTool)) return {}
  const scope = await memoryScopeOf(db, run)
  // os.remember answers such a run (a built-in task's not started by a training) that it writes none.
  if (!scope) return {}
  const material = recorded.training ?? (await chooseTrainingMaterial(db, run, scope))
  const text = await trainingBriefing(db, run.enterpriseId, scope, material)
  return recorded.training
    ? { text }
    : { text, event: { run, type: memoryEvents.training, payload: { ...material } } }
}

/**
 * An improvement run (its version lists os.propose_change and its input names a task) is given the
 * task's definition, recent runs and gate decisions (DESIGN 10), chosen at its first start (with the
 * event that records the choice) and read back by id afterwards.
 */
async function improveBriefingForRun(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId' | 'taskId' | 'input'>,
  recorded: RecordedMemory,
): Promise<{ text?: string; event?: NewEvent }> {
  const taskId = improvedTaskId(run.input)
  // os.propose_change answers such a run that its input names no task.
  if (!taskId) return {}
  const material = recorded.improve ?? (await chooseImproveMaterial(db, run, taskId))
  const text = await improveBriefing(db, run.enterpriseId, material)
  return recorded.improve
    ? { text }
    : { text, event: { run, type: memoryEvents.improve, payload: { ...material } } }
}
