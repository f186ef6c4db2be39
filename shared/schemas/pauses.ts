import { z } from 'zod'
import { IsoTime } from './common.js'

// Pause of a task or of the enterprise (issue 50; docs/usage.md#pause): while one is in force the
// task (or every task and chat of the enterprise) starts no new step; starts are accepted and wait.

/** A pause in force: since when, who took it (`token:<id>` or `user:<id>`), and why. */
export const Pause = z
  .object({
    at: IsoTime,
    by: z.string().meta({ description: 'who paused: token:<id> or user:<id>' }),
    reason: z.string(),
  })
  .meta({ id: 'Pause' })
export type Pause = z.infer<typeof Pause>

export const pauseScopes = ['task', 'enterprise'] as const

/** Why a run waits: the pause of its task or of its enterprise (the enterprise's when both are). */
export const RunPause = Pause.extend({
  scope: z
    .enum(pauseScopes)
    .meta({ description: 'what is paused: the task of the run, or the enterprise' }),
}).meta({ id: 'RunPause' })
export type RunPause = z.infer<typeof RunPause>

export const PauseInput = z
  .object({
    reason: z
      .string()
      .trim()
      .min(1)
      .max(1000)
      .meta({ description: 'why: kept with the pause and told in the event feed' }),
  })
  .meta({ id: 'PauseInput' })

export const ResumeInput = z
  .object({
    reason: z.string().trim().min(1).max(1000).optional().meta({ description: 'why, if said' }),
  })
  .meta({ id: 'ResumeInput' })

/** The enterprise's pause: the one in force, or null. */
export const EnterprisePause = z
  .object({ paused: Pause.nullable() })
  .meta({ id: 'EnterprisePause' })
export type EnterprisePause = z.infer<typeof EnterprisePause>
