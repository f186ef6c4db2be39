import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  catalogDir,
  checkServiceTask,
  loadServiceCatalog,
  publish,
  readCatalogFiles,
  unpublish,
} from '../../../server/domain/catalog/index.js'
import {
  CatalogRole,
  CatalogRoleCloned,
  CatalogRolePage,
  CatalogTaskPage,
  CatalogTaskRead,
} from '../../../shared/schemas/catalog.js'
import { TaskRead } from '../../../shared/schemas/tasks.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { apiStart } from '../../helpers/runs.js'

let t: TestApp
let acmeTeam: string
let otherTeam: string

beforeAll(async () => {
  t = await createTestApp()
  acmeTeam = (await t.call('GET', '/v1/teams')).body[0].id
  otherTeam = (await t.call('GET', '/v1/teams', { token: t.other.token })).body[0].id
})
afterAll(async () => {
  await t?.sql.end()
})

const as = (e: TestEnterprise) => ({ token: e.token })
async function entry(slug: string) {
  const page = CatalogTaskPage.parse((await t.call('GET', `/v1/catalog/tasks?slug=${slug}`)).body)
  const found = page.data.find((e) => e.slug === slug)
  expect(found, slug).toBeDefined()
  return found!
}
async function roleEntry(slug: string) {
  const page = CatalogRolePage.parse((await t.call('GET', `/v1/catalog/roles?slug=${slug}`)).body)
  return page.data.find((r) => r.slug === slug)!
}
async function taskTotal(e: TestEnterprise = t.acme): Promise<number> {
  return (await t.call('GET', '/v1/tasks?limit=1', as(e))).body.total
}

describe('the service catalogue files', () => {
  const roles = readCatalogFiles()

  it('ships at least six roles, each with tasks, every definition passing every check', () => {
    expect(roles.length).toBeGreaterThanOrEqual(6)
    for (const role of roles) {
      expect(role.tasks.length, role.slug).toBeGreaterThan(0)
      expect(role.description.length, role.slug).toBeGreaterThan(20)
      for (const task of role.tasks) {
        expect(checkServiceTask(task, roles), task.file).toEqual([])
        expect(task.definition.skillMd.length, task.file).toBeGreaterThan(400)
      }
    }
  })

  it('gates what leaves the company: release publishing, outbound support mail', () => {
    const task = (slug: string) => roles.flatMap((r) => r.tasks).find((x) => x.slug === slug)!
    expect(task('draft-release-notes').definition.gates.map((g) => g.tool)).toContain(
      'vcs.create_release',
    )
    expect(task('answer-support-inbox').definition.gates.map((g) => g.tool)).toContain(
      'os.mail_send',
    )
    expect(task('weekly-report').schedule?.cron).toBe('0 7 * * 1')
  })

  it('is loaded: every file is an entry, and loading again changes nothing', async () => {
    const page = CatalogTaskPage.parse(
      (await t.call('GET', '/v1/catalog/tasks?provenance=service&limit=200')).body,
    )
    expect(page.total).toBe(roles.flatMap((r) => r.tasks).length)
    expect(await loadServiceCatalog(t.sql)).toEqual({ created: [], updated: [], removed: [] })
  })
})

