// The closed sets of values the wire types use, apart from the zod schemas that are built on them
// (shared/schemas re-exports each), so osctl can offer them as choices without loading zod.

// runs
export const runStatuses = [
  'pending',
  'queued',
  'running',
  'waiting_on_gate',
  'blocked',
  'paused_spend',
  'succeeded',
  'failed',
  'cancelled',
  'skipped_overlap',
] as const
export type RunStatus = (typeof runStatuses)[number]
/** Ended statuses (spec: States and transitions); a refused start is recorded already ended. */
export const finishedStatuses: readonly RunStatus[] = [
  'succeeded',
  'failed',
  'cancelled',
  'skipped_overlap',
]
/** Not ended: every status but the finished ones, a run waiting at a gate or held included. */
export const unfinishedStatuses: readonly RunStatus[] = runStatuses.filter(
  (s) => !finishedStatuses.includes(s),
)
/** Under way (DESIGN 5): what an API start counts; a run waiting at a gate is not. */
export const underWayStatuses: readonly RunStatus[] = [
  'pending',
  'queued',
  'running',
  'blocked',
  'paused_spend',
]
export const runSorts = ['createdAt', 'status', 'finishedAt'] as const

// executions
/** Derived from the runs, in this order: any running, any at a gate, any held, any waiting to run, else how it ended. */
export const executionStatuses = [
  'running',
  'waiting',
  'blocked',
  'queued',
  'failed',
  'cancelled',
  'complete',
] as const
export const executionSorts = [
  'updatedAt',
  'startedAt',
  'runCount',
  'costUsdCents',
  'status',
] as const

// gates
export const gateDecisions = ['approve', 'reject', 'request_changes'] as const
/** The gate statuses a list names (spec: Gate): waiting (can be decided) and decided. */
export const gateStatuses = ['waiting', 'decided'] as const

// models
/** Model tiers (spec: Task definition spend.maxModelTier; Enterprise settings chatModelTier). */
export const modelTiers = ['economical', 'mid', 'frontier'] as const
/** provider_a speaks the Anthropic Messages API, provider_b the OpenAI Chat Completions API. */
export const providers = ['provider_a', 'provider_b'] as const
export const llmLayers = ['enterprise', 'team', 'member'] as const

// spend
export const spendLayers = ['enterprise', 'team', 'task', 'member'] as const

// tasks
export const taskKinds = ['llm', 'deterministic'] as const
export const taskStatuses = ['active', 'deprecated'] as const
export const taskOrigins = ['custom', 'copy', 'clone', 'builtin'] as const
export const taskSorts = ['slug', 'name', 'kind', 'status', 'createdAt', 'updatedAt'] as const

// catalogue
/** Where a catalogue entry comes from: the service's own files, or an enterprise's published task or role. */
export const catalogProvenances = ['service', 'enterprise'] as const
export const catalogTaskSorts = [
  'slug',
  'name',
  'status',
  'provenance',
  'createdAt',
  'updatedAt',
] as const
export const catalogRoleSorts = ['slug', 'name', 'provenance', 'createdAt', 'updatedAt'] as const

// tools
export const toolLayers = ['enterprise', 'team', 'member', 'role', 'task'] as const

// webhooks
export const deliveryStatuses = ['in_progress', 'accepted', 'refused', 'failed'] as const
export const deliveryKinds = ['task', 'gate'] as const
export const webhookSorts = [
  'receivedAt',
  'status',
  'target',
  'responseStatus',
  'durationMs',
] as const

// memory
export const memoryLayers = ['task', 'team', 'enterprise'] as const
/** The layers a person trains through a task, and `POST /v1/memory/train` trains. */
export const trainLayers = ['team', 'enterprise'] as const
export const noteKinds = ['note', 'correction'] as const
/**
 * proposed: a training run's correction of a person's note, waiting in the review queue as a conflict.
 * Only active notes are recalled, asked and listed.
 */
export const noteStatuses = ['active', 'proposed', 'superseded', 'tombstoned'] as const
/**
 * How GET /v1/memory orders notes: newest first (or, with q, by relevance), by lift (nulls last), by
 * recalls (issue 31).
 */
export const noteSorts = ['createdAt', 'impact', 'recalls'] as const

// Chats (spec: Endpoints Chats; DESIGN 11), as plain values so osctl offers them without zod.
export const chatPurposes = ['create_task'] as const
export const chatStatuses = ['open', 'closed'] as const
export const chatMessageRoles = ['person', 'member', 'tool'] as const
export const chatDecisions = ['allow', 'always', 'deny'] as const
// recommendations
export const recommendationStatuses = ['waiting', 'approved', 'declined'] as const
export const recommendationDecisions = ['approve', 'decline'] as const
/** GET /v1/recommendations view: those waiting (default), or those decided in the last 60 days. */
export const recommendationViews = ['waiting', 'decided'] as const

// configuration as code (issue 48; DESIGN 15)
/** The apiVersion every document of `GET /v1/config` carries and `POST /v1/config/plan|apply` take. */
export const configApiVersion = 'osd/v1'
/**
 * The kinds of document, in the order an export lists them. A kind named here has one module in
 * server/domain/config/kinds/ that reads, checks and writes it through the domain of its resource.
 */
export const configKinds = [
  'Settings',
  'Team',
  'Role',
  'Member',
  'Task',
  'ToolConnection',
  'ModelKey',
  'ModelTiers',
  'SpendLimits',
  'Retention',
] as const
export type ConfigKind = (typeof configKinds)[number]
/** What a plan answers for each object: created, changed, deleted (only with prune), or left as it is. */
export const configActions = ['create', 'update', 'delete', 'unchanged'] as const
export type ConfigAction = (typeof configActions)[number]
/** The longest grace a token's rotation gives the secret it replaces: 7 days, as Stripe's rolled keys. */
export const maxGraceSeconds = 7 * 24 * 3600

// outbound event subscriptions (issue 47): here, not in schemas/events.ts, so osctl names them without
// loading zod before a command acts (test/cli/startup.test.ts)
export const subscriptionFormats = ['standard', 'slack'] as const
export const subscriptionStatuses = ['enabled', 'disabled'] as const
export const deliveryStates = ['pending', 'succeeded', 'failed'] as const
