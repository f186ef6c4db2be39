import { Option, type Command } from 'commander'
import type { z } from 'zod'
import { taskKinds, taskOrigins, taskSorts, taskStatuses } from '../../shared/values.js'
import type {
  Schedule,
  TaskRead,
  TaskSummary,
  TaskVersion,
  TaskVersionRead,
  VersionDefinition,
  VersionPublished,
} from '../../shared/schemas/tasks.js'
import {
  actionOf,
  bodyWith,
  confirmDestructive,
  examples,
  withBodyOptions,
  type MakeDeps,
} from '../command.js'
import type { Deps } from '../deps.js'
import { UsageError } from '../errors.js'
import { collect, readInput } from '../inputs.js'
import type { Pause } from '../../shared/schemas/pauses.js'
import { usdFromDollars } from '../money.js'
import { colour, printFields, printTable, show } from '../output.js'
import { printPaged, withPageOptions, type PageFlags } from '../paging.js'
import { isUuid, taskId, teamId } from '../resolve.js'
import { about } from './about.js'
import { safeText } from '../safe-text.js'

type Published = z.infer<typeof VersionPublished>

const columns = [
  { header: 'SLUG', value: (t: TaskSummary) => t.slug, id: true },
  { header: 'NAME', value: (t: TaskSummary) => t.name },
  { header: 'KIND', value: (t: TaskSummary) => t.kind },
  { header: 'STATUS', value: (t: TaskSummary) => t.status },
  { header: 'ROLE', value: (t: TaskSummary) => t.assigneeRole },
  { header: 'VERSION', value: (t: TaskSummary) => t.versionNumber },
  { header: 'ISSUES', value: (t: TaskSummary) => t.definitionIssueCount || '' },
  { header: 'UPDATED', value: (t: TaskSummary) => t.updatedAt },
  { header: 'ID', value: (t: TaskSummary) => t.id },
]

/** An empty list reads as "-" like any other value left unset. */
const orNone = (values: unknown[]) => (values.length ? values : null)

function scheduleText(schedule: Schedule | null): string {
  if (!schedule) return '-'
  const state = schedule.enabled ? `next ${schedule.nextFireAt ?? '-'}` : 'disabled'
  return `${schedule.cron} (${schedule.timezone}), ${state}`
}

function showTask(deps: Deps, task: TaskRead): void {
  show(deps.out, task, () => {
    printFields(deps.out, [
      ['name', task.name],
      ['slug', task.slug],
      ['id', task.id],
      ['kind', task.kind],
      ['status', task.status],
      ['team', task.teamId],
      ['role', task.assigneeRole],
      ['origin', task.origin],
      ['version', `${task.currentVersion.number} (${task.currentVersionId})`],
      ['versions', task.versions.length],
      ['lanes', task.serializeOn ? `by ${task.serializeOn.join(', ')}` : 'one'],
      ['schedule', scheduleText(task.schedule)],
      ['webhook', `POST ${task.webhook.url} (header ${task.webhook.secretHeader})`],
      ['editable', task.canEditDefinition ? 'yes' : 'no'],
      ['issues', orNone(task.definitionIssues.map((i) => `${i.severity} ${i.code}: ${i.message}`))],
      ['paused', pauseText(task.paused)],
    ])
  })
}

/** A pause in force as a line: why, who and since when; "no" when none. */
export function pauseText(pause: Pause | null | undefined): string {
  return pause ? `yes, since ${pause.at} by ${pause.by}: ${safeText(pause.reason)}` : 'no'
}

/** The fields of a version's definition in the order the spec lists them, the skill last. */
const definitionOrder = [
  'goal',
  'metric',
  'guardrails',
  'overlapPolicy',
  'tools',
  'gates',
  'inputs',
  'spend',
  'workspace',
  'successors',
]

/**
 * A task's spend limits in words, its money in osctl's one format (issue 51): "$2.00 a run at most,
 * maxModelTier mid". A field this osctl does not know is shown as sent.
 */
function spendText(spend: unknown): unknown {
  if (!spend || typeof spend !== 'object' || Array.isArray(spend)) return spend
  return Object.entries(spend).map(([key, value]) =>
    key === 'moneyUsdPerRun' && typeof value === 'number'
      ? `${usdFromDollars(value)} a run at most`
      : `${key} ${typeof value === 'string' ? value : JSON.stringify(value)}`,
  )
}

