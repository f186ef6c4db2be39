import { sealedColumns } from '../../../server/crypto.js'
import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  ConfigApplied,
  ConfigExport,
  ConfigPlan,
  type ConfigDocument,
} from '../../../shared/schemas/config.js'
import { allScopes, type Scope } from '../../../shared/scopes.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { everyKindSecrets, makeEveryKind, type Api } from '../../helpers/config.js'
import { signIn, type TestPerson } from '../../helpers/people.js'

// Configuration as code (issue 48): GET /v1/config, POST /v1/config/plan and /apply. What a user sees:
// the documents, each object's action, the 400/403/409 and that nothing was applied.

let t: TestApp
let source: TestEnterprise
let sourceCeo: TestPerson

const apiOf =
  (token: string): Api =>
  (method, path, body) =>
    t.call(method, path, { token, body })

beforeAll(async () => {
  t = await createTestApp()
  source = await t.createEnterprise(`Source ${randomUUID().slice(0, 8)}`)
  sourceCeo = await signIn(t, 'owner', source)
  await makeEveryKind(apiOf(source.token), apiOf(sourceCeo.session))
}, 120_000)

async function exported(token: string) {
  const res = await t.call('GET', '/v1/config', { token })
  expect(res.status, res.text).toBe(200)
  // Held to its schema; answered as sent (parsing would fill the defaults a document leaves out).
  ConfigExport.parse(res.body)
  return res.body as { base: string; documents: ConfigDocument[] }
}

async function apply(token: string, body: Record<string, unknown>) {
  return t.call('POST', '/v1/config/apply', { token, body: { secrets: everyKindSecrets, ...body } })
}

async function plan(token: string, body: Record<string, unknown>) {
  return t.call('POST', '/v1/config/plan', { token, body })
}

/** A fresh enterprise, its chief executive, and the source's documents applied to it. */
async function copyOfSource() {
  const copy = await t.createEnterprise(`Copy ${randomUUID().slice(0, 8)}`)
  const ceo = await signIn(t, 'owner', copy)
  const { documents } = await exported(source.token)
  const res = await apply(ceo.session, { documents })
  expect(res.status, res.text).toBe(200)
  return { copy, ceo, documents }
}

const find = (docs: ConfigDocument[], kind: string, name: string) =>
  docs.find((d) => d.kind === kind && d.metadata.name === name)!

