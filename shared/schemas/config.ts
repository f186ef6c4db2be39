import { z } from 'zod'
import { configActions, configApiVersion, configKinds, type ConfigKind } from '../values.js'
import { JsonObject } from './common.js'
import { ChatMemoryDepth, ConcurrentRunLimit, Metrics } from './enterprise.js'
import { ModelTier, Provider } from './models.js'
import { RetentionWindow, defaultRetention } from './retention.js'
import { ConcurrentRunLimitOrNull, Name } from './organisation.js'
import { SerializeOn, VersionDefinition, taskKinds, taskStatuses } from './tasks.js'
import { ToolConnectionCreate } from './tools.js'
export { configActions, configApiVersion, configKinds, type ConfigKind }

// Configuration as code (issue 48; DESIGN 15): an enterprise as documents, `GET /v1/config`, and
// `POST /v1/config/plan|apply`. A document is `apiVersion: osd/v1`, `kind`, `metadata.name` (the slug or
// name people already use, never an id) and `spec`: what a person sets, never what osd computes (ids,
// version numbers, times, counts). The server checks every document with these schemas, and
// docs/config-as-code.md is generated from them (scripts/config-reference.ts).
//
// A spec's fields are written in a fixed order, and a field whose value is its default is left out, so
// that exporting an unchanged enterprise twice gives the same bytes (server/domain/config/canonical.ts).
// Every spec is strict: an unknown field (a typo) is refused, naming it, rather than quietly dropped.

/** A secret read from osctl's environment at apply time; never written in a document. */
export const SecretRef = z
  .string()
  .regex(
    /^env:[A-Za-z_][A-Za-z0-9_]*$/,
    'env:NAME, the name of a variable of the environment osctl runs in',
  )
  .meta({
    description:
      '`env:NAME`: osctl reads the variable NAME of its environment when it applies the documents and sends its value with them; the value is never written to a file and never answered. An export names the variable the object was last applied with (else OSD_TOOL_<...>_TOKEN, OSD_MODEL_KEY_<...>, with a suffix of its own where two objects would share one: one variable never names two secrets of an export).',
    example: 'env:GITHUB_TOKEN',
  })

// --- the specs --------------------------------------------------------------------------------------

export const SettingsSpec = z
  .strictObject({
    concurrentRunLimit: ConcurrentRunLimit.default(10).meta({
      description: "runs of the enterprise's that may run at once",
    }),
    chatModelTier: ModelTier.default('mid').meta({
      description: 'the model tier chat replies use',
    }),
    chatMemoryDepth: ChatMemoryDepth.default('medium').meta({
      description: 'how many notes a chat reply recalls: off, small, medium or large',
    }),
    metrics: Metrics.shape.metrics
      .default([])
      .meta({ description: "the names of the enterprise's metrics" }),
  })
  .meta({
    id: 'ConfigSettingsSpec',
    description:
      "The enterprise's settings (`GET /v1/enterprise/...`, enterprise:write). One document, named `enterprise`.",
  })

export const TeamSpec = z
  .strictObject({
    name: Name.meta({
      description: "the team's name as people read it; its slug is metadata.name",
    }),
    charter: z.string().max(10_000).default('').meta({ description: 'what the team is for' }),
    lead: z
      .string()
      .min(1)
      .nullable()
      .default(null)
      .meta({ description: 'the member who leads the team, by its name (a Member document)' }),
    concurrentRunLimit: ConcurrentRunLimitOrNull.default(null).meta({
      description: "runs of the team's that may run at once; none: only the enterprise's limit",
    }),
  })
  .meta({
    id: 'ConfigTeamSpec',
    description: 'A team (`/v1/teams`, teams:write). metadata.name is its slug.',
  })

export const RoleSpec = z
  .strictObject({
    name: Name.meta({ description: "the role's name as people read it" }),
  })
  .meta({
    id: 'ConfigRoleSpec',
    description:
      'A role (`/v1/roles`, roles:write). metadata.name is its slug, or `<team>/<slug>` for a role of a team. The built-in roles (ceo, coo) are in every enterprise and have no document; members hold them all the same.',
  })

/** A role as a member's roles name it: `slug` (enterprise-wide) or `team/slug` (a team's role). */
const RoleName = z
  .string()
  .regex(/^([a-z0-9-]+\/)?[a-z0-9-]+$/, 'a role: its slug, or <team slug>/<role slug>')