/** A version's definition and skill, for `version`, `workflow` and `catalog tasks get`. */
export function printVersion(
  deps: Deps,
  fields: [string, unknown][],
  definition: VersionDefinition,
  skillMd: string,
): void {
  const rank = (key: string) =>
    definitionOrder.includes(key) ? definitionOrder.indexOf(key) : definitionOrder.length
  const entries = Object.entries(definition)
    .filter(([key]) => key !== 'skillMd')
    .sort(([a], [b]) => rank(a) - rank(b))
    .map(([key, value]): [string, unknown] => [
      key,
      Array.isArray(value) ? orNone(value) : key === 'spend' ? spendText(value) : value,
    ])
  printFields(deps.out, [...fields, ...entries])
  deps.out.write(`\n${safeText(skillMd.trimEnd(), { multiline: true })}\n`)
}

export async function listTasks(
  deps: Deps,
  opts: PageFlags & {
    team?: string
    status?: string
    kind?: string
    role?: string
    origin?: string
    name?: string
    slug?: string
  },
): Promise<void> {
  const filters = {
    teamId: opts.team ? await teamId(deps.client(), opts.team) : undefined,
    status: opts.status,
    kind: opts.kind,
    assigneeRole: opts.role,
    origin: opts.origin,
    name: opts.name,
    slug: opts.slug,
  }
  await printPaged(deps, '/tasks', filters, opts, columns, 'tasks')
}

export async function getTask(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  showTask(deps, await client.get<TaskRead>(`/tasks/${await taskId(client, ref)}`))
}

interface CreateFlags {
  name?: string
  slug?: string
  team?: string
  role?: string
  kind?: string
  goal?: string
  data?: string
  file?: string
}

export async function createTask(deps: Deps, opts: CreateFlags): Promise<void> {
  const client = deps.client()
  const body = await bodyWith(deps, opts, {
    name: opts.name,
    slug: opts.slug,
    teamId: opts.team ? await teamId(client, opts.team) : undefined,
    assigneeRole: opts.role,
    kind: opts.kind,
    goal: opts.goal,
  })
  showTask(deps, await client.post<TaskRead>('/tasks', body))
}

/**
 * Publishes a version from the changed fields (spec: Publish a version); --base guards against
 * publishing over a version saved since it was read (409 task_version_conflict).
 */
export async function publishTask(
  deps: Deps,
  ref: string,
  opts: { base?: string; data?: string; file?: string },
): Promise<void> {
  if (opts.data === undefined && opts.file === undefined)
    throw new UsageError('give the changed fields with -f FILE or -d JSON')
  if (opts.base !== undefined && !isUuid(opts.base))
    throw new UsageError(`--base takes a version id; got "${opts.base}"`)
  const client = deps.client()
  const id = await taskId(client, ref)
  const body = await bodyWith(deps, opts, { baseVersionId: opts.base })
  const published = await client.post<Published>(`/tasks/${id}/versions`, body)
  show(deps.out, published, () => {
    printFields(deps.out, [
      ['version', published.number],
      ['id', published.id],
      ['created', published.createdAt],
    ])
    for (const issue of published.definitionIssues) {
      deps.out.error(
        `${colour(deps.out, 'yellow', issue.severity)} ${safeText(issue.code)}: ${safeText(issue.message)}\n`,
      )
    }
  })
}

export async function deleteTask(deps: Deps, ref: string, opts: { yes?: boolean }): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  await confirmDestructive(
    deps,
    opts.yes,
    `Delete task ${ref} and all its versions (runs are kept)`,
  )
  await client.delete(`/tasks/${id}`)
  show(deps.out, { deleted: id }, () => deps.out.write(`deleted task ${ref}\n`))
}

export async function copyTask(
  deps: Deps,
  ref: string,
  opts: { team: string; name: string; slug?: string; role?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  const body = {
    teamId: await teamId(client, opts.team),
    name: opts.name,
    slug: opts.slug,
    assigneeRole: opts.role,
  }
  showTask(deps, await client.post<TaskRead>(`/tasks/${id}/copy`, body))
}

export async function listVersions(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  const versions = await client.get<TaskVersionRead[]>(
    `/tasks/${await taskId(client, ref)}/versions`,
  )
  show(deps.out, versions, () =>
    printTable(deps.out, versions, [
      { header: 'VERSION', value: (v) => v.number },
      { header: 'CURRENT', value: (v) => (v.current ? 'yes' : '') },
      { header: 'RUNS', value: (v) => v.runCount },
      { header: 'CREATED', value: (v) => v.createdAt },
      { header: 'ID', value: (v) => v.id },
    ]),
  )
}

export async function getVersion(deps: Deps, ref: string, versionId: string): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  const version = await client.get<TaskVersionRead>(`/tasks/${id}/versions/${versionId}`)
  show(deps.out, version, () =>
    printVersion(
      deps,
      [
        ['version', version.number],
        ['id', version.id],
        ['current', version.current ? 'yes' : 'no'],
        ['runs', version.runCount],
        ['created', version.createdAt],
      ],
      version.definition,
      version.skillMd,
    ),
  )
}

