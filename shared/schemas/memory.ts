import { z } from 'zod'
import { memoryLayers, noteKinds, noteSorts, noteStatuses } from '../values.js'
import { IsoTime, Uuid, pageParameters, queryInteger } from './common.js'
export { memoryLayers, noteKinds, noteSorts, noteStatuses }

// Memory: notes the company learns per task, team or enterprise, their search, ratings and review
// (spec: Concepts "Memory", Endpoints Memory and /v1/tasks/{id}/memory...; DESIGN 10).

export const noteSources = ['person', 'training'] as const
export const reviewKinds = ['conflict', 'rated_down', 'low_impact'] as const
export const reviewStatuses = ['open', 'resolved', 'dismissed'] as const

export type MemoryLayer = (typeof memoryLayers)[number]

/** The longest note, in characters. */
export const maxNoteLength = 4000

/** A note's text: 1 to 4,000 characters, not only white space. */
export const NoteText = z
  .string()
  .max(maxNoteLength)
  .refine((text) => text.trim().length > 0, { message: 'must not be empty' })
  .meta({ description: `1 to ${maxNoteLength} characters` })

export const Evidence = z
  .object({ runId: Uuid, excerpt: z.string().max(2000).optional() })
  .meta({ id: 'MemoryEvidence' })
export type Evidence = z.infer<typeof Evidence>

/**
 * What a note did to outcomes (issue 31): of the finished runs that recalled it, how many succeeded and
 * failed; baseRate, the success rate of the finished runs of the same tasks over the same period (from
 * the first to the latest run that recalled it) that did not recall it; lift = successRate - baseRate.
 */
export const NoteImpact = z
  .object({
    recalledRuns: z
      .number()
      .int()
      .meta({ description: 'finished runs (succeeded or failed) that recalled the note' }),
    succeeded: z.number().int(),
    failed: z.number().int(),
    successRate: z
      .number()
      .nullable()
      .meta({ description: 'succeeded / recalledRuns, 4 decimals; null without runs' }),
    baseRate: z.number().nullable().meta({
      description:
        'success rate of the runs of the same tasks over the same period that did not recall it; null without such runs',
    }),
    lift: z.number().nullable().meta({
      description: 'successRate - baseRate; null while either side has fewer than 5 runs',
    }),
  })
  .meta({ id: 'MemoryNoteImpact' })
export type NoteImpact = z.infer<typeof NoteImpact>

export const MemoryNote = z
  .object({
    id: Uuid,
    layer: z.enum(memoryLayers),
    taskId: Uuid.nullable(),
    teamId: Uuid.nullable(),
    text: z.string(),
    kind: z.enum(noteKinds),
    correctsId: Uuid.nullable(),
    supersededById: Uuid.nullable(),
    status: z.enum(noteStatuses),
    source: z.enum(noteSources),
    evidence: z.array(Evidence),
    ratingUp: z.number().int(),
    ratingDown: z.number().int(),
    recalls: z.number().int(),
    validUntil: IsoTime.nullable().meta({
      description: 'after this time the note is neither recalled nor listed among active notes',
    }),
    expired: z.boolean().meta({ description: 'validUntil has passed' }),
    impact: NoteImpact,
    createdBy: z.string().nullable(),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'MemoryNote' })
export type MemoryNote = z.infer<typeof MemoryNote>

/** A note as a recall or an ask answers it: ranked, with its score. */
export const RecalledNote = z
  .object({
    id: Uuid,
    layer: z.enum(memoryLayers),
    taskId: Uuid.nullable(),
    teamId: Uuid.nullable(),
    text: z.string(),
    kind: z.enum(noteKinds),
    source: z.enum(noteSources),
    score: z.number(),
  })
  .meta({ id: 'RecalledNote' })
export type RecalledNote = z.infer<typeof RecalledNote>

export const MemoryAsk = z
  .object({ question: z.string(), notes: z.array(RecalledNote) })
  .meta({ id: 'MemoryAsk' })
export type MemoryAsk = z.infer<typeof MemoryAsk>

export const MemoryAskQuery = z.object({
  q: z.string().optional().meta({ description: "the text to recall for; default the task's goal" }),
  limit: queryInteger({ min: 1, max: 50, description: 'notes to answer, 1..50 (default 10)' }),
})

/** Which layers a task reads and which it may train. */
export const TrainingGrants = z
  .object({ read: z.array(z.enum(memoryLayers)), write: z.array(z.enum(memoryLayers)) })
  .meta({ id: 'MemoryTrainingGrants' })

export const TaskMemory = z
  .object({
    taskId: Uuid,
    teamId: Uuid.nullable(),
    notes: z.array(MemoryNote).meta({ description: "the task's active task-layer notes" }),
    grants: TrainingGrants,
  })
  .meta({ id: 'TaskMemory' })
export type TaskMemory = z.infer<typeof TaskMemory>

/** The longest idempotency key a note's write takes. */
export const maxNoteIdempotencyKey = 80

/**
 * A time a note holds until, as a person or a training run writes it: ISO 8601 with a zone (Z or an
 * offset), in the future (checked when the note is written).
 */
export const ValidUntil = z.iso.datetime({ offset: true }).meta({
  description: 'ISO 8601 time with a zone, in the future',
  example: '2027-03-31T00:00:00.000Z',
})

