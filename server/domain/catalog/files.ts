import { lockCatalogLoad } from '../../db/locks.js'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { projectRoot } from '../../../shared/paths.js'
import { cleanSlug } from '../../../shared/slug.js'
import { CatalogSchedule } from '../../../shared/schemas/catalog.js'
import {
  TaskDefinition,
  fixedTools,
  type VersionDefinition,
} from '../../../shared/schemas/tasks.js'
import { transaction, type Db } from '../../db/sql.js'
import { unpublishTasks } from './catalog.js'
import {
  type CheckContext,
  checkDefinition,
  createTask,
  insertVersion,
  loadVersion,
  syncClones,
  type TaskRow,
} from '../tasks/index.js'

// The service's own catalogue entries (DESIGN 12), kept as files and loaded at start (osd serve, and the
// tests' template database):
//
//   catalog/<role-slug>/role.json        {"name", "description"}
//   catalog/<role-slug>/<task-slug>.json the task's definition, every field but the skill, plus an
//                                        optional "schedule" {cron, timezone, input} its clones start with
//   catalog/<role-slug>/<task-slug>.md   the task's skill
//
// Each entry is a row of the service's catalogue enterprise. A file that changed (by content hash) makes a
// new version of the original on the next start, which every attached clone runs from then on; a file
// removed takes its entry out of the catalogue (its clones keep their last version, detached).

export const catalogDir = join(projectRoot, 'catalog')

/** The task file: a task definition without its skill (which is the .md beside it). */
const TaskFile = TaskDefinition.omit({
  slug: true,
  assigneeRole: true,
  teamId: true,
  skillMd: true,
})
  .extend({ schedule: CatalogSchedule.partial({ timezone: true, input: true }).optional() })
  .strict()

const RoleFile = z.object({ name: z.string().min(1).max(200), description: z.string() }).strict()

export interface ServiceTask {
  slug: string
  role: string
  name: string
  kind: TaskRow['kind']
  status: TaskRow['status']
  serializeOn: string[] | null
  definition: VersionDefinition
  schedule: CatalogSchedule | null
  hash: string
  file: string
}

export interface ServiceRole {
  slug: string
  name: string
  description: string
  hash: string
  tasks: ServiceTask[]
}

function hash(...parts: string[]): string {
  const h = createHash('sha256')
  for (const part of parts) h.update(part).update('\0')
  return h.digest('hex')
}

