import { OpenAPIHono } from '@hono/zod-openapi'
import type { z } from 'zod'
import { ApiError, errorStatus, type ErrorCode } from '../../shared/errors.js'
import { ErrorBody, FrameworkErrorBody } from '../../shared/schemas/common.js'
import type { AppContext, AppEnv } from './context.js'
import { validationError } from '../../shared/validation.js'
import { storable, unstorable } from '../../shared/text.js'

export type Router = OpenAPIHono<AppEnv>

/** A sub-app for one resource (STYLE: a sub-app per resource); createApp mounts it under /v1. */
export function createRouter(): Router {
  return new OpenAPIHono<AppEnv>()
}

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete'
type Schema = z.ZodType
type Infer<S> = S extends Schema ? z.infer<S> : Record<string, never>

export interface RouteDef<P, Q, B, R> {
  /**
   * The operation's name in the document, a verb in the spec's words (listRuns, startTaskRun): clients
   * generated from the document name their functions after it. Unique in the app (createApp checks).
   */
  operationId: string
  method: Method
  /** OpenAPI form, relative to where the router is mounted: '/{id}/versions'. */
  path: string
  summary: string
  description?: string
  params?: P
  query?: Q
  body?: B
  /**
   * A body documented but not validated here: for routes that must first authenticate and store the call
   * (inbound webhooks), and judge the body after.
   */
  bodyDoc?: Schema
  /** Status of success; 200 unless given. 204 answers an empty body. */
  status?: 200 | 201 | 202 | 204
  /** Schema of the success answer, for the OpenAPI document and the handler's return type. */
  response?: R
  /** Media type of a raw answer (an image), when the handler returns a Response. */
  rawResponse?: string
  /** Code answered when a path parameter is malformed (an id that cannot exist is simply not found). */
  notFound?: ErrorCode
  /** Error codes this route answers, for the document. */
  errors?: ErrorCode[]
  /** Other answers, for the document: health's 503 degraded. */
  otherAnswers?: Record<number, { description: string; schema: Schema }>
  /** Served without a token (spec: Routes without a token). The auth middleware reads this. */
  public?: boolean
}

export interface RouteInput<P, Q, B> {
  params: Infer<P>
  query: Infer<Q>
  body: Infer<B>
}

type Answer<R> = R extends Schema ? z.input<R> : void

/**
 * Declares one route: its OpenAPI entry, generated from the zod schemas, and its handler, which receives
 * validated params, query and body and returns the answer body (or a Response for raw answers).
 */
export function route<
  P extends Schema | undefined = undefined,
  Q extends Schema | undefined = undefined,
  B extends Schema | undefined = undefined,
  R extends Schema | undefined = undefined,
>(
  app: Router,
  def: RouteDef<P, Q, B, R>,
  handler: (c: AppContext, input: RouteInput<P, Q, B>) => Promise<Answer<R> | Response>,
): void {
  const status = def.status ?? 200
  app.openAPIRegistry.registerPath({
    operationId: def.operationId,
    method: def.method,
    path: def.path,
    summary: def.summary,
    description: def.description,
    tags: [],
    security: def.public ? [] : [{ bearer: [] }],
    request: {
      params: def.params as never,
      query: def.query as never,
      body:
        def.body || def.bodyDoc
          ? {
              required: true,
              content: { 'application/json': { schema: (def.body ?? def.bodyDoc) as Schema } },
            }
          : undefined,
    },
    responses: documentResponses(def, status) as never,
  })

  const honoPath = def.path.replace(/\{(\w+)\}/g, ':$1')
  const queryNames = def.query ? declaredNames(def.query) : undefined
  app.on(def.method.toUpperCase(), honoPath, async (c) => {
    // Params and query are only read when declared: each read builds an object per request.
    const input = {
      params: def.params
        ? parse(def.params, storableParams(c.req.param()), (e) =>
            notFoundFor(e, def.notFound ?? 'not_found'),
          )
        : {},
      query: def.query
        ? parse(def.query, storableQuery(c.req.query(), queryNames), (e) =>
            validationError(e, 'query'),
          )
        : {},
      body: def.body ? parse(def.body, c.get('body') ?? {}, (e) => validationError(e, 'body')) : {},
    } as RouteInput<P, Q, B>
    const answer = await handler(c as AppContext, input)
    if (answer instanceof Response) return answer
    if (status === 204) return c.body(null, 204)
    return c.json(answer as object, status)
  })
}

// A malformed id names nothing that exists: it answers its resource's not-found code, never 400.
const paramNotFound: Record<string, ErrorCode> = {
  memberId: 'member_not_found',
  roleId: 'role_not_found',
  taskId: 'task_not_found',
  teamId: 'team_not_found',
  versionId: 'version_not_found',
  gateId: 'gate_not_found',
  emailId: 'email_not_found',
  attachmentId: 'attachment_not_found',
  chatId: 'gate_not_found',
}