export const MemberSpec = z
  .strictObject({
    persona: z.string().max(20_000).default('').meta({ description: 'who the member is' }),
    email: z.email().max(320).optional().meta({
      description:
        'only when it is not the address made from the name when the member was made (<name-slug>@<enterprise-slug>.<mail domain>): left out, the member has that address',
    }),
    teams: z.array(z.string().min(1)).default([]).meta({
      description: 'the teams the member is on, by slug; a role of a team needs its team',
    }),
    roles: z.array(RoleName).default([]).meta({
      description: 'the roles the member holds: `slug` enterprise-wide, `team/slug` on a team',
    }),
  })
  .meta({
    id: 'ConfigMemberSpec',
    description:
      "An AI team member (`/v1/members`, members:write; its roles too, and its teams, but joining or leaving a team also needs teams:write as `/v1/teams/{id}/members` does, unless the join comes with a role of that team granted in the same change). metadata.name is the member's name.",
  })

export const ScheduleSpec = z
  .strictObject({
    cron: z.string().min(1).meta({
      description: 'five fields: minute hour day-of-month month day-of-week',
      example: '0 9 * * 1',
    }),
    timezone: z.string().default('UTC').meta({ description: 'an IANA time zone' }),
    input: JsonObject.default({}).meta({ description: "the runs' input, kept as written" }),
    enabled: z.boolean().default(true),
  })
  .meta({ id: 'ConfigScheduleSpec' })

const version = VersionDefinition.shape

export const TaskSpec = z
  .strictObject({
    name: Name,
    team: z
      .string()
      .min(1)
      .nullable()
      .default(null)
      .meta({ description: 'the team the task belongs to, by slug' }),
    assigneeRole: z
      .string()
      .max(80)
      .nullable()
      .default(null)
      .meta({ description: 'the slug of the role whose holders run it' }),
    kind: z.enum(taskKinds).default('llm'),
    status: z.enum(taskStatuses).default('active'),
    serializeOn: SerializeOn.default(null),
    overlapPolicy: version.overlapPolicy.default('skip'),
    goal: version.goal.default(''),
    metric: version.metric.default(null),
    guardrails: version.guardrails.default([]),
    tools: version.tools.default([]),
    gates: version.gates.default([]),
    inputs: version.inputs.default(null),
    spend: version.spend.default(null),
    workspace: version.workspace.default(null),
    successors: version.successors.default(null),
    schedule: ScheduleSpec.nullable()
      .default(null)
      .meta({ description: 'when the task runs by itself; none: only when started' }),
    skillMd: version.skillMd
      .optional()
      .meta({ description: 'the skill, in Markdown; a heading with the slug when left out' }),
  })
  .meta({
    id: 'ConfigTaskSpec',
    description:
      'A task (`/v1/tasks`, tasks:write; its schedule too): its current version\'s definition and its schedule. metadata.name is its slug. A change of the definition publishes a new version (message "applied from config"); the service\'s own tasks have no document.',
  })

export const ToolConnectionSpec = z
  .strictObject({
    url: z
      .url()
      .optional()
      .meta({ description: "a tool server's address (MCP over Streamable HTTP)" }),
    sites: z
      .array(z.string().min(1))
      .max(50)
      .optional()
      .meta({ description: "or a browser-operated system's sites" }),
    startPage: z.string().optional().meta({ description: "the browser system's start page" }),
    tokenFrom: SecretRef.optional().meta({ description: "the tool server's token: env:NAME" }),
    mustGate: z.array(z.string().min(1)).optional().meta({
      description:
        'tools a task must gate by name (only the chief executive may set it); left out: the merge tool for `vcs`, none for others',
    }),
    description: z.string().max(2000).default(''),
  })
  .meta({
    id: 'ConfigToolConnectionSpec',
    description:
      'A tool connection (`/v1/tools/bindings`, tools:write). metadata.name is its tool namespace; metadata.layer where it is connected (left out: the enterprise, which only the chief executive may change).',
  })

export const ModelKeySpec = z
  .strictObject({ tokenFrom: SecretRef.meta({ description: "the provider's API key: env:NAME" }) })
  .meta({
    id: 'ConfigModelKeySpec',
    description:
      'A model API key (`/v1/llm/bindings`, llm:write). metadata.name is the provider (provider_a, provider_b); metadata.layer the team or member it is bound to (left out: the enterprise). A subscription sign-in has no document.',
  })

const TierModels = z.strictObject({
  economical: z.string().trim().min(1).max(200).optional(),
  mid: z.string().trim().min(1).max(200).optional(),
  frontier: z.string().trim().min(1).max(200).optional(),
})

