import { lockCatalogInstalls } from '../../db/locks.js'
import { ApiError } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import type {
  CatalogClone,
  CatalogRole,
  ClonedSchedule,
  CatalogSchedule,
  CatalogTask,
  CatalogTaskRead,
  catalogRoleSorts,
  catalogTaskSorts,
} from '../../../shared/schemas/catalog.js'
import type { TaskCopy, VersionDefinition } from '../../../shared/schemas/tasks.js'
import { unsetRequiredInputs } from '../../../shared/task-inputs.js'
import { envelope, orderBy, type PageRequest } from '../../db/paging.js'
import { transaction, type Db } from '../../db/sql.js'
import { createTask, loadVersion, setSchedule, type TaskRow } from '../tasks/index.js'
import { requireTeam } from '../org/index.js'

// The catalogue (spec: Concepts "Catalogue", Endpoints Catalogue; DESIGN 12). An entry is a published
// original: a task or role row of the service's own catalogue enterprise (provenance service, loaded
// from catalog/ by files.ts) or of an enterprise an operator published it from (provenance
// enterprise). Every enterprise reads the same entries; installs write only the caller's enterprise, and
// read of the other enterprise nothing but the original's current version.

interface EntryRow {
  id: string
  enterpriseId: string
  slug: string
  name: string
  kind: TaskRow['kind']
  status: TaskRow['status']
  origin: TaskRow['origin']
  provenance: 'service' | 'enterprise'
  publisher: string | null
  assigneeRole: string | null
  serializeOn: string[] | null
  currentVersionId: string
  versionNumber: number
  definition: VersionDefinition
  schedule: CatalogSchedule | null
  publishedAt: Date
  createdAt: Date
  updatedAt: Date
}

/** Published tasks with what an entry shows; a CTE so provenance sorts and filters like a column. */
const entries = (db: Db) => db`
  entries as (
    select t.id, t.enterprise_id, t.slug, t.name, t.kind, t.status, t.origin, t.assignee_role,
           t.serialize_on, t.current_version_id, t.published_at, t.created_at, t.updated_at,
           case when e.catalog then 'service' else 'enterprise' end as provenance,
           case when e.catalog then null else e.name end as publisher,
           v.number as version_number, v.definition,
           coalesce(t.catalog_schedule,
                    (select jsonb_build_object('cron', s.cron, 'timezone', s.timezone, 'input', s.input)
                       from task_schedules s where s.task_id = t.id)) as schedule
      from tasks t
      join enterprises e on e.id = t.enterprise_id
      join task_versions v on v.id = t.current_version_id
     where t.published_at is not null
  )`