// Text no column can hold (U+0000, half a surrogate pair; a body holding it is refused in body.ts)
// never reaches the database from a path or a query. The OpenAPI document states the rule:
// - a path value holding it names nothing: it is read with U+FFFD in its place, so the route answers what
//   it answers for any value naming nothing (an id: its not-found code; an inbound webhook's enterprise
//   slug: 401; its task slug or gate id: not found, stored as a refused delivery);
// - a query value holding it is refused, 400 invalid_request naming the parameter.
export const unstorableRule =
  'A path value holding U+0000 or an unpaired surrogate names nothing and is answered as such (an id: its not-found code); a query value holding one is refused 400 invalid_request naming the parameter. A query parameter given twice counts once, the first; name[] and name[key] are other names, ignored as unknown parameters are.'

function storableParams(params: Record<string, string>): Record<string, string> {
  for (const [name, value] of Object.entries(params))
    if (unstorable(value)) params[name] = storable(value)
  return params
}

/** `query`, unless a parameter of `names` (every one, without names) holds unstorable text. */
function storableQuery(
  query: Record<string, string>,
  names: string[] | undefined,
): Record<string, string> {
  const refused = (names ?? Object.keys(query)).filter(
    (name) => Object.hasOwn(query, name) && unstorable(query[name]!),
  )
  if (refused.length === 0) return query
  const issues = refused.map((field) => ({
    field,
    message: 'holds U+0000 or an unpaired surrogate, which no value can hold',
  }))
  throw new ApiError('invalid_request', issues.map((i) => `${i.field}: ${i.message}`).join('; '), {
    issues,
  })
}

/** The parameter names of a query schema (an object), or undefined for any other schema. */
function declaredNames(schema: Schema): string[] | undefined {
  const shape = (schema as Partial<z.ZodObject<z.ZodRawShape>>).shape
  return shape ? Object.keys(shape) : undefined
}

function notFoundFor(error: z.ZodError, fallback: ErrorCode): ApiError {
  const param = error.issues[0]?.path[0]
  const code = (typeof param === 'string' && paramNotFound[param]) || fallback
  return new ApiError(code, `No ${String(param ?? 'resource')} of that value in this enterprise.`)
}

function parse(schema: Schema, value: unknown, fail: (e: z.ZodError) => ApiError) {
  const result = schema.safeParse(value)
  if (!result.success) throw fail(result.error)
  return result.data
}

function documentResponses(def: RouteDef<unknown, unknown, unknown, unknown>, status: number) {
  const responses: Record<
    string,
    { description: string; content?: Record<string, { schema: unknown }> }
  > = {}
  if (def.rawResponse) {
    const file = { type: 'string', format: 'binary' }
    responses[status] = {
      description: 'the file',
      content: { [def.rawResponse]: { schema: file } },
    }
  } else if (def.response) {
    responses[status] = {
      description: 'success',
      content: { 'application/json': { schema: def.response as Schema } },
    }
  } else {
    responses[status] = { description: 'success, empty body' }
  }
  const codes = new Set<ErrorCode>(def.errors ?? [])
  if (def.body || def.query) codes.add('invalid_request')
  if (def.params) {
    codes.add(def.notFound ?? 'not_found')
    const shape = (def.params as Partial<z.ZodObject<z.ZodRawShape>>).shape ?? {}
    for (const param of Object.keys(shape))
      if (paramNotFound[param]) codes.add(paramNotFound[param])
  }
  if (!def.public) codes.add('api_token_scope')
  // Answered by the body middleware and the error writer, whatever the route.
  if (def.body || def.bodyDoc) codes.add('invalid_json').add('body_too_large')
  codes.add('database_unavailable')
  const byStatus = new Map<number, string[]>()
  for (const code of codes)
    byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code])
  for (const [s, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[s] = {
      description: `error: ${list.join(', ')}`,
      content: { 'application/json': { schema: ErrorBody } },
    }
  }
  if (!def.public)
    responses[401] = {
      description: 'no or invalid token',
      content: { 'application/json': { schema: FrameworkErrorBody } },
    }
  for (const [s, { description, schema }] of Object.entries(def.otherAnswers ?? {}))
    responses[s] = { description, content: { 'application/json': { schema } } }
  return responses
}

/**
 * Refuses an app in which two operations share an operationId, or one has none: a generated client would
 * name two functions alike, or invent a name from the path. createApp calls it once every route is in.
 */
export function requireOperationIds(app: Router): void {
  const seen = new Map<string, string>()
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== 'route') continue
    const { operationId, method, path } = definition.route
    const where = `${method.toUpperCase()} ${path}`
    if (!operationId) throw new Error(`${where} has no operationId`)
    const first = seen.get(operationId)
    if (first)
      throw new Error(`operationId ${operationId} is declared twice: ${first} and ${where}`)
    seen.set(operationId, where)
  }
}
