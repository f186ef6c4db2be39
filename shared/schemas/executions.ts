import { z } from 'zod'
import { IsoTime, PageQuery, Uuid, idPrefixParameter, pagedEnvelope } from './common.js'
import { Run, RunRef } from './runs.js'
import { RunPause } from './pauses.js'
import { executionStatuses, executionSorts } from '../values.js'
export { executionStatuses, executionSorts }

// Executions: the runs linked by successors and retries (spec: Concepts; Endpoints Executions).

export type ExecutionStatus = (typeof executionStatuses)[number]

/** The board's lanes (spec: Endpoints Executions, board): at least these. */
export const boardLanes = [
  'queued',
  'running',
  'waiting',
  'blocked',
  'failed',
  'cancelled',
  'complete',
] as const

export const Execution = z
  .object({
    id: Uuid,
    status: z.enum(executionStatuses),
    closed: z.boolean(),
    closedAt: IsoTime.nullable(),
    startedAt: IsoTime,
    updatedAt: IsoTime,
    runCount: z.number().int(),
    costUsdCents: z.number(),
    /** The task it started with. */
    taskId: Uuid,
    taskSlug: z.string(),
    lastRun: RunRef,
    teamIds: z.array(Uuid),
    memberIds: z.array(Uuid),
    paused: RunPause.optional().meta({
      description:
        "on the board: present while the last run's task or the enterprise is paused and the execution not finished: why it waits (beyond the spec; issue 50)",
    }),
  })
  .meta({ id: 'Execution' })
export type Execution = z.infer<typeof Execution>

export const ExecutionFilters = z.object({
  teamId: z.string().optional(),
  memberId: z.string().optional(),
  status: z
    .string()
    .optional()
    .meta({ description: executionStatuses.join(', ') }),
  closed: z.string().optional().meta({ description: 'true for closed executions only' }),
})

export const ExecutionListQuery = PageQuery.extend({
  ...ExecutionFilters.shape,
  idPrefix: idPrefixParameter('executions'),
})
export const ExecutionPage = pagedEnvelope(Execution).meta({ id: 'ExecutionPage' })

export const Board = z
  .object({
    lanes: z.array(z.object({ lane: z.enum(boardLanes), executions: z.array(Execution) })),
  })
  .meta({ id: 'ExecutionBoard' })
export type Board = z.infer<typeof Board>

const Counts = z.object({
  running: z.number().int(),
  queued: z.number().int(),
  waiting: z.number().int(),
})
export const ExecutionCounts = z
  .object({ executions: Counts, runs: Counts })
  .meta({ id: 'ExecutionCounts' })

export const ExecutionDetail = z
  .object({
    execution: Execution,
    runs: z.array(Run),
    /** How runs lead to each other: a successor started, or a retry. */
    links: z.array(
      z.object({ from: Uuid, to: Uuid, kind: z.enum(['successor', 'retry', 'fork']) }),
    ),
    /** The task graph of the successors involved. */
    graph: z.object({
      tasks: z.array(z.object({ id: Uuid, slug: z.string(), name: z.string() })),
      edges: z.array(
        z.object({
          from: z.string(),
          to: z.string(),
          on: z.string(),
          when: z.string().nullable(),
          delayMinutes: z.number().nullable(),
        }),
      ),
    }),
    archived: z.boolean().optional().meta({
      description:
        'true: its runs left the live tables by retention and it is read back from the archive (it is in no list or board); false: live (beyond the spec; issue 46)',
    }),
  })
  .meta({ id: 'ExecutionDetail' })
export type ExecutionDetail = z.infer<typeof ExecutionDetail>

export const CloseCompleted = ExecutionFilters.pick({ teamId: true, memberId: true })
  .extend({ teamId: Uuid.optional(), memberId: Uuid.optional() })
  .meta({ id: 'CloseCompleted' })
