import { ApiError } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import type {
  DefinitionIssue,
  Successor,
  TaskDefinition,
  TaskRead,
  TaskSummary,
  TaskVersion,
  TaskVersionRead,
  VersionDefinition,
  VersionPublish,
  taskSorts,
} from '../../../shared/schemas/tasks.js'
import { fixedTools } from '../../../shared/schemas/tasks.js'
import { cleanSlug, slugFromName } from '../../../shared/slug.js'
import { validName, validSlug } from '../../../shared/names.js'
import { envelope, idFilter, orderBy, type PageRequest } from '../../db/paging.js'
import { isUniqueViolation, transaction, type Db } from '../../db/sql.js'
import { pauseOf } from '../pauses/index.js'
import { getSchedule } from './schedules.js'
import { checkDefinition, refuseErrors, type CheckContext } from './checks.js'
import { requireTeam } from '../org/index.js'

// Tasks and their immutable versions (spec: Task definition, Task read answer, Endpoints Tasks,
// Versioning; DESIGN 3).

export interface TaskRow {
  id: string
  enterpriseId: string
  slug: string
  name: string
  teamId: string | null
  assigneeRole: string | null
  kind: 'llm' | 'deterministic'
  status: 'active' | 'deprecated'
  serializeOn: string[] | null
  currentVersionId: string
  definitionIssues: DefinitionIssue[]
  origin: 'custom' | 'copy' | 'clone' | 'builtin'
  sourceTaskId: string | null
  sourceChatId: string | null
  /** A clone whose original left the catalogue: it keeps the last version it had. */
  detachedAt: Date | null
  createdAt: Date
  updatedAt: Date
}

export interface VersionRow {
  id: string
  taskId: string
  number: number
  definition: VersionDefinition
  /** Why it was published, when the publisher said (an apply of documents says "applied from config"). */
  message: string | null
  createdAt: Date
}

export const taskColumns = (db: Db) => db`
  t.id, t.enterprise_id, t.slug, t.name, t.team_id, t.assignee_role, t.kind, t.status, t.serialize_on,
  t.current_version_id, t.definition_issues, t.origin, t.source_task_id, t.source_chat_id, t.detached_at, t.created_at,
  t.updated_at`

export function taskNotFound(id: string): ApiError {
  return new ApiError('task_not_found', `No task ${id} in this enterprise.`)
}

/**
 * The task, 404 task_not_found unless the enterprise's. `lock`: true locks it for a change of its own;
 * 'key share' for a transaction that writes a row of the task (its schedule, a note), so a deletion of
 * the task (deleteTask's lock) waits for that row and takes it along, or went first and the task is not
 * found.
 */
export async function loadTask(
  db: Db,
  enterpriseId: string,
  id: string,
  lock: boolean | 'key share' = false,
): Promise<TaskRow> {
  const [row] = await db<TaskRow[]>`
    select ${taskColumns(db)} from tasks t
     where t.enterprise_id = ${enterpriseId} and t.id = ${id}
     ${lock === 'key share' ? db`for key share` : lock ? db`for update` : db``}`
  if (!row) throw taskNotFound(id)
  return row
}

/**
 * Locks every task of the enterprise against starts (an enterprise's pause, issue 50): a start's
 * share lock on its task (runs/start.ts lockedTargets) waits for it, and it waits for starts under
 * way, in task id order as starts take them. `for no key update`: runs and versions that point at
 * the tasks are still inserted meanwhile.
 */
export async function lockTasksOf(db: Db, enterpriseId: string): Promise<void> {
  await db`
    select 1 from tasks where enterprise_id = ${enterpriseId} order by id for no key update`
}