const noteWrite = {
  validUntil: ValidUntil.optional().meta({
    description:
      'the note holds until then (a release date, who is on call): in the future; after it the note is neither recalled nor listed',
  }),
  idempotencyKey: z.string().min(1).max(maxNoteIdempotencyKey).optional().meta({
    description:
      'the same caller repeating the same request with the same key is answered the first note, and nothing more is written',
  }),
}

export const TaskNoteInput = z
  .object({
    text: NoteText,
    correctsId: Uuid.optional().meta({ description: "a task note of this task's this corrects" }),
    ...noteWrite,
  })
  .meta({ id: 'TaskNoteInput' })

export const TaskTrainInput = z
  .object({
    text: NoteText,
    layer: z.enum(['team', 'enterprise']),
    correctsId: Uuid.optional().meta({ description: 'a note of that layer this corrects' }),
    ...noteWrite,
  })
  .meta({ id: 'TaskTrainInput' })

/** PATCH /v1/memory/{id}: extend (or end) an active note's validity. */
export const NotePatch = z
  .object({
    validUntil: ValidUntil.nullable().meta({
      description: 'a time in the future, or null: the note holds with no end',
    }),
  })
  .meta({ id: 'MemoryNotePatch' })
export type NotePatch = z.infer<typeof NotePatch>

/** POST /v1/memory/train: the layer an os-train-memory run trains. */
export const MemoryTrainInput = z
  .object({
    layer: z.enum(['team', 'enterprise']),
    teamId: Uuid.optional().meta({ description: 'the team layer: a team of this enterprise' }),
  })
  .meta({ id: 'MemoryTrainInput' })
export type MemoryTrainInput = z.infer<typeof MemoryTrainInput>

export const NoteListQuery = z.object({
  q: z.string().optional().meta({ description: 'search the notes; ranked by relevance' }),
  layer: z.enum(memoryLayers).optional(),
  taskId: z.string().optional(),
  teamId: z.string().optional(),
  status: z
    .enum(noteStatuses)
    .optional()
    .meta({ description: 'lists show active notes only: any other status lists none' }),
  kind: z.enum(noteKinds).optional(),
  expired: z.enum(['true', 'false']).optional().meta({
    description:
      'true: the active notes whose validUntil has passed (not recalled), instead of those that hold',
  }),
  sort: z.string().optional().meta({
    description:
      'createdAt (default: newest first, or with q by relevance), impact (lift, highest first, notes without one last), recalls (most first); unknown values sort by the default',
  }),
  ...pageParameters,
})
export type NoteListQuery = z.infer<typeof NoteListQuery>

/** The memory lists' own paging shape (spec: memory lists answer in a shape of their own). */
const memoryPage = <K extends string, T extends z.ZodType>(key: K, item: T) =>
  z.object({
    [key]: z.array(item),
    page: z.number().int(),
    limit: z.number().int(),
    total: z.number().int(),
  } as { [k in K]: z.ZodArray<T> } & {
    page: z.ZodNumber
    limit: z.ZodNumber
    total: z.ZodNumber
  })

export const NotePage = memoryPage('notes', MemoryNote).meta({ id: 'MemoryNotePage' })
export type NotePage = z.infer<typeof NotePage>

export const MemoryPageQuery = z.object(pageParameters)

export const RateInput = z
  .object({ rating: z.enum(['up', 'down']), reason: z.string().max(2000).optional() })
  .meta({ id: 'MemoryRateInput' })

export const ReviewItem = z
  .object({
    id: Uuid,
    kind: z.enum(reviewKinds),
    status: z.enum(reviewStatuses),
    note: MemoryNote.meta({ description: 'the note under review' }),
    correction: MemoryNote.nullable().meta({
      description: "conflict: the training run's proposed correction",
    }),
    reason: z.string().nullable().meta({ description: 'rated_down: the reason given, if any' }),
    createdAt: IsoTime,
    decidedAt: IsoTime.nullable(),
  })
  .meta({ id: 'MemoryReviewItem' })
export type ReviewItem = z.infer<typeof ReviewItem>

export const ReviewPage = memoryPage('items', ReviewItem).meta({ id: 'MemoryReviewPage' })
export type ReviewPage = z.infer<typeof ReviewPage>

export const ReviewDecision = z
  .object({
    id: Uuid,
    itemId: Uuid,
    kind: z.enum(reviewKinds),
    noteId: Uuid,
    decision: z.enum(['resolved', 'dismissed']),
    correctionId: Uuid.nullable(),
    reason: z.string(),
    decidedBy: z.string().nullable(),
    decidedAt: IsoTime,
  })
  .meta({ id: 'MemoryReviewDecision' })
export type ReviewDecision = z.infer<typeof ReviewDecision>

export const ReviewHistoryPage = memoryPage('decisions', ReviewDecision).meta({
  id: 'MemoryReviewHistoryPage',
})
export type ReviewHistoryPage = z.infer<typeof ReviewHistoryPage>

const Reason = z.string().trim().min(1).max(2000)

export const ResolveInput = z
  .object({ correctionId: Uuid, reason: Reason })
  .meta({ id: 'MemoryResolveInput' })
export const DismissInput = z.object({ reason: Reason }).meta({ id: 'MemoryDismissInput' })

const RecallCounts = z.object({
  attempted: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
})
export const RecallHealth = z
  .object({ since: IsoTime, runs: RecallCounts, chats: RecallCounts })
  .meta({ id: 'MemoryRecallHealth' })
export type RecallHealth = z.infer<typeof RecallHealth>