describe('GET /v1/config', () => {
  it('answers every object as a document: names, never ids, times or secrets', async () => {
    const { documents, base } = await exported(source.token)
    expect(base).toMatch(/^sha256:[0-9a-f]{64}$/)
    const kinds = new Set(documents.map((d) => d.kind))
    expect([...kinds]).toEqual([
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
    ])
    const text = JSON.stringify(documents)
    expect(text).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/)
    expect(text).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:\d\d/)
    for (const secret of Object.values(everyKindSecrets)) expect(text).not.toContain(secret)
    expect(find(documents, 'Task', 'weekly-report').spec).toMatchObject({
      name: 'Weekly report',
      team: 'engineering',
      assigneeRole: 'reviewer',
      schedule: { cron: '0 9 * * 1', timezone: 'Europe/Paris', input: { week: 'last' } },
    })
    expect(find(documents, 'Member', 'Ada Lovelace').spec).toEqual({
      persona: 'Careful.',
      teams: ['engineering'],
      roles: ['engineering/reviewer'],
    })
    // An address changed by hand is written; the one osd made is not.
    expect(find(documents, 'Member', 'Grace Hopper').spec.email).toBe('grace@navy.example')
    expect(find(documents, 'Team', 'engineering').spec).toMatchObject({ lead: 'Ada Lovelace' })
    expect(
      documents.find((d) => d.kind === 'ToolConnection' && d.metadata.name === 'docs'),
    ).toEqual({
      apiVersion: 'osd/v1',
      kind: 'ToolConnection',
      metadata: { name: 'docs', layer: 'team/engineering' },
      spec: {
        url: 'https://docs.example/mcp',
        tokenFrom: 'env:OSD_TOOL_TEAM_ENGINEERING_DOCS_TOKEN',
        description: 'The handbook.',
      },
    })
    expect(find(documents, 'SpendLimits', 'enterprise').spec).toEqual({
      moneyCentsDay: {
        enterprise: 10_000,
        teams: { engineering: 2_500 },
        tasks: { 'weekly-report': 300 },
        members: { 'Ada Lovelace': 150 },
      },
    })
    // A window left at its default is left out, as the other kinds' defaults are.
    expect(find(documents, 'Retention', 'enterprise').spec).toEqual({
      finishedRuns: 'P30D',
      closedChats: null,
    })
    // The service's own tasks and roles are in every enterprise: they have no document.
    expect(documents.some((d) => d.kind === 'Task' && d.metadata.name.startsWith('os-'))).toBe(
      false,
    )
    expect(documents.some((d) => d.kind === 'Role' && d.metadata.name === 'ceo')).toBe(false)
  })

  it('answers the same twice for an unchanged enterprise', async () => {
    const first = await t.call('GET', '/v1/config', { token: source.token })
    const second = await t.call('GET', '/v1/config', { token: source.token })
    expect(second.text).toBe(first.text)
  })

  it('needs the read scope of every kind, naming the first it lacks', async () => {
    const token = await t.tokenWith(
      allScopes.filter((s) => s !== 'members:read'),
      source,
    )
    const res = await t.call('GET', '/v1/config', { token })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'members:read' })
  })

  it('answers 401 without a token, on each route', async () => {
    for (const [method, path] of [
      ['GET', '/v1/config'],
      ['POST', '/v1/config/plan'],
      ['POST', '/v1/config/apply'],
    ] as const) {
      const res = await t.call(method, path, { token: null, body: { documents: [] } })
      expect(res.status).toBe(401)
    }
  })
})

describe('an apply to a second enterprise (the issue: round trip)', () => {
  it('makes an enterprise whose documents are the same, and applying again changes nothing', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const again = await exported(copy.token)
    expect(JSON.stringify(again.documents)).toBe(JSON.stringify(documents))
    const second = await apply(ceo.session, { documents, base: again.base })
    expect(second.status, second.text).toBe(200)
    const answer = ConfigApplied.parse(second.body)
    expect(answer.changes.map((c) => c.action)).toEqual(documents.map(() => 'unchanged'))
    expect(answer.base).toBe(again.base)
    // The secrets went with the apply: the copy's key is the one sent.
    const [key] = await t.sql<{ id: string; secretCiphertext: Buffer }[]>`
      select id, secret_ciphertext from llm_connections where enterprise_id = ${copy.id} and layer = 'enterprise'`
    expect(t.sealer.open(key!.secretCiphertext, sealedColumns.llmSecret, key!.id)).toBe(
      everyKindSecrets.OSD_MODEL_KEY_PROVIDER_A,
    )
  }, 120_000)
})

describe('a change of one task', () => {
  it('is planned as an update naming the field, applied as a new version, then unchanged', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const changed = structuredClone(documents)
    find(changed, 'Task', 'weekly-report').spec.skillMd = '# Weekly report\n\nNow shorter.\n'
    const planned = ConfigPlan.parse((await plan(copy.token, { documents: changed })).body)
    const updates = planned.changes.filter((c) => c.action !== 'unchanged')
    expect(updates).toHaveLength(1)
    expect(updates[0]).toMatchObject({
      kind: 'Task',
      name: 'weekly-report',
      action: 'update',
      fields: [{ path: 'spec.skillMd', new: '# Weekly report\n\nNow shorter.\n' }],
    })
    const res = await apply(ceo.session, { documents: changed, base: planned.base })
    expect(res.status, res.text).toBe(200)
    const [task] = (await t.call('GET', '/v1/tasks?slug=weekly-report', { token: copy.token })).body
      .data
    const read = (await t.call('GET', `/v1/tasks/${task.id}`, { token: copy.token })).body
    expect(read.skillMd).toBe('# Weekly report\n\nNow shorter.\n')
    // Made by the first apply (version 1), changed by this one (version 2).
    expect(read.versions.map((v: { message: string }) => v.message)).toEqual([
      'applied from config',
      'applied from config',
    ])
    const after = ConfigPlan.parse((await plan(copy.token, { documents: changed })).body)
    expect(after.changes.every((c) => c.action === 'unchanged')).toBe(true)
  }, 120_000)
})