export async function loadVersion(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<VersionRow | undefined> {
  const [row] = await db<VersionRow[]>`
    select id, task_id, number, definition, message, created_at
      from task_versions where enterprise_id = ${enterpriseId} and id = ${id}`
  return row
}

function toVersion(row: VersionRow): TaskVersion {
  return {
    id: row.id,
    taskId: row.taskId,
    number: row.number,
    message: row.message,
    createdAt: row.createdAt.toISOString(),
    definition: row.definition,
  }
}

// --- definitions ------------------------------------------------------------------------------------

/** A role slug as a task names it: cleaned like every slug; empty means none. */
function roleSlug(value: string | null | undefined): string | null | undefined {
  if (value === undefined || value === null) return value
  return cleanSlug(value) || null
}

/** The versioned half of a definition, defaults filled (spec: Task definition). */
function versionDefinition(input: Partial<VersionDefinition>, slug: string): VersionDefinition {
  return {
    overlapPolicy: input.overlapPolicy ?? 'skip',
    goal: input.goal ?? '',
    metric: input.metric ?? null,
    guardrails: input.guardrails ?? [],
    skillMd: input.skillMd ?? `# ${slug}`,
    tools: input.tools ?? [],
    gates: input.gates ?? [],
    inputs: input.inputs ?? null,
    spend: input.spend ?? null,
    workspace: input.workspace ?? null,
    successors: input.successors ?? null,
  }
}

function requireSkill(definition: VersionDefinition): void {
  if (definition.skillMd.trim() === '') {
    throw new ApiError('skillMd_required', 'skillMd would be empty: a version needs its skill.')
  }
}

/**
 * What the checks compare a definition with: the successors of the enterprise's other tasks and every
 * tool connection's mustGate list.
 */
export async function checkContext(
  db: Db,
  enterpriseId: string,
  exceptTaskId?: string,
): Promise<CheckContext> {
  const rows = await db<{ slug: string; successors: Successor[] | null }[]>`
    select t.slug, v.definition -> 'successors' as successors
      from tasks t join task_versions v on v.id = t.current_version_id
     where t.enterprise_id = ${enterpriseId} ${exceptTaskId ? db`and t.id <> ${exceptTaskId}` : db``}`
  return {
    tasks: new Map(rows.map((r) => [r.slug, { successors: r.successors }])),
    mustGate: await mustGateTools(db, enterpriseId),
  }
}

/**
 * The tools a task must gate by name (spec: Definition checks, merge gate rule): the merge tool, which
 * is gated whether or not a connection lists it, and every tool connection's mustGate list.
 */
export async function mustGateTools(db: Db, enterpriseId: string): Promise<string[]> {
  const rows = await db<{ tool: string }[]>`
    select distinct jsonb_array_elements_text(must_gate) as tool
      from tool_connections where enterprise_id = ${enterpriseId}`
  return [...new Set([fixedTools.merge, ...rows.map((r) => r.tool)])]
}

/** Runs the checks; errors refuse the save, warnings are answered to be kept with the task. */
async function check(
  db: Db,
  enterpriseId: string,
  definition: VersionDefinition & { slug: string; kind: TaskRow['kind'] },
  exceptTaskId?: string,
): Promise<DefinitionIssue[]> {
  const issues = checkDefinition(definition, await checkContext(db, enterpriseId, exceptTaskId))
  refuseErrors(issues)
  return issues
}

// --- create, read, list -----------------------------------------------------------------------------

export interface CreateOptions {
  origin?: TaskRow['origin']
  sourceTaskId?: string
  /** A clone's first version names the original's version it was written from. */
  sourceVersionId?: string
  /** A task proposed in a create-task chat names the chat (DESIGN 11). */
  sourceChatId?: string
  /** Why its first version was published (an apply of documents: "applied from config"). */
  message?: string
}

export async function createTask(
  db: Db,
  enterpriseId: string,
  input: TaskDefinition,
  options: CreateOptions = {},
): Promise<string> {
  const name = validName(input.name)
  const slug = input.slug !== undefined ? validSlug(input.slug) : slugFromName(name)
  if (!slug) throw new ApiError('invalid_slug', 'The name gives an empty slug: send a slug.')
  if (input.teamId) await requireTeam(db, enterpriseId, input.teamId)
  const kind = input.kind ?? 'llm'
  const definition = versionDefinition(input, slug)
  requireSkill(definition)
  const issues = await check(db, enterpriseId, { ...definition, slug, kind })
  try {
    return await transaction(db, async (tx) => {
      // Checked again under the team's lock: a deletion of the team at once waits, then counts this task.
      if (input.teamId) await requireTeam(tx, enterpriseId, input.teamId, true)
      const [task] = await tx<{ id: string }[]>`
        insert into tasks (enterprise_id, slug, name, team_id, assignee_role, kind, status, serialize_on,
                           definition_issues, origin, source_task_id, source_chat_id)
        values (${enterpriseId}, ${slug}, ${name}, ${input.teamId ?? null}, ${roleSlug(input.assigneeRole) ?? null},
                ${kind}, ${input.status ?? 'active'}, ${input.serializeOn ? tx.json(input.serializeOn) : null},
                ${tx.json(issues)}, ${options.origin ?? 'custom'}, ${options.sourceTaskId ?? null},
                ${options.sourceChatId ?? null})
        returning id`
      await insertVersion(
        tx,
        enterpriseId,
        task!.id,
        1,
        definition,
        options.sourceVersionId,
        options.message,
      )
      return task!.id
    })
  } catch (err) {
    if (isUniqueViolation(err, 'tasks_enterprise_id_slug_key')) {
      throw new ApiError('task_slug_taken', `A task with the slug "${slug}" exists.`)
    }
    throw err
  }
}

export async function insertVersion(
  tx: Db,
  enterpriseId: string,
  taskId: string,
  number: number,
  definition: VersionDefinition,
  sourceVersionId: string | null = null,
  message: string | null = null,
): Promise<VersionRow> {
  const [version] = await tx<VersionRow[]>`
    insert into task_versions (enterprise_id, task_id, number, definition, source_version_id, message)
    values (${enterpriseId}, ${taskId}, ${number}, ${tx.json(definition as never)}, ${sourceVersionId},
            ${message})
    returning id, task_id, number, definition, message, created_at`
  await tx`update tasks set current_version_id = ${version!.id}, updated_at = now() where id = ${taskId}`
  return version!
}

/** Runs that used each version (refused starts never ran, so they do not count). */
async function runCounts(db: Db, versionIds: string[]): Promise<Map<string, number>> {
  if (versionIds.length === 0) return new Map()
  const rows = await db<{ taskVersionId: string; n: number }[]>`
    select task_version_id, count(*)::int as n from runs
     where task_version_id = any(${db.array(versionIds)}::uuid[]) and status <> 'skipped_overlap'
     group by task_version_id`
  return new Map(rows.map((r) => [r.taskVersionId, r.n]))
}

/** The task read answer (spec: Task read answer). `apiBase` is the /v1 address callers reach. */
export async function readTask(
  db: Db,
  enterpriseId: string,
  id: string,
  apiBase: string,
): Promise<TaskRead> {
  const task = await loadTask(db, enterpriseId, id)
  const [versions, enterprise, schedule, paused] = await Promise.all([
    db<VersionRow[]>`
      select id, task_id, number, definition, message, created_at from task_versions
       where task_id = ${id} order by number desc`,
    db<{ slug: string }[]>`select slug from enterprises where id = ${enterpriseId}`,
    getSchedule(db, enterpriseId, id, task.status),
    pauseOf(db, enterpriseId, id),
  ])
  const counts = await runCounts(
    db,
    versions.map((v) => v.id),
  )
  const current = versions.find((v) => v.id === task.currentVersionId)!
  return {
    ...summaryFields(task),
    currentVersion: toVersion(current),
    skillMd: current.definition.skillMd,
    versions: versions.map((v) => ({
      id: v.id,
      number: v.number,
      message: v.message,
      createdAt: v.createdAt.toISOString(),
      runCount: counts.get(v.id) ?? 0,
      current: v.id === task.currentVersionId,
    })),
    definitionIssues: task.definitionIssues,
    webhook: {
      url: `${apiBase}/webhooks/${enterprise[0]!.slug}/tasks/${task.slug}`,
      secretHeader: 'x-os-webhook-secret',
    },
    canEditDefinition: task.origin !== 'clone' && task.origin !== 'builtin',
    sourceTaskId: task.sourceTaskId,
    sourceChatId: task.sourceChatId,
    detached: task.detachedAt !== null,
    schedule,
    paused,
  }
}

function summaryFields(task: TaskRow) {
  return {
    id: task.id,
    slug: task.slug,
    name: task.name,
    teamId: task.teamId,
    assigneeRole: task.assigneeRole,
    kind: task.kind,
    status: task.status,
    serializeOn: task.serializeOn,
    origin: task.origin,
    currentVersionId: task.currentVersionId,
    createdAt: task.createdAt.toISOString(),
    updatedAt: task.updatedAt.toISOString(),
  }
}

type TaskSort = (typeof taskSorts)[number]
const sortColumns: Record<TaskSort, string> = {
  slug: 't.slug',
  name: 't.name',
  kind: 't.kind',
  status: 't.status',
  createdAt: 't.created_at',
  updatedAt: 't.updated_at',
}

export interface TaskFilters {
  teamId?: string
  status?: string
  kind?: string
  assigneeRole?: string
  origin?: string
  name?: string
  slug?: string
}

/** Any part of a name or slug, any case; % and _ are taken literally. */
function contains(value: string): string {
  return `%${value.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

export async function listTasks(
  db: Db,
  enterpriseId: string,
  filters: TaskFilters,
  page: PageRequest<TaskSort>,
): Promise<Paged<TaskSummary>> {
  const where = db`
    t.enterprise_id = ${enterpriseId}
    ${idFilter(db, 't.team_id', filters.teamId)}
    ${filters.status ? db`and t.status = ${filters.status}` : db``}
    ${filters.kind ? db`and t.kind = ${filters.kind}` : db``}
    ${filters.assigneeRole ? db`and t.assignee_role = ${filters.assigneeRole}` : db``}
    ${filters.origin ? db`and t.origin = ${filters.origin}` : db``}
    ${filters.name ? db`and t.name ilike ${contains(filters.name)}` : db``}
    ${filters.slug ? db`and t.slug ilike ${contains(filters.slug)}` : db``}`
  const [rows, [count]] = await Promise.all([
    db<(TaskRow & { versionNumber: number })[]>`
      select ${taskColumns(db)}, v.number as version_number
        from tasks t join task_versions v on v.id = t.current_version_id
       where ${where}
       ${orderBy(db, page, sortColumns, 't.id')}
       limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from tasks t where ${where}`,
  ])
  const data = rows.map((row) => ({
    ...summaryFields(row),
    versionNumber: row.versionNumber,
    definitionIssueCount: row.definitionIssues.length,
  }))
  return envelope(data, count!.n, page)
}

/**
 * Every task of the enterprise with its current version's definition, in slug order, in one query:
 * what an export of its documents reads (domain/config), where readTask would cost four per task.
 */
export async function listTaskDefinitions(
  db: Db,
  enterpriseId: string,
): Promise<(TaskRow & { definition: VersionDefinition })[]> {
  return db<(TaskRow & { definition: VersionDefinition })[]>`
    select ${taskColumns(db)}, v.definition
      from tasks t join task_versions v on v.id = t.current_version_id
     where t.enterprise_id = ${enterpriseId}
     order by t.slug`
}

// --- versions ---------------------------------------------------------------------------------------

/**
 * Refuses any change to one of the service's own tasks (DESIGN 10): its definition, its role, its
 * schedule, its deletion. Reading, starting, copying and the settings bound at its layer stay open.
 */
export function refuseBuiltin(task: Pick<TaskRow, 'origin' | 'slug'>): void {
  if (task.origin === 'builtin') {
    throw new ApiError(
      'os_task_immutable',
      `${task.slug} is one of the service's own tasks: it cannot be changed or deleted. Copy it to change the copy.`,
    )
  }
}

