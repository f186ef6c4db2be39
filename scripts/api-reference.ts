// npm run docs:api: writes docs/api.md, the API reference, from the OpenAPI document the daemon serves
// (GET /v1/openapi.json): each operation with its parameters, body, answers and their error codes, then
// each schema with its fields. The app is built with a database that is never reached (no route runs).
// test/server/http/api-reference.test.ts fails when the file is out of date.
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import pino from 'pino'
import { loadConfig } from '../server/config.js'
import { createSealer } from '../server/crypto.js'
import type { Sql } from '../server/db/sql.js'
import { createApp } from '../server/http/app.js'
import { projectRoot } from '../shared/paths.js'
import { writeGenerated } from './generated.js'

export const apiReferenceFile = join(projectRoot, 'docs', 'api.md')

type Schema = {
  $ref?: string
  type?: string | string[]
  enum?: unknown[]
  const?: unknown
  format?: string
  items?: Schema
  properties?: Record<string, Schema>
  required?: string[]
  anyOf?: Schema[]
  oneOf?: Schema[]
  allOf?: Schema[]
  additionalProperties?: boolean | Schema
  description?: string
  nullable?: boolean
}
type Operation = {
  operationId: string
  summary?: string
  description?: string
  tags?: string[]
  parameters?: {
    name: string
    in: string
    required?: boolean
    schema?: Schema
    description?: string
  }[]
  requestBody?: { content: Record<string, { schema: Schema }> }
  responses: Record<string, { description: string; content?: Record<string, { schema: Schema }> }>
  security?: Record<string, string[]>[]
}
type Document = {
  info: { title: string; version: string; description?: string }
  paths: Record<string, Record<string, Operation>>
  components: {
    schemas: Record<string, Schema>
    securitySchemes?: Record<string, { description?: string }>
  }
}

/** The document, from an app whose database is never reached: building the routes runs no query. */
export async function apiDocument(): Promise<Document> {
  const silent = pino({ level: 'silent' })
  const unreached = {
    listen: async () => ({ unlisten: async () => undefined }),
  } as unknown as Sql
  const app = createApp({
    sql: unreached,
    // The package's version, as every app of the process has (the reference does not show it): the
    // document made once for them serves here too: most of a second of zod-to-openapi a test worker.
    config: loadConfig({}, {}),
    log: silent,
    sealer: createSealer(Buffer.alloc(32)),
  })
  const res = await app.request('/v1/openapi.json')
  return (await res.json()) as Document
}

/** A schema in a few words: its name, or its type with what it holds. */
function typeOf(schema: Schema | undefined): string {
  if (!schema) return 'any'
  if (schema.$ref)
    return `[${schema.$ref.split('/').pop()}](#${anchor(schema.$ref.split('/').pop()!)})`
  if (schema.enum) return schema.enum.map((v) => `\`${JSON.stringify(v)}\``).join(' \\| ')
  if (schema.const !== undefined) return `\`${JSON.stringify(schema.const)}\``
  const union = schema.anyOf ?? schema.oneOf
  if (union) return union.map(typeOf).join(' \\| ')
  if (schema.allOf) return schema.allOf.map(typeOf).join(' & ')
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []
  const described = types.map((t) => {
    if (t === 'array') return `${typeOf(schema.items)}[]`
    if (t === 'object' && schema.properties) return 'object'
    return schema.format ? `${t} (${schema.format})` : t
  })
  return described.join(' \\| ') || 'any'
}

const anchor = (name: string) => `schema-${name.toLowerCase()}`

/**
 * Text of the document, shown as written: an asterisk is not emphasis. Unescaped, prettier took the
 * event types `run.*, model.*` for emphasis and wrote `run._, model._`, and the media type of any
 * file `_/_`.
 */
const prose = (text: string) => text.replace(/\*/g, '\\*')

/** Markdown that a description might otherwise break: table cells keep to one line. */
const cell = (text: string | undefined) => (text ?? '').replace(/\|/g, '\\|').replace(/\n+/g, ' ')

