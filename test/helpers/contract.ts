import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'

// The contract check (DESIGN 4): an answer held against the daemon's own OpenAPI document, as a
// validating proxy between a client and osd would hold it. The status must be one the operation
// declares; a JSON body must be valid against the declared schema, with every object closed to fields
// it does not name; a raw answer must carry a declared media type; declared headers must be there.
// A method a path does not have must answer 405 with Allow (OPTIONS: 204 with Allow), and a path the
// document does not name one of the refusals that come before any route.
//
// Objects are closed here rather than in the document (additionalProperties: false on every object of
// the document, or .strict() on the zod schemas): osctl parses answers with the same zod schemas, so a
// closed schema would make an older osctl refuse the answer of a newer osd that added a field, and a
// client generated in another language would be told the same. The document stays open for additions;
// the check holds osd to exactly what it declares today. A schema that declares its openness
// (additionalProperties given, as the error body and a run's result do) is left as declared, and so are
// the members of an allOf, each of which sees only part of the object.

type Schema = { [keyword: string]: unknown }
export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>
  components: { schemas: Record<string, Schema> }
}
interface Operation {
  operationId: string
  responses: Record<string, ResponseObject>
}
interface ResponseObject {
  description: string
  content?: Record<string, { schema?: Schema }>
  headers?: Record<string, { required?: boolean; schema?: Schema }>
}

/** One request and its answer, as a test saw them. */
export interface Exchange {
  method: string
  /** The path as requested, with its query. */
  url: string
  status: number
  headers: Headers
  text: string
}

interface PathTemplate {
  template: string
  pattern: RegExp
  /** Parameters in the template: the fewer, the more precisely it names a path (static first). */
  params: number
  operations: Map<string, Operation>
}

const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']
const base = 'osd-openapi'

/**
 * Answers to a path the document does not name: refused before any route (the body middleware, the
 * authentication), or not found.
 */
const unknownPath: Record<string, ResponseObject> = {
  400: errorAnswer(['invalid_json']),
  401: frameworkAnswer(),
  404: frameworkAnswer(),
  413: errorAnswer(['body_too_large']),
}

function frameworkAnswer(): ResponseObject {
  const schema = { $ref: '#/components/schemas/FrameworkError' }
  return { description: 'framework refusal', content: { 'application/json': { schema } } }
}

function errorAnswer(codes: string[]): ResponseObject {
  const schema = {
    allOf: [
      { $ref: '#/components/schemas/Error' },
      { type: 'object', required: ['error'], properties: { error: { enum: codes } } },
    ],
  }
  return { description: codes.join(', '), content: { 'application/json': { schema } } }
}

export class Contract {
  private readonly ajv: Ajv2020
  private readonly paths: PathTemplate[]
  /**
   * By the schema's text: of the document's 1,593 answer schemas only 255 differ (the error answers
   * repeat from operation to operation), and compiling one is milliseconds of ajv, so each is
   * compiled once, not once per operation that answers it (issue 40).
   */
  private readonly validators = new Map<string, ValidateFunction>()

