import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { taskProblems } from '../../../server/domain/tasks/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

let t: TestApp
let foreignTask: string
let foreignTeam: string
let general: string

beforeAll(async () => {
  t = await createTestApp()
  foreignTask = (
    await t.call('POST', '/v1/tasks', { token: t.other.token, body: { name: 'Their Task' } })
  ).body.id
  foreignTeam = (await t.call('GET', '/v1/teams', { token: t.other.token })).body[0].id
  general = (await t.call('GET', '/v1/teams')).body[0].id
})

const unique = () => randomUUID().slice(0, 8)

async function create(body: Record<string, unknown>) {
  const res = await t.call('POST', '/v1/tasks', { body })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body
}

async function refused(body: Record<string, unknown>, status: number, code: string) {
  const res = await t.call('POST', '/v1/tasks', { body })
  expect(res.status, JSON.stringify(res.body)).toBe(status)
  expect(res.body.error).toBe(code)
  return res.body
}

describe('route checks', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/tasks' })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/tasks',
    body: () => ({ name: `Checked ${unique()}` }),
  })
  for (const [method, suffix, body] of [
    ['GET', '', undefined],
    ['DELETE', '', undefined],
    ['POST', '/copy', { teamId: randomUUID(), name: 'x' }],
    ['GET', '/versions', undefined],
    ['POST', '/versions', { goal: 'x' }],
    ['GET', '/workflow', undefined],
    ['PUT', '/schedule', { cron: '0 9 * * 1' }],
    ['DELETE', '/schedule', undefined],
  ] as const) {
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/tasks/${foreignTask}${suffix}`,
      body: () => body,
      foreign: () => ({ path: `/v1/tasks/${foreignTask}${suffix}`, body }),
      notFoundCode: 'task_not_found',
    })
  }
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/tasks/${foreignTask}/versions/${randomUUID()}`,
    foreign: () => ({ path: `/v1/tasks/${foreignTask}/versions/${randomUUID()}` }),
    notFoundCode: 'task_not_found',
  })
})

