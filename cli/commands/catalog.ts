import { Option, type Command } from 'commander'
import {
  catalogProvenances,
  catalogRoleSorts,
  catalogTaskSorts,
  taskKinds,
  taskOrigins,
  taskStatuses,
} from '../../shared/values.js'
import type {
  CatalogRole,
  CatalogRoleCloned,
  CatalogTask,
  CatalogTaskRead,
  ClonedSchedule,
} from '../../shared/schemas/catalog.js'
import type { Member, Role } from '../../shared/schemas/organisation.js'
import type { TaskRead } from '../../shared/schemas/tasks.js'
import { unsetRequiredInputs } from '../../shared/task-inputs.js'
import type { ApiClient } from '../client.js'
import { actionOf, examples, type MakeDeps } from '../command.js'
import type { Deps } from '../deps.js'
import { ApiRequestError, CliError } from '../errors.js'
import { printFields, printJson, printTable, show } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { resolveRef, teamId } from '../resolve.js'
import { safeText } from '../safe-text.js'
import { about } from './about.js'
import { printVersion } from './tasks.js'

// `osctl catalog` (spec: Concepts "Catalogue", Endpoints Catalogue; DESIGN 12): the public tasks and
// roles every enterprise reads, and installing them on a team: a task cloned (linked to the original,
// its definition the original's) or copied (independent), a role cloned with all its public tasks.

/** Who published an entry: the service, or the enterprise by name. */
const provenance = (e: { provenance: string; publisher: string | null }) =>
  e.publisher ? `${e.provenance} (${e.publisher})` : e.provenance

const describeEntry = (e: {
  id: string
  slug: string
  provenance: string
  publisher: string | null
}) => `${e.slug} (${provenance(e)}: ${e.id})`

/**
 * An entry's id from an id or a slug. The list's `slug` filter matches any part, so the entries it
 * answers are searched for the exact slug; one answer is taken, more (an enterprise published a task
 * with a service entry's slug) ask for an id.
 */
function taskEntryId(client: ApiClient, ref: string): Promise<string> {
  return resolveRef(
    client,
    'catalogue task',
    ref,
    () => client.all<CatalogTask>('/catalog/tasks', { slug: ref }),
    (e, r) => e.slug === r,
    describeEntry,
  )
}

function roleEntryId(client: ApiClient, ref: string): Promise<string> {
  return resolveRef(
    client,
    'catalogue role',
    ref,
    () => client.all<CatalogRole>('/catalog/roles', { slug: ref }),
    (e, r) => e.slug === r,
    describeEntry,
  )
}

const taskColumns = [
  { header: 'SLUG', value: (e: CatalogTask) => e.slug, id: true },
  { header: 'NAME', value: (e: CatalogTask) => e.name },
  { header: 'KIND', value: (e: CatalogTask) => e.kind },
  { header: 'STATUS', value: (e: CatalogTask) => e.status },
  { header: 'ROLE', value: (e: CatalogTask) => e.assigneeRole },
  { header: 'PROVENANCE', value: provenance },
  { header: 'VERSION', value: (e: CatalogTask) => e.versionNumber },
  { header: 'ID', value: (e: CatalogTask) => e.id },
]

const roleColumns = [
  { header: 'SLUG', value: (r: CatalogRole) => r.slug, id: true },
  { header: 'NAME', value: (r: CatalogRole) => r.name },
  { header: 'TASKS', value: (r: CatalogRole) => r.tasks.length },
  { header: 'PROVENANCE', value: provenance },
  { header: 'ID', value: (r: CatalogRole) => r.id },
]

const roleTaskColumns = [
  { header: 'SLUG', value: (t: CatalogRole['tasks'][number]) => t.slug, id: true },
  { header: 'NAME', value: (t: CatalogRole['tasks'][number]) => t.name },
  { header: 'STATUS', value: (t: CatalogRole['tasks'][number]) => t.status },
  { header: 'ID', value: (t: CatalogRole['tasks'][number]) => t.id },
]

export async function listEntries(
  deps: Deps,
  opts: PageFlags & {
    status?: string
    kind?: string
    provenance?: string
    origin?: string
    slug?: string
  },
): Promise<void> {
  const filters = {
    status: opts.status,
    kind: opts.kind,
    provenance: opts.provenance,
    origin: opts.origin,
    slug: opts.slug,
  }
  await printPaged(deps, '/catalog/tasks', filters, opts, taskColumns, 'entries')
}

