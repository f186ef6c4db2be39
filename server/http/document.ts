import { z } from 'zod'
import { resourceOf } from '../../shared/scopes.js'
import { secretHeader } from '../domain/webhooks/index.js'
import { pollTokenHeader } from '../routes/consent.js'
import { authRefusals, csrfHeader, sessionCookie } from './auth.js'
import {
  addErrorCodes,
  addFrameworkAnswer,
  unstorableRule,
  type Responses,
  type Router,
} from './router.js'

// The OpenAPI document as a whole (DESIGN 4): what route() cannot know about one operation (its path
// under the mount point, what the middleware answers there), the checks that keep its names unique,
// and the text a client generated from it needs besides the operations.

type RouteConfig = Extract<
  Router['openAPIRegistry']['definitions'][number],
  { type: 'route' }
>['route']

/**
 * Completes every operation registered so far and checks the whole: called by createApp once every
 * route is in, before the routes that are not route()'s own (the document itself).
 */
export function finishDocument(app: Router): void {
  requireOperationIds(app)
  const registry = app.openAPIRegistry
  for (const [name, scheme] of Object.entries(securitySchemes))
    registry.registerComponent('securitySchemes', name, scheme)
  for (const definition of registry.definitions) {
    if (definition.type !== 'route') continue
    const route = definition.route
    const method = route.method.toUpperCase()
    const responses = route.responses as Responses
    // A generated client groups operations by tag: the resource, as the scope rule names it.
    route.tags = [resourceOf(route.path) ?? 'service']
    if (!isPublic(route)) {
      addErrorCodes(responses, authRefusals(method, route.path))
      addFrameworkAnswer(responses, 401, 'no credential, or one that is wrong, revoked or expired')
    }
    // Rate limits (http/limits.ts): per token or session, or per client address without one; and the
    // refusal while osd stops (headers.ts, requestLog). The health checks a balancer polls are neither
    // counted nor refused.
    if (!route.path.startsWith('/v1/health'))
      addErrorCodes(responses, ['rate_limited', 'shutting_down'])
    // The body middleware reads a body sent to any method but GET, whatever the route takes.
    if (method !== 'GET') addErrorCodes(responses, ['invalid_json', 'body_too_large'])
    addFrameworkAnswer(
      responses,
      500,
      'a failure on the service side: message Internal server error',
    )
    // Every 401 carries its challenge (errors.ts, challengeUnauthorized).
    const refusal = responses[401]
    if (refusal) refusal.headers = { ...refusal.headers, ...challengeHeader }
  }
}

const challengeHeader = {
  'WWW-Authenticate': {
    description:
      'how to authenticate (RFC 6750): Bearer, or Bearer error="invalid_token" when a bearer credential was sent and refused (unknown, revoked, expired); on the inbound webhooks, WebhookSecret header="x-os-webhook-secret"',
    required: true,
    schema: { type: 'string' },
  },
}

/** Whether an operation takes no token (spec: Routes without a token): it declares no bearer scheme. */
export function isPublic(route: Pick<RouteConfig, 'security'>): boolean {
  return !route.security?.some((requirement) => 'bearer' in requirement)
}

const securitySchemes = {
  bearer: {
    type: 'http',
    scheme: 'bearer',
    description:
      "Authorization: Bearer <secret>: an API token of the enterprise (osd_...), acting with its scopes (spec: Authentication), or a person's session secret (osds_...) answered by POST /v1/auth/login, acting with every scope. The portal-only routes refuse API tokens (403).",
  },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: sessionCookie,
    description:
      'The session cookie POST /v1/auth/login sets, as a browser sends it. Every call but a GET made with it also needs the csrf header.',
  },
  csrf: {
    type: 'apiKey',
    in: 'header',
    name: csrfHeader,
    description: `With the session cookie, on every call but a GET: the csrfToken the sign-in answered. Without it: 403 csrf_required.`,
  },
  webhookSecret: {
    type: 'apiKey',
    in: 'header',
    name: secretHeader,
    description:
      "The enterprise's webhook secret, shown once by POST /v1/enterprise/webhook-secret/rotate (spec: Authentication 8). A wrong secret and an unknown enterprise answer the same 401.",
  },
  pollToken: {
    type: 'apiKey',
    in: 'header',
    name: pollTokenHeader,
    description:
      'The poll token POST /v1/consent/requests answered; without it, or with another, the request is not found (404).',
  },
} as const

/**
 * Refuses an app in which two operations share an operationId, or one has none: a generated client would
 * name two functions alike, or invent a name from the path.
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

type AnySchema = z.core.$ZodType

/**
 * Refuses to make the document of an app in which two different schemas carry one component id
 * (`.meta({ id })`): it would keep one of them under that name and describe every use of the other with
 * its shape. The error names both schemas and where each is used. Checked as the document is made, not
 * as the app is: the walk over every schema was a tenth of an osd's start, and the suite makes the
 * document of its apps (the contract check reads it), so a clash never gets past a test run.
 */