export const ModelTiersSpec = z
  .strictObject({
    provider_a: TierModels.default({}).meta({
      description: 'model per tier, where not the shipped one',
    }),
    provider_b: TierModels.default({}).meta({
      description: 'model per tier, where not the shipped one',
    }),
  })
  .meta({
    id: 'ConfigModelTiersSpec',
    description:
      "The enterprise's choice of model per tier (`/v1/llm/tiers`, llm:write); a tier left out uses the shipped model. One document, named `enterprise`.",
  })

const Cents = z.number().int().min(0).max(100_000_000)

export const SpendLimitsSpec = z
  .strictObject({
    enabled: z.boolean().default(true).meta({ description: 'whether caps are enforced' }),
    moneyCentsDay: z
      .strictObject({
        enterprise: Cents.nullable().default(null),
        teams: z.record(z.string(), Cents).default({}).meta({ description: 'by team slug' }),
        tasks: z.record(z.string(), Cents).default({}).meta({ description: 'by task slug' }),
        members: z.record(z.string(), Cents).default({}).meta({ description: 'by member name' }),
      })
      .default({ enterprise: null, teams: {}, tasks: {}, members: {} })
      .meta({ description: 'daily caps in US cents; a layer left out has none' }),
  })
  .meta({
    id: 'ConfigSpendLimitsSpec',
    description: 'Daily spend caps (`/v1/spend`, spend:write). One document, named `enterprise`.',
  })

export const RetentionSpec = z
  .strictObject({
    finishedRuns: RetentionWindow.default(defaultRetention.finishedRuns).meta({
      description: 'how long an execution stays once its last run has finished; null: for ever',
    }),
    closedChats: RetentionWindow.default(defaultRetention.closedChats).meta({
      description: 'how long a chat stays once closed; null: for ever',
    }),
    webhookDeliveries: RetentionWindow.default(defaultRetention.webhookDeliveries).meta({
      description: 'how long an inbound webhook delivery is kept; null: for ever',
    }),
    archive: z.boolean().default(defaultRetention.archive).meta({
      description: 'keep what leaves in the archive (true), or delete it (false)',
    }),
  })
  .meta({
    id: 'ConfigRetentionSpec',
    description:
      'How long finished runs, closed chats and webhook deliveries stay in the live tables (`/v1/enterprise/retention`, enterprise:write): ISO 8601 durations (P90D), null for ever; a field left out has its default. One document, named `enterprise`.',
  })

/** Each kind's spec, and what its metadata holds beyond the name. */
export const configSpecs = {
  Settings: SettingsSpec,
  Team: TeamSpec,
  Role: RoleSpec,
  Member: MemberSpec,
  Task: TaskSpec,
  ToolConnection: ToolConnectionSpec,
  ModelKey: ModelKeySpec,
  ModelTiers: ModelTiersSpec,
  SpendLimits: SpendLimitsSpec,
  Retention: RetentionSpec,
} satisfies Record<ConfigKind, z.ZodType>

export type ConfigSpec<K extends ConfigKind> = z.output<(typeof configSpecs)[K]>

/** Kinds of one document per enterprise: its name is always `enterprise`. */
export const singletonKinds: readonly ConfigKind[] = [
  'Settings',
  'ModelTiers',
  'SpendLimits',
  'Retention',
]
/** Kinds connected at a layer: metadata.layer names it (none: the enterprise). */
export const layeredKinds: readonly ConfigKind[] = ['ToolConnection', 'ModelKey']

export const ConfigMetadata = z
  .strictObject({
    name: z.string().min(1).max(200).meta({ description: 'the slug or name people use' }),
    layer: z
      .string()
      .regex(
        /^(team|member|role|task)\/.+$/,
        '<layer>/<name>: team/<slug>, member/<name>, role/<role>, task/<slug>',
      )
      .optional()
      .meta({
        description:
          'ToolConnection and ModelKey only: where it is connected, `team/<slug>`, `member/<name>`, `role/<role>` or `task/<slug>`; left out, the enterprise',
        example: 'team/engineering',
      }),
  })
  .meta({ id: 'ConfigMetadata' })
export type ConfigMetadata = z.infer<typeof ConfigMetadata>

const documentOf = <K extends ConfigKind>(kind: K) =>
  z.strictObject({
    apiVersion: z.literal(configApiVersion),
    kind: z.literal(kind),
    metadata: ConfigMetadata,
    spec: configSpecs[kind],
  })