function toEntry(row: EntryRow): CatalogTask {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    kind: row.kind,
    status: row.status,
    origin: row.origin,
    provenance: row.provenance,
    publisher: row.publisher,
    assigneeRole: row.assigneeRole,
    goal: row.definition.goal,
    tools: row.definition.tools,
    currentVersionId: row.currentVersionId,
    versionNumber: row.versionNumber,
    publishedAt: row.publishedAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

/** Any part, any case; % and _ are taken literally. */
function contains(value: string): string {
  return `%${value.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
}

type TaskSort = (typeof catalogTaskSorts)[number]
const taskSortColumns: Record<TaskSort, string> = {
  slug: 'slug',
  name: 'name',
  status: 'status',
  provenance: 'provenance',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
}

export interface CatalogTaskFilters {
  status?: string
  kind?: string
  provenance?: string
  origin?: string
  slug?: string
}

export async function listCatalogTasks(
  db: Db,
  filters: CatalogTaskFilters,
  page: PageRequest<TaskSort>,
): Promise<Paged<CatalogTask>> {
  const where = db`
    true
    ${filters.status ? db`and c.status = ${filters.status}` : db``}
    ${filters.kind ? db`and c.kind = ${filters.kind}` : db``}
    ${filters.provenance ? db`and c.provenance = ${filters.provenance}` : db``}
    ${filters.origin ? db`and c.origin = ${filters.origin}` : db``}
    ${filters.slug ? db`and c.slug ilike ${contains(filters.slug)}` : db``}`
  const [rows, [count]] = await Promise.all([
    db<EntryRow[]>`
      with ${entries(db)}
      select * from entries c where ${where}
      ${orderBy(db, page, taskSortColumns, 'id')}
      limit ${page.limit} offset ${page.offset}`,
    db<
      { n: number }[]
    >`with ${entries(db)} select count(*)::int as n from entries c where ${where}`,
  ])
  return envelope(rows.map(toEntry), count!.n, page)
}

export function entryNotFound(id: string): ApiError {
  return new ApiError('task_not_found', `No task ${id} in the catalogue.`)
}

async function loadEntry(db: Db, id: string, lock = false): Promise<EntryRow> {
  const [row] = await db<EntryRow[]>`
    with ${entries(db)} select * from entries where id = ${id}`
  if (!row) throw entryNotFound(id)
  if (lock) {
    // A new version of the original waits until this install commits, and then reaches the clone too.
    await db`select 1 from tasks where id = ${id} for share`
    const [again] = await db<EntryRow[]>`with ${entries(db)} select * from entries where id = ${id}`
    if (!again) throw entryNotFound(id)
    return again
  }
  return row
}

export async function getCatalogTask(db: Db, id: string): Promise<CatalogTaskRead> {
  const row = await loadEntry(db, id)
  const version = await versionSaved(db, row.currentVersionId)
  return {
    ...toEntry(row),
    serializeOn: row.serializeOn,
    currentVersion: {
      id: row.currentVersionId,
      taskId: row.id,
      number: row.versionNumber,
      message: version.message,
      createdAt: version.createdAt.toISOString(),
      definition: row.definition,
    },
    skillMd: row.definition.skillMd,
    schedule: row.schedule,
  }
}

async function versionSaved(
  db: Db,
  id: string,
): Promise<{ createdAt: Date; message: string | null }> {
  const [row] = await db<
    { createdAt: Date; message: string | null }[]
  >`select created_at, message from task_versions where id = ${id}`
  return row!
}

// --- installs ---------------------------------------------------------------------------------------

/**
 * Installs in one enterprise wait for each other, so two clones of one role (or one task) at once
 * install it once: the second finds the slugs taken.
 */
async function lockInstalls(tx: Db, enterpriseId: string): Promise<void> {
  await lockCatalogInstalls(tx, enterpriseId)
}

/**
 * The schedule an entry comes with, on the task installed from it: on only when its input gives every
 * required input a value (issue 51). A catalogue schedule's blanks are for the enterprise to fill;
 * turned on as they are, it would start runs every week without what they need.
 */
async function installSchedule(
  tx: Db,
  enterpriseId: string,
  taskId: string,
  entry: Pick<EntryRow, 'schedule' | 'definition'>,
): Promise<Omit<ClonedSchedule, 'taskId' | 'taskSlug'> | null> {
  if (!entry.schedule) return null
  const { cron, timezone, input } = entry.schedule
  const missingInputs = unsetRequiredInputs(entry.definition.inputs, input)
  const enabled = missingInputs.length === 0
  await setSchedule(tx, enterpriseId, taskId, { cron, timezone, input, enabled })
  return { cron, timezone, input, enabled, missingInputs }
}

/** A clone of `entry` on the team: its current version, linked; the role and schedule it comes with. */
async function installClone(
  tx: Db,
  enterpriseId: string,
  entry: EntryRow,
  install: { teamId: string; name?: string; slug?: string },
): Promise<{ taskId: string; schedule: ClonedSchedule | null }> {
  const slug = install.slug ?? entry.slug
  const taskId = await createTask(
    tx,
    enterpriseId,
    {
      ...entry.definition,
      name: install.name ?? entry.name,
      slug,
      teamId: install.teamId,
      assigneeRole: entry.assigneeRole,
      kind: entry.kind,
      serializeOn: entry.serializeOn,
      status: 'active',
    },
    { origin: 'clone', sourceTaskId: entry.id, sourceVersionId: entry.currentVersionId },
  )
  const schedule = await installSchedule(tx, enterpriseId, taskId, entry)
  return { taskId, schedule: schedule && { taskId, taskSlug: slug, ...schedule } }
}

/** POST /v1/catalog/tasks/{id}/clone: a task linked to the original, on the caller's team. */
export async function cloneCatalogTask(
  db: Db,
  enterpriseId: string,
  id: string,
  body: CatalogClone,
): Promise<string> {
  return transaction(db, async (tx) => {
    await lockInstalls(tx, enterpriseId)
    const entry = await loadEntry(tx, id, true)
    await requireTeam(tx, enterpriseId, body.teamId, true)
    return (await installClone(tx, enterpriseId, entry, body)).taskId
  })
}

/** POST /v1/catalog/tasks/{id}/copy: an independent task the enterprise owns (no link). */
export async function copyCatalogTask(
  db: Db,
  enterpriseId: string,
  id: string,
  body: TaskCopy,
): Promise<string> {
  return transaction(db, async (tx) => {
    const entry = await loadEntry(tx, id)
    const current = (await loadVersion(tx, entry.enterpriseId, entry.currentVersionId))!
    const taskId = await createTask(
      tx,
      enterpriseId,
      {
        ...current.definition,
        name: body.name,
        slug: body.slug,
        teamId: body.teamId,
        assigneeRole: body.assigneeRole === undefined ? entry.assigneeRole : body.assigneeRole,
        kind: entry.kind,
        serializeOn: entry.serializeOn,
        status: 'active',
      },
      { origin: 'copy', sourceTaskId: entry.id },
    )
    await installSchedule(tx, enterpriseId, taskId, {
      schedule: entry.schedule,
      definition: current.definition,
    })
    return taskId
  })
}

// --- roles ------------------------------------------------------------------------------------------

interface RoleEntryRow {
  id: string
  enterpriseId: string
  slug: string
  name: string
  description: string
  provenance: 'service' | 'enterprise'
  publisher: string | null
  publishedAt: Date
  createdAt: Date
  updatedAt: Date
}

const roleEntries = (db: Db) => db`
  role_entries as (
    select r.id, r.enterprise_id, r.slug, r.name, r.description, r.published_at, r.created_at,
           r.updated_at,
           case when e.catalog then 'service' else 'enterprise' end as provenance,
           case when e.catalog then null else e.name end as publisher
      from roles r join enterprises e on e.id = r.enterprise_id
     where r.published_at is not null
  )`

type RoleSort = (typeof catalogRoleSorts)[number]
const roleSortColumns: Record<RoleSort, string> = {
  slug: 'slug',
  name: 'name',
  provenance: 'provenance',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
}

/** A role's public tasks: the published tasks of its enterprise that name it. */
async function tasksOfRoleEntries(db: Db, roles: RoleEntryRow[]) {
  if (roles.length === 0) return new Map<string, EntryRow[]>()
  const rows = await db<(EntryRow & { roleId: string })[]>`
    with ${entries(db)}
    select c.*, r.id as role_id
      from entries c join roles r
        on r.enterprise_id = c.enterprise_id and r.slug = c.assignee_role
     where r.id = any(${db.array(roles.map((r) => r.id))}::uuid[])
     order by c.slug, c.id`
  const byRole = new Map<string, EntryRow[]>()
  for (const row of rows) byRole.set(row.roleId, [...(byRole.get(row.roleId) ?? []), row])
  return byRole
}

function toRoleEntry(row: RoleEntryRow, tasks: EntryRow[]): CatalogRole {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    description: row.description,
    provenance: row.provenance,
    publisher: row.publisher,
    tasks: tasks.map((t) => ({
      id: t.id,
      slug: t.slug,
      name: t.name,
      status: t.status,
      goal: t.definition.goal,
    })),
    publishedAt: row.publishedAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

export async function listCatalogRoles(
  db: Db,
  filters: { provenance?: string; slug?: string },
  page: PageRequest<RoleSort>,
): Promise<Paged<CatalogRole>> {
  const where = db`
    true
    ${filters.provenance ? db`and c.provenance = ${filters.provenance}` : db``}
    ${filters.slug ? db`and c.slug ilike ${contains(filters.slug)}` : db``}`
  const [rows, [count]] = await Promise.all([
    db<RoleEntryRow[]>`
      with ${roleEntries(db)}
      select * from role_entries c where ${where}
      ${orderBy(db, page, roleSortColumns, 'id')}
      limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`
      with ${roleEntries(db)} select count(*)::int as n from role_entries c where ${where}`,
  ])
  const tasks = await tasksOfRoleEntries(db, rows)
  return envelope(
    rows.map((r) => toRoleEntry(r, tasks.get(r.id) ?? [])),
    count!.n,
    page,
  )
}