describe('create and read (spec: Task definition, Task read answer)', () => {
  it('needs only a name, fills the defaults, and answers the read answer', async () => {
    const task = await create({ name: 'Triage Inbox' })
    expect(task).toMatchObject({
      slug: 'triage-inbox',
      name: 'Triage Inbox',
      teamId: null,
      assigneeRole: null,
      kind: 'llm',
      status: 'active',
      serializeOn: null,
      origin: 'custom',
      skillMd: '# triage-inbox',
      definitionIssues: [],
      canEditDefinition: true,
      schedule: null,
      webhook: {
        url: expect.stringMatching(/\/v1\/webhooks\/acme\/tasks\/triage-inbox$/),
        secretHeader: 'x-os-webhook-secret',
      },
    })
    expect(task.currentVersion).toMatchObject({
      id: task.currentVersionId,
      taskId: task.id,
      number: 1,
      definition: {
        overlapPolicy: 'skip',
        goal: '',
        metric: null,
        guardrails: [],
        skillMd: '# triage-inbox',
        tools: [],
        gates: [],
        inputs: null,
        spend: null,
        workspace: null,
        successors: null,
      },
    })
    expect(task.versions).toEqual([
      {
        id: task.currentVersionId,
        number: 1,
        message: null,
        createdAt: task.currentVersion.createdAt,
        runCount: 0,
        current: true,
      },
    ])
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body).toEqual(task)
  })

  it('keeps every field of a full definition', async () => {
    const body = {
      name: 'Full',
      slug: `full-${unique()}`,
      teamId: general,
      assigneeRole: 'ceo',
      kind: 'llm',
      status: 'active',
      overlapPolicy: 'os',
      serializeOn: ['repo', 'pr.number'],
      goal: 'Merge safe pull requests.',
      metric: { text: 'PRs merged without revert' },
      guardrails: ['Never force-push'],
      skillMd: '# Merge\nReview then merge.',
      tools: ['vcs.merge_pull_request', 'os.set_gate_summary'],
      gates: [{ tool: 'vcs.merge_pull_request', owner: 'ceo', approval: 'specific' }],
      inputs: [
        {
          key: 'repo',
          label: 'Repository',
          type: 'string',
          required: true,
          placeholder: 'org/repo',
        },
      ],
      spend: { moneyUsdPerRun: 2.5, maxModelTier: 'mid' },
      workspace: { branch: 'main', files: ['src/**'] },
      successors: [],
    }
    const task = await create(body)
    const { name, slug, teamId, assigneeRole, kind, status, serializeOn, ...versioned } = body
    expect(task).toMatchObject({ name, slug, teamId, assigneeRole, kind, status, serializeOn })
    expect(task.currentVersion.definition).toEqual(versioned)
  })

  it('fills a gate with owner ceo and approval specific when they are omitted', async () => {
    const task = await create({
      name: `Gated ${unique()}`,
      tools: ['os.mail_send'],
      gates: [{ tool: 'os.mail_send' }],
    })
    expect(task.currentVersion.definition.gates).toEqual([
      { tool: 'os.mail_send', owner: 'ceo', approval: 'specific' },
    ])
  })

  it.each([
    [{ name: '' }, 'invalid_name'],
    [{ name: '   ' }, 'invalid_name'],
    [{ name: 'x'.repeat(201) }, 'invalid_name'],
    [{}, 'invalid_name'],
    [{ name: 7 }, 'invalid_name'],
    [{ name: 'ok', slug: '!!!' }, 'invalid_slug'],
    [{ name: 'ok', slug: 'a'.repeat(81) }, 'invalid_slug'],
    [{ name: 'ok', assigneeMemberId: randomUUID() }, 'assignee_member_removed'],
    [{ name: 'ok', assigneeMemberId: null }, 'assignee_member_removed'],
    [{ name: 'ok', serializeOn: 'repo' }, 'serialize_on_invalid'],
    [
      { name: 'ok', serializeOn: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] },
      'serialize_on_invalid',
    ],
    [{ name: 'ok', serializeOn: ['has space'] }, 'serialize_on_invalid'],
    [{ name: 'ok', kind: 'magic' }, 'invalid_request'],
    [{ name: 'ok', status: 'paused' }, 'invalid_request'],
    [{ name: 'ok', overlapPolicy: 'always' }, 'invalid_request'],
    [{ name: 'ok', spend: { moneyUsdPerRun: -1 } }, 'invalid_request'],
    [{ name: 'ok', spend: { maxModelTier: 'huge' } }, 'invalid_request'],
    [{ name: 'ok', tools: 'vcs' }, 'invalid_request'],
    [{ name: 'ok', inputs: [{ key: 'k', label: 'K', type: 'date' }] }, 'invalid_request'],
    [{ name: 'ok', skillMd: '' }, 'skillMd_required'],
    [{ name: 'ok', skillMd: '  \n ' }, 'skillMd_required'],
  ])('refuses %j with 400 %s', async (body, code) => {
    await refused(body, 400, code)
  })

  it('cleans the slug: lower case, accents dropped, runs of other characters to one hyphen', async () => {
    expect((await create({ name: 'x', slug: '  Déjà  Vu!! Ünïcödé__Task ' })).slug).toBe(
      'deja-vu-unicode-task',
    )
    expect((await create({ name: 'Crème Brûlée: the Recipe' })).slug).toBe(
      'creme-brulee-the-recipe',
    )
    const long = await create({ name: 'word '.repeat(40).trim() })
    expect(long.slug.length).toBeLessThanOrEqual(80)
  })

  it('accepts a slug of exactly 80 characters', async () => {
    expect((await create({ name: 'x', slug: 'b'.repeat(80) })).slug).toBe('b'.repeat(80))
  })

  it('refuses a taken slug with 409 task_slug_taken, also when made from the name', async () => {
    await create({ name: 'Weekly Report' })
    await refused({ name: 'Weekly report!' }, 409, 'task_slug_taken')
    await refused({ name: 'Other', slug: 'WEEKLY REPORT' }, 409, 'task_slug_taken')
  })

  it("refuses a team that is missing or another enterprise's with 404 team_not_found", async () => {
    await refused({ name: `T ${unique()}`, teamId: randomUUID() }, 404, 'team_not_found')
    await refused({ name: `T ${unique()}`, teamId: foreignTeam }, 404, 'team_not_found')
  })

  it('cleans the assignee role like a slug', async () => {
    expect(
      (await create({ name: `R ${unique()}`, assigneeRole: 'Chief Reviewer' })).assigneeRole,
    ).toBe('chief-reviewer')
  })
})