export async function getEntry(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  const entry = await client.get<CatalogTaskRead>(
    `/catalog/tasks/${await taskEntryId(client, ref)}`,
  )
  const schedule = entry.schedule
  show(deps.out, entry, () =>
    printVersion(
      deps,
      [
        ['name', entry.name],
        ['slug', entry.slug],
        ['id', entry.id],
        ['kind', entry.kind],
        ['status', entry.status],
        ['provenance', provenance(entry)],
        ['role', entry.assigneeRole],
        ['version', `${entry.versionNumber} (${entry.currentVersionId})`],
        ['lanes', entry.serializeOn ? `by ${entry.serializeOn.join(', ')}` : 'one'],
        ['schedule', schedule ? `${schedule.cron} (${schedule.timezone})` : null],
        ['published', entry.publishedAt],
        ['updated', entry.updatedAt],
      ],
      entry.currentVersion.definition,
      entry.skillMd,
    ),
  )
}

/**
 * A task runs only when its role exists on its team or enterprise-wide and someone holds it (spec:
 * task_not_runnable): said on stderr after an install, with the command that brings what is missing.
 */
async function roleNote(deps: Deps, task: TaskRead): Promise<void> {
  const role = task.assigneeRole
  if (!role) return
  const roles = await deps.client().get<Role[]>('/roles')
  const found = roles.find(
    (r) => r.slug === role && (r.teamId === null || r.teamId === task.teamId),
  )
  if (!found)
    deps.out.error(
      `no role ${role} on its team or enterprise-wide: it runs once there is one (osctl catalog roles clone ${role} --team TEAM brings the role)\n`,
    )
  else if (found.holderCount === 0)
    deps.out.error(`nobody holds the role ${role} yet: osctl roles grant ${role} MEMBER\n`)
}

/** A word for a shell: as it is when nothing in it is special to one, else in single quotes. */
function shellWord(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
}

/**
 * A schedule an install came with, in one line (issue 51): on, or off with the required inputs it
 * misses and the command that sets them and turns it on (the schedule's other inputs kept as they are).
 */
export function scheduleLine(
  schedule: Pick<ClonedSchedule, 'taskSlug' | 'cron' | 'timezone' | 'input' | 'enabled'> & {
    missingInputs: readonly string[]
  },
): string {
  const head = `schedule of ${schedule.taskSlug}: ${schedule.cron} (${schedule.timezone})`
  if (schedule.enabled) return `${head}, on`
  const { missingInputs: missing } = schedule
  if (missing.length === 0) return `${head}, off`
  // The missing first, in the order the task declares them; then the rest, kept as they are.
  const keys = [...new Set([...missing, ...Object.keys(schedule.input)])]
  const inputs = keys.map((key) => {
    const value = schedule.input[key]
    const text = missing.includes(key)
      ? 'VALUE'
      : typeof value === 'string'
        ? value
        : JSON.stringify(value)
    return `--input ${shellWord(`${key}=${text}`)}`
  })
  const command = [
    `osctl tasks schedule set ${shellWord(schedule.taskSlug)}`,
    `--cron ${shellWord(schedule.cron)} --tz ${shellWord(schedule.timezone)}`,
    ...inputs,
  ].join(' ')
  const what =
    missing.length === 1
      ? `the required input ${missing[0]} has no value`
      : `the required inputs ${missing.join(', ')} have no value`
  return `${head}, off: ${what}; turn it on with: ${command}`
}

/** `team` is the team as the user named it (a slug reads better than the id the answer holds). */
async function showInstalled(deps: Deps, task: TaskRead, team: string, how: string): Promise<void> {
  if (deps.out.json) return printJson(deps.out, task)
  deps.out.write(`installed task ${safeText(task.slug)} (${task.id}) on team ${team}, ${how}\n`)
  const schedule = task.schedule
  if (schedule) {
    const missingInputs = unsetRequiredInputs(task.currentVersion.definition.inputs, schedule.input)
    deps.out.write(`${scheduleLine({ ...schedule, taskSlug: task.slug, missingInputs })}\n`)
  }
  await roleNote(deps, task)
}

