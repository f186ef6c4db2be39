import { z } from 'zod'
import { durationProblem } from '../durations.js'

// Retention per enterprise (issue 46; DESIGN 15): how long finished runs, closed chats and webhook
// deliveries stay in the live tables, and whether what leaves is kept in the archive.

/** A window: an ISO 8601 duration (P90D, PT1M, P1Y2M), or null to keep for ever. */
export const RetentionWindow = z
  .string()
  .superRefine((text, ctx) => {
    const problem = durationProblem(text)
    if (problem) ctx.addIssue({ code: 'custom', message: problem })
  })
  .nullable()
  .meta({
    description:
      'an ISO 8601 duration of whole numbers (P90D, PT1M, P1Y2M, P2W), from a second to a hundred years; null keeps for ever',
    example: 'P90D',
  })

export const RetentionSettings = z
  .object({
    finishedRuns: RetentionWindow.meta({
      description:
        'how long an execution stays once its last run has finished (all its runs move together, with their events, journal, logs and gates); null: for ever',
      example: 'P90D',
    }),
    closedChats: RetentionWindow.meta({
      description:
        'how long a chat stays once closed (with its messages, turns and questions); null: for ever',
      example: 'P180D',
    }),
    webhookDeliveries: RetentionWindow.meta({
      description:
        'how long an inbound webhook delivery is kept; those of calls that never authenticated are deleted after 3 days whatever this says, and never archived',
      example: 'P30D',
    }),
    archive: z.boolean().meta({
      description:
        'true: what leaves is kept in the archive first, and GET /v1/runs/{id} and GET /v1/chats/{id} still answer it (archived: true); false: it is deleted',
    }),
  })
  .meta({ id: 'RetentionSettings' })
export type RetentionSettings = z.infer<typeof RetentionSettings>

/** PATCH /v1/enterprise/retention: the fields to change; the others stay. */
export const RetentionSettingsInput = RetentionSettings.partial()
  .strict()
  .meta({ id: 'RetentionSettingsInput' })
export type RetentionSettingsInput = z.infer<typeof RetentionSettingsInput>

/** The windows a new enterprise has (issue 46). */
export const defaultRetention: RetentionSettings = {
  finishedRuns: 'P90D',
  closedChats: 'P180D',
  webhookDeliveries: 'P30D',
  archive: true,
}