describe('definition checks (spec: Errors, Definition checks)', () => {
  const ok = async (extra: Record<string, unknown>) =>
    create({ name: `Check ${unique()}`, ...extra })
  const bad = async (
    extra: Record<string, unknown>,
    issue: string,
    code = 'invalid_task_definition',
  ) => {
    const body = await refused({ name: `Check ${unique()}`, ...extra }, 400, code)
    expect(body.issues.map((i: { code: string }) => i.code)).toContain(issue)
    expect(
      body.issues.every((i: { severity: string; message: string }) => i.severity && i.message),
    ).toBe(true)
    return body
  }
  const merge = 'vcs.merge_pull_request'
  const summary = 'os.set_gate_summary'

  it('gate_required_for_tool: the merge tool by name, vcs or vcs.* needs a gate naming it itself', async () => {
    for (const tools of [
      [merge, summary],
      ['vcs', summary],
      ['vcs.*', summary],
    ]) {
      await bad({ tools }, 'gate_required_for_tool', 'gate_required_for_tool')
      await bad(
        { tools, gates: [{ tool: 'vcs' }] },
        'gate_required_for_tool',
        'gate_required_for_tool',
      )
      await bad(
        { tools, gates: [{ tool: 'vcs.*' }] },
        'gate_required_for_tool',
        'gate_required_for_tool',
      )
      await ok({ tools, gates: [{ tool: merge }] })
    }
    await ok({ tools: ['vcs.open_pull_request'] }) // does not reach the merge tool
  })

  it("gate_required_for_tool: a tool on any connection's mustGate list", async () => {
    await t.sql`
      insert into tool_connections (enterprise_id, name, kind, layer, must_gate)
      values (${t.acme.id}, 'deploy', 'mcp', 'team', '["deploy.release"]')`
    await bad({ tools: ['deploy'] }, 'gate_required_for_tool', 'gate_required_for_tool')
    await bad({ tools: ['deploy.release'] }, 'gate_required_for_tool', 'gate_required_for_tool')
    await ok({ tools: ['deploy.release'], gates: [{ tool: 'deploy.release' }] })
    await ok({ tools: ['deploy.status'] })
    // Another enterprise's connections do not count.
    const theirs = await t.call('POST', '/v1/tasks', {
      token: t.other.token,
      body: { name: `X ${unique()}`, tools: ['deploy'] },
    })
    expect(theirs.status).toBe(201)
  })

  it('gate_required_for_tool: os.mail_send needs its gate; os.write_plan needs a gate on os.ask_ceo', async () => {
    await bad({ tools: ['os.mail_send'] }, 'gate_required_for_tool', 'gate_required_for_tool')
    await ok({ tools: ['os.mail_send'], gates: [{ tool: 'os.mail_send' }] })
    await bad({ tools: ['os.write_plan'] }, 'gate_required_for_tool', 'gate_required_for_tool')
    await bad(
      { tools: ['os.write_plan'], gates: [{ tool: 'os.write_plan' }] },
      'gate_required_for_tool',
      'gate_required_for_tool',
    )
    await ok({ tools: ['os.write_plan'], gates: [{ tool: 'os.ask_ceo' }] })
  })

  it('gate_required_for_tool: os and os.* reach os.mail_send and os.write_plan as a run reaches them (issue 41)', async () => {
    const mailGate = { tool: 'os.mail_send' }
    const askGate = { tool: 'os.ask_ceo' }
    for (const tools of [['os'], ['os.*']]) {
      await bad({ tools }, 'gate_required_for_tool', 'gate_required_for_tool')
      await bad({ tools, gates: [mailGate] }, 'gate_required_for_tool', 'gate_required_for_tool')
      await bad({ tools, gates: [askGate] }, 'gate_required_for_tool', 'gate_required_for_tool')
      // A gate on the namespace does not name os.mail_send itself.
      await bad(
        { tools, gates: [{ tool: 'os' }, askGate] },
        'gate_required_for_tool',
        'gate_required_for_tool',
      )
      await ok({ tools, gates: [mailGate, askGate] })
      // os reaches os.set_gate_summary too: enough for the merge rule's summary.
      await ok({ tools: [...tools, 'vcs'], gates: [mailGate, askGate, { tool: merge }] })
    }
  })

  it('gate_summary_tool_required: the merge tool needs os.set_gate_summary', async () => {
    await bad({ tools: [merge], gates: [{ tool: merge }] }, 'gate_summary_tool_required')
    await ok({ tools: [merge, summary], gates: [{ tool: merge }] })
  })

  it('deterministic_with_tools: a deterministic task lists no tools', async () => {
    await bad({ kind: 'deterministic', tools: ['os.finish'] }, 'deterministic_with_tools')
    await ok({ kind: 'deterministic', tools: [] })
    await ok({ kind: 'llm', tools: ['os.finish'] })
  })

  it('successor_when_unknown, successor_cap_invalid, successor_delay_invalid', async () => {
    const next = `next-${unique()}`
    await ok({ slug: next })
    await bad({ successors: [{ slug: next, when: 'sometimes' }] }, 'successor_when_unknown')
    for (const when of ['has_issue', 'has_pr', 'no_pr'])
      await ok({ successors: [{ slug: next, when }] })
    for (const cap of [0, -1, 1.5, '2'])
      await bad({ successors: [{ slug: next, maxRunsPerIssue: cap }] }, 'successor_cap_invalid')
    await ok({ successors: [{ slug: next, maxRunsPerIssue: 1 }] })
    for (const delay of [0, -5, 1441, 'soon']) {
      await bad({ successors: [{ slug: next, delayMinutes: delay }] }, 'successor_delay_invalid')
    }
    for (const delay of [0.5, 1, 1440])
      await ok({ successors: [{ slug: next, delayMinutes: delay }] })
  })

  it('unconditional_loop: terminal successors that lead back, directly or through other tasks', async () => {
    const a = `loop-a-${unique()}`
    const b = `loop-b-${unique()}`
    const c = `loop-c-${unique()}`
    await bad({ slug: a, successors: [{ slug: a, on: 'terminal' }] }, 'unconditional_loop')
    await ok({ slug: c, successors: [{ slug: a, on: 'terminal' }] })
    await ok({ slug: b, successors: [{ slug: c, on: 'terminal' }] })
    const loop = await bad(
      { slug: a, successors: [{ slug: b, on: 'terminal' }] },
      'unconditional_loop',
    )
    expect(loop.message).toContain(`${a} -> ${b} -> ${c} -> ${a}`)
    // A loop on an outcome other than terminal is not unconditional.
    await ok({ slug: a, successors: [{ slug: b, on: 'succeeded' }] })
  })

  it('successor_unknown_slug and successor_on_unknown are warnings: saved, listed, on Blockers', async () => {
    const task = await ok({ successors: [{ slug: 'no-such-task', on: 'reviewed' }] })
    expect(
      task.definitionIssues.map((i: { code: string; severity: string }) => [i.code, i.severity]),
    ).toEqual([
      ['successor_unknown_slug', 'warning'],
      ['successor_on_unknown', 'warning'],
    ])
    const problems = await taskProblems(t.sql, t.acme.id)
    expect(problems.find((p) => p.taskId === task.id)?.issues).toHaveLength(2)
    await t.call('POST', `/v1/tasks/${task.id}/versions`, { body: { status: 'deprecated' } })
    expect((await taskProblems(t.sql, t.acme.id)).find((p) => p.taskId === task.id)).toBeUndefined()
  })

  it('joins every error sentence in the message and lists warnings beside them', async () => {
    const body = await bad(
      {
        kind: 'deterministic',
        tools: ['x'],
        successors: [{ slug: 'nowhere', when: 'bad', delayMinutes: 0 }],
      },
      'deterministic_with_tools',
    )
    const errors = body.issues.filter((i: { severity: string }) => i.severity === 'error')
    expect(errors.map((i: { code: string }) => i.code).sort()).toEqual(
      ['deterministic_with_tools', 'successor_delay_invalid', 'successor_when_unknown'].sort(),
    )
    expect(body.message).toBe(errors.map((i: { message: string }) => i.message).join(' '))
    expect(body.issues.some((i: { code: string }) => i.code === 'successor_unknown_slug')).toBe(
      true,
    )
  })
})