function operationSection(method: string, path: string, op: Operation): string[] {
  const lines = [`### ${method.toUpperCase()} ${path}`, '']
  lines.push(`\`${op.operationId}\`${op.summary ? `: ${prose(op.summary)}` : ''}`, '')
  if (op.description) lines.push(prose(op.description), '')
  const security = (op.security ?? []).flatMap((s) => Object.keys(s))
  lines.push(
    `- Credentials: ${security.length ? [...new Set(security)].map((s) => `\`${s}\``).join(', ') : 'none'}`,
  )
  for (const place of ['path', 'query', 'header']) {
    const params = (op.parameters ?? []).filter((p) => p.in === place)
    if (params.length)
      lines.push(
        `- ${place[0]!.toUpperCase()}${place.slice(1)}: ${params
          .map((p) => `\`${p.name}\`${p.required ? '' : '?'} ${typeOf(p.schema)}`)
          .join(', ')}`,
      )
  }
  const body = op.requestBody?.content
  if (body)
    lines.push(
      `- Body: ${Object.entries(body)
        .map(([type, { schema }]) => `${typeOf(schema)} (${prose(type)})`)
        .join(', ')}`,
    )
  lines.push('- Answers:')
  for (const [status, answer] of Object.entries(op.responses)) {
    const content = Object.entries(answer.content ?? {})
    const what = content.length
      ? content
          .map(
            ([type, { schema }]) =>
              `${typeOf(schema)}${type === 'application/json' ? '' : ` (${prose(type)})`}`,
          )
          .join(', ')
      : 'no body'
    const codes = content
      .map(([, { schema }]) => schema.properties?.error?.enum)
      .find((e) => e !== undefined)
    lines.push(
      `  - \`${status}\` ${what}${codes ? `: ${codes.map((c) => `\`${String(c)}\``).join(', ')}` : ` (${cell(prose(answer.description))})`}`,
    )
  }
  lines.push('')
  return lines
}

function schemaSection(name: string, schema: Schema): string[] {
  const lines = [`### ${name}`, '', `<a id="${anchor(name)}"></a>`, '']
  if (schema.description) lines.push(prose(schema.description), '')
  const props = schema.properties
  if (!props) {
    lines.push(`${typeOf(schema)}`, '')
    return lines
  }
  const required = new Set(schema.required ?? [])
  lines.push('| field | type | |', '|---|---|---|')
  for (const [field, value] of Object.entries(props))
    lines.push(
      `| \`${field}\`${required.has(field) ? '' : '?'} | ${cell(typeOf(value))} | ${cell(value.description && prose(value.description))} |`,
    )
  lines.push('')
  return lines
}

/** docs/api.md as the OpenAPI document makes it, before prettier formats it (writeGenerated). */
export async function renderApiReference(): Promise<string> {
  const document = await apiDocument()
  const lines = [
    '# osd API reference',
    '',
    'Generated from the OpenAPI document the daemon serves (`GET /v1/openapi.json`) by `npm run docs:api`;',
    'a test fails when this file is out of date. The contract is the spec; this is what osd answers.',
    '',
    prose(document.info.description ?? ''),
    '',
    '## Credentials',
    '',
  ]
  for (const [name, scheme] of Object.entries(document.components.securitySchemes ?? {}))
    lines.push(`- \`${name}\`: ${cell(scheme.description && prose(scheme.description))}`)
  lines.push('', '## Operations', '')
  const byTag = new Map<string, string[]>()
  for (const [path, item] of Object.entries(document.paths))
    for (const [method, op] of Object.entries(item)) {
      const tag = op.tags?.[0] ?? 'other'
      byTag.set(tag, [...(byTag.get(tag) ?? []), ...operationSection(method, path, op)])
    }
  for (const [tag, section] of [...byTag].sort(([a], [b]) => a.localeCompare(b)))
    lines.push(`## ${tag}`, '', ...section)
  lines.push('## Schemas', '')
  for (const [name, schema] of Object.entries(document.components.schemas).sort(([a], [b]) =>
    a.localeCompare(b),
  ))
    lines.push(...schemaSection(name, schema))
  return lines.join('\n')
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await writeGenerated(apiReferenceFile, 'docs:api', await renderApiReference(), {
    proseWrap: 'preserve',
  })
  console.log(`wrote ${apiReferenceFile}`)
  process.exit(0)
}