function editable(task: TaskRow): void {
  refuseBuiltin(task)
  if (task.origin === 'clone') {
    throw new ApiError(
      'task_definition_read_only',
      `${task.slug} is a clone: its definition belongs to the original's owner. Copy it to change it.`,
    )
  }
}

/**
 * Publishes a new version (spec: Endpoints Tasks, Publish a version): omitted fields keep the current
 * version's values, null clears; name, slug, teamId, assigneeRole, serializeOn, status and kind change
 * the task at once, and a version is still published. With baseVersionId, a newer current version is
 * a conflict; without it the save is unchecked. The task's waiting recommendations are declined with
 * the save (spec: Saving a version declines any waiting recommendation), decided by `saved.by` with
 * `saved.why` as their reason, else one that names the new version.
 */
export async function publishVersion(
  db: Db,
  enterpriseId: string,
  id: string,
  body: VersionPublish,
  saved: { by?: string; why?: string; message?: string } = {},
): Promise<TaskVersion & { definitionIssues: DefinitionIssue[] }> {
  return transaction(db, async (tx) => {
    const task = await loadTask(tx, enterpriseId, id, true)
    if (task.origin === 'clone') refuseCloneDefinition(task, body)
    else editable(task)
    if (body.baseVersionId && body.baseVersionId !== task.currentVersionId) {
      throw new ApiError(
        'task_version_conflict',
        `A newer version than ${body.baseVersionId} exists (current: ${task.currentVersionId}); read the task and try again.`,
        { currentVersionId: task.currentVersionId },
      )
    }
    const current = (await loadVersion(tx, enterpriseId, task.currentVersionId))!
    const name = body.name === undefined ? task.name : validName(body.name)
    const slug = body.slug === undefined ? task.slug : validSlug(body.slug)
    if (body.teamId) await requireTeam(tx, enterpriseId, body.teamId, true)
    if (task.origin === 'clone') {
      // A clone's own fields change at once; its definition stays the original's (no version of its own).
      await updateTaskFields(tx, task, {
        name,
        slug,
        teamId: body.teamId,
        assigneeRole: body.assigneeRole,
        status: body.status,
      })
      return { ...toVersion(current), definitionIssues: task.definitionIssues }
    }
    const kind = body.kind ?? task.kind
    const definition: VersionDefinition = { ...current.definition }
    for (const key of Object.keys(definition) as (keyof VersionDefinition)[]) {
      if (body[key] !== undefined) (definition as Record<string, unknown>)[key] = body[key]
    }
    requireSkill(definition)
    const issues = await check(tx, enterpriseId, { ...definition, slug, kind }, id)

    const [latest] = await tx<
      { n: number }[]
    >`select max(number)::int as n from task_versions where task_id = ${id}`
    const version = await insertVersion(
      tx,
      enterpriseId,
      id,
      latest!.n + 1,
      definition,
      null,
      body.message ?? saved.message ?? null,
    )
    try {
      await tx`
        update tasks
           set name = ${name},
               slug = ${slug},
               team_id = ${body.teamId === undefined ? task.teamId : body.teamId},
               assignee_role = ${body.assigneeRole === undefined ? task.assigneeRole : (roleSlug(body.assigneeRole) ?? null)},
               serialize_on = ${body.serializeOn === undefined ? (task.serializeOn ? tx.json(task.serializeOn) : null) : body.serializeOn ? tx.json(body.serializeOn) : null},
               status = ${body.status ?? task.status},
               kind = ${kind},
               definition_issues = ${tx.json(issues)},
               updated_at = now()
         where id = ${id}`
    } catch (err) {
      if (isUniqueViolation(err, 'tasks_enterprise_id_slug_key')) {
        throw new ApiError('task_slug_taken', `A task with the slug "${slug}" exists.`)
      }
      throw err
    }
    await syncClones(
      tx,
      {
        id,
        kind,
        serializeOn: body.serializeOn === undefined ? task.serializeOn : body.serializeOn,
      },
      version,
    )
    await tx`
      update recommendations
         set status = 'declined', decision = 'decline', decided_at = now(),
             decided_by = ${saved.by ?? null},
             reason = ${saved.why ?? `Version ${version.number} of the task was saved: a recommendation is proposed against the version it would change.`}
       where enterprise_id = ${enterpriseId} and task_id = ${id} and status = 'waiting'`
    return { ...toVersion(version), definitionIssues: issues }
  })
}