export async function cloneEntry(
  deps: Deps,
  ref: string,
  opts: { team: string; name?: string; slug?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskEntryId(client, ref)
  const body = { teamId: await teamId(client, opts.team), name: opts.name, slug: opts.slug }
  const task = await client.post<TaskRead>(`/catalog/tasks/${id}/clone`, body)
  await showInstalled(
    deps,
    task,
    opts.team,
    'linked to the original: each new version of it is what it runs',
  )
}

export async function copyEntry(
  deps: Deps,
  ref: string,
  opts: { team: string; name: string; slug?: string; role?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskEntryId(client, ref)
  const body = {
    teamId: await teamId(client, opts.team),
    name: opts.name,
    slug: opts.slug,
    assigneeRole: opts.role,
  }
  const task = await client.post<TaskRead>(`/catalog/tasks/${id}/copy`, body)
  await showInstalled(deps, task, opts.team, 'an independent copy, yours to edit')
}

export async function listRoleEntries(
  deps: Deps,
  opts: PageFlags & { provenance?: string; slug?: string },
): Promise<void> {
  const filters = { provenance: opts.provenance, slug: opts.slug }
  await printPaged(deps, '/catalog/roles', filters, opts, roleColumns, 'roles')
}

export async function getRoleEntry(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  const role = await client.get<CatalogRole>(`/catalog/roles/${await roleEntryId(client, ref)}`)
  show(deps.out, role, () => {
    printFields(deps.out, [
      ['name', role.name],
      ['slug', role.slug],
      ['id', role.id],
      ['provenance', provenance(role)],
      ['published', role.publishedAt],
      ['updated', role.updatedAt],
    ])
    deps.out.write(`\n${safeText(role.description.trimEnd(), { multiline: true })}\n\n`)
    printTable(deps.out, role.tasks, roleTaskColumns)
  })
}

/**
 * A role clone installs everything or nothing: a taken task slug answers 409 task_slug_taken listing
 * every such slug in `slugs`, named here whatever the message says.
 */
function slugsTaken(err: unknown): unknown {
  if (!(err instanceof ApiRequestError) || err.code !== 'task_slug_taken') return err
  const slugs = (err.body as { slugs?: unknown } | undefined)?.slugs
  if (!Array.isArray(slugs) || slugs.length === 0) return err
  return new ApiRequestError(
    err.status,
    err.code,
    `nothing was installed: the enterprise has tasks with the slugs ${slugs.join(', ')}; rename or delete them, or clone the role's other tasks one by one (osctl catalog tasks clone)`,
    err.body,
  )
}

export async function cloneRoleEntry(
  deps: Deps,
  ref: string,
  opts: { team: string; newMember?: string },
): Promise<void> {
  const client = deps.client()
  const id = await roleEntryId(client, ref)
  const body = { teamId: await teamId(client, opts.team) }
  const cloned = await client
    .post<CatalogRoleCloned>(`/catalog/roles/${id}/clone`, body)
    .catch((err: unknown) => {
      throw slugsTaken(err)
    })
  const holder =
    opts.newMember === undefined ? undefined : await newHolder(deps, id, cloned, opts.newMember)
  show(deps.out, holder ? { ...cloned, member: holder } : cloned, () => {
    const role = cloned.role
    const where = role.teamId === body.teamId ? `on team ${opts.team}` : 'enterprise-wide'
    deps.out.write(
      `${cloned.roleCreated ? 'installed' : 'reused'} role ${role.slug} (${role.id}) ${where}\n`,
    )
    for (const task of cloned.tasks) {
      deps.out.write(`installed task ${safeText(task.slug)} (${task.id})\n`)
      // An osd from before issue 51 answers no schedules: nothing is said of them then.
      const schedule = cloned.schedules?.find((s) => s.taskId === task.id)
      if (schedule) deps.out.write(`${scheduleLine(schedule)}\n`)
    }
    for (const skip of cloned.skipped)
      deps.out.write(`skipped task ${safeText(skip.slug)}: ${safeText(skip.reason)}\n`)
    if (holder)
      deps.out.write(
        `new member ${safeText(holder.name)} (${safeText(holder.email)}) holds the role ${role.slug}\n`,
      )
    else if (role.holderCount === 0 && cloned.tasks.length)
      deps.out.error(
        `nobody holds the role ${role.slug} yet: its tasks run once someone does (osctl roles grant ${role.slug} MEMBER)\n`,
      )
  })
}

/**
 * A new member who holds the role just cloned (issue 35: a first team in few commands), its persona
 * the catalogue's description of the role, so that it knows in a chat what it is there for. The role
 * is installed whatever happens here; a failure says how to finish by hand.
 */
async function newHolder(
  deps: Deps,
  entryId: string,
  cloned: CatalogRoleCloned,
  name: string,
): Promise<Member> {
  const client = deps.client()
  const role = cloned.role
  try {
    const entry = await client.get<CatalogRole>(`/catalog/roles/${entryId}`)
    const persona = `Your role: ${entry.name}. ${entry.description.trim()}`.replace(/\.$/, '')
    const member = await client.post<Member>('/members', { name, persona })
    await client.post(`/roles/${role.id}/members`, { memberId: member.id })
    return member
  } catch (err) {
    if (err instanceof CliError)
      err.hint =
        `the role ${role.slug} and its tasks are installed; give it a holder with ` +
        `\`osctl members create --name NAME\` and \`osctl roles grant ${role.slug} MEMBER\``
    throw err
  }
}

export function registerCatalog(program: Command, makeDeps: MakeDeps): void {
  const catalog = program.command('catalog').description(about.catalog)

  const tasks = catalog.command('tasks').description("the catalogue's public tasks")
  examples(
    withPageOptions(
      tasks
        .command('list')
        .description('public tasks, a page at a time (--all for every one)')
        .addOption(new Option('--status <status>').choices(taskStatuses))
        .addOption(new Option('--kind <kind>').choices(taskKinds))
        .addOption(
          new Option('--provenance <provenance>', "the service's or an enterprise's").choices(
            catalogProvenances,
          ),
        )
        .addOption(new Option('--origin <origin>', "the original's origin").choices(taskOrigins))
        .option('--slug <text>', 'slug contains'),
      catalogTaskSorts,
    ).action(actionOf(makeDeps, listEntries)),
    'osctl catalog tasks list --provenance service',
    'osctl catalog tasks list --slug report --all --json',
  )
  examples(
    tasks
      .command('get')
      .argument('<entry>', 'id or slug')
      .description('one public task: its definition, schedule and skill')
      .action(actionOf(makeDeps, getEntry)),
    'osctl catalog tasks get weekly-report',
  )
  examples(
    tasks
      .command('clone')
      .argument('<entry>', 'id or slug')
      .requiredOption('--team <team>', 'team id or slug to install it on')
      .option('--name <name>', "name of the clone (default: the original's)")
      .option('--slug <slug>', "slug of the clone (default: the original's)")
      .description(
        "install a task linked to the original: its definition stays the original's, each new version is what it runs",
      )
      .action(actionOf(makeDeps, cloneEntry)),
    'osctl catalog tasks clone weekly-report --team general',
    'osctl catalog tasks clone weekly-report --team sales --slug sales-weekly-report --json',
  )
  examples(
    tasks
      .command('copy')
      .argument('<entry>', 'id or slug')
      .requiredOption('--team <team>', 'team id or slug to install it on')
      .requiredOption('--name <name>', 'name of the copy')
      .option('--slug <slug>', 'made from the name when omitted')
      .option('--role <role>', "assignee role slug (default: the original's)")
      .description('install an independent copy of a public task, yours to edit')
      .action(actionOf(makeDeps, copyEntry)),
    'osctl catalog tasks copy weekly-report --team general --name "Our weekly report"',
  )

  const roles = catalog.command('roles').description("the catalogue's public roles and their tasks")
  examples(
    withPageOptions(
      roles
        .command('list')
        .description('public roles with the number of their public tasks')
        .addOption(
          new Option('--provenance <provenance>', "the service's or an enterprise's").choices(
            catalogProvenances,
          ),
        )
        .option('--slug <text>', 'slug contains'),
      catalogRoleSorts,
    ).action(actionOf(makeDeps, listRoleEntries)),
    'osctl catalog roles list',
    'osctl catalog roles list --all --json',
  )
  examples(
    roles
      .command('get')
      .argument('<entry>', 'id or slug')
      .description('one public role: its description and public tasks')
      .action(actionOf(makeDeps, getRoleEntry)),
    'osctl catalog roles get release-manager',
  )
  examples(
    roles
      .command('clone')
      .argument('<entry>', 'id or slug')
      .requiredOption('--team <team>', 'team id or slug to install it on')
      .option(
        '--new-member <name>',
        "also make a member of this name who holds the role, the role's description its persona",
      )
      .description(
        'install the role (one with its slug is reused) and all its public tasks, linked; deprecated tasks are skipped; a task slug taken installs nothing',
      )
      .action(actionOf(makeDeps, cloneRoleEntry)),
    'osctl catalog roles clone reporting-analyst --team general',
    'osctl catalog roles clone reporting-analyst --team general --new-member Rita',
  )
}