describe('retention (a kind of one document)', () => {
  it('plans and applies a window through the retention settings, refuses one that is no duration', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    expect(
      (await t.call('GET', '/v1/enterprise/retention', { token: copy.token })).body,
    ).toMatchObject({ finishedRuns: 'P30D', closedChats: null, webhookDeliveries: 'P30D' })
    const changed = structuredClone(documents)
    find(changed, 'Retention', 'enterprise').spec = { finishedRuns: 'P7D', archive: false }
    const planned = ConfigPlan.parse((await plan(copy.token, { documents: changed })).body)
    const updates = planned.changes.filter((c) => c.action !== 'unchanged')
    expect(updates).toEqual([
      expect.objectContaining({ kind: 'Retention', name: 'enterprise', action: 'update' }),
    ])
    expect(updates[0]!.fields!.map((f) => f.path).sort()).toEqual([
      'spec.archive',
      'spec.closedChats',
      'spec.finishedRuns',
    ])
    const res = await apply(ceo.session, { documents: changed, base: planned.base })
    expect(res.status, res.text).toBe(200)
    expect((await t.call('GET', '/v1/enterprise/retention', { token: copy.token })).body).toEqual({
      finishedRuns: 'P7D',
      closedChats: 'P180D', // left out: its default
      webhookDeliveries: 'P30D',
      archive: false,
    })
    const again = ConfigPlan.parse((await plan(copy.token, { documents: changed })).body)
    expect(again.changes.every((c) => c.action === 'unchanged')).toBe(true)

    find(changed, 'Retention', 'enterprise').spec = { finishedRuns: 'ninety days' }
    const refused = await apply(ceo.session, { documents: changed })
    expect(refused.status).toBe(400)
    expect(refused.body).toMatchObject({
      error: 'config_document_invalid',
      document: { kind: 'Retention', name: 'enterprise' },
      field: 'spec.finishedRuns',
    })
    const misnamed = structuredClone(documents)
    find(misnamed, 'Retention', 'enterprise').metadata.name = 'runs'
    expect((await plan(copy.token, { documents: misnamed })).status).toBe(400)
  }, 120_000)

  it('needs enterprise:write to change it', async () => {
    const { copy, documents } = await copyOfSource()
    const changed = structuredClone(documents)
    find(changed, 'Retention', 'enterprise').spec = { finishedRuns: 'P1D' }
    const token = await t.tokenWith(
      allScopes.filter((s) => s !== 'enterprise:write'),
      copy,
    )
    const res = await apply(token, { documents: changed })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'enterprise:write' })
    expect(
      (await t.call('GET', '/v1/enterprise/retention', { token: copy.token })).body.finishedRuns,
    ).toBe('P30D')
  }, 120_000)
})