/** What a clone's owner may change: the task's own fields, never its definition (DESIGN 12). */
const cloneOwnFields = new Set([
  'name',
  'slug',
  'teamId',
  'assigneeRole',
  'status',
  'baseVersionId',
  'message',
])

function refuseCloneDefinition(task: TaskRow, body: VersionPublish): void {
  const definitionFields = Object.entries(body)
    .filter(([key, value]) => value !== undefined && !cloneOwnFields.has(key))
    .map(([key]) => key)
  if (definitionFields.length > 0) {
    throw new ApiError(
      'task_definition_read_only',
      `${task.slug} is a clone: its definition (${definitionFields.join(', ')}) belongs to the original's owner, and each new version of the original is what it runs. Its name, slug, team, role and status are yours to change; copy it from the catalogue to change the rest.`,
      { fields: definitionFields },
    )
  }
}

async function updateTaskFields(
  tx: Db,
  task: TaskRow,
  change: {
    name: string
    slug: string
    teamId?: string | null
    assigneeRole?: string | null
    status?: TaskRow['status']
  },
): Promise<void> {
  try {
    await tx`
      update tasks
         set name = ${change.name},
             slug = ${change.slug},
             team_id = ${change.teamId === undefined ? task.teamId : change.teamId},
             assignee_role = ${change.assigneeRole === undefined ? task.assigneeRole : (roleSlug(change.assigneeRole) ?? null)},
             status = ${change.status ?? task.status},
             updated_at = now()
       where id = ${task.id}`
  } catch (err) {
    if (isUniqueViolation(err, 'tasks_enterprise_id_slug_key')) {
      throw new ApiError('task_slug_taken', `A task with the slug "${change.slug}" exists.`)
    }
    throw err
  }
}