  constructor(document: OpenApiDocument) {
    this.ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true })
    // OpenAPI's own annotation, not a JSON Schema keyword.
    this.ajv.addVocabulary(['example'])
    addFormats.default(this.ajv)
    const schemas = structuredClone(document.components.schemas)
    for (const schema of Object.values(schemas)) prepare(schema)
    this.ajv.addSchema({ $id: base, $defs: schemas })
    this.paths = Object.entries(document.paths).map(([template, item]) => ({
      template,
      pattern: new RegExp(
        `^${template
          .split(/\{\w+\}/)
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('[^/]+')}$`,
      ),
      params: (template.match(/\{/g) ?? []).length,
      operations: new Map(
        Object.entries(item)
          .filter(([method]) => methods.includes(method))
          .map(([method, op]) => [method.toUpperCase(), op]),
      ),
    }))
  }

  /** What the answer does that the document does not declare; empty when it holds to it. */
  problems(exchange: Exchange): string[] {
    const path = new URL(exchange.url, 'http://osd').pathname
    const matching = this.paths
      .filter((p) => p.pattern.test(path))
      .sort((a, b) => a.params - b.params)
    const method = exchange.method.toUpperCase()
    if (matching.length === 0)
      return this.against(`${method} ${path} (no such path)`, unknownPath, exchange)
    const allow = new Set(matching.flatMap((p) => [...p.operations.keys()]))
    if (allow.has('GET')) allow.add('HEAD')
    allow.add('OPTIONS')
    const allowText = [...allow].sort().join(', ')
    const reading = method === 'HEAD' ? 'GET' : method
    const found = matching.find((p) => p.operations.has(reading))
    if (!found || method === 'OPTIONS') {
      const where = `${method} ${matching[0]!.template}`
      const problems: string[] = []
      const allowed = exchange.headers.get('allow')
      if (allowed !== allowText)
        problems.push(`${where}: Allow is ${JSON.stringify(allowed)}, not "${allowText}"`)
      if (method === 'OPTIONS') {
        if (exchange.status !== 204 || exchange.text !== '')
          problems.push(`${where} answered ${exchange.status}, not 204 with an empty body`)
        return problems
      }
      const refused = { 405: frameworkAnswer() }
      return [...problems, ...this.against(where, refused, exchange)]
    }
    const operation = found.operations.get(reading)!
    const where = `${method} ${found.template} (${operation.operationId})`
    return this.against(where, operation.responses, exchange, method === 'HEAD')
  }

  private against(
    where: string,
    responses: Record<string, ResponseObject>,
    exchange: Exchange,
    head = false,
  ): string[] {
    const declared = responses[exchange.status]
    if (!declared) {
      const statuses = Object.keys(responses).join(', ')
      return [
        `${where} answered ${exchange.status}, which its document does not declare (it declares ${statuses}): ${exchange.text.slice(0, 300)}`,
      ]
    }
    const problems: string[] = []
    for (const [name, header] of Object.entries(declared.headers ?? {}))
      if (header.required && !exchange.headers.has(name))
        problems.push(`${where} answered ${exchange.status} without its header ${name}`)
    const media = Object.keys(declared.content ?? {})
    const type = exchange.headers.get('content-type')?.split(';')[0]?.trim() ?? ''
    if (media.length === 0) {
      if (exchange.text !== '')
        problems.push(`${where} answered ${exchange.status} with a body; it declares none`)
      return problems
    }
    if (head) return problems
    const mediaMatch = media.find(
      (m) =>
        m === type ||
        (m === '*/*' && type !== '') ||
        (m.endsWith('/*') && type.startsWith(m.slice(0, -1))),
    )
    if (!mediaMatch) {
      problems.push(
        `${where} answered ${exchange.status} as ${type || 'no content-type'}; it declares ${media.join(', ')}`,
      )
      return problems
    }
    const schema = declared.content![mediaMatch]!.schema
    if (mediaMatch !== 'application/json' || !schema) return problems
    let body: unknown
    try {
      body = JSON.parse(exchange.text)
    } catch {
      return [...problems, `${where} answered ${exchange.status} with a body that is not JSON`]
    }
    const validate = this.validatorOf(schema)
    if (!validate(body))
      problems.push(
        `${where} answered ${exchange.status} with a body its document does not describe:\n${explain(validate.errors ?? [])}\n  body: ${exchange.text.slice(0, 600)}`,
      )
    return problems
  }

  private validatorOf(schema: Schema): ValidateFunction {
    const text = JSON.stringify(schema)
    let validate = this.validators.get(text)
    if (!validate) {
      const prepared = structuredClone(schema)
      prepare(prepared)
      validate = this.ajv.compile(prepared)
      this.validators.set(text, validate)
    }
    return validate
  }
}

/**
 * Points the document's references at the components as this validator holds them, and closes every
 * object that names its properties and says nothing of others (see the top of this file).
 */
function prepare(schema: unknown, inAllOf = false): void {
  if (Array.isArray(schema)) {
    for (const item of schema) prepare(item, inAllOf)
    return
  }
  if (!schema || typeof schema !== 'object') return
  const node = schema as Schema
  if (typeof node.$ref === 'string')
    node.$ref = node.$ref.replace('#/components/schemas/', `${base}#/$defs/`)
  if (node.properties && node.additionalProperties === undefined && !inAllOf)
    node.additionalProperties = false
  for (const [keyword, value] of Object.entries(node)) {
    if (keyword === 'properties' || keyword === '$defs' || keyword === 'patternProperties') {
      for (const child of Object.values(value as Schema)) prepare(child)
    } else if (keyword === 'allOf') prepare(value, true)
    else if (keyword !== 'enum' && keyword !== 'const' && keyword !== 'example') prepare(value)
  }
}

function explain(errors: ErrorObject[]): string {
  return errors
    .slice(0, 8)
    .map((e) => {
      const extra =
        e.keyword === 'additionalProperties'
          ? ` (${String((e.params as { additionalProperty?: string }).additionalProperty)})`
          : e.keyword === 'enum'
            ? ` (${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)})`
            : ''
      return `  ${e.instancePath || '/'} ${e.message}${extra}`
    })
    .join('\n')
}