describe('all or nothing', () => {
  let copy: TestEnterprise
  let ceo: TestPerson
  let documents: ConfigDocument[]
  beforeAll(async () => {
    ;({ copy, ceo, documents } = await copyOfSource())
  }, 120_000)

  const withValidChange = () => {
    const docs = structuredClone(documents)
    find(docs, 'Team', 'operations').spec.charter = 'Changed.'
    return docs
  }

  async function unchangedSince(before: { documents: ConfigDocument[] }) {
    const now = await exported(copy.token)
    expect(JSON.stringify(now.documents)).toBe(JSON.stringify(before.documents))
  }

  it('an invalid document beside a valid change: 400 naming the document and the field', async () => {
    const before = await exported(copy.token)
    const docs = withValidChange()
    find(docs, 'Task', 'publish').spec.skilMd = 'typo'
    const res = await apply(ceo.session, { documents: docs })
    expect(res.status).toBe(400)
    const index = docs.indexOf(find(docs, 'Task', 'publish'))
    expect(res.body).toMatchObject({
      error: 'config_document_invalid',
      document: { index, kind: 'Task', name: 'publish' },
      field: 'spec.skilMd',
    })
    expect(res.body.message).toContain('spec.skilMd')
    await unchangedSince(before)
  })

  it('a reference to nothing: 400 naming the field', async () => {
    const docs = withValidChange()
    find(docs, 'Member', 'Ada Lovelace').spec.roles = ['engineering/reviewer', 'nobody']
    const res = await apply(ceo.session, { documents: docs })
    expect(res.body).toMatchObject({
      error: 'config_document_invalid',
      document: { kind: 'Member', name: 'Ada Lovelace' },
      field: 'spec.roles',
    })
  })

  it('a change the domain refuses (a definition check) undoes the changes before it', async () => {
    const before = await exported(copy.token)
    const docs = withValidChange()
    // os.mail_send without a gate on it: gate_required_for_tool (spec: Definition checks).
    Object.assign(find(docs, 'Task', 'weekly-report').spec, { gates: [] })
    const res = await apply(ceo.session, { documents: docs })
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toMatch(/gate_required_for_tool|invalid_task_definition/)
    expect(res.body.message).toContain('Task weekly-report')
    expect(res.body.document).toMatchObject({ kind: 'Task', name: 'weekly-report' })
    // The field, as a schema fault names it: what the refusal asks to change.
    expect(res.body.field).toBe('spec.gates')
    await unchangedSince(before)
  })

  it('a change the token has no scope for: 403 naming it, nothing applied', async () => {
    const before = await exported(copy.token)
    const docs = withValidChange()
    find(docs, 'Task', 'publish').spec.name = 'Publish it'
    const token = await t.tokenWith(
      allScopes.filter((s) => s !== 'tasks:write'),
      copy,
    )
    const res = await apply(token, { documents: docs })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'tasks:write' })
    expect(res.body.message).toContain('Task publish')
    await unchangedSince(before)
  })

  it("a member's teams changed by a token without teams:write: 403 naming it, nothing applied", async () => {
    // Through the API a member joins or leaves a team by POST/DELETE /v1/teams/{id}/members, teams:write.
    const token = await t.tokenWith(
      allScopes.filter((s) => s !== 'teams:write'),
      copy,
    )
    const before = await exported(copy.token)
    const joins = structuredClone(documents)
    find(joins, 'Member', 'Grace Hopper').spec.teams = ['engineering', 'operations']
    const leaves = structuredClone(documents)
    find(leaves, 'Member', 'Grace Hopper').spec.teams = []
    const made = structuredClone(documents)
    made.push({
      apiVersion: 'osd/v1',
      kind: 'Member',
      metadata: { name: 'Alan Turing' },
      spec: { teams: ['operations'] },
    })
    for (const docs of [joins, leaves, made]) {
      const res = await apply(token, { documents: docs })
      expect(res.status, res.text).toBe(403)
      expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'teams:write' })
      expect(res.body.message).toMatch(/of Member (Grace Hopper|Alan Turing) \(spec\.teams\)/)
      await unchangedSince(before)
    }
    // A team role granted puts its holder on the team, as POST /v1/members/{id}/roles does with
    // members:write alone: that join needs no more.
    const granted = structuredClone(documents)
    Object.assign(find(granted, 'Member', 'Grace Hopper').spec, {
      teams: ['engineering', 'operations'],
      roles: ['engineering/reviewer', 'writer'],
    })
    const res = await apply(token, { documents: granted, dryRun: true })
    expect(res.status, res.text).toBe(200)
  })

  it('an enterprise tool connection changed by a token: 403 ceo_bind_only, nothing applied', async () => {
    const before = await exported(copy.token)
    const docs = withValidChange()
    const vcs = docs.find((d) => d.kind === 'ToolConnection' && d.metadata.name === 'vcs')!
    vcs.spec.description = 'changed by a token'
    const res = await apply(copy.token, { documents: docs })
    expect(res.status, res.text).toBe(403)
    expect(res.body.error).toBe('ceo_bind_only')
    expect(res.body.document).toMatchObject({ kind: 'ToolConnection', name: 'vcs' })
    await unchangedSince(before)
  })

  it("a tool server's address osd may not reach: 400 url_not_allowed, nothing applied", async () => {
    const before = await exported(copy.token)
    const docs = withValidChange()
    const docsConn = docs.find((d) => d.kind === 'ToolConnection' && d.metadata.name === 'docs')!
    docsConn.spec.url = 'http://169.254.169.254/latest/meta-data'
    const res = await apply(ceo.session, { documents: docs })
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toBe('url_not_allowed')
    expect(res.body).toMatchObject({
      document: { kind: 'ToolConnection', name: 'docs', layer: 'team/engineering' },
      field: 'spec.url',
    })
    await unchangedSince(before)
  })

  it('a dry run answers the changes and keeps none', async () => {
    const before = await exported(copy.token)
    const res = await apply(ceo.session, { documents: withValidChange(), dryRun: true })
    expect(res.status, res.text).toBe(200)
    const answer = ConfigApplied.parse(res.body)
    expect(answer.dryRun).toBe(true)
    expect(answer.base).toBe(before.base)
    expect(answer.changes.filter((c) => c.action === 'update').map((c) => c.name)).toEqual([
      'operations',
    ])
    await unchangedSince(before)
  })
})

