import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'

// Plans a run wrote with os.write_plan (spec: Plans (planned)).

export const Plan = z
  .object({
    id: Uuid,
    kind: z.string(),
    status: z.string(),
    title: z.string(),
    items: z.array(z.object({ title: z.string(), detail: z.string().optional() })),
    producedByRunId: Uuid.nullable(),
    chatSessionId: Uuid.nullable(),
    createdAt: IsoTime,
  })
  .meta({ id: 'Plan' })
export type Plan = z.infer<typeof Plan>

/** One plan with the gates of the run that wrote it. */
export const PlanDetail = Plan.extend({
  gates: z.array(
    z.object({
      id: Uuid,
      kind: z.string(),
      tool: z.string().nullable(),
      status: z.string(),
      decision: z.string().nullable(),
    }),
  ),
}).meta({ id: 'PlanDetail' })
export type PlanDetail = z.infer<typeof PlanDetail>
