import { z } from 'zod'
import { Pause } from './pauses.js'
import { IsoTime, JsonObject, PageQuery, Uuid, pagedEnvelope } from './common.js'
import { ModelTier } from './models.js'
import { Name, SlugInput } from './organisation.js'
import { taskKinds, taskStatuses, taskOrigins, taskSorts } from '../values.js'
export { taskKinds, taskStatuses, taskOrigins, taskSorts }

// The task definition and its versions (spec: Task definition; Task read answer; Endpoints Tasks).

export const overlapPolicies = ['skip', 'os'] as const
export const successorWhens = ['has_issue', 'has_pr', 'no_pr'] as const
/** Outcomes a run can end with that the service itself names; `terminal` matches any end. */
export const knownOutcomes = ['succeeded', 'failed', 'cancelled', 'terminal'] as const

/** Names of tools the interface fixes (spec: Task definition). */
export const fixedTools = {
  merge: 'vcs.merge_pull_request',
  gateSummary: 'os.set_gate_summary',
  mailSend: 'os.mail_send',
  writePlan: 'os.write_plan',
  askCeo: 'os.ask_ceo',
} as const

export const SerializeOn = z
  .array(
    z.string().regex(/^[A-Za-z0-9_.-]+$/, 'keys are letters, digits, underscore, dot or hyphen'),
  )
  .max(8)
  .nullable()
  .meta({
    description: 'null: one lane for the task; else up to 8 input keys whose values make the lane',
  })

/**
 * A task's gate rule (spec: Task definition, gates): a call of `tool` waits for `owner`'s approval. Not
 * the gate a person decides (shared/schemas/gates.ts), which a run opens under such a rule.
 */
export const GateRule = z
  .object({
    tool: z.string().min(1),
    owner: z.string().min(1).default('ceo'),
    approval: z.string().min(1).default('specific'),
  })
  .meta({ id: 'GateRule' })
export type GateRule = z.infer<typeof GateRule>

export const TaskInput = z
  .object({
    key: z.string().regex(/^[A-Za-z0-9_.-]+$/),
    label: z.string(),
    type: z.enum(['string', 'number']),
    required: z.boolean().optional(),
    default: z.union([z.string(), z.number()]).optional(),
    placeholder: z.string().optional(),
  })
  .meta({ id: 'TaskInput' })

/**
 * A task's spend limits (spec: Task definition, spend). Not the enterprise's spend days and caps
 * (shared/schemas/spend.ts).
 */
export const SpendLimits = z
  .object({
    moneyUsdPerRun: z
      .number()
      .positive()
      .optional()
      .meta({ description: 'US dollars a run may cost' }),
    maxModelTier: ModelTier.optional(),
    model: z.string().min(1).optional().meta({ description: 'an exact model; overrides the tier' }),
  })
  .meta({ id: 'SpendLimits' })

export const Workspace = z
  .looseObject({ branch: z.string().optional(), files: z.array(z.string()).optional() })
  .meta({
    id: 'Workspace',
    description: 'for a task that works in a repository: its branch and the files it may write',
  })

/**
 * A successor. `when`, `delayMinutes` and `maxRunsPerIssue` are judged by the definition checks, so that a
 * bad value answers its own code (successor_when_unknown, ...) rather than a generic refusal.
 */
export const Successor = z
  .object({
    slug: z.string().min(1),
    on: z
      .string()
      .min(1)
      .optional()
      .meta({ description: 'outcome to wait for; terminal matches any end; default succeeded' }),
    when: z.unknown().optional().meta({ description: 'has_issue, has_pr or no_pr' }),
    delayMinutes: z.unknown().optional().meta({ description: 'above 0, at most 1440' }),
    maxRunsPerIssue: z.unknown().optional().meta({ description: 'a whole number, at least 1' }),
    resumeConversation: z.boolean().optional(),
  })
  .meta({ id: 'Successor' })
export type Successor = z.infer<typeof Successor>