describe('two applies on one base', () => {
  it('one wins, the other answers 409 config_changed', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const { base } = await exported(copy.token)
    const variants = ['First.', 'Second.'].map((charter) => {
      const docs = structuredClone(documents)
      find(docs, 'Team', 'engineering').spec.charter = charter
      return docs
    })
    const answers = await Promise.all(
      variants.map((docs) => apply(ceo.session, { documents: docs, base })),
    )
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409])
    const lost = answers.find((a) => a.status === 409)!
    expect(lost.body.error).toBe('config_changed')
    const won = variants[answers.findIndex((a) => a.status === 200)]!
    const now = await exported(copy.token)
    expect(find(now.documents, 'Team', 'engineering').spec.charter).toBe(
      find(won, 'Team', 'engineering').spec.charter,
    )
  }, 120_000)
})

describe('prune', () => {
  it('deletes what no document names, only of the kinds the documents hold', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const docs = documents.filter((d) => !(d.kind === 'Role' && d.metadata.name === 'writer'))
    // Grace holds writer: her document no longer names it.
    find(docs, 'Member', 'Grace Hopper').spec.roles = []
    const planned = ConfigPlan.parse(
      (await plan(copy.token, { documents: docs, prune: true })).body,
    )
    expect(planned.changes.filter((c) => c.action === 'delete')).toMatchObject([
      { kind: 'Role', name: 'writer' },
    ])
    // Without prune nothing is deleted.
    const kept = ConfigPlan.parse((await plan(copy.token, { documents: docs })).body)
    expect(kept.changes.some((c) => c.action === 'delete')).toBe(false)
    // Only tasks: no team, member or role is deleted, though no document names them.
    const tasksOnly = docs.filter((d) => d.kind === 'Task')
    const onlyTasks = ConfigPlan.parse(
      (await plan(copy.token, { documents: tasksOnly, prune: true })).body,
    )
    expect(onlyTasks.changes.every((c) => c.kind === 'Task')).toBe(true)
    const res = await apply(ceo.session, { documents: docs, prune: true })
    expect(res.status, res.text).toBe(200)
    const roles = (await t.call('GET', '/v1/roles', { token: copy.token })).body
    expect(roles.some((r: { slug: string }) => r.slug === 'writer')).toBe(false)
  }, 120_000)

  it('never deletes a task with a run under way, nor a member a waiting run needs: 409', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const teams = (await t.call('GET', '/v1/teams', { token: copy.token })).body
    const general = teams.find((team: { slug: string }) => team.slug === 'general')
    const made = await t.call('POST', '/v1/tasks', {
      token: copy.token,
      body: { name: 'Busy', teamId: general.id, assigneeRole: 'coo' },
    })
    const started = await t.call('POST', `/v1/tasks/${made.body.id}/runs`, {
      token: copy.token,
      body: {},
    })
    expect(started.status, started.text).toBe(201)
    const withoutTask = await apply(ceo.session, { documents, prune: true })
    expect(withoutTask.status).toBe(409)
    expect(withoutTask.body.error).toBe('task_busy')
    expect(withoutTask.body.message).toContain('busy')
    // Named, the task stays; the coo holder its queued run went to is needed by it.
    const busy = (await exported(copy.token)).documents.find(
      (d) => d.kind === 'Task' && d.metadata.name === 'busy',
    )!
    const docs = [
      ...documents.filter(
        (d) => !(d.kind === 'Member' && d.metadata.name === 'Chief Operating Officer'),
      ),
      busy,
    ]
    const withoutMember = await apply(ceo.session, { documents: docs, prune: true })
    expect(withoutMember.status, withoutMember.text).toBe(409)
    expect(withoutMember.body.error).toBe('config_prune_refused')
    expect(withoutMember.body.message).toContain('Chief Operating Officer')
    expect(withoutMember.body.runs).toEqual([started.body.id])
  }, 120_000)
})

