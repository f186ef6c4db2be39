import { z } from 'zod'

// Wire types shared by the daemon (validation, OpenAPI) and osctl (decoding answers).

/**
 * Any JSON object, answered as the very object sent: what a run's input is (spec: Start a run, stored as
 * sent). A record schema would answer a copy, and its copy leaves out a key named "__proto__".
 */
export const JsonObject = z
  .custom<Record<string, unknown>>(
    (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
    { message: 'expected a JSON object' },
  )
  .meta({ type: 'object', additionalProperties: {} } as never)

export const Uuid = z
  .uuid()
  .meta({ description: 'UUID', example: '0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10' })

/** ISO 8601 in UTC with milliseconds (spec: Common conventions). */
export const IsoTime = z.iso
  .datetime({ precision: 3 })
  .meta({ example: '2026-11-22T09:30:00.000Z' })

export const IdParam = z.object({ id: Uuid.meta({ param: { name: 'id', in: 'path' } }) })

/** First error shape: the code in `error` (spec: Errors, Two body shapes). */
export const ErrorBody = z
  .looseObject({
    error: z.string().meta({ description: 'error code; match on this, not on the message' }),
    message: z.string().optional(),
  })
  .meta({ id: 'Error' })

/** Second error shape, for framework-level refusals: the code in `message`. */
export const FrameworkErrorBody = z
  .object({ message: z.string(), error: z.string().optional(), statusCode: z.number().int() })
  .meta({ id: 'FrameworkError' })

export type ErrorBody = z.infer<typeof ErrorBody>

/** Query of the six paged lists (spec: Limits). Lenient on purpose: bad values are brought in range. */
export const PageQuery = z.object({
  page: z.string().optional().meta({ description: 'page number from 1 (default 1)' }),
  limit: z.string().optional().meta({ description: 'page size, 1..200 (default 25; clamped)' }),
  order: z.string().optional().meta({ description: 'asc, or desc (default; anything but asc)' }),
  sort: z
    .string()
    .optional()
    .meta({ description: 'sort field; unknown values sort by the default' }),
})

export function pagedEnvelope<T extends z.ZodType>(item: T) {
  return z.object({
    data: z.array(item),
    total: z.number().int(),
    page: z.number().int(),
    limit: z.number().int(),
    pages: z.number().int().min(1),
  })
}

export type Paged<T> = { data: T[]; total: number; page: number; limit: number; pages: number }

export const Health = z
  .object({ status: z.enum(['ok', 'degraded']), version: z.string() })
  .meta({ id: 'Health' })
export type Health = z.infer<typeof Health>