function parse<T>(schema: z.ZodType<T>, text: string, file: string): T {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new Error(`${file}: not JSON: ${(err as Error).message}`)
  }
  const parsed = schema.safeParse(value)
  if (!parsed.success) {
    throw new Error(
      `${file}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`).join('; ')}`,
    )
  }
  return parsed.data
}

/** Reads every role folder and its tasks; a file that does not parse names itself in the error. */
export function readCatalogFiles(dir = catalogDir): ServiceRole[] {
  if (!existsSync(dir)) return []
  const roles: ServiceRole[] = []
  for (const folder of readdirSync(dir).sort()) {
    const path = join(dir, folder)
    if (!statSync(path).isDirectory()) continue
    if (cleanSlug(folder) !== folder) throw new Error(`${path}: a role folder is named by its slug`)
    const roleText = readFileSync(join(path, 'role.json'), 'utf8')
    const role = parse(RoleFile, roleText, join(path, 'role.json'))
    const tasks: ServiceTask[] = []
    for (const name of readdirSync(path).sort()) {
      if (!name.endsWith('.json') || name === 'role.json') continue
      const slug = name.slice(0, -'.json'.length)
      const file = join(path, name)
      if (cleanSlug(slug) !== slug) throw new Error(`${file}: a task file is named by its slug`)
      const text = readFileSync(file, 'utf8')
      const skillFile = join(path, `${slug}.md`)
      if (!existsSync(skillFile)) throw new Error(`${file}: its skill ${skillFile} is missing`)
      const skillMd = readFileSync(skillFile, 'utf8')
      const task = parse(TaskFile, text, file)
      tasks.push({
        slug,
        role: folder,
        name: task.name,
        kind: task.kind ?? 'llm',
        status: task.status ?? 'active',
        serializeOn: task.serializeOn ?? null,
        definition: {
          overlapPolicy: task.overlapPolicy ?? 'skip',
          goal: task.goal ?? '',
          metric: task.metric ?? null,
          guardrails: task.guardrails ?? [],
          skillMd,
          tools: task.tools ?? [],
          gates: task.gates ?? [],
          inputs: task.inputs ?? null,
          spend: task.spend ?? null,
          workspace: task.workspace ?? null,
          successors: task.successors ?? null,
        },
        schedule: task.schedule
          ? {
              cron: task.schedule.cron,
              timezone: task.schedule.timezone ?? 'UTC',
              input: task.schedule.input ?? {},
            }
          : null,
        hash: hash(folder, text, skillMd),
        file,
      })
    }
    roles.push({
      slug: folder,
      name: role.name,
      description: role.description,
      hash: hash(roleText),
      tasks,
    })
  }
  return roles
}

/** The checks a service entry must pass: against the other entries, gating the merge tool. */
export function catalogCheckContext(roles: ServiceRole[]): CheckContext {
  const tasks = roles.flatMap((r) => r.tasks)
  return {
    tasks: new Map(tasks.map((t) => [t.slug, { successors: t.definition.successors }])),
    mustGate: [fixedTools.merge],
  }
}

export function checkServiceTask(task: ServiceTask, roles: ServiceRole[]) {
  const context = catalogCheckContext(roles)
  context.tasks.delete(task.slug)
  return checkDefinition({ ...task.definition, slug: task.slug, kind: task.kind }, context)
}

/** The service's catalogue enterprise, made on first use (it has no team, member or token). */
async function catalogEnterprise(tx: Db): Promise<string> {
  await tx`
    insert into enterprises (slug, name, catalog, webhook_secret_hash, webhook_secret_last_chars)
    values ('_catalog', 'Service catalogue', true, ${createHash('sha256').update(randomBytes(32)).digest()}, '')
    on conflict do nothing`
  const [row] = await tx<{ id: string }[]>`select id from enterprises where catalog`
  return row!.id
}

export interface CatalogLoad {
  created: string[]
  updated: string[]
  removed: string[]
}

/**
 * Loads the files into the service's catalogue: new entries are made, changed ones get a new version
 * (which their clones run from then on), removed ones leave the catalogue. One transaction under an
 * advisory lock, so osd processes starting at once load once; a definition that fails a check stops the
 * load (and the start) with the file named.
 */
export async function loadServiceCatalog(db: Db, dir = catalogDir): Promise<CatalogLoad> {
  const roles = readCatalogFiles(dir)
  for (const role of roles) {
    for (const task of role.tasks) {
      const errors = checkServiceTask(task, roles).filter((i) => i.severity === 'error')
      if (errors.length) throw new Error(`${task.file}: ${errors.map((e) => e.message).join(' ')}`)
    }
  }
  const result: CatalogLoad = { created: [], updated: [], removed: [] }
  await transaction(db, async (tx) => {
    await lockCatalogLoad(tx)
    const enterpriseId = await catalogEnterprise(tx)
    for (const role of roles) {
      await tx`
        insert into roles (enterprise_id, team_id, name, slug, description, source_hash, published_at)
        values (${enterpriseId}, null, ${role.name}, ${role.slug}, ${role.description}, ${role.hash}, now())
        on conflict (enterprise_id, coalesce(team_id, '00000000-0000-0000-0000-000000000000'::uuid), slug)
        do update set name = excluded.name, description = excluded.description,
                      source_hash = excluded.source_hash, published_at = coalesce(roles.published_at, now()),
                      updated_at = now()
          where roles.source_hash is distinct from excluded.source_hash or roles.published_at is null`
      for (const task of role.tasks) await loadTask(tx, enterpriseId, task, roles, result)
    }
    const slugs = roles.flatMap((r) => r.tasks.map((t) => t.slug))
    const gone = await tx<{ id: string; slug: string }[]>`
      select id, slug from tasks
       where enterprise_id = ${enterpriseId} and published_at is not null
         and slug <> all(${tx.array(slugs)}::text[])`
    await unpublishTasks(
      tx,
      gone.map((t) => t.id),
    )
    result.removed.push(...gone.map((t) => t.slug))
    await tx`
      update roles set published_at = null
       where enterprise_id = ${enterpriseId} and published_at is not null
         and slug <> all(${tx.array(roles.map((r) => r.slug))}::text[])`
  })
  return result
}

async function loadTask(
  tx: Db,
  enterpriseId: string,
  task: ServiceTask,
  roles: ServiceRole[],
  result: CatalogLoad,
): Promise<void> {
  const [existing] = await tx<
    { id: string; sourceHash: string | null; publishedAt: Date | null; currentVersionId: string }[]
  >`
    select id, source_hash, published_at, current_version_id from tasks
     where enterprise_id = ${enterpriseId} and slug = ${task.slug}
     for update`
  const schedule = task.schedule ? tx.json(task.schedule as never) : null
  if (!existing) {
    const id = await createTask(
      tx,
      enterpriseId,
      {
        ...task.definition,
        name: task.name,
        slug: task.slug,
        assigneeRole: task.role,
        kind: task.kind,
        status: task.status,
        serializeOn: task.serializeOn,
      },
      { origin: 'builtin' },
    )
    await tx`
      update tasks set published_at = now(), source_hash = ${task.hash}, catalog_schedule = ${schedule}
       where id = ${id}`
    result.created.push(task.slug)
    return
  }
  if (existing.sourceHash === task.hash) {
    if (!existing.publishedAt)
      await tx`update tasks set published_at = now() where id = ${existing.id}`
    return
  }
  const issues = checkServiceTask(task, roles)
  const [latest] = await tx<{ n: number }[]>`
    select max(number)::int as n from task_versions where task_id = ${existing.id}`
  const current = (await loadVersion(tx, enterpriseId, existing.currentVersionId))!
  const changed = JSON.stringify(current.definition) !== JSON.stringify(task.definition)
  const version = changed
    ? await insertVersion(tx, enterpriseId, existing.id, latest!.n + 1, task.definition)
    : current
  await tx`
    update tasks
       set name = ${task.name}, assignee_role = ${task.role}, kind = ${task.kind}, status = ${task.status},
           serialize_on = ${task.serializeOn ? tx.json(task.serializeOn) : null},
           definition_issues = ${tx.json(issues)}, source_hash = ${task.hash},
           catalog_schedule = ${schedule}, published_at = coalesce(published_at, now()), updated_at = now()
     where id = ${existing.id}`
  if (changed) {
    await syncClones(
      tx,
      { id: existing.id, kind: task.kind, serializeOn: task.serializeOn },
      version,
    )
  }
  result.updated.push(task.slug)
}