describe('secrets', () => {
  it('compares a sent secret with the kept one: a new value is an update; none sent, no change', async () => {
    const { copy, ceo, documents } = await copyOfSource()
    const secrets = { ...everyKindSecrets, OSD_TOOL_TEAM_ENGINEERING_DOCS_TOKEN: 'rotated' }
    const planned = ConfigPlan.parse((await plan(ceo.session, { documents, secrets })).body)
    expect(planned.changes.filter((c) => c.action === 'update')).toMatchObject([
      {
        kind: 'ToolConnection',
        name: 'docs',
        fields: [{ path: 'spec.tokenFrom (value)' }],
      },
    ])
    expect(JSON.stringify(planned)).not.toContain('rotated')
    const none = ConfigPlan.parse((await plan(copy.token, { documents })).body)
    expect(none.changes.every((c) => c.action === 'unchanged')).toBe(true)
    const res = await t.call('POST', '/v1/config/apply', {
      token: ceo.session,
      body: { documents, secrets },
    })
    expect(res.status, res.text).toBe(200)
    const [row] = await t.sql<{ id: string; tokenCiphertext: Buffer }[]>`
      select id, token_ciphertext from tool_connections where enterprise_id = ${copy.id} and name = 'docs'`
    expect(t.sealer.open(row!.tokenCiphertext, sealedColumns.toolToken, row!.id)).toBe('rotated')
  }, 120_000)

  it('an export never names one variable for two connections whose derived names meet', async () => {
    // gh-api and gh_api on one team, team_engineering_crm on the enterprise and crm on team
    // engineering: each pair derives one OSD_TOOL_..._TOKEN, so an apply would give both one token.
    const pair = await t.createEnterprise(`Pair ${randomUUID().slice(0, 8)}`)
    const ceo = await signIn(t, 'owner', pair)
    const team = await t.call('POST', '/v1/teams', {
      token: pair.token,
      body: { name: 'Engineering' },
    })
    expect(team.status, team.text).toBe(201)
    const connect = async (name: string, token: string, at: Record<string, unknown>) => {
      const res = await t.call('POST', '/v1/tools/bindings', {
        token: ceo.session,
        body: { name, url: `https://${name.replace(/_/g, '-')}.example/mcp`, token, ...at },
      })
      expect(res.status, res.text).toBe(201)
    }
    const onTeam = { layer: 'team', layerId: team.body.id }
    await connect('gh-api', 'token-1', onTeam)
    await connect('gh_api', 'token-2', onTeam)
    await connect('team_engineering_crm', 'token-3', { layer: 'enterprise' })
    await connect('crm', 'token-4', onTeam)
    await connect('docs', 'token-5', onTeam)

    const { documents } = await exported(pair.token)
    const tools = documents.filter((d) => d.kind === 'ToolConnection')
    const names = tools.map((d) => d.spec.tokenFrom as string)
    expect(new Set(names).size).toBe(names.length)
    for (const name of names.filter((n) => !n.endsWith('_DOCS_TOKEN')))
      expect(name).toMatch(/^env:OSD_TOOL_TEAM_ENGINEERING_(GH_API|CRM)_TOKEN_[0-9A-F]{6}$/)
    // A name no other object meets is the one it always was.
    expect(names).toContain('env:OSD_TOOL_TEAM_ENGINEERING_DOCS_TOKEN')
    // The same again: an export is stable.
    expect((await exported(pair.token)).documents).toEqual(documents)

    // Applied to another enterprise with each variable's value, each connection keeps its own token.
    const copy = await t.createEnterprise(`Pair copy ${randomUUID().slice(0, 8)}`)
    const copyCeo = await signIn(t, 'owner', copy)
    const secrets = Object.fromEntries(
      tools.map((d, i) => [(d.spec.tokenFrom as string).slice('env:'.length), `value-${i}`]),
    )
    const res = await t.call('POST', '/v1/config/apply', {
      token: copyCeo.session,
      body: { documents, secrets },
    })
    expect(res.status, res.text).toBe(200)
    const again = await t.call('POST', '/v1/config/plan', {
      token: copyCeo.session,
      body: { documents, secrets },
    })
    expect(again.body.changes.every((c: { action: string }) => c.action === 'unchanged')).toBe(true)
    expect((await exported(copy.token)).documents).toEqual(documents)
  }, 120_000)

  it('comparing one needs the write scope of its kind', async () => {
    const token = await t.tokenWith(
      allScopes.filter((s) => s !== 'tools:write'),
      source,
    )
    const { documents } = await exported(source.token)
    const res = await plan(token, { documents, secrets: { OSD_TOOL_VCS_TOKEN: 'guess' } })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ error: 'api_token_scope', needed: 'tools:write' })
  })

  it('a secret to write that osctl did not send: 400 naming the document and the variable', async () => {
    const copy = await t.createEnterprise(`Nosecret ${randomUUID().slice(0, 8)}`)
    const { documents } = await exported(source.token)
    const keys = documents.filter((d) => d.kind === 'ModelKey' && !d.metadata.layer)
    const res = await t.call('POST', '/v1/config/apply', {
      token: copy.token,
      body: { documents: keys },
    })
    expect(res.status).toBe(400)
    expect(res.body).toMatchObject({ error: 'config_document_invalid', field: 'spec.tokenFrom' })
    expect(res.body.message).toContain('OSD_MODEL_KEY_PROVIDER_A')
  })
})

describe('enterprises', () => {
  it("reads only the caller's enterprise, and names of another are not found", async () => {
    const { documents } = await exported(t.other.token)
    expect(documents.some((d) => d.metadata.name === 'Ada Lovelace')).toBe(false)
    const docs = [
      {
        apiVersion: 'osd/v1',
        kind: 'Task',
        metadata: { name: 'intruder' },
        spec: { name: 'Intruder', team: 'engineering' },
      },
    ]
    const res = await plan(t.other.token, { documents: docs })
    expect(res.body).toMatchObject({ error: 'config_document_invalid', field: 'spec.team' })
  })

  it('plans with the read scope of the documents’ kinds only', async () => {
    const token = await t.tokenWith(['tasks:read'] as Scope[], source)
    const { documents } = await exported(source.token)
    const tasks = documents.filter((d) => d.kind === 'Task')
    const res = await plan(token, { documents: tasks })
    expect(res.status, res.text).toBe(200)
    const refused = await plan(token, { documents })
    expect(refused.status).toBe(403)
    expect(refused.body.needed).toBe('enterprise:read')
  })
})