describe('GET /v1/catalog/tasks and /v1/catalog/roles', () => {
  it('answers the paged envelope, the same for every enterprise', async () => {
    const mine = await t.call('GET', '/v1/catalog/tasks?limit=5&sort=name&order=asc')
    const theirs = await t.call('GET', '/v1/catalog/tasks?limit=5&sort=name&order=asc', as(t.other))
    expect(mine.status).toBe(200)
    const page = CatalogTaskPage.parse(mine.body)
    expect(page).toMatchObject({ page: 1, limit: 5 })
    expect(page.pages).toBe(Math.ceil(page.total / 5))
    expect(theirs.body).toEqual(mine.body)
    const names = page.data.map((e) => e.name)
    expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b)))
  })

  it('filters: slug matches any part, provenance, status, kind', async () => {
    const page = CatalogTaskPage.parse((await t.call('GET', '/v1/catalog/tasks?slug=INVOICE')).body)
    expect(page.data.map((e) => e.slug)).toEqual(['chase-overdue-invoices'])
    const none = CatalogTaskPage.parse(
      (await t.call('GET', '/v1/catalog/tasks?provenance=enterprise&kind=deterministic')).body,
    )
    expect(none).toMatchObject({ total: 0, pages: 1, data: [] })
  })

  it('reads one entry with its definition and skill; an unknown id is 404', async () => {
    const weekly = await entry('weekly-report')
    const res = await t.call('GET', `/v1/catalog/tasks/${weekly.id}`)
    const read = CatalogTaskRead.parse(res.body)
    expect(read).toMatchObject({ provenance: 'service', assigneeRole: 'reporting-analyst' })
    expect(read.skillMd).toContain('# Weekly business report')
    expect(read.schedule).toEqual({ cron: '0 7 * * 1', timezone: 'UTC', input: expect.any(Object) })
    const missing = await t.call('GET', '/v1/catalog/tasks/00000000-0000-4000-8000-000000000000')
    expect(missing.status).toBe(404)
    expect(missing.body.error).toBe('task_not_found')
  })

  it('lists roles with their public tasks', async () => {
    const res = await t.call('GET', '/v1/catalog/roles?sort=slug&order=asc&limit=200')
    const page = CatalogRolePage.parse(res.body)
    expect(page.total).toBeGreaterThanOrEqual(6)
    const support = page.data.find((r) => r.slug === 'support-lead')!
    expect(support.tasks.map((x) => x.slug)).toContain('answer-support-inbox')
    const one = await t.call('GET', `/v1/catalog/roles/${support.id}`)
    expect(CatalogRole.parse(one.body)).toEqual(support)
  })
})

describe('POST /v1/catalog/tasks/{id}/clone and /copy', () => {
  it('clones linked: origin clone, read-only definition, its own name and status, the schedule', async () => {
    const weekly = await entry('weekly-report')
    const res = await t.call('POST', `/v1/catalog/tasks/${weekly.id}/clone`, {
      body: { teamId: acmeTeam },
    })
    expect(res.status).toBe(201)
    const clone = TaskRead.parse(res.body)
    expect(clone).toMatchObject({
      origin: 'clone',
      canEditDefinition: false,
      sourceTaskId: weekly.id,
      detached: false,
      slug: 'weekly-report',
      assigneeRole: 'reporting-analyst',
      teamId: acmeTeam,
    })
    expect(clone.schedule).toMatchObject({ cron: '0 7 * * 1', timezone: 'UTC' })

    const refused = await t.call('POST', `/v1/tasks/${clone.id}/versions`, {
      body: { goal: 'something else' },
    })
    expect(refused.status).toBe(403)
    expect(refused.body.error).toBe('task_definition_read_only')

    const renamed = await t.call('POST', `/v1/tasks/${clone.id}/versions`, {
      body: { name: 'Monday report', status: 'deprecated', baseVersionId: clone.currentVersionId },
    })
    expect(renamed.status).toBe(201)
    const after = TaskRead.parse((await t.call('GET', `/v1/tasks/${clone.id}`)).body)
    expect(after).toMatchObject({ name: 'Monday report', status: 'deprecated' })
    expect(after.currentVersionId).toBe(clone.currentVersionId)

    const again = await t.call('POST', `/v1/catalog/tasks/${weekly.id}/clone`, {
      body: { teamId: acmeTeam },
    })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('task_slug_taken')
  })

  it('copies independent and editable', async () => {
    const notes = await entry('draft-release-notes')
    const res = await t.call('POST', `/v1/catalog/tasks/${notes.id}/copy`, {
      body: { teamId: acmeTeam, name: 'Our release notes', slug: 'our-release-notes' },
    })
    expect(res.status).toBe(201)
    const copy = TaskRead.parse(res.body)
    expect(copy).toMatchObject({
      origin: 'copy',
      canEditDefinition: true,
      slug: 'our-release-notes',
    })
    expect(copy.assigneeRole).toBe('release-manager')
    const changed = await t.call('POST', `/v1/tasks/${copy.id}/versions`, {
      body: { goal: 'Shorter notes.' },
    })
    expect(changed.status).toBe(201)
  })

  it('refuses bad input clearly and installs nothing', async () => {
    const triage = await entry('triage-issues')
    const before = await taskTotal()
    const cases: [string, unknown, number, string][] = [
      ['clone', { teamId: otherTeam }, 404, 'team_not_found'],
      ['clone', {}, 400, 'invalid_request'],
      ['clone', { teamId: acmeTeam, slug: '!!!' }, 400, 'invalid_slug'],
      ['copy', { teamId: acmeTeam }, 400, 'invalid_name'],
      ['copy', { teamId: acmeTeam, name: 'X', slug: '---' }, 400, 'invalid_slug'],
      [
        'copy',
        { teamId: '00000000-0000-4000-8000-000000000000', name: 'X' },
        404,
        'team_not_found',
      ],
    ]
    for (const [verb, body, status, code] of cases) {
      const res = await t.call('POST', `/v1/catalog/tasks/${triage.id}/${verb}`, { body })
      expect([verb, body, res.status, res.body.error]).toEqual([verb, body, status, code])
    }
    const unknown = await t.call(
      'POST',
      '/v1/catalog/tasks/00000000-0000-4000-8000-000000000000/clone',
      { body: { teamId: acmeTeam } },
    )
    expect(unknown.status).toBe(404)
    expect(await taskTotal()).toBe(before)
  })
})