const assigneeMemberIdRefused = z
  .unknown()
  .refine(
    (v) => v === undefined,
    'is no longer accepted: a task is assigned to a role (assigneeRole)',
  )
  .optional()

/** Fields of the definition that live in a version (the rest change the task itself). */
const versionFields = {
  overlapPolicy: z.enum(overlapPolicies),
  goal: z.string().max(2000),
  metric: z.looseObject({ text: z.string() }).nullable(),
  guardrails: z.array(z.string()),
  skillMd: z.string().max(60_000),
  tools: z.array(z.string().min(1)),
  gates: z.array(GateRule),
  inputs: z.array(TaskInput).nullable(),
  spend: SpendLimits.nullable(),
  workspace: Workspace.nullable(),
  successors: z.array(Successor).nullable(),
}

/** A version's definition as saved (defaults filled). */
export const VersionDefinition = z.object(versionFields).meta({ id: 'VersionDefinition' })
export type VersionDefinition = z.infer<typeof VersionDefinition>

const taskFields = {
  name: Name,
  slug: SlugInput,
  teamId: Uuid.nullable(),
  assigneeRole: z.string().max(80).nullable(),
  kind: z.enum(taskKinds),
  status: z.enum(taskStatuses),
  serializeOn: SerializeOn,
}

/** The body of POST /v1/tasks: only name is required (spec: Task definition). */
export const TaskDefinition = z
  .object({
    ...taskFields,
    ...versionFields,
    assigneeMemberId: assigneeMemberIdRefused,
  })
  .partial()
  .required({ name: true })
  .meta({ id: 'TaskDefinition' })
export type TaskDefinition = z.infer<typeof TaskDefinition>

/**
 * The body of POST /v1/tasks/{id}/versions: only changed fields; null clears inputs, workspace,
 * successors (and metric, spend); baseVersionId guards against a lost update.
 */
export const VersionPublish = z
  .object({
    ...taskFields,
    ...versionFields,
    assigneeMemberId: assigneeMemberIdRefused,
    baseVersionId: Uuid.optional(),
    message: z.string().trim().min(1).max(500).optional().meta({
      description:
        'why this version is published, kept with it (an apply of documents says "applied from config")',
    }),
  })
  .partial()
  .meta({ id: 'VersionPublish' })
export type VersionPublish = z.infer<typeof VersionPublish>

export const DefinitionIssue = z
  .object({ severity: z.enum(['error', 'warning']), code: z.string(), message: z.string() })
  .meta({ id: 'DefinitionIssue' })
export type DefinitionIssue = z.infer<typeof DefinitionIssue>

export const TaskVersion = z
  .object({
    id: Uuid,
    taskId: Uuid,
    number: z.number().int(),
    message: z
      .string()
      .nullable()
      .meta({ description: 'why it was published, if the publisher said' }),
    createdAt: IsoTime,
    definition: VersionDefinition,
  })
  .meta({ id: 'TaskVersion' })
export type TaskVersion = z.infer<typeof TaskVersion>

export const TaskVersionSummary = z
  .object({
    id: Uuid,
    number: z.number().int(),
    message: z.string().nullable(),
    createdAt: IsoTime,
    runCount: z.number().int(),
    current: z.boolean(),
  })
  .meta({ id: 'TaskVersionSummary' })

/** GET /v1/tasks/{id}/versions/{versionId}: the version as saved, its skill, run count and currency. */
export const TaskVersionRead = TaskVersion.extend({
  skillMd: z.string(),
  runCount: z.number().int(),
  current: z.boolean(),
}).meta({ id: 'TaskVersionRead' })
export type TaskVersionRead = z.infer<typeof TaskVersionRead>

/** The answer of POST /v1/tasks/{id}/versions: the new version, and the warnings the save kept. */
export const VersionPublished = TaskVersion.extend({
  definitionIssues: z.array(DefinitionIssue),
}).meta({
  id: 'VersionPublished',
})