export function requireUniqueSchemaIds(app: Router): void {
  const owners = new Map<string, { schema: AnySchema; where: string }>()
  const visited = new Set<AnySchema>()
  const visit = (schema: AnySchema, where: string) => {
    if (visited.has(schema)) return
    visited.add(schema)
    const id = z.globalRegistry.get(schema)?.id
    if (typeof id === 'string') {
      const first = owners.get(id)
      if (first && first.schema !== schema)
        throw new Error(
          `component id ${id} names two schemas: ${shapeText(first.schema)} in ${first.where}, and ${shapeText(schema)} in ${where}`,
        )
      owners.set(id, { schema, where })
    }
    for (const [step, child] of children(schema)) visit(child, `${where}${step}`)
  }
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type === 'schema') {
      if (isSchema(definition.schema)) visit(definition.schema, 'a registered schema')
      continue
    }
    if (definition.type !== 'route') continue
    const route = definition.route
    const op = `${route.method.toUpperCase()} ${route.path}`
    for (const part of ['params', 'query', 'headers'] as const) {
      const schema: unknown = route.request?.[part]
      if (isSchema(schema)) visit(schema, `${op} ${part}`)
    }
    const body = route.request?.body as
      { content?: Record<string, { schema?: unknown }> } | undefined
    for (const { schema } of Object.values(body?.content ?? {}))
      if (isSchema(schema)) visit(schema, `${op} body`)
    for (const [status, answer] of Object.entries(route.responses)) {
      const content = (answer as { content?: Record<string, { schema?: unknown }> }).content
      for (const { schema } of Object.values(content ?? {}))
        if (isSchema(schema)) visit(schema, `${op} answer ${status}`)
    }
  }
}

function isSchema(value: unknown): value is AnySchema {
  return typeof value === 'object' && value !== null && '_zod' in value
}

/** The schemas a schema is made of, each with the step that reaches it (`.field`, `[]`). */
function* children(schema: AnySchema): Iterable<[string, AnySchema]> {
  const def = schema._zod.def as unknown as Record<string, unknown>
  if (def.type === 'lazy') yield ['', (def.getter as () => AnySchema)()]
  for (const [key, value] of Object.entries(def)) {
    if (key === 'shape' && value && typeof value === 'object') {
      for (const [field, child] of Object.entries(value))
        if (isSchema(child)) yield [`.${field}`, child]
    } else if (isSchema(value)) yield [key === 'element' ? '[]' : '', value]
    else if (Array.isArray(value)) for (const item of value) if (isSchema(item)) yield ['', item]
  }
}

function shapeText(schema: AnySchema): string {
  const shape = (schema._zod.def as { shape?: object }).shape
  if (!shape) return `a ${schema._zod.def.type}`
  const keys = Object.keys(shape)
  return `{${keys.slice(0, 5).join(', ')}${keys.length > 5 ? ', ...' : ''}}`
}

/** The document's own text: what a client needs besides the operations. */
const description = [
  'The HTTP API of osd, the task automation service.',
  "Credentials: every operation names its security. Most take an API token or a person's session secret as a bearer credential (scope rule: resource = first path segment after /v1, read for GET, write otherwise; a token without it: 403 api_token_scope), or the session cookie with the x-osd-csrf header on every call but a GET. Operations with an empty security take no credential; the inbound webhooks take the enterprise webhook secret.",
  'Errors come in two shapes: {error, message?, ...} (Error: match on error, the code; each operation lists the codes it answers per status) and, for refusals before any route (no credential, a failure on the service side, a method a path does not have), {message, error, statusCode} (FrameworkError). 429 and 503 carry Retry-After.',
  'Rate limits: each token or session may make OSD_RATE_LIMIT_PER_MINUTE requests a minute (6,000 unless set), a whole minute\'s worth at once; each client address, on the operations that take no credential, OSD_RATE_LIMIT_IP_PER_MINUTE (600). Past it: 429 rate_limited with Retry-After. Counted answers carry the IETF RateLimit-Policy and RateLimit headers (draft-ietf-httpapi-ratelimit-headers): "caller";q=6000;w=60 and "caller";r=<left>;t=<seconds until full>.',
  'Methods: a method a path does not have answers 405 with Allow listing those it has, in the FrameworkError shape; OPTIONS on any path answers 204 with Allow, without a credential. HEAD is answered wherever GET is. A path the document does not name answers 404 (401 first when no credential is sent).',
  'Answers carry only the fields their schemas name; a new field may be added to an answer in a later version, so a client should ignore fields it does not know.',
  unstorableRule,
].join('\n\n')

/**
 * Documents made so far in this process, by the operations they describe and the version. Every app
 * createApp makes has the same routes whatever its configuration, so one document serves them all:
 * the suite makes an app per test file or more, and making each its own document was about a tenth
 * of the route tests' CPU (issue 40).
 */
const documents = new Map<string, unknown>()

/** Built once, on first request: the routes do not change while the process runs. */
export function openApiDocument(app: Router, version: string): () => unknown {
  let document: unknown
  return () => {
    if (document) return document
    const operations = app.openAPIRegistry.definitions.map((d) =>
      d.type === 'route' ? `${d.route.method} ${d.route.path}` : d.type,
    )
    const key = [version, ...operations].join('\n')
    document = documents.get(key)
    if (!document) {
      requireUniqueSchemaIds(app)
      document = app.getOpenAPI31Document({
        openapi: '3.1.0',
        info: { title: 'osd: task automation service', version, description },
        servers: [{ url: '/' }],
      })
      documents.set(key, document)
    }
    return document
  }
}
