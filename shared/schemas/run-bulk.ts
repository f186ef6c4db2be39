import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { runOrigins } from './runs.js'
import { runStatuses } from '../values.js'

// Acting on runs by a filter (issue 50: Act on a filter; docs/api-in-brief.md): POST /v1/runs/bulk
// and the operation it makes, GET /v1/runs/bulk/{id}.

export const bulkActions = ['cancel', 'retry'] as const
export type BulkAction = (typeof bulkActions)[number]

/** The runs an operation acts on: all of the caller's enterprise that match every field given. */
export const RunFilter = z
  .object({
    taskId: Uuid.optional(),
    status: z.enum(runStatuses).optional(),
    origin: z.enum(runOrigins).optional(),
    startedAfter: z.iso.datetime({ offset: true }).optional().meta({
      description: 'runs started (created) at or after this time',
    }),
    startedBefore: z.iso.datetime({ offset: true }).optional().meta({
      description: 'runs started (created) before this time',
    }),
  })
  .meta({ id: 'RunFilter' })
export type RunFilter = z.infer<typeof RunFilter>

export const RunBulkRequest = z
  .object({
    action: z.enum(bulkActions).meta({
      description:
        'cancel: the matching runs not yet ended, as POST /v1/runs/{id}/cancel; retry: the matching ended runs not retried already (a chain of retries is retried once, from its last run), as POST /v1/runs/{id}/retry',
    }),
    filter: RunFilter,
    dryRun: z
      .boolean()
      .optional()
      .meta({ description: 'true: answer 200 with the count matched and do nothing' }),
    idempotencyKey: z.string().min(1).max(200).meta({
      description: 'the same key in the same enterprise answers the same operation',
    }),
    reason: z.string().trim().min(1).max(1000).optional().meta({
      description: "why: kept with the operation and in each cancelled run's reason and event",
    }),
  })
  .meta({ id: 'RunBulkRequest' })
export type RunBulkRequest = z.infer<typeof RunBulkRequest>

export const RunBulkOperation = z
  .object({
    id: Uuid,
    action: z.enum(bulkActions),
    filter: RunFilter,
    /** running until every matched run is done, failed or skipped; then completed. */
    status: z.enum(['running', 'completed']),
    matched: z.number().int().meta({ description: 'runs the filter matched when it was made' }),
    done: z.number().int().meta({ description: 'cancelled, or retried (a new run made)' }),
    failed: z.number().int().meta({ description: 'retries refused: the task cannot run' }),
    skipped: z.number().int().meta({
      description:
        'runs that moved meanwhile: no longer matching, ended before their cancel, or retried meanwhile',
    }),
    createdBy: z.string().meta({ description: 'who made it: token:<id> or user:<id>' }),
    reason: z.string().nullable().meta({ description: 'why, as its maker said; null: not said' }),
    createdAt: IsoTime,
    finishedAt: IsoTime.nullable(),
  })
  .meta({ id: 'RunBulkOperation' })
export type RunBulkOperation = z.infer<typeof RunBulkOperation>

/** A dry run's answer: what the operation would act on, nothing done. */
export const RunBulkCount = z
  .object({
    dryRun: z.literal(true),
    action: z.enum(bulkActions),
    filter: RunFilter,
    matched: z.number().int(),
    maxRuns: z.number().int().meta({
      description:
        'the most runs one operation acts on: past it, POST without dryRun is 400 bulk_too_many_runs',
    }),
  })
  .meta({ id: 'RunBulkCount' })
export type RunBulkCount = z.infer<typeof RunBulkCount>