async function loadRoleEntry(db: Db, id: string): Promise<RoleEntryRow> {
  const [row] = await db<RoleEntryRow[]>`
    with ${roleEntries(db)} select * from role_entries where id = ${id}`
  if (!row) throw new ApiError('role_not_found', `No role ${id} in the catalogue.`)
  return row
}

export async function getCatalogRole(db: Db, id: string): Promise<CatalogRole> {
  const row = await loadRoleEntry(db, id)
  return toRoleEntry(row, (await tasksOfRoleEntries(db, [row])).get(row.id) ?? [])
}

export interface RoleCloned {
  roleId: string
  roleCreated: boolean
  taskIds: string[]
  skipped: { slug: string; reason: string }[]
  /** The installed tasks' schedules, each on or off (installSchedule). */
  schedules: ClonedSchedule[]
}

/**
 * POST /v1/catalog/roles/{id}/clone: the role on the team (a role of that slug on the team or
 * enterprise-wide is reused) and each of its public tasks, linked, deprecated ones skipped. One
 * transaction: if any task slug is taken nothing is installed and the 409 lists those slugs.
 */
export async function cloneCatalogRole(
  db: Db,
  enterpriseId: string,
  id: string,
  teamId: string,
): Promise<RoleCloned> {
  return transaction(db, async (tx) => {
    await lockInstalls(tx, enterpriseId)
    const role = await loadRoleEntry(tx, id)
    await requireTeam(tx, enterpriseId, teamId, true)
    const tasks = (await tasksOfRoleEntries(tx, [role])).get(role.id) ?? []
    const installable = tasks.filter((t) => t.status === 'active')
    const skipped = tasks
      .filter((t) => t.status !== 'active')
      .map((t) => ({ slug: t.slug, reason: 'deprecated' }))
    const taken = await tx<{ slug: string }[]>`
      select slug from tasks
       where enterprise_id = ${enterpriseId}
         and slug = any(${tx.array(installable.map((t) => t.slug))}::text[])
       order by slug`
    if (taken.length > 0) {
      const slugs = taken.map((t) => t.slug)
      throw new ApiError(
        'task_slug_taken',
        `Nothing was installed: tasks with the slugs ${slugs.join(', ')} exist in this enterprise. Rename them, or clone the role's other tasks one by one.`,
        { slugs },
      )
    }
    const [existing] = await tx<{ id: string }[]>`
      select id from roles
       where enterprise_id = ${enterpriseId} and slug = ${role.slug}
         and (team_id = ${teamId} or team_id is null)
       order by team_id nulls last
       limit 1`
    let roleId = existing?.id
    if (!roleId) {
      const [made] = await tx<{ id: string }[]>`
        insert into roles (enterprise_id, team_id, name, slug, description)
        values (${enterpriseId}, ${teamId}, ${role.name}, ${role.slug}, ${role.description})
        returning id`
      roleId = made!.id
    }
    const taskIds: string[] = []
    const schedules: ClonedSchedule[] = []
    for (const task of installable) {
      const entry = await loadEntry(tx, task.id, true)
      const installed = await installClone(tx, enterpriseId, entry, { teamId })
      taskIds.push(installed.taskId)
      if (installed.schedule) schedules.push(installed.schedule)
    }
    return { roleId, roleCreated: !existing, taskIds, skipped, schedules }
  })
}

