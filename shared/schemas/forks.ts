import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'
import { ModelTier } from './models.js'

// A run's steps and forking a run from one of them (issue 50; DESIGN 15). A step is an entry of the
// run's journal (DESIGN 5, 6), numbered from 1 in the order the run took them.

export const RunStep = z
  .object({
    step: z.number().int().min(1),
    kind: z.enum(['model', 'tool', 'gate']).meta({
      description: 'model: a model call; tool: a tool call; gate: a tool call a gate decides first',
    }),
    name: z.string().meta({ description: 'the model of a model call, the tool of a tool call' }),
    status: z.enum(['started', 'done', 'failed']).meta({
      description: 'started: under way (or a gated call waiting for its decision); done; failed',
    }),
    isError: z
      .boolean()
      .meta({ description: 'a tool call that answered an error, a model call that failed' }),
    toolCalls: z
      .array(z.string())
      .meta({ description: 'a model call: the tools its answer called, in order' }),
    gate: z
      .object({ id: Uuid, status: z.enum(['waiting', 'decided']), decision: z.string().nullable() })
      .nullable(),
    costUsdCents: z.number().meta({ description: "0 for a step copied from the run's original" }),
    copied: z.boolean().meta({
      description: 'taken from the run this one was forked from, not made again',
    }),
    startedAt: IsoTime,
    finishedAt: IsoTime.nullable(),
    forkable: z.boolean().meta({
      description: 'POST /v1/runs/{id}/fork may go on live from this step',
    }),
  })
  .meta({ id: 'RunStep' })
export type RunStep = z.infer<typeof RunStep>

export const RunSteps = z.object({ runId: Uuid, steps: z.array(RunStep) }).meta({ id: 'RunSteps' })
export type RunSteps = z.infer<typeof RunSteps>

export const ForkRequest = z
  .strictObject({
    fromStep: z.number().int().meta({
      description:
        "the first step made live; the steps before it are copied from this run's journal at no cost",
    }),
    versionId: Uuid.optional().meta({
      description: "a version of the run's task to go on with (default: the run's own version)",
    }),
    modelTier: ModelTier.optional().meta({
      description: "the tier of the fork's model calls instead of its version's",
    }),
    reason: z.string().max(1000).optional().meta({ description: 'why, kept with the fork' }),
  })
  .meta({ id: 'ForkRequest' })
export type ForkRequest = z.infer<typeof ForkRequest>