/** One object of the enterprise as a document. */
export const ConfigDocument = z
  .discriminatedUnion(
    'kind',
    configKinds.map((kind) => documentOf(kind)) as unknown as [
      ReturnType<typeof documentOf<ConfigKind>>,
      ...ReturnType<typeof documentOf<ConfigKind>>[],
    ],
  )
  .meta({ id: 'ConfigDocument' })

/** A document as answered: its spec holds what differs from the defaults, in the spec's order. */
export interface ConfigDocument {
  apiVersion: typeof configApiVersion
  kind: ConfigKind
  metadata: ConfigMetadata
  spec: Record<string, unknown>
}

/** GET /v1/config. */
export const ConfigExport = z
  .object({
    base: z.string().meta({
      description: 'names the state these documents describe: send it to apply as base',
    }),
    documents: z.array(ConfigDocument),
  })
  .meta({ id: 'ConfigExport' })
export type ConfigExport = { base: string; documents: ConfigDocument[] }

export const configBodyMaxBytes = 4 * 1024 * 1024

const planFields = {
  documents: z.array(ConfigDocument).max(10_000).meta({
    description:
      'the documents the enterprise should match; each is checked as a whole first (400 config_document_invalid names the document by its index, kind and name, and the field)',
  }),
  prune: z.boolean().optional().meta({
    description:
      'also delete the objects of the kinds the documents hold that no document names (never the service’s own)',
  }),
  secrets: z.record(z.string(), z.string().min(1).max(4000)).optional().meta({
    description:
      'the values of the env:NAME the documents name, by NAME (osctl reads them from its environment); comparing or writing one needs the write scope of its kind',
  }),
}

/** The body of POST /v1/config/plan. Validated by the domain, document by document. */
export const ConfigPlanInput = z.object(planFields).meta({ id: 'ConfigPlanInput' })
export interface ConfigPlanInput {
  documents: unknown[]
  prune?: boolean
  secrets?: Record<string, string>
}

export const ConfigApplyInput = z
  .object({
    ...planFields,
    base: z.string().optional().meta({
      description:
        'the base a plan or an export answered: 409 config_changed if the enterprise changed since',
    }),
    dryRun: z.boolean().optional().meta({
      description: 'do everything, with every check, then roll it back and answer what it did',
    }),
  })
  .meta({ id: 'ConfigApplyInput' })
export interface ConfigApplyInput extends ConfigPlanInput {
  base?: string
  dryRun?: boolean
}

export const ConfigFieldChange = z
  .object({
    path: z.string().meta({ description: 'spec.<field>, or spec.tokenFrom (value) for a secret' }),
    old: z.unknown(),
    new: z.unknown(),
  })
  .meta({ id: 'ConfigFieldChange' })
export type ConfigFieldChange = { path: string; old: unknown; new: unknown }

export const ConfigChange = z
  .object({
    kind: z.enum(configKinds),
    name: z.string(),
    layer: z.string().nullable(),
    action: z.enum(configActions),
    fields: z
      .array(ConfigFieldChange)
      .meta({ description: 'update: the fields that change, old and new' }),
    current: ConfigDocument.nullable().meta({
      description: 'the object as it is (none for create and unchanged)',
    }),
    desired: ConfigDocument.nullable().meta({
      description: 'the object as it will be (none for delete and unchanged)',
    }),
    index: z
      .number()
      .int()
      .nullable()
      .meta({ description: 'the index of the document that names it (none for delete)' }),
  })
  .meta({ id: 'ConfigChange' })
export interface ConfigChange {
  kind: ConfigKind
  name: string
  layer: string | null
  action: (typeof configActions)[number]
  fields: ConfigFieldChange[]
  current: ConfigDocument | null
  desired: ConfigDocument | null
  index: number | null
}

export const ConfigPlan = z
  .object({
    base: z.string().meta({ description: 'the state planned against: send it to apply' }),
    changes: z.array(ConfigChange),
  })
  .meta({ id: 'ConfigPlan' })
export interface ConfigPlan {
  base: string
  changes: ConfigChange[]
}

export const ConfigApplied = ConfigPlan.extend({
  base: z.string().meta({ description: 'the state after the apply (before it, with dryRun)' }),
  dryRun: z.boolean(),
}).meta({ id: 'ConfigApplied' })
export interface ConfigApplied extends ConfigPlan {
  dryRun: boolean
}
