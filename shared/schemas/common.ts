import { z } from 'zod'
import { idPrefixRange, minIdPrefix } from '../ids.js'

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

/**
 * A whole number in a query (issue 51): `type: integer` with its bounds in the document, so a client
 * generated from it sends a number. The query carries digits; anything else (a fraction, 1e3, a word)
 * is refused 400 invalid_request naming the parameter, and so is a number out of bounds, unless
 * `clamp` brings it inside them (the page and page size, spec: Limits). An empty value is none given.
 */
export function queryInteger(bounds: {
  min: number
  max: number
  clamp?: boolean
  description: string
}) {
  const { min, max, clamp } = bounds
  const range = `a whole number from ${min} to ${max}`
  return z
    .preprocess(
      (value) => {
        if (typeof value !== 'string') return value
        const text = value.trim()
        if (text === '') return undefined
        if (!/^-?\d+$/.test(text)) return value
        const n = Number(text)
        return clamp ? Math.min(max, Math.max(min, n)) : n
      },
      // One issue per value: the first check it fails ends the checks (a huge one is not safe and too big).
      z
        .number({ error: range })
        .int({ error: range, abort: true })
        .min(min, { error: range, abort: true })
        .max(max, { error: range, abort: true })
        .optional(),
    )
    .meta({ description: bounds.description })
}

const idPrefixValue = () =>
  z.string().refine((value) => idPrefixRange(value) !== undefined, {
    error: `at least ${minIdPrefix} hex characters of an id, dashes only where they fall in one`,
  })

const idPrefixDescription = (what: string) =>
  `only the ${what} whose id starts with this, as git names an object by a prefix: at least ${minIdPrefix} hex characters as the id prints (dashes where they fall in it, or none); otherwise 400 invalid_request naming idPrefix (beyond the spec)`

/**
 * idPrefix of the lists of runs, gates, chats, executions and API tokens (beyond the spec; issue 51):
 * only the ids that start with it, at least 8 hex characters as an id prints (shared/ids.ts).
 */
export const idPrefixParameter = (what: string) =>
  idPrefixValue()
    .optional()
    .meta({ description: idPrefixDescription(what) })

/**
 * GET /v1/runs/archived and /v1/chats/archived (issue 46): the archived ones a prefix names, which no
 * list shows; idPrefix is required, as a lookup by prefix is all they are for.
 */
export const ArchivedQuery = (what: string) =>
  z.object({ idPrefix: idPrefixValue().meta({ description: idPrefixDescription(what) }) })

/** waitSeconds of the long-polls (beyond the spec): 0 (the default) answers at once, 30 at most. */
export const waitSecondsParameter = (description: string) =>
  queryInteger({ min: 0, max: 30, description })

/** The last page a request may name (server/db/paging.ts maxPage): its offset stays a bigint. */
const lastPage = Math.floor(Number.MAX_SAFE_INTEGER / 200)

/** page and limit of a paged list (spec: Limits): out-of-range values are brought inside. */
export const pageParameters = {
  page: queryInteger({
    min: 1,
    max: lastPage,
    clamp: true,
    description: 'page number from 1 (default 1); a number out of range is brought inside',
  }),
  limit: queryInteger({
    min: 1,
    max: 200,
    clamp: true,
    description: 'page size, 1..200 (default 25); a number out of range is brought inside',
  }),
}

/** Query of the six paged lists (spec: Limits): out-of-range numbers brought inside, not refused. */
export const PageQuery = z.object({
  ...pageParameters,
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