describe('POST /v1/catalog/roles/{id}/clone', () => {
  it('installs the role and its tasks once when two clones race; the second lists the slugs', async () => {
    const e = await t.createEnterprise('Racing Co')
    const team = (await t.call('GET', '/v1/teams', as(e))).body[0].id
    const support = await roleEntry('support-lead')
    const [a, b] = await Promise.all(
      [1, 2].map(() =>
        t.call('POST', `/v1/catalog/roles/${support.id}/clone`, {
          ...as(e),
          body: { teamId: team },
        }),
      ),
    )
    const statuses = [a!.status, b!.status].sort()
    expect(statuses).toEqual([201, 409])
    const won = CatalogRoleCloned.parse((a!.status === 201 ? a : b)!.body)
    const lost = (a!.status === 409 ? a : b)!.body
    expect(won.roleCreated).toBe(true)
    expect(won.tasks.map((x) => x.slug).sort()).toEqual(support.tasks.map((x) => x.slug).sort())
    expect(won.tasks.every((x) => x.origin === 'clone' && x.assigneeRole === 'support-lead')).toBe(
      true,
    )
    expect(lost.error).toBe('task_slug_taken')
    expect(lost.slugs.sort()).toEqual(support.tasks.map((x) => x.slug).sort())
    const roles = (await t.call('GET', '/v1/roles', as(e))).body
    expect(roles.filter((r: { slug: string }) => r.slug === 'support-lead')).toHaveLength(1)
  })

  it('reuses a role of that slug; a taken task slug installs nothing at all', async () => {
    const e = await t.createEnterprise('Reuse Co')
    const team = (await t.call('GET', '/v1/teams', as(e))).body[0].id
    const existing = (await t.call('POST', '/v1/roles', { ...as(e), body: { name: 'Bookkeeper' } }))
      .body
    await t.call('POST', '/v1/tasks', { ...as(e), body: { name: 'Chase overdue invoices' } })
    const books = await roleEntry('bookkeeper')
    const before = await taskTotal(e)
    const res = await t.call('POST', `/v1/catalog/roles/${books.id}/clone`, {
      ...as(e),
      body: { teamId: team },
    })
    expect(res.status).toBe(409)
    expect(res.body).toMatchObject({ error: 'task_slug_taken', slugs: ['chase-overdue-invoices'] })
    expect(await taskTotal(e)).toBe(before)

    await t.call(
      'DELETE',
      `/v1/tasks/${(await t.call('GET', '/v1/tasks?slug=chase-overdue-invoices', as(e))).body.data[0].id}`,
      as(e),
    )
    const ok = await t.call('POST', `/v1/catalog/roles/${books.id}/clone`, {
      ...as(e),
      body: { teamId: team },
    })
    expect(ok.status).toBe(201)
    expect(CatalogRoleCloned.parse(ok.body)).toMatchObject({
      roleCreated: false,
      role: { id: existing.id },
    })
  })

  it('turns a schedule on only when every required input has a value, and says which is which (issue 51)', async () => {
    const e = await t.createEnterprise('Schedules Co')
    const team = (await t.call('GET', '/v1/teams', as(e))).body[0].id
    const clone = async (slug: string) => {
      const res = await t.call('POST', `/v1/catalog/roles/${(await roleEntry(slug)).id}/clone`, {
        ...as(e),
        body: { teamId: team },
      })
      expect(res.status, JSON.stringify(res.body)).toBe(201)
      return CatalogRoleCloned.parse(res.body)
    }
    const enabledOf = async (taskId: string) => {
      const [row] = await t.sql<{ enabled: boolean }[]>`
        select enabled from task_schedules where enterprise_id = ${e.id} and task_id = ${taskId}`
      return row?.enabled
    }

    // weekly-report's schedule leaves spreadsheet and recipients blank: off, and why.
    const analyst = await clone('reporting-analyst')
    const report = analyst.tasks.find((x) => x.slug === 'weekly-report')!
    expect(analyst.schedules).toEqual([
      {
        taskId: report.id,
        taskSlug: 'weekly-report',
        cron: '0 7 * * 1',
        timezone: 'UTC',
        input: { spreadsheet: '', recipients: '' },
        enabled: false,
        missingInputs: ['spreadsheet', 'recipients'],
      },
    ])
    expect(report.schedule).toMatchObject({ enabled: false, nextFireAt: null })
    expect(await enabledOf(report.id)).toBe(false)
    // triage-issues names its repository in no schedule: off too.
    const release = await clone('release-manager')
    expect(release.schedules.map((s) => [s.taskSlug, s.enabled, s.missingInputs])).toEqual([
      ['triage-issues', false, ['repository']],
    ])

    // The support lead's schedules need nothing more: on, and they will fire.
    const support = await clone('support-lead')
    expect(support.schedules.map((s) => [s.taskSlug, s.enabled, s.missingInputs]).sort()).toEqual([
      ['answer-support-inbox', true, []],
      ['summarise-support-week', true, []],
    ])
    for (const task of support.tasks) {
      expect(task.schedule).toMatchObject({ enabled: true })
      expect(task.schedule!.nextFireAt).not.toBeNull()
      expect(await enabledOf(task.id)).toBe(true)
    }
  })

  it('installs a task clone or copy with its schedule off while a required input is blank', async () => {
    const e = await t.createEnterprise('Single Co')
    const team = (await t.call('GET', '/v1/teams', as(e))).body[0].id
    const report = await entry('weekly-report')
    const cloned = await t.call('POST', `/v1/catalog/tasks/${report.id}/clone`, {
      ...as(e),
      body: { teamId: team },
    })
    expect(cloned.status).toBe(201)
    expect(TaskRead.parse(cloned.body).schedule).toMatchObject({ enabled: false })
    const copied = await t.call('POST', `/v1/catalog/tasks/${report.id}/copy`, {
      ...as(e),
      body: { teamId: team, name: 'Our weekly report' },
    })
    expect(copied.status).toBe(201)
    expect(TaskRead.parse(copied.body).schedule).toMatchObject({ enabled: false })
    const books = await entry('chase-overdue-invoices')
    const chase = await t.call('POST', `/v1/catalog/tasks/${books.id}/clone`, {
      ...as(e),
      body: { teamId: team },
    })
    expect(TaskRead.parse(chase.body).schedule).toMatchObject({ enabled: true })
  })
})

