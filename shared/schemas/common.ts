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

/**
 * First error shape: the code in `error` (spec: Errors, Two body shapes). Open: some refusals add fields
 * of their own, named here where more than one code carries them.
 */
export const ErrorBody = z
  .looseObject({
    error: z.string().meta({ description: 'error code; match on this, not on the message' }),
    message: z.string().optional(),
    issues: z
      .array(
        z.object({
          field: z.string().optional().meta({ description: 'the field at fault (a.b for nested)' }),
          severity: z.enum(['error', 'warning']).optional(),
          code: z.string().optional().meta({ description: 'a definition check: its code' }),
          message: z.string(),
        }),
      )
      .optional()
      .meta({
        description:
          'what is wrong, one entry per fault: a field of the request (invalid_request, invalid_name, ...) or a definition check (invalid_task_definition, gate_required_for_tool)',
      }),
    retryAfterSeconds: z
      .number()
      .int()
      .optional()
      .meta({ description: 'with 429: the seconds Retry-After also says' }),
  })
  .meta({
    id: 'Error',
    description:
      'Other fields some codes add: needed and held (api_token_scope), runId (overlap, member_busy: the run recorded as skipped), currentVersionId (task_version_conflict), decision (gate_not_waiting), status (already_decided), taskId (recommendation_not_applicable), slugs (a role clone whose task slugs exist), deliveryId (the refused replay of a webhook delivery), duplicateOf (note_duplicate: the note of the same layer and owner that says nearly the same), connectionId (tool_connection_shadows_enterprise: the enterprise connection of that name).',
  })

/**
 * Second error shape, for refusals before any route (no credential, a method the path does not have, an
 * unknown path) and failures: the code in `message`, the status's name in `error`.
 */
export const FrameworkErrorBody = z
  .object({
    message: z.string().meta({ description: 'the code: Unauthorized, Not Found, ...' }),
    error: z.string().meta({ description: "the status's name" }),
    statusCode: z.number().int(),
  })
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

/** A Kubernetes probe's answer (GET /v1/health/live, /v1/health/ready): its status says it all. */
export const Probe = z
  .object({
    status: z.enum(['ok', 'unavailable']),
    /** Why a readiness probe answers 503: the database does not answer, or the daemon is stopping. */
    reason: z.string().optional(),
  })
  .meta({ id: 'Probe' })
export type Probe = z.infer<typeof Probe>