describe('versions (spec: Endpoints Tasks, Publish a version; Versioning)', () => {
  const publish = (id: string, body: Record<string, unknown>) =>
    t.call('POST', `/v1/tasks/${id}/versions`, { body })

  it('publishes a partial change: omitted fields keep their values, skillMd included', async () => {
    const task = await create({
      name: `V ${unique()}`,
      goal: 'one',
      skillMd: '# skill',
      guardrails: ['g'],
    })
    const res = await publish(task.id, { goal: 'two', baseVersionId: task.currentVersionId })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({ number: 2, taskId: task.id, definitionIssues: [] })
    expect(res.body.definition).toEqual({ ...task.currentVersion.definition, goal: 'two' })
    const read = (await t.call('GET', `/v1/tasks/${task.id}`)).body
    expect(read.currentVersionId).toBe(res.body.id)
    expect(read.skillMd).toBe('# skill')
    expect(
      read.versions.map((v: { number: number; current: boolean }) => [v.number, v.current]),
    ).toEqual([
      [2, true],
      [1, false],
    ])
  })

  it('keeps the message a version is published with, not in its definition (issue 48)', async () => {
    const task = await create({ name: `M ${unique()}` })
    expect(task.currentVersion.message).toBeNull()
    const res = await publish(task.id, { goal: 'why not', message: '  weekly tidy-up  ' })
    expect(res.status).toBe(201)
    expect(res.body.message).toBe('weekly tidy-up')
    expect(res.body.definition).not.toHaveProperty('message')
    const read = (await t.call('GET', `/v1/tasks/${task.id}`)).body
    expect(read.versions.map((v: { message: string | null }) => v.message)).toEqual([
      'weekly tidy-up',
      null,
    ])
    const empty = await publish(task.id, { goal: 'x', message: '   ' })
    expect(empty.status).toBe(400)
  })

  it('clears inputs, workspace and successors with null', async () => {
    const next = await create({ name: `N ${unique()}` })
    const task = await create({
      name: `C ${unique()}`,
      inputs: [{ key: 'k', label: 'K', type: 'number' }],
      workspace: { branch: 'dev' },
      successors: [{ slug: next.slug }],
    })
    const res = await publish(task.id, { inputs: null, workspace: null, successors: null })
    expect(res.body.definition).toMatchObject({ inputs: null, workspace: null, successors: null })
  })

  it('changes name, slug, team, role, serializeOn, status and kind at once, and still publishes', async () => {
    const team = (await t.call('POST', '/v1/teams', { body: { name: `Team ${unique()}` } })).body
    const task = await create({ name: `Old ${unique()}` })
    const newSlug = `renamed-${unique()}`
    const res = await publish(task.id, {
      name: 'Renamed',
      slug: newSlug,
      teamId: team.id,
      assigneeRole: 'coo',
      serializeOn: ['repo'],
      status: 'deprecated',
      kind: 'deterministic',
    })
    expect(res.status).toBe(201)
    expect(res.body.number).toBe(2)
    expect(res.body.definition).toEqual(task.currentVersion.definition)
    const read = (await t.call('GET', `/v1/tasks/${task.id}`)).body
    expect(read).toMatchObject({
      name: 'Renamed',
      slug: newSlug,
      teamId: team.id,
      assigneeRole: 'coo',
      serializeOn: ['repo'],
      status: 'deprecated',
      kind: 'deterministic',
    })
    expect(read.webhook.url).toMatch(new RegExp(`/tasks/${newSlug}$`))
  })

  it('answers 409 task_version_conflict for a stale baseVersionId, also for a repeat of a landed save', async () => {
    const task = await create({ name: `Race ${unique()}` })
    const first = await publish(task.id, { goal: 'a', baseVersionId: task.currentVersionId })
    expect(first.status).toBe(201)
    const repeat = await publish(task.id, { goal: 'a', baseVersionId: task.currentVersionId })
    expect(repeat.status).toBe(409)
    expect(repeat.body).toMatchObject({
      error: 'task_version_conflict',
      currentVersionId: first.body.id,
    })
    // Without baseVersionId the save is unchecked and publishes over whatever is current.
    const unchecked = await publish(task.id, { goal: 'b' })
    expect(unchecked.status).toBe(201)
    expect(unchecked.body.number).toBe(3)
  })

  it('lets exactly one of two concurrent saves from the same base land', async () => {
    const task = await create({ name: `Concurrent ${unique()}` })
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        publish(task.id, { goal: `g${i}`, baseVersionId: task.currentVersionId }),
      ),
    )
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1)
    expect(answers.filter((a) => a.status === 409)).toHaveLength(4)
  })

  it('checks every save: errors refuse it, warnings are kept', async () => {
    const task = await create({ name: `Checked ${unique()}` })
    const bad = await publish(task.id, { tools: ['os.mail_send'] })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toBe('gate_required_for_tool')
    const empty = await publish(task.id, { skillMd: '' })
    expect(empty.body.error).toBe('skillMd_required')
    const warned = await publish(task.id, { successors: [{ slug: 'ghost' }] })
    expect(warned.body.definitionIssues.map((i: { code: string }) => i.code)).toEqual([
      'successor_unknown_slug',
    ])
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body.definitionIssues).toHaveLength(1)
    const assignee = await publish(task.id, { assigneeMemberId: randomUUID() })
    expect(assignee.body.error).toBe('assignee_member_removed')
    const versions = (await t.call('GET', `/v1/tasks/${task.id}/versions`)).body
    expect(versions).toHaveLength(2) // refused saves published nothing
  })

  it('refuses a taken slug on save', async () => {
    const a = await create({ name: `Slug A ${unique()}` })
    const b = await create({ name: `Slug B ${unique()}` })
    const res = await publish(b.id, { slug: a.slug })
    expect(res.status).toBe(409)
    expect(res.body.error).toBe('task_slug_taken')
  })

  it('keeps versions immutable: old versions read as saved, and the database refuses changes', async () => {
    const task = await create({ name: `Imm ${unique()}`, goal: 'first' })
    await publish(task.id, { goal: 'second' })
    const v1 = await t.call('GET', `/v1/tasks/${task.id}/versions/${task.currentVersionId}`)
    expect(v1.status).toBe(200)
    expect(v1.body).toMatchObject({
      number: 1,
      current: false,
      runCount: 0,
      skillMd: task.skillMd,
      definition: task.currentVersion.definition,
    })
    await expect(
      t.sql`update task_versions set definition = '{}' where id = ${task.currentVersionId}`,
    ).rejects.toThrow(/immutable/)
  })

  it('lists versions newest first, and refuses a version of another task', async () => {
    const task = await create({ name: `List ${unique()}` })
    await publish(task.id, { goal: 'x' })
    await publish(task.id, { goal: 'y' })
    const versions = (await t.call('GET', `/v1/tasks/${task.id}/versions`)).body
    expect(versions.map((v: { number: number }) => v.number)).toEqual([3, 2, 1])
    expect(versions[0].current).toBe(true)
    const other = await create({ name: `Other ${unique()}` })
    const res = await t.call('GET', `/v1/tasks/${task.id}/versions/${other.currentVersionId}`)
    expect(res.status).toBe(404)
    expect(res.body.error).toBe('version_not_found')
  })

  it('answers the workflow: current version and skill only', async () => {
    const task = await create({ name: `Flow ${unique()}`, skillMd: '# do it' })
    const res = await t.call('GET', `/v1/tasks/${task.id}/workflow`)
    expect(res.body).toEqual({ currentVersion: task.currentVersion, skillMd: '# do it' })
  })

  it('refuses changes to a clone (403) and to a built-in task (409)', async () => {
    const clone = await create({ name: `Clone ${unique()}` })
    await t.sql`update tasks set origin = 'clone' where id = ${clone.id}`
    const cloned = await publish(clone.id, { goal: 'x' })
    expect(cloned.status).toBe(403)
    expect(cloned.body.error).toBe('task_definition_read_only')
    expect((await t.call('GET', `/v1/tasks/${clone.id}`)).body.canEditDefinition).toBe(false)
    const builtin = await create({ name: `Builtin ${unique()}` })
    await t.sql`update tasks set origin = 'builtin' where id = ${builtin.id}`
    const res = await publish(builtin.id, { goal: 'x' })
    expect(res.status).toBe(409)
    expect(res.body.error).toBe('os_task_immutable')
    expect((await t.call('DELETE', `/v1/tasks/${builtin.id}`)).body.error).toBe('os_task_immutable')
  })
})