describe('an enterprise publishes; its clones follow new versions; unpublishing detaches them', () => {
  it('runs the newest version of the original, and the last one once detached', async () => {
    // acme's own task, published by the operator.
    const created = TaskRead.parse(
      (
        await t.call('POST', '/v1/tasks', {
          body: { name: 'Shared checklist', assigneeRole: 'coo', goal: 'First goal.' },
        })
      ).body,
    )
    await publish(t.sql, t.acme.id, { task: 'shared-checklist' })
    const published = await entry('shared-checklist')
    expect(published).toMatchObject({ provenance: 'enterprise', publisher: 'Acme' })
    // acme sees it as its own task, too.
    expect((await t.call('GET', `/v1/tasks/${created.id}`)).status).toBe(200)

    const clone = TaskRead.parse(
      (
        await t.call('POST', `/v1/catalog/tasks/${published.id}/clone`, {
          ...as(t.other),
          body: { teamId: otherTeam },
        })
      ).body,
    )
    const publishedV2 = await t.call('POST', `/v1/tasks/${created.id}/versions`, {
      body: { goal: 'Second goal.' },
    })
    expect(publishedV2.status).toBe(201)
    const following = TaskRead.parse(
      (await t.call('GET', `/v1/tasks/${clone.id}`, as(t.other))).body,
    )
    expect(following.currentVersion.definition.goal).toBe('Second goal.')
    expect(following.currentVersionId).not.toBe(clone.currentVersionId)
    // the clone's next run is in the cloning enterprise, on that version
    const { run } = await apiStart(t.sql, t.other.id, clone.id, {})
    expect(run).toMatchObject({
      enterpriseId: t.other.id,
      taskVersionId: following.currentVersionId,
    })

    const out = await unpublish(t.sql, t.acme.id, { task: 'shared-checklist' })
    expect(out.detachedClones).toBe(1)
    await t.call('POST', `/v1/tasks/${created.id}/versions`, { body: { goal: 'Third goal.' } })
    const detached = TaskRead.parse(
      (await t.call('GET', `/v1/tasks/${clone.id}`, as(t.other))).body,
    )
    expect(detached).toMatchObject({ detached: true, currentVersionId: following.currentVersionId })
    const gone = await t.call('GET', `/v1/catalog/tasks/${published.id}`)
    expect(gone.status).toBe(404)
  })

  it('a changed service file is a new version of the original, which its clones run', async () => {
    const triage = await entry('triage-issues')
    const clone = TaskRead.parse(
      (
        await t.call('POST', `/v1/catalog/tasks/${triage.id}/clone`, {
          ...as(t.other),
          body: { teamId: otherTeam },
        })
      ).body,
    )
    const dir = mkdtempSync(join(tmpdir(), 'osd-catalog-'))
    cpSync(catalogDir, dir, { recursive: true })
    const skill = join(dir, 'release-manager', 'triage-issues.md')
    writeFileSync(
      skill,
      readFileSync(skill, 'utf8') + '\n## New rule\n\nLabel security reports `security`.\n',
    )
    expect(await loadServiceCatalog(t.sql, dir)).toEqual({
      created: [],
      updated: ['triage-issues'],
      removed: [],
    })
    const after = TaskRead.parse((await t.call('GET', `/v1/tasks/${clone.id}`, as(t.other))).body)
    expect(after.skillMd).toContain('## New rule')
    expect(after.versions).toHaveLength(2)
    expect((await entry('triage-issues')).versionNumber).toBe(2)
  })
})