export async function getWorkflow(deps: Deps, ref: string): Promise<void> {
  const client = deps.client()
  const workflow = await client.get<{ currentVersion: TaskVersion; skillMd: string }>(
    `/tasks/${await taskId(client, ref)}/workflow`,
  )
  const version = workflow.currentVersion
  show(deps.out, workflow, () =>
    printVersion(
      deps,
      [
        ['version', version.number],
        ['id', version.id],
        ['created', version.createdAt],
      ],
      version.definition,
      workflow.skillMd,
    ),
  )
}

export async function setSchedule(
  deps: Deps,
  ref: string,
  opts: {
    cron: string
    tz?: string
    input?: string[]
    data?: string
    file?: string
    disabled?: boolean
  },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  const body = {
    cron: opts.cron,
    timezone: opts.tz,
    input: await readInput(deps, opts),
    enabled: !opts.disabled,
  }
  const schedule = await client.put<Schedule>(`/tasks/${id}/schedule`, body)
  show(deps.out, schedule, () =>
    printFields(deps.out, [
      ['cron', schedule.cron],
      ['timezone', schedule.timezone],
      ['input', schedule.input],
      ['enabled', schedule.enabled ? 'yes' : 'no'],
      ['next', schedule.nextFireAt],
    ]),
  )
}

export async function clearSchedule(
  deps: Deps,
  ref: string,
  opts: { yes?: boolean },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  await confirmDestructive(deps, opts.yes, `Remove the schedule of task ${ref}`)
  await client.delete(`/tasks/${id}/schedule`)
  show(deps.out, { task: id, schedule: null }, () => deps.out.write(`schedule of ${ref} removed\n`))
}

/** Pauses a task (issue 50): its starts wait and its runs stop after their current step. */
export async function pauseTask(deps: Deps, ref: string, opts: { reason: string }): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  const task = await client.post<TaskRead>(`/tasks/${id}/pause`, { reason: opts.reason })
  show(deps.out, task, () => deps.out.write(`task ${ref} paused: ${pauseText(task.paused)}\n`))
}

/** Ends a task's pause: its waiting runs go on in their order. */
export async function resumeTask(
  deps: Deps,
  ref: string,
  opts: { reason?: string },
): Promise<void> {
  const client = deps.client()
  const id = await taskId(client, ref)
  const task = await client.post<TaskRead>(`/tasks/${id}/resume`, { reason: opts.reason })
  show(deps.out, task, () => deps.out.write(`task ${ref} resumed\n`))
}