/**
 * Writes a new version of an original into each of its attached clones, as a new version of the clone
 * in the clone's own enterprise (DESIGN 12): from then on the clone's runs use it. The checks run
 * against the clone's enterprise and are kept with the clone; they never refuse (the original's owner
 * published, the clone's owner did not), so an error found there shows on the clone's Blockers. The
 * clones are locked, so a save of a clone's own fields waits for this.
 */
export async function syncClones(
  tx: Db,
  original: { id: string; kind: TaskRow['kind']; serializeOn: string[] | null },
  version: VersionRow,
): Promise<number> {
  const clones = await tx<{ id: string; enterpriseId: string; slug: string }[]>`
    select id, enterprise_id, slug from tasks
     where source_task_id = ${original.id} and origin = 'clone' and detached_at is null
     order by id
     for update`
  for (const clone of clones) {
    const issues = checkDefinition(
      { ...version.definition, slug: clone.slug, kind: original.kind },
      await checkContext(tx, clone.enterpriseId, clone.id),
    )
    const [latest] = await tx<{ n: number }[]>`
      select max(number)::int as n from task_versions where task_id = ${clone.id}`
    await insertVersion(
      tx,
      clone.enterpriseId,
      clone.id,
      latest!.n + 1,
      version.definition,
      version.id,
    )
    await tx`
      update tasks
         set kind = ${original.kind},
             serialize_on = ${original.serializeOn ? tx.json(original.serializeOn) : null},
             definition_issues = ${tx.json(issues)}
       where id = ${clone.id}`
  }
  return clones.length
}