describe('copy and delete', () => {
  it('copies the current definition to a team; the role defaults to the original one', async () => {
    const team = (await t.call('POST', '/v1/teams', { body: { name: `Copy Team ${unique()}` } }))
      .body
    const original = await create({
      name: `Orig ${unique()}`,
      assigneeRole: 'ceo',
      goal: 'g',
      kind: 'deterministic',
    })
    const res = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      body: { teamId: team.id, name: 'The Copy' },
    })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      name: 'The Copy',
      slug: 'the-copy',
      teamId: team.id,
      assigneeRole: 'ceo',
      origin: 'copy',
      kind: 'deterministic',
      canEditDefinition: true,
    })
    expect(res.body.currentVersion.definition).toEqual(original.currentVersion.definition)
    expect(res.body.id).not.toBe(original.id)
    const withRole = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      body: { teamId: team.id, name: 'Second Copy', slug: 'copy-two', assigneeRole: 'coo' },
    })
    expect(withRole.body).toMatchObject({ slug: 'copy-two', assigneeRole: 'coo' })
    const taken = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      body: { teamId: team.id, name: 'x', slug: 'copy-two' },
    })
    expect(taken.body.error).toBe('task_slug_taken')
    const theirs = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      body: { teamId: foreignTeam, name: 'y' },
    })
    expect(theirs.status).toBe(404)
    expect(theirs.body.error).toBe('team_not_found')
    const assignee = await t.call('POST', `/v1/tasks/${original.id}/copy`, {
      body: { teamId: team.id, name: 'z', assigneeMemberId: randomUUID() },
    })
    expect(assignee.body.error).toBe('assignee_member_removed')
  })

  it('deletes the task and its versions and keeps its runs; refuses while a run is under way', async () => {
    const task = await create({ name: `Del ${unique()}` })
    const run = async (status: string) => {
      const [row] = await t.sql<{ id: string }[]>`
        insert into runs (enterprise_id, task_id, task_version_id, task_slug, task_name, kind, overlap_policy, lane,
                          status, origin, input, execution_id)
        values (${t.acme.id}, ${task.id}, ${task.currentVersionId}, ${task.slug}, ${task.name}, 'llm', 'skip', ${task.id},
                ${status}, 'api', '{}', gen_random_uuid()) returning id`
      return row!.id
    }
    const done = await run('succeeded')
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body.versions[0].runCount).toBe(1)
    const open = await run('pending')
    const refusedDelete = await t.call('DELETE', `/v1/tasks/${task.id}`)
    expect(refusedDelete.status).toBe(409)
    expect(refusedDelete.body.error).toBe('task_busy')
    await t.sql`update runs set status = 'cancelled' where id = ${open}`
    expect((await t.call('DELETE', `/v1/tasks/${task.id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).status).toBe(404)
    expect(await t.sql`select 1 from task_versions where task_id = ${task.id}`).toHaveLength(0)
    expect(await t.sql`select 1 from runs where id = ${done}`).toHaveLength(1)
  })
})

describe('GET /v1/tasks (paged; spec: Endpoints, sort and filters)', () => {
  let lister: { token: string }
  beforeAll(async () => {
    const fresh = await t.createEnterprise(`Lister ${unique()}`)
    lister = { token: fresh.token }
    const team = (await t.call('POST', '/v1/teams', { ...lister, body: { name: 'Listed' } })).body
    const tasks = [
      { name: 'Alpha Report', kind: 'llm', assigneeRole: 'ceo' },
      { name: 'beta Sync', kind: 'deterministic', teamId: team.id },
      { name: 'Gamma Report', kind: 'llm', status: 'deprecated' },
      { name: 'Delta', kind: 'deterministic', assigneeRole: 'coo', teamId: team.id },
      { name: 'Epsilon Report', kind: 'llm' },
    ]
    for (const body of tasks) {
      expect((await t.call('POST', '/v1/tasks', { ...lister, body })).status).toBe(201)
    }
  })
  const list = async (query: string) => (await t.call('GET', `/v1/tasks${query}`, lister)).body
  const slugs = async (query: string) =>
    (await list(query)).data.map((x: { slug: string }) => x.slug)

  it('answers the envelope, sorted by slug descending by default', async () => {
    const page = await list('')
    // The enterprise's five, and the two built-in tasks every enterprise has (DESIGN 10).
    expect(page).toMatchObject({ total: 7, page: 1, limit: 25, pages: 1 })
    expect(page.data.map((x: { slug: string }) => x.slug)).toEqual([
      'os-train-memory',
      'os-improve',
      'gamma-report',
      'epsilon-report',
      'delta',
      'beta-sync',
      'alpha-report',
    ])
    expect(page.data[2]).toMatchObject({
      versionNumber: 1,
      definitionIssueCount: 0,
      origin: 'custom',
    })
  })

  it('pages, clamps the limit, and answers an empty page past the last', async () => {
    // The enterprise's own five (origin=custom leaves out the built-in tasks).
    expect(await list('?origin=custom&limit=2&page=2&order=asc')).toMatchObject({
      total: 5,
      page: 2,
      limit: 2,
      pages: 3,
    })
    expect(await slugs('?origin=custom&limit=2&page=3&order=asc')).toEqual(['gamma-report'])
    expect(await list('?origin=custom&limit=2&page=9')).toMatchObject({
      data: [],
      total: 5,
      pages: 3,
    })
    expect((await list('?limit=1000')).limit).toBe(200)
    expect((await list('?limit=0')).limit).toBe(1)
  })

  it.each(['slug', 'name', 'kind', 'status', 'createdAt', 'updatedAt'])(
    'sorts by %s both ways',
    async (sort) => {
      const asc = await list(`?sort=${sort}&order=asc`)
      const desc = await list(`?sort=${sort}&order=desc`)
      const key = (x: Record<string, string>) => x[sort]!
      const ascKeys = asc.data.map(key)
      expect(ascKeys).toEqual([...ascKeys].sort())
      expect(desc.data.map(key)).toEqual([...ascKeys].reverse().sort().reverse())
    },
  )

  it('sorts an unknown field by the default and ignores unknown filters', async () => {
    expect(await slugs('?sort=password&colour=red')).toEqual(await slugs(''))
  })

  it('filters by team, status, kind, role, origin, and name or slug by any part', async () => {
    const teamId = (await t.call('GET', '/v1/teams', lister)).body.find(
      (x: { slug: string }) => x.slug === 'listed',
    ).id
    expect(await slugs(`?teamId=${teamId}&order=asc`)).toEqual(['beta-sync', 'delta'])
    expect(await slugs('?status=deprecated')).toEqual(['gamma-report'])
    expect(await slugs('?kind=deterministic&order=asc')).toEqual(['beta-sync', 'delta'])
    // delta, and the built-in tasks, which the enterprise-wide coo role runs (DESIGN 10).
    expect(await slugs('?assigneeRole=coo&order=asc')).toEqual([
      'delta',
      'os-improve',
      'os-train-memory',
    ])
    expect((await slugs('?origin=custom')).length).toBe(5)
    expect(await slugs('?origin=builtin&order=asc')).toEqual(['os-improve', 'os-train-memory'])
    expect(await slugs('?origin=copy')).toEqual([])
    expect(await slugs('?name=REPORT&order=asc')).toEqual([
      'alpha-report',
      'epsilon-report',
      'gamma-report',
    ])
    expect(await slugs('?slug=ta-s')).toEqual(['beta-sync'])
    expect(await slugs('?slug=delta')).toEqual(['delta'])
    expect(await slugs('?name=%25')).toEqual([])
    expect(await slugs('?teamId=not-a-uuid')).toEqual([])
  })
})

describe('schedules (DESIGN 7)', () => {
  it('sets a schedule, answers when it fires next, and setting it twice leaves the same value', async () => {
    const task = await create({ name: `Sched ${unique()}` })
    const body = { cron: '0 9 * * 1-5', timezone: 'Europe/Paris', input: { report: 'daily' } }
    const first = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body })
    expect(first.status).toBe(200)
    expect(first.body).toMatchObject({
      cron: '0 9 * * 1-5',
      timezone: 'Europe/Paris',
      input: { report: 'daily' },
      enabled: true,
    })
    expect(Date.parse(first.body.nextFireAt)).toBeGreaterThan(Date.now())
    const second = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body })
    expect({ ...second.body, updatedAt: null }).toEqual({ ...first.body, updatedAt: null })
    expect(await t.sql`select 1 from task_schedules where task_id = ${task.id}`).toHaveLength(1)
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body.schedule).toMatchObject({
      cron: '0 9 * * 1-5',
    })
  })

  it('defaults to UTC and an empty input; a disabled or deprecated schedule fires never', async () => {
    const task = await create({ name: `Sched2 ${unique()}` })
    const res = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, {
      body: { cron: '*/5 * * * *', enabled: false },
    })
    expect(res.body).toMatchObject({ timezone: 'UTC', input: {}, enabled: false, nextFireAt: null })
    await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body: { cron: '*/5 * * * *' } })
    await t.call('POST', `/v1/tasks/${task.id}/versions`, { body: { status: 'deprecated' } })
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body.schedule.nextFireAt).toBeNull()
  })

  it.each([
    [{ cron: '0 9 * *' }, 'cron'],
    [{ cron: '0 0 9 * * 1' }, 'cron'],
    [{ cron: 'every day' }, 'cron'],
    [{ cron: '61 * * * *' }, 'cron'],
    [{ cron: '0 9 * * *', timezone: 'Mars/Olympus' }, 'timezone'],
    [{}, 'cron'],
    [{ cron: '0 9 * * *', input: 'x' }, 'input'],
  ])('refuses %j with a 400 naming %s', async (body, field) => {
    const task = await create({ name: `Bad sched ${unique()}` })
    const res = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body })
    expect(res.status).toBe(400)
    expect(res.body.message).toContain(field)
  })

  it('removes a schedule (again: no change)', async () => {
    const task = await create({ name: `Sched3 ${unique()}` })
    await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body: { cron: '0 * * * *' } })
    expect((await t.call('DELETE', `/v1/tasks/${task.id}/schedule`)).status).toBe(204)
    expect((await t.call('DELETE', `/v1/tasks/${task.id}/schedule`)).status).toBe(204)
    expect((await t.call('GET', `/v1/tasks/${task.id}`)).body.schedule).toBeNull()
  })
})
