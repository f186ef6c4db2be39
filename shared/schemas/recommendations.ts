import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { VersionPublish } from './tasks.js'
import { recommendationDecisions, recommendationStatuses, recommendationViews } from '../values.js'
export { recommendationDecisions, recommendationStatuses, recommendationViews }

// Recommendations (spec: Concepts, Recommendations; Endpoints Recommendations; DESIGN 10): a change to a
// task that an os-improve run proposed, waiting for a person to approve or decline it.

/** The longest decline reason (or approval note) a decision takes. */
export const maxDecisionReason = 2000
/** The longest idempotency key a decision takes (spec: Limits). */
export const maxIdempotencyKey = 80

/**
 * What a recommendation may change: the fields of a version publish that live in a version (skillMd,
 * goal, guardrails, tools, gates, inputs, spend, successors, ...). The task's own fields (name, slug,
 * team, role, status) are a person's to change, not a proposal's.
 */
export const RecommendationChanges = VersionPublish.pick({
  overlapPolicy: true,
  goal: true,
  metric: true,
  guardrails: true,
  skillMd: true,
  tools: true,
  gates: true,
  inputs: true,
  spend: true,
  workspace: true,
  successors: true,
})
  .strict()
  .meta({ id: 'RecommendationChanges' })
export type RecommendationChanges = z.infer<typeof RecommendationChanges>

export const RecommendationEvidence = z
  .object({ runId: Uuid, why: z.string() })
  .meta({ id: 'RecommendationEvidence' })
export type RecommendationEvidence = z.infer<typeof RecommendationEvidence>

export const Recommendation = z
  .object({
    id: Uuid,
    taskId: Uuid,
    taskSlug: z.string(),
    status: z.enum(recommendationStatuses),
    baseVersionId: Uuid,
    changes: RecommendationChanges,
    rationale: z.string(),
    evidence: z.array(RecommendationEvidence),
    /** The os-improve run that proposed it. */
    proposedByRunId: Uuid.nullable(),
    createdAt: IsoTime,
    decidedAt: IsoTime.nullable(),
    decision: z.enum(recommendationDecisions).nullable(),
    reason: z.string().nullable(),
    decidedBy: z.string().nullable(),
    /** The version an approval published, and the run it started on it. */
    versionId: Uuid.nullable(),
    runId: Uuid.nullable(),
  })
  .meta({ id: 'Recommendation' })
export type Recommendation = z.infer<typeof Recommendation>

/** One changed field: its value in the base version and in the proposal. */
export const FieldChange = z
  .object({ field: z.string(), before: z.unknown(), after: z.unknown() })
  .meta({ id: 'RecommendationFieldChange' })
export type FieldChange = z.infer<typeof FieldChange>

export const diffLineKinds = ['same', 'removed', 'added'] as const
export const DiffLine = z
  .object({ kind: z.enum(diffLineKinds), text: z.string() })
  .meta({ id: 'DiffLine' })
export type DiffLine = z.infer<typeof DiffLine>

/** GET /v1/recommendations/{id}: the recommendation, and its changes against the base version. */
export const RecommendationDetail = Recommendation.extend({
  /** The base version is still the task's current one (approve would publish on it). */
  baseIsCurrent: z.boolean(),
  baseVersionNumber: z.number().int().nullable(),
  /** Field by field, in definition order; skillMd included. */
  fieldChanges: z.array(FieldChange),
  /** A line diff of the skill, base to proposal; null when the proposal leaves the skill alone. */
  skillDiff: z.array(DiffLine).nullable(),
}).meta({ id: 'RecommendationDetail' })
export type RecommendationDetail = z.infer<typeof RecommendationDetail>

export const RecommendationListQuery = z.object({
  taskId: z.string().optional().meta({ description: 'only this task’s' }),
  view: z
    .enum(recommendationViews)
    .optional()
    .meta({ description: 'waiting (default), or decided: those decided in the last 60 days' }),
})

export const TaskRecommendationQuery = z.object({
  view: z
    .enum(['waiting', 'decided', 'all'])
    .optional()
    .meta({ description: 'all (default), waiting, or decided in the last 60 days' }),
})

export const RecommendationDecision = z
  .object({
    decision: z.enum(recommendationDecisions),
    reason: z
      .string()
      .max(maxDecisionReason)
      .optional()
      .meta({ description: 'required to decline; kept with an approval' }),
    idempotencyKey: z.string().min(1).max(maxIdempotencyKey).optional().meta({
      description:
        'the same caller repeating the same key is answered the first decision again, and nothing more is started',
    }),
  })
  .superRefine((body, ctx) => {
    if (body.decision === 'decline' && !body.reason?.trim())
      ctx.addIssue({
        code: 'custom',
        path: ['reason'],
        message: 'a decline needs a reason (1 to 2,000 characters)',
      })
  })
  .meta({ id: 'RecommendationDecision' })
export type RecommendationDecision = z.infer<typeof RecommendationDecision>