export async function listVersions(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<TaskVersionRead[]> {
  const task = await loadTask(db, enterpriseId, id)
  const versions = await db<VersionRow[]>`
    select id, task_id, number, definition, message, created_at from task_versions
     where task_id = ${id} order by number desc`
  const counts = await runCounts(
    db,
    versions.map((v) => v.id),
  )
  return versions.map((v) => versionRead(v, task, counts))
}

function versionRead(v: VersionRow, task: TaskRow, counts: Map<string, number>): TaskVersionRead {
  return {
    ...toVersion(v),
    skillMd: v.definition.skillMd,
    runCount: counts.get(v.id) ?? 0,
    current: v.id === task.currentVersionId,
  }
}

export async function getVersion(
  db: Db,
  enterpriseId: string,
  id: string,
  versionId: string,
): Promise<TaskVersionRead> {
  const task = await loadTask(db, enterpriseId, id)
  const version = await loadVersion(db, enterpriseId, versionId)
  if (!version || version.taskId !== id) {
    throw new ApiError('version_not_found', `Task ${task.slug} has no version ${versionId}.`)
  }
  return versionRead(version, task, await runCounts(db, [version.id]))
}

export async function getWorkflow(db: Db, enterpriseId: string, id: string) {
  const task = await loadTask(db, enterpriseId, id)
  const current = (await loadVersion(db, enterpriseId, task.currentVersionId))!
  return { currentVersion: toVersion(current), skillMd: current.definition.skillMd }
}
