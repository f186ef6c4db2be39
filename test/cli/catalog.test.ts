import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  cloneEntry,
  cloneRoleEntry,
  copyEntry,
  getEntry,
  listEntries,
  listRoleEntries,
} from '../../cli/commands/catalog.js'
import { ApiRequestError, CliError, exitCodes } from '../../cli/errors.js'
import {
  CatalogRole,
  CatalogRoleCloned,
  CatalogRolePage,
  CatalogTask,
  CatalogTaskPage,
  CatalogTaskRead,
} from '../../shared/schemas/catalog.js'
import { TaskRead } from '../../shared/schemas/tasks.js'
import { FakeApi, fakeDeps, type Answer, type Sent } from '../helpers/cli.js'
import { osctl, startCliDaemon, type CliDaemon } from '../helpers/osctl.js'

// osctl catalog tasks|roles. In process first: the actions called with deps of the test's own (a
// client whose transport answers what the test says and records what was sent, and captured output),
// so what each verb sends and prints is seen exactly. Then against a real daemon, whose starter
// catalogue is loaded at start: the whole of osctl, still in process, its --json parsed by the shared
// schemas.

const now = () => new Date().toISOString()

function entry(overrides: Partial<CatalogTask> = {}): CatalogTask {
  return CatalogTask.parse({
    id: randomUUID(),
    slug: 'weekly-report',
    name: 'Weekly report',
    kind: 'llm',
    status: 'active',
    origin: 'builtin',
    provenance: 'service',
    publisher: null,
    assigneeRole: 'reporting-analyst',
    goal: 'Report the week',
    tools: [],
    currentVersionId: randomUUID(),
    versionNumber: 1,
    publishedAt: now(),
    createdAt: now(),
    updatedAt: now(),
    ...overrides,
  })
}

function roleEntry(overrides: Partial<CatalogRole> = {}): CatalogRole {
  return CatalogRole.parse({
    id: randomUUID(),
    slug: 'reporting-analyst',
    name: 'Reporting analyst',
    description: 'Answers data questions and sends the weekly report.',
    provenance: 'service',
    publisher: null,
    tasks: [
      {
        id: randomUUID(),
        slug: 'weekly-report',
        name: 'Weekly report',
        status: 'active',
        goal: 'g',
      },
      {
        id: randomUUID(),
        slug: 'answer-data-question',
        name: 'Answer',
        status: 'active',
        goal: 'g',
      },
    ],
    publishedAt: now(),
    createdAt: now(),
    updatedAt: now(),
    ...overrides,
  })
}

/** The fields of an installed task the verbs print (the rest of a TaskRead is not read). */
function installed(
  slug: string,
  teamId: string,
  assigneeRole: string | null = 'reporting-analyst',
) {
  return { id: randomUUID(), slug, teamId, assigneeRole, origin: 'clone' }
}

const page = <T>(data: T[], p = 1, limit = 25, total = data.length) => ({
  data,
  page: p,
  limit,
  total,
  pages: Math.max(1, Math.ceil(total / limit)),
})

const teamUuid = randomUUID()

/** Answers the team look-up every install makes: team `general`; and the enterprise's roles. */
function lookups(req: Sent, roles: unknown[] = []): Answer | undefined {
  if (req.method === 'GET' && req.path === '/teams')
    return { body: [{ id: teamUuid, slug: 'general' }] }
  if (req.method === 'GET' && req.path === '/roles') return { body: roles }
  return undefined
}

async function failure(promise: Promise<unknown>): Promise<CliError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(CliError)
  return err as CliError
}