export const Schedule = z
  .object({
    cron: z.string(),
    timezone: z.string(),
    input: z.record(z.string(), z.unknown()),
    enabled: z.boolean(),
    /** When it next fires (null when disabled, or when the task is deprecated). */
    nextFireAt: IsoTime.nullable(),
    updatedAt: IsoTime,
  })
  .meta({ id: 'Schedule' })
export type Schedule = z.infer<typeof Schedule>

export const ScheduleInput = z
  .object({
    cron: z.string().meta({
      description: 'five fields: minute hour day-of-month month day-of-week',
      example: '0 9 * * 1-5',
    }),
    timezone: z.string().optional().meta({
      description:
        'IANA time zone, default UTC. Summer time as cron keeps it: a fixed time the clocks skip fires when they jump, one they show twice fires once; wildcard minutes or hours fire as the clocks read',
      example: 'Europe/Paris',
    }),
    input: JsonObject.optional().meta({ description: "the runs' input, kept as sent" }),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'ScheduleInput' })
export type ScheduleInput = z.infer<typeof ScheduleInput>

const taskSummaryFields = {
  id: Uuid,
  slug: z.string(),
  name: z.string(),
  teamId: Uuid.nullable(),
  assigneeRole: z.string().nullable(),
  kind: z.enum(taskKinds),
  status: z.enum(taskStatuses),
  serializeOn: z.array(z.string()).nullable(),
  origin: z.enum(taskOrigins),
  currentVersionId: Uuid,
  createdAt: IsoTime,
  updatedAt: IsoTime,
}

/** An entry of GET /v1/tasks. */
export const TaskSummary = z
  .object({
    ...taskSummaryFields,
    versionNumber: z.number().int(),
    definitionIssueCount: z.number().int(),
  })
  .meta({ id: 'TaskSummary' })
export type TaskSummary = z.infer<typeof TaskSummary>

/** The task read answer (spec: Task read answer); also the answer of create and copy. */
export const TaskRead = z
  .object({
    ...taskSummaryFields,
    currentVersion: TaskVersion,
    skillMd: z.string(),
    versions: z.array(TaskVersionSummary),
    definitionIssues: z.array(DefinitionIssue),
    webhook: z.object({ url: z.string(), secretHeader: z.literal('x-os-webhook-secret') }),
    canEditDefinition: z.boolean(),
    sourceTaskId: Uuid.nullable().meta({
      description: 'a copy: the task it was copied from; a clone: its catalogue original',
    }),
    sourceChatId: Uuid.nullable().meta({
      description: 'the create-task chat the task came from, if it came from one',
    }),
    detached: z.boolean().meta({
      description:
        'a clone whose original left the catalogue: it keeps running the last version it had',
    }),
    schedule: Schedule.nullable(),
    paused: Pause.nullable().meta({
      description:
        'the pause in force (POST /v1/tasks/{id}/pause): its runs start no step until the resume; null when none (beyond the spec; issue 50)',
    }),
  })
  .meta({ id: 'TaskRead' })
export type TaskRead = z.infer<typeof TaskRead>

export const TaskCopy = z
  .object({
    teamId: Uuid,
    name: Name,
    slug: SlugInput.optional(),
    assigneeRole: z.string().max(80).nullable().optional(),
    assigneeMemberId: assigneeMemberIdRefused,
  })
  .meta({ id: 'TaskCopy' })
export type TaskCopy = z.infer<typeof TaskCopy>

export const TaskWorkflow = z
  .object({ currentVersion: TaskVersion, skillMd: z.string() })
  .meta({ id: 'TaskWorkflow' })

export const TaskListQuery = PageQuery.extend({
  teamId: z.string().optional(),
  status: z.string().optional(),
  kind: z.string().optional(),
  assigneeRole: z.string().optional(),
  origin: z.string().optional(),
  name: z.string().optional().meta({ description: 'matches any part, any case' }),
  slug: z
    .string()
    .optional()
    .meta({ description: 'matches any part; an exact slug finds the task' }),
})

export const TaskPage = pagedEnvelope(TaskSummary).meta({ id: 'TaskPage' })