// --- publishing (osd admin catalog) ----------------------------------------------------------------

export interface Published {
  kind: 'task' | 'role'
  id: string
  slug: string
  published: boolean
  /** The role's tasks published or unpublished with it. */
  tasks: { id: string; slug: string }[]
  /** Clones detached by an unpublish. */
  detachedClones: number
}

async function findTaskBySlug(db: Db, enterpriseId: string, slug: string) {
  const [task] = await db<{ id: string; slug: string; origin: TaskRow['origin'] }[]>`
    select id, slug, origin from tasks where enterprise_id = ${enterpriseId} and slug = ${slug}`
  if (!task)
    throw new ApiError('task_not_found', `No task with the slug "${slug}" in this enterprise.`)
  return task
}

async function findRoleBySlug(db: Db, enterpriseId: string, slug: string) {
  const roles = await db<{ id: string; slug: string; builtin: boolean }[]>`
    select id, slug, builtin from roles where enterprise_id = ${enterpriseId} and slug = ${slug}
     order by team_id nulls first, id`
  if (roles.length === 0) {
    throw new ApiError('role_not_found', `No role with the slug "${slug}" in this enterprise.`)
  }
  return roles[0]!
}

function refuseUnpublishable(task: { slug: string; origin: TaskRow['origin'] }): void {
  if (task.origin === 'clone' || task.origin === 'builtin') {
    throw new ApiError(
      'invalid_request',
      `${task.slug} is ${task.origin === 'clone' ? 'a clone: publish its original' : "one of the service's own tasks"}; it cannot be published.`,
    )
  }
}