describe('osctl catalog, in process', () => {
  it('tasks list sends the filters, and --all follows the pages to the last one', async () => {
    const entries = Array.from({ length: 5 }, (_, i) => entry({ slug: `report-${i}` }))
    const api = new FakeApi((req) => {
      const p = Number(req.query.page ?? 1)
      const limit = Number(req.query.limit ?? 25)
      return { body: page(entries.slice((p - 1) * limit, p * limit), p, limit, entries.length) }
    })
    const json = fakeDeps(api, { json: true })
    await listEntries(json.deps, { all: true, limit: '2', provenance: 'service', slug: 'report' })
    expect(api.sent.map((r) => [r.path, r.query])).toEqual(
      [1, 2, 3].map((p) => [
        '/catalog/tasks',
        { provenance: 'service', slug: 'report', limit: '2', page: String(p) },
      ]),
    )
    expect(CatalogTask.array().parse(JSON.parse(json.stdout()))).toEqual(entries)

    const one = fakeDeps(api)
    await listEntries(one.deps, { limit: '2', sort: 'name', order: 'asc', kind: 'llm' })
    expect(api.sent.at(-1)!.query).toEqual({ kind: 'llm', sort: 'name', order: 'asc', limit: '2' })
    const [header, first] = one.stdout().split('\n')
    expect(header).toMatch(/^SLUG\s+NAME\s+KIND\s+STATUS\s+ROLE\s+PROVENANCE\s+VERSION\s+ID$/)
    expect(first).toMatch(
      new RegExp(
        `^report-0\\s+Weekly report\\s+llm\\s+active\\s+reporting-analyst\\s+service\\s+1\\s+${entries[0]!.id}$`,
      ),
    )
    expect(one.stderr()).toBe('page 1 of 3, 5 entries: --page N for another, --all for every one\n')

    // A page past the last says so, instead of an empty table (issue 51 item 10); --json is the page.
    const past = new FakeApi(() => ({ body: page([], 9, 2, 5) }))
    const beyond = fakeDeps(past)
    await listEntries(beyond.deps, { page: '9', limit: '2' })
    expect(beyond.stdout()).toBe('')
    expect(beyond.stderr()).toBe(
      'page 9 is past the last: 5 entries make 3 pages (--page 3 for the last)\n',
    )
    const pastJson = fakeDeps(past, { json: true })
    await listEntries(pastJson.deps, { page: '9', limit: '2' })
    expect(JSON.parse(pastJson.stdout())).toMatchObject({ data: [], page: 9, pages: 3 })
  })

  it('roles list shows the number of public tasks, and who published an enterprise entry', async () => {
    const roles = [
      roleEntry(),
      roleEntry({ slug: 'ops', provenance: 'enterprise', publisher: 'Acme', tasks: [] }),
    ]
    const api = new FakeApi(() => ({ body: page(roles) }))
    const { deps, stdout } = fakeDeps(api)
    await listRoleEntries(deps, { provenance: 'service' })
    expect(api.sent[0]).toMatchObject({ path: '/catalog/roles', query: { provenance: 'service' } })
    const lines = stdout().trimEnd().split('\n')
    expect(lines[0]).toMatch(/^SLUG\s+NAME\s+TASKS\s+PROVENANCE\s+ID$/)
    expect(lines[1]).toMatch(
      new RegExp(`^reporting-analyst\\s+Reporting analyst\\s+2\\s+service\\s+${roles[0]!.id}$`),
    )
    expect(lines[2]).toMatch(/^ops\s+Reporting analyst\s+0\s+enterprise \(Acme\)\s+/)
  })

  it('get finds an entry by its exact slug among what the slug filter answers, and prints the skill', async () => {
    const wanted = entry()
    const read = {
      ...entry({ id: wanted.id }),
      serializeOn: null,
      currentVersion: {
        id: wanted.currentVersionId,
        taskId: wanted.id,
        number: 1,
        createdAt: now(),
        definition: { goal: 'Report the week', tools: ['os.mail_send'] },
      },
      skillMd: '# Weekly business report\n\nRead the numbers.\n',
      schedule: { cron: '0 7 * * 1', timezone: 'UTC', input: {} },
    }
    const api = new FakeApi((req) =>
      req.path === '/catalog/tasks'
        ? { body: page([entry({ slug: 'sales-weekly-report' }), wanted]) }
        : { body: read },
    )
    const { deps, stdout } = fakeDeps(api)
    await getEntry(deps, 'weekly-report')
    expect(api.sent.map((r) => [r.path, r.query.slug])).toEqual([
      ['/catalog/tasks', 'weekly-report'],
      [`/catalog/tasks/${wanted.id}`, undefined],
    ])
    expect(stdout()).toMatch(/^name\s+Weekly report\n/)
    expect(stdout()).toMatch(/schedule\s+0 7 \* \* 1 \(UTC\)\n/)
    expect(stdout()).toMatch(/tools\s+os\.mail_send\n/)
    expect(stdout()).toContain('\n# Weekly business report\n\nRead the numbers.\n')

    // An id is used as it is: no look-up.
    const byId = new FakeApi(() => ({ body: read }))
    await getEntry(fakeDeps(byId).deps, wanted.id)
    expect(byId.sent.map((r) => r.path)).toEqual([`/catalog/tasks/${wanted.id}`])
  })

  it('a slug no entry has, or two entries share, is refused before anything is sent', async () => {
    const service = entry()
    const published = entry({ provenance: 'enterprise', publisher: 'Acme', origin: 'custom' })
    const api = new FakeApi((req) =>
      req.query.slug === 'weekly-report'
        ? { body: page([service, published]) }
        : { body: page([entry({ slug: 'weekly-report-eu' })]) },
    )
    const { deps } = fakeDeps(api)
    const twice = await failure(cloneEntry(deps, 'weekly-report', { team: 'general' }))
    expect(twice.exitCode).toBe(exitCodes.failed)
    expect(twice.message).toBe(
      `"weekly-report" names 2 catalogue tasks: weekly-report (service: ${service.id}), weekly-report (enterprise (Acme): ${published.id}); use an id`,
    )
    const none = await failure(getEntry(deps, 'weekly'))
    expect(none.message).toBe('no catalogue task "weekly"')
    expect(api.sent.every((r) => r.method === 'GET' && r.path === '/catalog/tasks')).toBe(true)
  })

  it('clone sends the team by id and names what it installed; --json is the task unchanged', async () => {
    const wanted = entry()
    const task = installed('weekly-report', teamUuid)
    const api = new FakeApi(
      (req) =>
        lookups(req) ??
        (req.method === 'GET' ? { body: page([wanted]) } : { status: 201, body: task }),
    )
    const human = fakeDeps(api)
    await cloneEntry(human.deps, 'weekly-report', { team: 'general', slug: 'our-weekly' })
    expect(api.sent.find((r) => r.method === 'POST')).toEqual({
      method: 'POST',
      path: `/catalog/tasks/${wanted.id}/clone`,
      query: {},
      body: { teamId: teamUuid, slug: 'our-weekly' },
    })
    expect(human.stdout()).toBe(
      `installed task weekly-report (${task.id}) on team general, linked to the original: each new version of it is what it runs\n`,
    )
    // The enterprise has no role reporting-analyst: the clone cannot run until it has.
    expect(human.stderr()).toBe(
      'no role reporting-analyst on its team or enterprise-wide: it runs once there is one (osctl catalog roles clone reporting-analyst --team TEAM brings the role)\n',
    )

    const json = fakeDeps(api, { json: true })
    await cloneEntry(json.deps, wanted.id, { team: teamUuid })
    expect(JSON.parse(json.stdout())).toEqual(task)
    expect(json.stderr()).toBe('')
  })

  it('copy sends name, slug and role; an unheld role is said on stderr', async () => {
    const wanted = entry()
    const task = installed('our-report', teamUuid, 'analyst')
    const roles = [{ id: randomUUID(), slug: 'analyst', teamId: null, holderCount: 0 }]
    const api = new FakeApi((req) => lookups(req, roles) ?? { status: 201, body: task })
    const { deps, stdout, stderr } = fakeDeps(api)
    await copyEntry(deps, wanted.id, {
      team: 'general',
      name: 'Our report',
      slug: 'our-report',
      role: 'analyst',
    })
    expect(api.sent.find((r) => r.method === 'POST')).toMatchObject({
      path: `/catalog/tasks/${wanted.id}/copy`,
      body: { teamId: teamUuid, name: 'Our report', slug: 'our-report', assigneeRole: 'analyst' },
    })
    expect(stdout()).toBe(
      `installed task our-report (${task.id}) on team general, an independent copy, yours to edit\n`,
    )
    expect(stderr()).toBe('nobody holds the role analyst yet: osctl roles grant analyst MEMBER\n')
  })

  it('roles clone names the role, each task installed and each skipped', async () => {
    const wanted = roleEntry()
    const role = { id: randomUUID(), slug: 'reporting-analyst', teamId: teamUuid, holderCount: 0 }
    const tasks = [
      installed('weekly-report', teamUuid),
      installed('answer-data-question', teamUuid),
    ]
    const cloned = {
      role,
      roleCreated: true,
      tasks,
      skipped: [{ slug: 'old-report', reason: 'deprecated' }],
    }
    const api = new FakeApi(
      (req) =>
        lookups(req) ??
        (req.method === 'GET' ? { body: page([wanted]) } : { status: 201, body: cloned }),
    )
    const { deps, stdout, stderr } = fakeDeps(api)
    await cloneRoleEntry(deps, 'reporting-analyst', { team: 'general' })
    expect(api.sent.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /catalog/roles',
      'GET /teams',
      `POST /catalog/roles/${wanted.id}/clone`,
    ])
    expect(api.sent.at(-1)!.body).toEqual({ teamId: teamUuid })
    expect(stdout()).toBe(
      [
        `installed role reporting-analyst (${role.id}) on team general`,
        `installed task weekly-report (${tasks[0]!.id})`,
        `installed task answer-data-question (${tasks[1]!.id})`,
        'skipped task old-report: deprecated',
        '',
      ].join('\n'),
    )
    expect(stderr()).toBe(
      'nobody holds the role reporting-analyst yet: its tasks run once someone does (osctl roles grant reporting-analyst MEMBER)\n',
    )

    // An enterprise-wide role of that slug, held, is reused: said so, and nothing on stderr.
    Object.assign(cloned, {
      role: { ...role, teamId: null, holderCount: 2 },
      roleCreated: false,
      skipped: [],
    })
    const reused = fakeDeps(api)
    await cloneRoleEntry(reused.deps, wanted.id, { team: 'general' })
    expect(reused.stdout().split('\n')[0]).toBe(
      `reused role reporting-analyst (${role.id}) enterprise-wide`,
    )
    expect(reused.stderr()).toBe('')
  })

  it('a role clone refused with task_slug_taken names the slugs, keeping the code and the body', async () => {
    const wanted = roleEntry()
    const body = {
      error: 'task_slug_taken',
      message: 'Nothing was installed.',
      slugs: ['weekly-report', 'answer-data-question'],
    }
    const api = new FakeApi((req) => lookups(req) ?? { status: 409, body })
    const err = await failure(cloneRoleEntry(fakeDeps(api).deps, wanted.id, { team: 'general' }))
    expect(err).toBeInstanceOf(ApiRequestError)
    expect(err).toMatchObject({ status: 409, code: 'task_slug_taken', body, exitCode: 1 })
    expect(err.message).toBe(
      "nothing was installed: the enterprise has tasks with the slugs weekly-report, answer-data-question; rename or delete them, or clone the role's other tasks one by one (osctl catalog tasks clone)",
    )
  })
})

