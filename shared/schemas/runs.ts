import { z } from 'zod'
import {
  IsoTime,
  JsonObject,
  PageQuery,
  Uuid,
  idPrefixParameter,
  pageParameters,
  pagedEnvelope,
  waitSecondsParameter,
} from './common.js'
import { Gate } from './gates.js'
import { tokenCounts } from './models.js'
import { RunPause } from './pauses.js'
import {
  runStatuses,
  finishedStatuses,
  unfinishedStatuses,
  underWayStatuses,
  runSorts,
} from '../values.js'
import type { RunStatus } from '../values.js'
export { runStatuses, finishedStatuses, unfinishedStatuses, underWayStatuses, runSorts }
export type { RunStatus }

// Runs, their events, Blockers (spec: Run; States and transitions; Endpoints Runs and Blockers; Events).

/** learning: an os-improve run started by a failure or a gate decision (DESIGN 10); recommendation: the run
 * an approved recommendation starts on the version it published; fork: POST /v1/runs/{id}/fork (issue 50). */
export const runOrigins = [
  'api',
  'schedule',
  'webhook',
  'successor',
  'retry',
  'learning',
  'recommendation',
  'fork',
] as const

/** Where a fork came from: the run, and the step it went on live from (numbered from 1; issue 50). */
export const ForkedFrom = z
  .object({ runId: Uuid, step: z.number().int().min(1) })
  .meta({ id: 'ForkedFrom' })

/** How a run ended (spec: DESIGN 5, Result); successors match on outcome and look at issue and pr. */
export const RunResult = z
  .looseObject({
    outcome: z.string(),
    summary: z.string().optional(),
    issue: z.unknown().optional(),
    pr: z.unknown().optional(),
    output: z.unknown().optional(),
    successorInput: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: 'RunResult' })
export type RunResult = z.infer<typeof RunResult>

export const Run = z
  .object({
    id: Uuid,
    status: z.enum(runStatuses),
    input: z.record(z.string(), z.unknown()),
    costUsdCents: z.number(),
    costUnpriced: z.boolean().meta({
      description:
        'some of its model calls had no price (a model neither listed nor priced, on an address the operator set): they count $0 in costUsdCents',
    }),
    startedAt: IsoTime.nullable(),
    finishedAt: IsoTime.nullable(),
    blockedReason: z.string().optional().meta({ description: 'present when status is blocked' }),
    taskId: Uuid,
    taskVersionId: Uuid,
    taskSlug: z.string(),
    memberId: Uuid.nullable(),
    executionId: Uuid,
    previousRunId: Uuid.nullable(),
    origin: z.enum(runOrigins),
    forkedFrom: ForkedFrom.optional().meta({
      description: 'a fork only: the run and step it was forked from (beyond the spec; issue 50)',
    }),
    result: RunResult.nullable(),
    /** Why it failed, was skipped or cancelled, in a sentence. */
    reason: z.string().nullable(),
    traceId: z
      .string()
      .regex(/^[0-9a-f]{32}$/)
      .nullable()
      .meta({
        description:
          "the OpenTelemetry trace its spans are in (docs/observability.md): the caller's `traceparent` trace when the start sent one, else one made for it; null when tracing was off at its start (beyond the spec; issue 49)",
      }),
    paused: RunPause.optional().meta({
      description:
        'present while the task or the enterprise is paused and the run not finished: why it waits (starts no step) until the resume (beyond the spec; issue 50)',
    }),
    createdAt: IsoTime,
    updatedAt: IsoTime,
  })
  .meta({ id: 'Run' })
export type Run = z.infer<typeof Run>

export const RunEvent = z
  .object({
    id: Uuid,
    type: z.string(),
    payload: z.record(z.string(), z.unknown()),
    createdAt: IsoTime,
  })
  .meta({ id: 'RunEvent' })
export type RunEvent = z.infer<typeof RunEvent>

