import { z } from 'zod'
import { Uuid } from './common.js'
import { spendLayers } from '../values.js'
export { spendLayers }

// Spend (spec: Endpoints Spend; DESIGN 6): daily caps per layer, in US cents.

export const SpendLayer = z.enum(spendLayers)
export type SpendLayer = z.infer<typeof SpendLayer>

const LayerSpend = z.object({
  layer: SpendLayer,
  layerId: Uuid,
  usdCents: z.number(),
  runs: z.number().int(),
  unpriced: z.boolean().meta({
    description:
      'some model calls on this layer today had no price (a model neither listed nor priced, on an address the operator set): they count $0',
  }),
})

export const SpendView = z
  .object({
    day: z.string().meta({ description: 'today, in UTC' }),
    enabled: z.boolean(),
    /** Today's spend and runs per layer that spent anything. */
    today: z.array(LayerSpend),
    caps: z.array(z.object({ layer: SpendLayer, layerId: Uuid, moneyCentsDay: z.number().int() })),
  })
  .meta({ id: 'Spend' })
export type SpendView = z.infer<typeof SpendView>

export const SpendCapInput = z
  .object({
    layer: SpendLayer,
    layerId: Uuid.optional().meta({
      description: 'the team, task or member; for the enterprise its own id, or omitted',
    }),
    moneyCentsDay: z
      .number()
      .int()
      .min(0)
      .max(100_000_000)
      .nullable()
      .meta({ description: 'null removes the cap' }),
  })
  .meta({ id: 'SpendCapInput' })
export type SpendCapInput = z.infer<typeof SpendCapInput>

export const SpendEnabledInput = z
  .object({ enabled: z.boolean() })
  .meta({ id: 'SpendEnabledInput' })
