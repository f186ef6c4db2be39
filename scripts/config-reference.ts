// npm run docs:config: writes docs/config-as-code.md, the reference of the documents of GET /v1/config
// and POST /v1/config/plan|apply (issue 48), from the schemas the server checks documents with
// (shared/schemas/config.ts): each kind's description, its fields with their types, defaults and
// descriptions, and an example, which test/server/config-reference.test.ts holds to the server's own
// check of documents. That test also fails when the file is out of date.
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import YAML from 'yaml'
import { z } from 'zod'
import { projectRoot } from '../shared/paths.js'
import { writeGenerated } from './generated.js'
import {
  configApiVersion,
  configKinds,
  configSpecs,
  layeredKinds,
  singletonKinds,
  type ConfigKind,
} from '../shared/schemas/config.js'

export const configReferenceFile = join(projectRoot, 'docs', 'config-as-code.md')

/** An example document of each kind, as an export writes one (tests check the server takes each). */
export const configExamples: Record<
  ConfigKind,
  { metadata: { name: string; layer?: string }; spec: Record<string, unknown> }[]
> = {
  Settings: [
    { metadata: { name: 'enterprise' }, spec: { concurrentRunLimit: 7, metrics: ['lead time'] } },
  ],
  Team: [
    {
      metadata: { name: 'engineering' },
      spec: {
        name: 'Engineering',
        charter: 'Ship the product.\nKeep it running.\n',
        lead: 'Ada Lovelace',
        concurrentRunLimit: 3,
      },
    },
  ],
  Role: [{ metadata: { name: 'engineering/reviewer' }, spec: { name: 'Reviewer' } }],
  Member: [
    {
      metadata: { name: 'Ada Lovelace' },
      spec: { persona: 'Careful.', teams: ['engineering'], roles: ['engineering/reviewer'] },
    },
  ],
  Task: [
    {
      metadata: { name: 'weekly-report' },
      spec: {
        name: 'Weekly report',
        team: 'engineering',
        assigneeRole: 'reviewer',
        goal: 'Tell the week.',
        tools: ['os.mail_send'],
        gates: [{ tool: 'os.mail_send' }],
        schedule: { cron: '0 9 * * 1', timezone: 'Europe/Paris', input: { week: 'last' } },
        skillMd: "# Weekly report\n\nRead the week's runs, then write the report.\n",
      },
    },
  ],
  ToolConnection: [
    {
      metadata: { name: 'vcs' },
      spec: { url: 'https://vcs.example/mcp', tokenFrom: 'env:VCS_TOKEN' },
    },
    {
      metadata: { name: 'intranet', layer: 'team/engineering' },
      spec: { sites: ['intranet.example'], startPage: 'https://intranet.example/home' },
    },
  ],
  ModelKey: [{ metadata: { name: 'provider_a' }, spec: { tokenFrom: 'env:PROVIDER_A_KEY' } }],
  ModelTiers: [
    { metadata: { name: 'enterprise' }, spec: { provider_a: { economical: 'claude-haiku-4-5' } } },
  ],
  SpendLimits: [
    {
      metadata: { name: 'enterprise' },
      spec: { moneyCentsDay: { enterprise: 10_000, teams: { engineering: 2_500 } } },
    },
  ],
  Retention: [
    { metadata: { name: 'enterprise' }, spec: { finishedRuns: 'P30D', closedChats: null } },
  ],
}

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
  additionalProperties?: boolean | Schema
  description?: string
  default?: unknown
}

const cell = (text: unknown) =>
  String(text ?? '')
    .replace(/\|/g, '\\|')
    .replace(/\n/g, ' ')

function typeOf(schema: Schema | undefined, defs: Record<string, Schema>): string {
  if (!schema) return 'any'
  if (schema.$ref) return schema.$ref.split('/').pop()!
  const union = schema.anyOf ?? schema.oneOf
  if (union) return union.map((s) => typeOf(s, defs)).join(' | ')
  if (schema.const !== undefined) return JSON.stringify(schema.const)
  if (schema.enum) return schema.enum.map((e) => JSON.stringify(e)).join(' | ')
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? 'any']
  return types
    .map((t) => {
      if (t === 'array') return `${typeOf(schema.items, defs)}[]`
      if (t === 'object' && typeof schema.additionalProperties === 'object')
        return `map of ${typeOf(schema.additionalProperties, defs)}`
      return t
    })
    .join(' | ')
}

/** A schema's object form (through a $ref or a nullable union), if it has fields of its own. */
function objectOf(schema: Schema, defs: Record<string, Schema>): Schema | undefined {
  const resolved = schema.$ref ? defs[schema.$ref.split('/').pop()!] : schema
  if (!resolved) return undefined
  if (resolved.properties) return resolved
  const union = resolved.anyOf ?? resolved.oneOf
  return union?.map((s) => objectOf(s, defs)).find(Boolean)
}