export const RunRef = z
  .object({
    id: Uuid,
    status: z.enum(runStatuses),
    taskId: Uuid,
    taskSlug: z.string(),
    createdAt: IsoTime,
  })
  .meta({ id: 'RunRef' })
export type RunRef = z.infer<typeof RunRef>

/** GET /v1/runs/{id} (spec: Run): the run, its events and gates, what it ran, its neighbours, its cost. */
export const RunDetail = z
  .object({
    run: Run,
    events: z.array(RunEvent),
    gates: z.array(Gate),
    /** null once the task is deleted (its runs are kept). */
    task: z.object({ id: Uuid, slug: z.string(), name: z.string(), status: z.string() }).nullable(),
    version: z.object({ id: Uuid, number: z.number().int() }).nullable(),
    previous: RunRef.nullable(),
    next: z.array(RunRef),
    execution: z.object({ id: Uuid, runCount: z.number().int() }),
    cost: z.object({
      usdCents: z.number(),
      /** Some model calls had no price: they count $0 (Run.costUnpriced). */
      unpriced: z.boolean(),
      modelCalls: z.number().int(),
      /** Tokens of the run's model calls, each kind once as the provider bills it (DESIGN 13). */
      ...tokenCounts,
    }),
    forks: z
      .array(z.object({ runId: Uuid, step: z.number().int(), status: z.enum(runStatuses) }))
      .optional()
      .meta({
        description: 'the runs forked from this one, oldest first (beyond the spec; issue 50)',
      }),
    archived: z.boolean().optional().meta({
      description:
        'true: the run left the live tables by retention and is read back from the archive (it is in no list); false: live (beyond the spec; issue 46)',
    }),
  })
  .meta({ id: 'RunDetail' })
export type RunDetail = z.infer<typeof RunDetail>

export const RunDetailQuery = z.object({
  afterEventId: z.string().optional().meta({ description: 'only events after this one' }),
  waitSeconds: waitSecondsParameter(
    'with afterEventId: hold the answer up to this many seconds, 0..30, until a later event exists (beyond the spec); a finished run answers at once',
  ),
})

export const RunListQuery = PageQuery.extend({
  idPrefix: idPrefixParameter('runs'),
  taskId: z.string().optional(),
  taskVersionId: z.string().optional(),
  status: z.string().optional(),
  live: z
    .string()
    .optional()
    .meta({ description: 'true: unfinished runs, blocked and paused left out' }),
})

export const RunPage = pagedEnvelope(Run).meta({ id: 'RunPage' })

export const RunLog = z.object({ runId: Uuid, body: z.string() }).meta({ id: 'RunLog' })

export const OsToolView = z
  .object({
    status: z.enum(runStatuses),
    task: z.object({ id: Uuid, slug: z.string(), name: z.string() }),
    input: z.record(z.string(), z.unknown()),
    events: z.array(RunEvent).max(8),
  })
  .meta({ id: 'OsToolView' })
export type OsToolView = z.infer<typeof OsToolView>

/** The body of POST /v1/tasks/{id}/runs: any JSON object, stored as sent. */
export const RunInput = JsonObject.meta({ id: 'RunInput' })

export const BlockersQuery = z.object({
  failedPage: pageParameters.page,
  pageSize: pageParameters.limit,
})

export const Blockers = z
  .object({
    failed: pagedEnvelope(Run),
    stoppedPipelines: z.array(
      z.object({ executionId: Uuid, run: Run, successorsNotStarted: z.array(z.string()) }),
    ),
    blocked: z.array(Run),
    paused: z.array(Run),
    taskProblems: z.array(
      z.object({
        taskId: Uuid,
        slug: z.string(),
        name: z.string(),
        issues: z.array(z.object({ severity: z.string(), code: z.string(), message: z.string() })),
      }),
    ),
  })
  .meta({ id: 'Blockers' })
export type Blockers = z.infer<typeof Blockers>

export const BlockersClear = z
  .object({ section: z.literal('failed') })
  .meta({ id: 'BlockersClear' })