describe('osctl catalog against a daemon', () => {
  let env: Record<string, string>
  let json: CliDaemon['json']

  beforeAll(async () => {
    const cli = await startCliDaemon('Catalog Cli')
    env = cli.env
    json = cli.json
  })

  it('lists, pages and reads the starter catalogue', async () => {
    const first = CatalogTaskPage.parse(await json(['catalog', 'tasks', 'list', '--limit', '3']))
    expect(first).toMatchObject({ page: 1, limit: 3 })
    expect(first.total).toBeGreaterThan(6)
    const all = CatalogTask.array().parse(
      await json(['catalog', 'tasks', 'list', '--all', '--limit', '4', '--provenance', 'service']),
    )
    expect(all).toHaveLength(first.total)
    expect(all.map((e) => e.slug)).toContain('weekly-report')

    const table = await osctl(['catalog', 'tasks', 'list', '--slug', 'invoice'], env)
    expect(table.exitCode, table.stderr).toBe(0)
    const [header, ...rows] = table.stdout.trimEnd().split('\n')
    expect(header).toMatch(/^SLUG\s+NAME\s+KIND\s+STATUS\s+ROLE\s+PROVENANCE\s+VERSION\s+ID$/)
    expect(rows.map((r) => r.split(/\s{2,}/)[0])).toEqual(['chase-overdue-invoices'])

    const read = CatalogTaskRead.parse(await json(['catalog', 'tasks', 'get', 'weekly-report']))
    expect(read).toMatchObject({ slug: 'weekly-report', assigneeRole: 'reporting-analyst' })
    const shown = await osctl(['catalog', 'tasks', 'get', read.id], env)
    expect(shown.exitCode, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/^name\s+/)
    expect(shown.stdout).toContain('# Weekly business report')

    const roles = CatalogRolePage.parse(await json(['catalog', 'roles', 'list']))
    expect(roles.total).toBeGreaterThanOrEqual(6)
    const role = CatalogRole.parse(await json(['catalog', 'roles', 'get', 'release-manager']))
    expect(role.tasks.map((t) => t.slug).sort()).toEqual(['draft-release-notes', 'triage-issues'])
    const missing = await osctl(['catalog', 'roles', 'get', 'no-such-role'], env)
    expect([missing.exitCode, missing.stderr]).toEqual([
      1,
      'error: no catalogue role "no-such-role"\n',
    ])
  })

  it('clones a task into the general team: `tasks get` shows it a clone', async () => {
    const cloned = await osctl(
      ['catalog', 'tasks', 'clone', 'weekly-report', '--team', 'general'],
      env,
    )
    expect(cloned.exitCode, cloned.stderr).toBe(0)
    const task = TaskRead.parse(await json(['tasks', 'get', 'weekly-report']))
    expect(cloned.stdout).toBe(
      `installed task weekly-report (${task.id}) on team general, linked to the original: each new version of it is what it runs\n` +
        "schedule of weekly-report: 0 7 * * 1 (UTC), off: the required inputs spreadsheet, recipients have no value; turn it on with: osctl tasks schedule set weekly-report --cron '0 7 * * 1' --tz UTC --input spreadsheet=VALUE --input recipients=VALUE\n",
    )
    expect(cloned.stderr).toContain('no role reporting-analyst')
    expect(task).toMatchObject({ origin: 'clone', canEditDefinition: false })
    const shown = await osctl(['tasks', 'get', 'weekly-report'], env)
    expect(shown.stdout).toMatch(/\norigin\s+clone\n/)

    // The same slug again: the API's 409, exit 1.
    const again = await osctl(
      ['catalog', 'tasks', 'clone', 'weekly-report', '--team', 'general'],
      env,
    )
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toMatch(/^error: task_slug_taken: /)
  })

  it('clones a role naming what it installed; a second clone installs nothing and names the slugs', async () => {
    const res = await osctl(
      ['catalog', 'roles', 'clone', 'release-manager', '--team', 'general'],
      env,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    const lines = res.stdout.trimEnd().split('\n')
    expect(lines[0]).toMatch(/^installed role release-manager \([0-9a-f-]{36}\) on team general$/)
    expect(lines.slice(1)).toEqual([
      expect.stringMatching(/^installed task draft-release-notes \([0-9a-f-]{36}\)$/),
      expect.stringMatching(/^installed task triage-issues \([0-9a-f-]{36}\)$/),
      "schedule of triage-issues: 0 8 * * 1-5 (UTC), off: the required input repository has no value; turn it on with: osctl tasks schedule set triage-issues --cron '0 8 * * 1-5' --tz UTC --input repository=VALUE",
    ])
    const notes = TaskRead.parse(await json(['tasks', 'get', 'draft-release-notes']))
    expect(res.stdout).toContain(`installed task draft-release-notes (${notes.id})`)
    expect(notes.origin).toBe('clone')

    const before = (await json(['tasks', 'list'])).total
    const again = await osctl(
      ['--json', 'catalog', 'roles', 'clone', 'release-manager', '--team', 'general'],
      env,
    )
    expect(again.exitCode).toBe(1)
    expect(again.stderr).toMatch(
      /^error: task_slug_taken: nothing was installed: the enterprise has tasks with the slugs (draft-release-notes, triage-issues|triage-issues, draft-release-notes); .* \(409\)\n$/,
    )
    expect(JSON.parse(again.stdout)).toMatchObject({ error: 'task_slug_taken' })
    expect(JSON.parse(again.stdout).slugs.sort()).toEqual(['draft-release-notes', 'triage-issues'])
    expect((await json(['tasks', 'list'])).total).toBe(before)

    // The command the line gives, with values in place of VALUE, turns the schedule on.
    const command = lines.at(-1)!.split('turn it on with: osctl ')[1]!
    const args = command
      .replace('repository=VALUE', 'repository=acme/web')
      .match(/'[^']*'|\S+/g)!
      .map((word) => word.replace(/^'|'$/g, ''))
    const set = await osctl(args, env)
    expect(set.exitCode, set.stderr).toBe(0)
    expect(set.stdout).toMatch(/^enabled\s+yes$/m)
    expect(TaskRead.parse(await json(['tasks', 'get', 'triage-issues'])).schedule).toMatchObject({
      cron: '0 8 * * 1-5',
      input: { repository: 'acme/web' },
      enabled: true,
    })

    // The role of a task cloned alone (weekly-report, above) is taken: only that slug is named.
    const analyst = await osctl(
      ['catalog', 'roles', 'clone', 'reporting-analyst', '--team', 'general'],
      env,
    )
    expect(analyst.exitCode).toBe(1)
    expect(analyst.stderr).toContain('the enterprise has tasks with the slugs weekly-report;')
  })

  it('clones a role with a new member who holds it, the role its persona', async () => {
    const res = await osctl(
      ['catalog', 'roles', 'clone', 'support-lead', '--team', 'general', '--new-member', 'Sam'],
      env,
    )
    expect(res.exitCode, res.stderr).toBe(0)
    expect(res.stderr).toBe('')
    // Its schedules need no input they lack: each is on, and said to be.
    expect(res.stdout).toContain('schedule of answer-support-inbox: 0 9,14 * * 1-5 (UTC), on\n')
    expect(res.stdout).toContain('schedule of summarise-support-week: 0 16 * * 5 (UTC), on\n')
    const sam = await json(['members', 'get', 'Sam'])
    expect(res.stdout.trimEnd().split('\n').at(-1)).toBe(
      `new member Sam (${sam.email}) holds the role support-lead`,
    )
    expect(sam.roles.map((r: { slug: string }) => r.slug)).toEqual(['support-lead'])
    expect(sam.teams.map((t: { slug: string }) => t.slug)).toEqual(['general'])
    expect(sam.persona).toMatch(/^Your role: Support lead\. \S.*[^.]$/)

    // A name taken: the role is installed all the same, and the error says how to finish.
    const taken = await osctl(
      ['catalog', 'roles', 'clone', 'content-marketer', '--team', 'general', '--new-member', 'Sam'],
      env,
    )
    expect(taken.exitCode).toBe(1)
    expect(taken.stderr).toContain(
      'the role content-marketer and its tasks are installed; give it a holder with',
    )
    const marketer = await json(['roles', 'get', 'content-marketer'])
    expect(marketer.role.slug).toBe('content-marketer')
    expect(marketer.holders).toEqual([])
  })

  it('--json of a role clone is the API answer unchanged', async () => {
    const cloned = CatalogRoleCloned.parse(
      await json(['catalog', 'roles', 'clone', 'bookkeeper', '--team', 'general']),
    )
    expect(cloned.roleCreated).toBe(true)
    expect(cloned.tasks.map((t) => t.origin)).toEqual(cloned.tasks.map(() => 'clone'))
  })
})