/**
 * Publishes an enterprise's task, or its role with every task that names it (clones and built-in tasks
 * aside). Publishing again changes nothing.
 */
export async function publish(
  db: Db,
  enterpriseId: string,
  target: { task?: string; role?: string },
): Promise<Published> {
  return transaction(db, async (tx) => {
    if (target.task) {
      const task = await findTaskBySlug(tx, enterpriseId, target.task)
      refuseUnpublishable(task)
      await tx`update tasks set published_at = coalesce(published_at, now()) where id = ${task.id}`
      return {
        kind: 'task',
        id: task.id,
        slug: task.slug,
        published: true,
        tasks: [],
        detachedClones: 0,
      }
    }
    const role = await findRoleBySlug(tx, enterpriseId, target.role!)
    await tx`update roles set published_at = coalesce(published_at, now()) where id = ${role.id}`
    const tasks = await tx<{ id: string; slug: string }[]>`
      update tasks set published_at = coalesce(published_at, now())
       where enterprise_id = ${enterpriseId} and assignee_role = ${role.slug}
         and origin not in ('clone', 'builtin')
      returning id, slug`
    return { kind: 'role', id: role.id, slug: role.slug, published: true, tasks, detachedClones: 0 }
  })
}

/** Takes the entry out of the catalogue; installed clones keep their last version, detached. */
export async function unpublish(
  db: Db,
  enterpriseId: string,
  target: { task?: string; role?: string },
): Promise<Published> {
  return transaction(db, async (tx) => {
    let ids: { id: string; slug: string }[]
    let result: Pick<Published, 'kind' | 'id' | 'slug'>
    if (target.task) {
      const task = await findTaskBySlug(tx, enterpriseId, target.task)
      ids = [task]
      result = { kind: 'task', id: task.id, slug: task.slug }
    } else {
      const role = await findRoleBySlug(tx, enterpriseId, target.role!)
      await tx`update roles set published_at = null where id = ${role.id}`
      ids = await tx<{ id: string; slug: string }[]>`
        select id, slug from tasks
         where enterprise_id = ${enterpriseId} and assignee_role = ${role.slug}
           and published_at is not null`
      result = { kind: 'role', id: role.id, slug: role.slug }
    }
    const detached = await unpublishTasks(
      tx,
      ids.map((t) => t.id),
    )
    return {
      ...result,
      published: false,
      tasks: target.task ? [] : ids,
      detachedClones: detached,
    }
  })
}

/** Unpublishes the tasks and detaches their clones; answers how many clones were detached. */
export async function unpublishTasks(tx: Db, taskIds: string[]): Promise<number> {
  if (taskIds.length === 0) return 0
  await tx`update tasks set published_at = null where id = any(${tx.array(taskIds)}::uuid[])`
  const detached = await tx`
    update tasks set detached_at = now()
     where source_task_id = any(${tx.array(taskIds)}::uuid[]) and origin = 'clone' and detached_at is null
    returning id`
  return detached.length
}