/** `osctl tasks`, returned for the task-level verbs of memory and recommendations (program.ts). */
export function registerTasks(program: Command, makeDeps: MakeDeps): Command {
  const tasks = program.command('tasks').description(about.tasks)
  examples(
    withPageOptions(
      tasks
        .command('list')
        .description('tasks, a page at a time (--all for every one)')
        .option('--team <team>', 'team id or slug')
        .addOption(new Option('--status <status>').choices(taskStatuses))
        .addOption(new Option('--kind <kind>').choices(taskKinds))
        .option('--role <role>', 'assignee role slug')
        .addOption(new Option('--origin <origin>').choices(taskOrigins))
        .option('--name <text>', 'name contains, any case')
        .option('--slug <text>', 'slug contains'),
      taskSorts,
    ).action(actionOf(makeDeps, listTasks)),
    'osctl tasks list --team platform --status active',
    'osctl tasks list --all --sort name --order asc --json',
  )
  examples(
    tasks
      .command('get')
      .argument('<task>', 'id or slug')
      .description('one task: its current version, schedule, webhook and issues')
      .action(actionOf(makeDeps, getTask)),
    'osctl tasks get nightly-report',
  )
  examples(
    withBodyOptions(
      tasks
        .command('create')
        .description('create a task from a definition (-f/-d) and flags; flags win')
        .option('--name <name>')
        .option('--slug <slug>', 'made from the name when omitted')
        .option('--team <team>', 'team id or slug')
        .option('--role <role>', 'assignee role slug')
        .addOption(new Option('--kind <kind>').choices(taskKinds))
        .option('--goal <text>', 'one sentence'),
    ).action(actionOf(makeDeps, createTask)),
    'osctl tasks create -f nightly-report.json',
    `osctl tasks create --name "Echo" --kind deterministic --role ceo`,
  )
  examples(
    withBodyOptions(
      tasks
        .command('publish')
        .argument('<task>', 'id or slug')
        .description('publish a new version from the changed fields only')
        .option('--base <versionId>', 'the currentVersionId read earlier; refused if stale'),
    ).action(actionOf(makeDeps, publishTask)),
    `osctl tasks publish nightly-report -d '{"goal":"Summarise the day"}' --base 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10`,
    'osctl tasks publish nightly-report -f changes.json',
  )
  examples(
    tasks
      .command('delete')
      .argument('<task>', 'id or slug')
      .option('-y, --yes', 'do not ask')
      .description('delete a task and all its versions; its runs are kept')
      .action(actionOf(makeDeps, deleteTask)),
    'osctl tasks delete nightly-report --yes',
  )
  examples(
    tasks
      .command('copy')
      .argument('<task>', 'id or slug')
      .requiredOption('--team <team>', 'team id or slug of the copy')
      .requiredOption('--name <name>', 'name of the copy')
      .option('--slug <slug>', 'made from the name when omitted')
      .option('--role <role>', "assignee role slug (default: the original's)")
      .description('an independent copy of a task on a team')
      .action(actionOf(makeDeps, copyTask)),
    'osctl tasks copy nightly-report --team sales --name "Sales nightly report"',
  )
  examples(
    tasks
      .command('versions')
      .argument('<task>', 'id or slug')
      .description('every version, newest first, with its run count')
      .action(actionOf(makeDeps, listVersions)),
    'osctl tasks versions nightly-report',
  )
  examples(
    tasks
      .command('version')
      .argument('<task>', 'id or slug')
      .argument('<versionId>', 'version id')
      .description('one version as saved, with its skill')
      .action(actionOf(makeDeps, getVersion)),
    'osctl tasks version nightly-report 0b8f6f9e-3c1a-4e55-9d7a-2f0c9d1e6a10',
  )
  examples(
    tasks
      .command('workflow')
      .argument('<task>', 'id or slug')
      .description('the current version and its skill')
      .action(actionOf(makeDeps, getWorkflow)),
    'osctl tasks workflow nightly-report',
  )

  examples(
    tasks
      .command('pause')
      .argument('<task>', 'id or slug')
      .requiredOption('--reason <text>', 'why: kept with the pause and told in the event feed')
      .description(
        'pause a task: starts wait pending and runs under way stop after their current step, until resume',
      )
      .action(actionOf(makeDeps, pauseTask)),
    'osctl tasks pause nightly-report --reason "sends wrong mail since v7"',
  )
  examples(
    tasks
      .command('resume')
      .argument('<task>', 'id or slug')
      .option('--reason <text>', 'why, if you want it on record')
      .description("end a task's pause: its waiting runs go on in their order")
      .action(actionOf(makeDeps, resumeTask)),
    'osctl tasks resume nightly-report',
  )

  const schedule = tasks.command('schedule').description("a task's cron schedule")
  examples(
    schedule
      .command('set')
      .argument('<task>', 'id or slug')
      .requiredOption('--cron <expr>', 'five fields: minute hour day-of-month month day-of-week')
      .option('--tz <zone>', 'IANA time zone (default UTC)')
      .option('--input <key=value>', 'input field, the value read as JSON when it parses', collect)
      .option('-d, --data <json>', 'input as a JSON object ("-" reads stdin)')
      .option('-f, --file <file>', 'input from a JSON file ("-" reads stdin)')
      .option('--disabled', 'keep the schedule but fire nothing')
      .description('set the schedule, replacing any other')
      .action(actionOf(makeDeps, setSchedule)),
    'osctl tasks schedule set nightly-report --cron "0 9 * * 1-5" --tz Europe/Paris --input region=eu',
  )
  examples(
    schedule
      .command('clear')
      .argument('<task>', 'id or slug')
      .option('-y, --yes', 'do not ask')
      .description('remove the schedule')
      .action(actionOf(makeDeps, clearSchedule)),
    'osctl tasks schedule clear nightly-report --yes',
  )
  return tasks
}