/** The table rows of an object's fields, nested objects' fields under their dotted path. */
function fieldRows(schema: Schema, defs: Record<string, Schema>, prefix = ''): string[] {
  const rows: string[] = []
  const required = new Set(schema.required ?? [])
  for (const [name, field] of Object.entries(schema.properties ?? {})) {
    const path = `${prefix}${name}`
    const shown =
      'default' in field
        ? `\`${JSON.stringify(field.default)}\``
        : required.has(name)
          ? 'required'
          : ''
    const nested = objectOf(field, defs)
    const inner = field.$ref ? defs[field.$ref.split('/').pop()!] : undefined
    const description = field.description ?? inner?.description
    rows.push(
      `| \`${path}\` | ${cell(nested ? 'object' : typeOf(field, defs))} | ${cell(shown)} | ${cell(description)} |`,
    )
    if (nested) rows.push(...fieldRows(nested, defs, `${path}.`))
  }
  return rows
}

/** docs/config-as-code.md as the schemas make it, before prettier formats it (writeGenerated). */
export async function renderConfigReference(): Promise<string> {
  const lines = [
    '# Configuration as code',
    '',
    '<!-- Generated by `npm run docs:config` from shared/schemas/config.ts: do not edit by hand. -->',
    '',
    'An enterprise as YAML documents (issue 48): `osctl config export DIR` writes one file per object, `osctl diff -f DIR` shows what applying them would change, and `osctl apply -f DIR [--prune] [--dry-run]` makes the enterprise match, in one transaction. The same is open to any HTTP client: `GET /v1/config`, `POST /v1/config/plan` and `POST /v1/config/apply` (docs/api.md).',
    '',
    'Every document has four fields:',
    '',
    `- \`apiVersion\`: \`${configApiVersion}\`;`,
    `- \`kind\`: one of ${configKinds.map((k) => `\`${k}\``).join(', ')};`,
    '- `metadata.name`: the slug or name people already use, never an id;',
    `- \`metadata.layer\` (${layeredKinds.map((k) => `\`${k}\``).join(' and ')} only): where it is connected, \`team/<slug>\`, \`member/<name>\`, \`role/<role>\` or \`task/<slug>\`; left out, the enterprise;`,
    '- `spec`: what a person sets, never what osd computes (ids, version numbers, times, counts).',
    '',
    `${singletonKinds.map((k) => `\`${k}\``).join(', ')} have one document per enterprise, named \`enterprise\`.`,
    '',
    'A spec leaves out every field whose value is its default, and an export writes the fields in the order below, so two exports of an unchanged enterprise are the same bytes. An unknown field is refused (400 `config_document_invalid`, naming the document and the field): a typo is never quietly dropped.',
    '',
    "**Secrets never appear in a document.** A tool server's token or a model key is written `tokenFrom: env:NAME`: osctl reads the variable `NAME` of its environment when it diffs or applies, and sends its value beside the documents. A plan compares a value sent with the one kept (constant time) and shows a new one as a change of `spec.tokenFrom (value)`; with the variable unset, the kept secret stays.",
    '',
    '**Applying.** Each change needs the write scope of its kind, and that of anything the API writes through another resource\'s routes (a member joining or leaving a team: teams:write), so a token does through documents what it may do through the API (403 `api_token_scope` naming the first missing, nothing applied), and goes through the same rules as the API (the definition checks, the egress rule for URLs, only the chief executive binds tools on the enterprise). A task whose definition changes gets a new version, message "applied from config". With `base` (from an export or a plan), an apply answers 409 `config_changed` when the enterprise changed since. `prune` deletes the objects of the documents\' kinds that no document names, but never a task with a run under way nor a member holding a role a waiting run needs (409).',
    '',
    "**osctl exit codes.** `osctl diff`: 0 nothing would change, 1 something would, 2 or more an error (3 where other commands answer 1). `osctl apply`: 0 applied, more than 0 with the server's reason.",
    '',
    '## Kinds',
    '',
  ]
  for (const kind of configKinds) {
    const json = z.toJSONSchema(configSpecs[kind], {
      io: 'input',
      unrepresentable: 'any',
    }) as Schema & {
      $defs?: Record<string, Schema>
    }
    const defs = json.$defs ?? {}
    const spec = json.$ref ? defs[json.$ref.split('/').pop()!]! : json
    lines.push(`### ${kind}`, '', cell(spec.description), '')
    lines.push('| field | type | default | description |', '| --- | --- | --- | --- |')
    lines.push(...fieldRows(spec, defs, 'spec.'), '')
    const examples = configExamples[kind]
    lines.push(examples.length > 1 ? 'Examples:' : 'Example:', '', '```yaml')
    lines.push(
      examples
        .map((e) =>
          YAML.stringify({ apiVersion: configApiVersion, kind, ...e }, { lineWidth: 0 }).trimEnd(),
        )
        .join('\n---\n'),
    )
    lines.push('```', '')
  }
  return lines.join('\n')
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await writeGenerated(configReferenceFile, 'docs:config', await renderConfigReference(), {
    proseWrap: 'preserve',
  })
  console.log(`wrote ${configReferenceFile}`)
  process.exit(0)
}
