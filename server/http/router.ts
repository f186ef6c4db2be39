import { OpenAPIHono } from '@hono/zod-openapi'
import { z } from 'zod'
import { ApiError, errorStatus, type ErrorCode } from '../../shared/errors.js'
import { ErrorBody, FrameworkErrorBody } from '../../shared/schemas/common.js'
import type { Context } from 'hono'
import type { IncomingMessage } from 'node:http'
import type { AppContext, AppEnv } from './context.js'
import { requestHeader } from './headers.js'
import { fieldCodes, validationError } from '../../shared/validation.js'
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
  /**
   * Media type of an answer that is not JSON (an image, a file, a text/event-stream), when the handler
   * returns a Response: the document declares the status and the media type, not a body schema. With
   * `response` too, the route answers either, as the request's Accept asks.
   */
  rawResponse?: string
  /** What that answer is, for the document; by default said from its media type. */
  rawDescription?: string
  /** Code answered when a path parameter is malformed (an id that cannot exist is simply not found). */
  notFound?: ErrorCode
  /**
   * Error codes this route answers, for the document. Those of its input (invalid_request, a field's
   * own code, the path's not-found codes) are added here, and those of the middleware (credentials,
   * scope, CSRF, body) by document.ts: list the ones the handler and the domain answer.
   */
  errors?: ErrorCode[]
  /**
   * Other answers, for the document: health's 503 degraded; a repeat answering 200 what its first call
   * answered 201.
   */
  otherAnswers?: Record<number, { description: string; schema: Schema }>
  /**
   * Served without a token (spec: Routes without a token): the document declares no bearer scheme for
   * it, and the auth middleware lets through the routes so declared.
   */
  public?: boolean
  /**
   * What a public route takes instead of a token, declared as its security scheme (document.ts): the
   * inbound webhooks' secret header (spec: Authentication 8), with the 401 a wrong one answers; or a
   * consent request's poll token.
   */
  credential?: 'webhookSecret' | 'pollToken'
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
    security: securityOf(def),
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
    const params = def.params ? storableParams(c.req.param()) : {}
    const input = {
      params: def.params
        ? parse(def.params, params, (e) => notFoundFor(e, def.notFound ?? 'not_found', params))
        : {},
      query: def.query
        ? parse(def.query, storableQuery(c.req.query(), queryNames), (e) =>
            validationError(e, 'query'),
          )
        : {},
      body: def.body ? parse(def.body, await jsonBody(c), (e) => validationError(e, 'body')) : {},
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

/**
 * A path value that cannot be an id answers not found, saying what names the resource there (issue 51:
 * `POST /v1/tasks/nightly-report/runs` found nothing and did not say why). A task's slug gets the way
 * from it to the id.
 */
function notFoundFor(
  error: z.ZodError,
  fallback: ErrorCode,
  params: Record<string, string>,
): ApiError {
  const param = error.issues[0]?.path[0]
  const code = (typeof param === 'string' && paramNotFound[param]) || fallback
  const value = typeof param === 'string' ? params[param] : undefined
  const what =
    code === 'not_found' ? 'resource' : code.replace(/_not_found$/, '').replace(/_/g, ' ')
  if (value === undefined || value.length > 200)
    return new ApiError(code, `No ${what} has that id in this enterprise.`)
  const shown = JSON.stringify(value)
  return new ApiError(
    code,
    `No ${what} has the id ${shown} in this enterprise: a ${what} is named by its id (a UUID) here` +
      (code === 'task_not_found'
        ? `; find it by slug with GET /v1/tasks?slug=${encodeURIComponent(value)}.`
        : '.'),
  )
}

const jsonType = /^application\/json\s*(;|$)/i

/**
 * The route's body, read as JSON by body.ts; none is `{}`. A body sent as something else (a form, as
 * `curl -d` sends by default) is refused, not taken for none (issue 51: it started a run with an empty
 * input). The spec has no 415: it is the 400 of a body that is not JSON (spec: Errors, Statuses).
 */
async function jsonBody(c: Context<AppEnv>): Promise<unknown> {
  const body = c.get('body')
  if (body !== undefined) return body
  const type = requestHeader(c, 'content-type')
  if (type && !jsonType.test(type) && (await sentBody(c)))
    throw new ApiError(
      'invalid_json',
      `The body must be JSON, sent with content-type: application/json; this one is ${type.split(';')[0]!.trim().slice(0, 100)}.`,
    )
  return {}
}

/**
 * Whether the request carries a body of some bytes (a declared empty one is none). Read only for a body
 * that is refused unless empty: node's request says so in its headers; a web Request (tests) is read.
 */
async function sentBody(c: Context<AppEnv>): Promise<boolean> {
  const length = requestHeader(c, 'content-length')
  if (length !== undefined) return Number(length) > 0
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming
  if (incoming) return requestHeader(c, 'transfer-encoding') !== undefined
  return c.req.raw.body !== null && (await c.req.text()) !== ''
}

function parse(schema: Schema, value: unknown, fail: (e: z.ZodError) => ApiError) {
  const result = schema.safeParse(value)
  if (!result.success) throw fail(result.error)
  return result.data
}

/**
 * The credentials a route takes (securitySchemes are declared in document.ts): a token or a person's
 * session secret as a bearer credential, or the session cookie, which needs x-osd-csrf on a change;
 * or, on a public route, none or the inbound webhooks' secret.
 */
function securityOf(def: RouteDef<unknown, unknown, unknown, unknown>): Record<string, string[]>[] {
  if (def.public) return def.credential ? [{ [def.credential]: [] }] : []
  return def.method === 'get'
    ? [{ bearer: [] }, { session: [] }]
    : [{ bearer: [] }, { session: [], csrf: [] }]
}

export type Responses = Record<string, ResponseEntry>
interface ResponseEntry {
  description: string
  content?: Record<string, { schema: unknown }>
  headers?: Record<string, { description: string; required?: boolean; schema: unknown }>
}

const rawDescriptions: Record<string, string> = {
  'text/event-stream': 'a stream of server-sent events',
  'application/octet-stream': 'the file',
  '*/*': 'the file, in its own media type',
}

function documentResponses(def: RouteDef<unknown, unknown, unknown, unknown>, status: number) {
  const responses: Responses = {}
  if (def.rawResponse) {
    const media = def.rawResponse
    const description =
      def.rawDescription ??
      rawDescriptions[media] ??
      (media.startsWith('image/') ? 'the image' : 'the file')
    const schema =
      media === 'text/event-stream' ? { type: 'string' } : { type: 'string', format: 'binary' }
    const content: Record<string, { schema: unknown }> = { [media]: { schema } }
    // A route that answers either, as the request's Accept asks (GET /v1/events: a stream or a page).
    if (def.response) content['application/json'] = { schema: def.response as Schema }
    responses[status] = {
      description: def.response ? `${description}, or (JSON) the answer` : description,
      content,
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
  if (def.body || def.bodyDoc || def.query) codes.add('invalid_request')
  // The fields whose refusal has its own code (shared/validation.ts), where the body has them.
  for (const field of Object.keys(shapeOf(def.body) ?? {}))
    if (fieldCodes[field]) codes.add(fieldCodes[field])
  if (def.params) {
    codes.add(def.notFound ?? 'not_found')
    for (const param of Object.keys(shapeOf(def.params) ?? {}))
      if (paramNotFound[param]) codes.add(paramNotFound[param])
  }
  codes.add('database_unavailable')
  addErrorCodes(responses, codes)
  if (def.credential === 'webhookSecret')
    addFrameworkAnswer(
      responses,
      401,
      'the webhook secret is wrong, or no enterprise has that slug',
    )
  for (const [s, { description, schema }] of Object.entries(def.otherAnswers ?? {}))
    responses[s] = { description, content: { 'application/json': { schema } } }
  return responses
}

function shapeOf(schema: unknown): z.ZodRawShape | undefined {
  return (schema as Partial<z.ZodObject<z.ZodRawShape>> | undefined)?.shape
}

/**
 * Declares a refusal in the second error shape (spec: Errors, Two body shapes): 401, 500. Where the
 * route also answers codes of that status in the first shape (login's 401 invalid_credentials beside the
 * 401 of no credential), the answer is either shape.
 */
export function addFrameworkAnswer(responses: Responses, status: 401 | 500, description: string) {
  const declared = responses[status]
  const codes = declared?.content?.['application/json']?.schema as z.ZodType | undefined
  const schema = codes ? frameworkOr(codes) : FrameworkErrorBody
  const entry = {
    description: declared ? `${description}; or ${declared.description}` : description,
    content: { 'application/json': { schema } },
  }
  framework.set(entry, description)
  responses[status] = entry
}

/** Answers that tell the caller when to try again. */
const retryAfter = {
  'Retry-After': {
    description: 'seconds to wait before trying again',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
}

/**
 * Declares that the route answers these codes, each under its status (shared/errors.ts), merged with the
 * codes already declared: the first error shape, whose `error` is one of the codes of that status, so a
 * client generated from the document knows every code an operation can answer.
 */
export function addErrorCodes(responses: Responses, codes: Iterable<ErrorCode>): void {
  const byStatus = new Map<number, Set<string>>()
  for (const code of codes) {
    const status = errorStatus[code]
    const declared = responses[status]?.content?.['application/json']?.schema
    const set = byStatus.get(status) ?? new Set(declared ? codesOf.get(declared) : [])
    byStatus.set(status, set.add(code))
  }
  for (const [status, set] of byStatus) {
    const before = responses[status]
    const schema = errorBodyOf([...set].sort())
    const list = codesOf.get(schema)!
    responses[status] = {
      description: `error: ${list.join(', ')}`,
      content: { 'application/json': { schema } },
      ...(status === 429 || status === 503 ? { headers: retryAfter } : {}),
    }
    // A framework refusal declared at this status before stays declared.
    const refusal = before ? framework.get(before) : undefined
    if (refusal) addFrameworkAnswer(responses, status as 401 | 500, refusal)
  }
}

/** The codes an error answer's schema lists, to add more to it. */
const codesOf = new WeakMap<object, string[]>()

// One schema per list of codes, and one union per schema, for every route and app of the process: many
// routes answer the same codes, and making these zod schemas anew for each was a third of making an
// app (osd's start, and every app the suite makes; issue 40).
const errorBodies = new Map<string, z.ZodType>()
const frameworkUnions = new WeakMap<z.ZodType, z.ZodType>()

/** The first error shape whose `error` is one of `codes` (sorted). */
function errorBodyOf(codes: string[]): z.ZodType {
  const key = codes.join(' ')
  let schema = errorBodies.get(key)
  if (!schema) {
    schema = ErrorBody.and(z.object({ error: z.enum(codes as [string, ...string[]]) }))
    codesOf.set(schema, codes)
    errorBodies.set(key, schema)
  }
  return schema
}

/** The second error shape, or the first with these codes. */
function frameworkOr(codes: z.ZodType): z.ZodType {
  let schema = frameworkUnions.get(codes)
  if (!schema) {
    schema = z.union([FrameworkErrorBody, codes])
    codesOf.set(schema, codesOf.get(codes) ?? [])
    frameworkUnions.set(codes, schema)
  }
  return schema
}
/** Answers that include a framework refusal, with its description. */
const framework = new WeakMap<ResponseEntry, string>()
