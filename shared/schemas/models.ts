import { z } from 'zod'

/** Model tiers (spec: Task definition spend.maxModelTier; Enterprise settings chatModelTier). */
export const modelTiers = ['economical', 'mid', 'frontier'] as const
export const ModelTier = z.enum(modelTiers).meta({ id: 'ModelTier' })
export type ModelTier = z.infer<typeof ModelTier>
