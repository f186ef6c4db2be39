import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type Answer, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

let t: TestApp
// Resources of the other enterprise, for the foreign-id checks.
let foreign: { team: string; member: string; role: string }

const png = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
)

beforeAll(async () => {
  t = await createTestApp()
  const as = { token: t.other.token }
  foreign = {
    team: (await t.call('POST', '/v1/teams', { ...as, body: { name: 'Their Team' } })).body.id,
    member: (await t.call('POST', '/v1/members', { ...as, body: { name: 'Their Member' } })).body
      .id,
    role: (await t.call('POST', '/v1/roles', { ...as, body: { name: 'Their Role' } })).body.id,
  }
})

async function team(name = `Team ${randomUUID().slice(0, 8)}`, extra: object = {}) {
  const res = await t.call('POST', '/v1/teams', { body: { name, ...extra } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body
}
async function member(name = `Member ${randomUUID().slice(0, 8)}`) {
  const res = await t.call('POST', '/v1/members', { body: { name } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body
}
async function role(name = `Role ${randomUUID().slice(0, 8)}`, teamId?: string) {
  const res = await t.call('POST', '/v1/roles', { body: { name, teamId } })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body
}
async function task(name: string, extra: object = {}) {
  const [row] = await t.sql<{ id: string }[]>`
    insert into tasks (enterprise_id, slug, name) values (${t.acme.id}, ${name.toLowerCase().replace(/\W+/g, '-')}, ${name})
    returning id`
  if (Object.keys(extra).length)
    await t.sql`update tasks set ${t.sql(extra as Record<string, unknown>)} where id = ${row!.id}`
  return row!.id
}

describe('a new enterprise', () => {
  it('has a team, the built-in roles ceo and coo, and a member holding each', async () => {
    const fresh = await t.createEnterprise('Brand New')
    const teams = (await t.call('GET', '/v1/teams', { token: fresh.token })).body
    expect(teams.map((x: { slug: string }) => x.slug)).toEqual(['general'])
    const roles = (await t.call('GET', '/v1/roles', { token: fresh.token })).body
    expect(
      roles.map((r: { slug: string; builtin: boolean; teamId: null; holderCount: number }) => [
        r.slug,
        r.builtin,
        r.teamId,
        r.holderCount,
      ]),
    ).toEqual([
      ['ceo', true, null, 1],
      ['coo', true, null, 1],
    ])
    const members = (await t.call('GET', '/v1/members', { token: fresh.token })).body
    expect(members.map((m: { email: string }) => m.email).sort()).toEqual([
      'chief-executive@brand-new.osd.local',
      'chief-operating-officer@brand-new.osd.local',
    ])
    expect(members.every((m: { teams: unknown[] }) => m.teams.length === 1)).toBe(true)
  })
})

describe('teams', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/teams' })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/teams',
    body: () => ({ name: `Checked ${randomUUID()}` }),
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/teams/${foreign.team}`,
    foreign: () => ({ path: `/v1/teams/${foreign.team}` }),
    notFoundCode: 'team_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'PATCH',
    path: () => `/v1/teams/${foreign.team}`,
    body: () => ({ charter: 'x' }),
    foreign: () => ({ path: `/v1/teams/${foreign.team}`, body: { charter: 'x' } }),
    notFoundCode: 'team_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => `/v1/teams/${foreign.team}`,
    foreign: () => ({ path: `/v1/teams/${foreign.team}` }),
    notFoundCode: 'team_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => `/v1/teams/${foreign.team}/members`,
    body: () => ({ memberId: foreign.member }),
    foreign: () => ({
      path: `/v1/teams/${foreign.team}/members`,
      body: { memberId: foreign.member },
    }),
    notFoundCode: 'team_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => `/v1/teams/${foreign.team}/members/${foreign.member}`,
    foreign: () => ({ path: `/v1/teams/${foreign.team}/members/${foreign.member}` }),
    notFoundCode: 'team_not_found',
  })

  it('creates a team with a slug made from the name, and answers it as a plain array entry', async () => {
    const created = await team('Platform Ops Team')
    expect(created).toMatchObject({
      slug: 'platform-ops-team',
      name: 'Platform Ops Team',
      charter: '',
      leadMemberId: null,
      concurrentRunLimit: null,
      members: [],
    })
    const list = await t.call('GET', '/v1/teams')
    expect(Array.isArray(list.body)).toBe(true)
    expect(list.body.find((x: { id: string }) => x.id === created.id)).toEqual(created)
    expect((await t.call('GET', `/v1/teams/${created.id}`)).body).toEqual(created)
  })

  it('cleans a sent slug and refuses a taken one with 409 team_slug_taken', async () => {
    const created = await team('Anything', { slug: '  Ünïque  Slug!! ' })
    expect(created.slug).toBe('unique-slug')
    const again = await t.call('POST', '/v1/teams', {
      body: { name: 'Other', slug: 'unique-slug' },
    })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('team_slug_taken')
  })

  it.each([
    [{ name: '' }, 'invalid_name'],
    [{ name: 'x'.repeat(201) }, 'invalid_name'],
    [{}, 'invalid_name'],
    [{ name: 'ok', slug: '!!!' }, 'invalid_slug'],
    [{ name: 'ok', slug: 'a'.repeat(81) }, 'invalid_slug'],
    [{ name: 'ok', concurrentRunLimit: 0 }, 'invalid_request'],
    [{ name: 'ok', concurrentRunLimit: 1.5 }, 'invalid_request'],
    [{ name: 'ok', leadMemberId: 'not-a-uuid' }, 'invalid_request'],
  ])('refuses %j with 400 %s', async (body, code) => {
    const res = await t.call('POST', '/v1/teams', { body })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe(code)
  })

  it('needs a lead that is a member of the enterprise', async () => {
    const missing = await t.call('POST', '/v1/teams', {
      body: { name: 'Led', leadMemberId: randomUUID() },
    })
    expect(missing.status).toBe(404)
    expect(missing.body.error).toBe('member_not_found')
    const theirs = await t.call('POST', '/v1/teams', {
      body: { name: 'Led', leadMemberId: foreign.member },
    })
    expect(theirs.body.error).toBe('member_not_found')
    const lead = await member()
    const led = await team('Led Well', { leadMemberId: lead.id })
    expect(led.leadMemberId).toBe(lead.id)
  })

  it('changes name, charter, lead and limit, and clears lead and limit with null', async () => {
    const lead = await member()
    const created = await team()
    const changed = await t.call('PATCH', `/v1/teams/${created.id}`, {
      body: {
        name: 'Renamed',
        charter: 'Keep the lights on',
        leadMemberId: lead.id,
        concurrentRunLimit: 3,
      },
    })
    expect(changed.status).toBe(200)
    expect(changed.body).toMatchObject({
      name: 'Renamed',
      charter: 'Keep the lights on',
      leadMemberId: lead.id,
      concurrentRunLimit: 3,
      slug: created.slug,
    })
    const cleared = await t.call('PATCH', `/v1/teams/${created.id}`, {
      body: { leadMemberId: null, concurrentRunLimit: null },
    })
    expect(cleared.body).toMatchObject({
      name: 'Renamed',
      leadMemberId: null,
      concurrentRunLimit: null,
    })
  })

  it('adds a member (again changes nothing), grants a role with it, and removes them with the team roles', async () => {
    const created = await team()
    const teamRole = await role('Reviewer', created.id)
    const wide = await role()
    const m = await member()
    const added = await t.call('POST', `/v1/teams/${created.id}/members`, {
      body: { memberId: m.id, roleId: teamRole.id },
    })
    expect(added.status).toBe(201)
    expect(added.body.members.map((x: { id: string }) => x.id)).toEqual([m.id])
    const twice = await t.call('POST', `/v1/teams/${created.id}/members`, {
      body: { memberId: m.id },
    })
    expect(twice.body.members).toHaveLength(1)
    await t.call('POST', `/v1/members/${m.id}/roles`, { body: { roleId: wide.id } })
    expect(
      (await t.call('GET', `/v1/members/${m.id}`)).body.roles
        .map((r: { id: string }) => r.id)
        .sort(),
    ).toEqual([teamRole.id, wide.id].sort())

    const malformed = await t.call('DELETE', `/v1/teams/${created.id}/members/not-a-uuid`)
    expect(malformed.status).toBe(404)
    expect(malformed.body.error).toBe('member_not_found') // the id that names nothing, not the team
    const removed = await t.call('DELETE', `/v1/teams/${created.id}/members/${m.id}`)
    expect(removed.status).toBe(204)
    const after = (await t.call('GET', `/v1/members/${m.id}`)).body
    expect(after.teams).toEqual([])
    expect(after.roles.map((r: { id: string }) => r.id)).toEqual([wide.id]) // the team's role went with the team
  })

  it("refuses another team's role, and ids of nothing, with their own codes", async () => {
    const a = await team()
    const b = await team()
    const bRole = await role('B only', b.id)
    const m = await member()
    const mismatch = await t.call('POST', `/v1/teams/${a.id}/members`, {
      body: { memberId: m.id, roleId: bRole.id },
    })
    expect(mismatch.status).toBe(409)
    expect(mismatch.body.error).toBe('role_team_mismatch')
    const noMember = await t.call('POST', `/v1/teams/${a.id}/members`, {
      body: { memberId: foreign.member },
    })
    expect(noMember.body.error).toBe('member_not_found')
    const noRole = await t.call('POST', `/v1/teams/${a.id}/members`, {
      body: { memberId: m.id, roleId: foreign.role },
    })
    expect(noRole.body.error).toBe('role_not_found')
    const malformed = await t.call('GET', '/v1/teams/not-a-uuid')
    expect(malformed.status).toBe(404)
    expect(malformed.body.error).toBe('team_not_found')
  })

  it('grants a role on a team by the rule of granting it: the same inputs are refused the same way', async () => {
    const onTeam = await team()
    const own = { role: (await role()).id, member: (await member()).id }
    const removed = (await member()).id
    expect((await t.call('DELETE', `/v1/members/${removed}`)).status).toBe(204)
    const cases = [
      { roleId: own.role, memberId: foreign.member },
      { roleId: own.role, memberId: removed },
      { roleId: own.role, memberId: randomUUID() },
      { roleId: foreign.role, memberId: own.member },
      { roleId: randomUUID(), memberId: own.member },
      { roleId: foreign.role, memberId: foreign.member },
    ]
    for (const { roleId, memberId } of cases) {
      const granted = await t.call('POST', `/v1/roles/${roleId}/members`, { body: { memberId } })
      const added = await t.call('POST', `/v1/teams/${onTeam.id}/members`, {
        body: { memberId, roleId },
      })
      const answer = (res: typeof granted) => [res.status, res.body.error]
      expect(answer(added), JSON.stringify({ roleId, memberId })).toEqual(answer(granted))
      expect(granted.status).toBe(404)
    }
    expect((await t.call('GET', `/v1/teams/${onTeam.id}`)).body.members).toEqual([])
    const added = await t.call('POST', `/v1/teams/${onTeam.id}/members`, {
      body: { memberId: own.member, roleId: own.role },
    })
    expect(added.status).toBe(201)
    const holder = (await t.call('GET', `/v1/members/${own.member}`)).body
    expect(holder.roles.map((r: { id: string }) => r.id)).toEqual([own.role])
    expect(holder.teams.map((x: { id: string }) => x.id)).toEqual([onTeam.id])
  })

  it('refuses to delete a team that tasks belong to, naming them', async () => {
    const created = await team()
    await task('Owned Task', { team_id: created.id })
    const res = await t.call('DELETE', `/v1/teams/${created.id}`)
    expect(res.status).toBe(409)
    expect(res.body.error).toBe('team_has_tasks')
    expect(res.body.tasks.map((x: { slug: string }) => x.slug)).toEqual(['owned-task'])
    expect(res.body.message).toContain('owned-task')
  })

  it('deletes a team with its memberships and roles, but never the last one', async () => {
    const fresh = await t.createEnterprise('One Team Only')
    const as = { token: fresh.token }
    const [general] = (await t.call('GET', '/v1/teams', as)).body
    const last = await t.call('DELETE', `/v1/teams/${general.id}`, as)
    expect(last.status).toBe(409)
    expect(last.body.error).toBe('team_last')

    const second = (await t.call('POST', '/v1/teams', { ...as, body: { name: 'Second' } })).body
    const secondRole = (
      await t.call('POST', '/v1/roles', { ...as, body: { name: 'Second Role', teamId: second.id } })
    ).body
    expect((await t.call('DELETE', `/v1/teams/${second.id}`, as)).status).toBe(204)
    expect((await t.call('GET', `/v1/teams/${second.id}`, as)).status).toBe(404)
    expect((await t.call('GET', `/v1/roles/${secondRole.id}`, as)).status).toBe(404)
    expect((await t.call('DELETE', `/v1/teams/${general.id}`, as)).body.error).toBe('team_last')
  })
})

describe('members', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/members' })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/members',
    body: () => ({ name: `Checked ${randomUUID()}` }),
  })
  for (const [method, suffix, body] of [
    ['GET', '', undefined],
    ['PATCH', '', { persona: 'x' }],
    ['DELETE', '', undefined],
    ['GET', '/avatar', undefined],
    ['PUT', '/avatar', { dataUrl: `data:image/png;base64,${png.toString('base64')}` }],
    ['DELETE', '/avatar', undefined],
    ['POST', '/roles', { roleId: randomUUID() }],
  ] as const) {
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/members/${foreign.member}${suffix}`,
      body: () => body,
      foreign: () => ({ path: `/v1/members/${foreign.member}${suffix}`, body }),
      notFoundCode: 'member_not_found',
    })
  }
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => `/v1/members/${foreign.member}/roles/${foreign.role}`,
    foreign: () => ({ path: `/v1/members/${foreign.member}/roles/${foreign.role}` }),
    notFoundCode: 'member_not_found',
  })

  it('derives the email from the name, ignoring a sent one', async () => {
    const res = await t.call('POST', '/v1/members', {
      body: { name: 'Zoë  Müller-Smith', email: 'mine@example.com', persona: 'Careful and kind.' },
    })
    expect(res.status).toBe(201)
    expect(res.body).toMatchObject({
      name: 'Zoë  Müller-Smith',
      email: 'zoe-muller-smith@acme.osd.local',
      persona: 'Careful and kind.',
      avatarUrl: null,
      roles: [],
      teams: [],
      lastAssignedAt: null,
    })
  })

  it('uses OSD_MAIL_DOMAIN for the email', async () => {
    const other = await createTestApp({ mailDomain: 'mail.example.org' })
    const res = await other.call('POST', '/v1/members', { body: { name: 'Pat' } })
    expect(res.body.email).toBe('pat@acme.mail.example.org')
  })

  it('refuses a member whose derived email exists with 409 member_email_taken', async () => {
    await member('Same Name')
    const again = await t.call('POST', '/v1/members', { body: { name: 'same name!' } })
    expect(again.status).toBe(409)
    expect(again.body.error).toBe('member_email_taken')
  })

  it('refuses a name without letters or digits, or too long', async () => {
    for (const name of ['!!!', '', 'x'.repeat(201)]) {
      const res = await t.call('POST', '/v1/members', { body: { name } })
      expect(res.status).toBe(400)
      expect(res.body.error).toBe('invalid_name')
    }
  })

  it('changes name, email and persona; an email must be valid and unique', async () => {
    const a = await member()
    const b = await member()
    const changed = await t.call('PATCH', `/v1/members/${a.id}`, {
      body: { name: 'Renamed Person', email: 'Renamed@Example.com', persona: 'new' },
    })
    expect(changed.status).toBe(200)
    expect(changed.body).toMatchObject({
      name: 'Renamed Person',
      email: 'renamed@example.com',
      persona: 'new',
    })
    const taken = await t.call('PATCH', `/v1/members/${b.id}`, {
      body: { email: 'renamed@example.com' },
    })
    expect(taken.status).toBe(409)
    expect(taken.body.error).toBe('member_email_taken')
    const invalid = await t.call('PATCH', `/v1/members/${b.id}`, {
      body: { email: 'not an email' },
    })
    expect(invalid.status).toBe(400)
    expect(invalid.body.message).toContain('email')
  })

  it('keeps a picture: put, get the bytes with their type, delete, then 404', async () => {
    const m = await member()
    expect((await t.call('GET', `/v1/members/${m.id}/avatar`)).status).toBe(404)
    const put = await t.call('PUT', `/v1/members/${m.id}/avatar`, {
      body: { dataUrl: `data:image/png;base64,${png.toString('base64')}` },
    })
    expect(put.body).toEqual({ contentType: 'image/png', bytes: png.length })
    const res = await t.app.request(`/v1/members/${m.id}/avatar`, {
      headers: { authorization: `Bearer ${t.acme.token}` },
    })
    await t.expectDocumented('GET', `/v1/members/${m.id}/avatar`, res)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('image/png')
    expect(Buffer.from(await res.arrayBuffer()).equals(png)).toBe(true)
    expect((await t.call('GET', `/v1/members/${m.id}`)).body.avatarUrl).toBe(
      `/v1/members/${m.id}/avatar`,
    )
    const bad = await t.call('PUT', `/v1/members/${m.id}/avatar`, {
      body: { dataUrl: 'data:text/plain;base64,aGk=' },
    })
    expect(bad.body.error).toBe('invalid_image')
    expect((await t.call('DELETE', `/v1/members/${m.id}/avatar`)).status).toBe(204)
    const gone = await t.call('GET', `/v1/members/${m.id}/avatar`)
    expect(gone.status).toBe(404)
    expect(gone.body.error).toBe('avatar_not_found')
  })

  it('grants and revokes roles; a team role puts the member on its team', async () => {
    const created = await team()
    const teamRole = await role('Team Scoped', created.id)
    const m = await member()
    const granted = await t.call('POST', `/v1/members/${m.id}/roles`, {
      body: { roleId: teamRole.id },
    })
    expect(granted.status).toBe(201)
    expect(granted.body.roles.map((r: { slug: string }) => r.slug)).toEqual(['team-scoped'])
    expect(granted.body.teams.map((x: { id: string }) => x.id)).toEqual([created.id])
    expect((await t.call('DELETE', `/v1/members/${m.id}/roles/${teamRole.id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/members/${m.id}`)).body.roles).toEqual([])
    const foreignRole = await t.call('POST', `/v1/members/${m.id}/roles`, {
      body: { roleId: foreign.role },
    })
    expect(foreignRole.status).toBe(404)
    expect(foreignRole.body.error).toBe('role_not_found')
  })

  it('removes a member from every list while runs keep naming it', async () => {
    const created = await team()
    const m = await member()
    await t.call('POST', `/v1/teams/${created.id}/members`, { body: { memberId: m.id } })
    await t.call('PATCH', `/v1/teams/${created.id}`, { body: { leadMemberId: m.id } })
    expect((await t.call('DELETE', `/v1/members/${m.id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/members/${m.id}`)).status).toBe(404)
    expect(
      (await t.call('GET', '/v1/members')).body.some((x: { id: string }) => x.id === m.id),
    ).toBe(false)
    const after = (await t.call('GET', `/v1/teams/${created.id}`)).body
    expect(after.members).toEqual([])
    expect(after.leadMemberId).toBeNull()
    const [row] = await t.sql`select name from members where id = ${m.id}`
    expect(row!.name).toBe(m.name) // still there for run history
    // The removed member's email is free again.
    expect((await t.call('POST', '/v1/members', { body: { name: m.name } })).status).toBe(201)
  })
})

describe('roles', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/roles' })
  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/roles',
    body: () => ({ name: `Checked ${randomUUID()}` }),
  })
  for (const [method, suffix, body] of [
    ['GET', '', undefined],
    ['DELETE', '', undefined],
    ['POST', '/members', { memberId: randomUUID() }],
    ['POST', '/tasks', { taskId: randomUUID() }],
  ] as const) {
    commonRouteChecks(() => t, {
      method,
      path: () => `/v1/roles/${foreign.role}${suffix}`,
      body: () => body,
      foreign: () => ({ path: `/v1/roles/${foreign.role}${suffix}`, body }),
      notFoundCode: 'role_not_found',
    })
  }
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => `/v1/roles/${foreign.role}/members/${foreign.member}`,
    foreign: () => ({ path: `/v1/roles/${foreign.role}/members/${foreign.member}` }),
    notFoundCode: 'role_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'DELETE',
    path: () => `/v1/roles/${foreign.role}/tasks/${randomUUID()}`,
    foreign: () => ({ path: `/v1/roles/${foreign.role}/tasks/${randomUUID()}` }),
    notFoundCode: 'role_not_found',
  })

  it('has slugs unique per enterprise and team: the same slug may exist enterprise-wide and on a team', async () => {
    const created = await team()
    expect((await t.call('POST', '/v1/roles', { body: { name: 'Writer' } })).status).toBe(201)
    expect(
      (await t.call('POST', '/v1/roles', { body: { name: 'Writer', teamId: created.id } })).status,
    ).toBe(201)
    for (const body of [{ name: 'writer' }, { name: 'Writer!', teamId: created.id }]) {
      const taken = await t.call('POST', '/v1/roles', { body })
      expect(taken.status).toBe(409)
      expect(taken.body.error).toBe('role_slug_taken')
    }
    const noTeam = await t.call('POST', '/v1/roles', {
      body: { name: 'Orphan', teamId: foreign.team },
    })
    expect(noTeam.status).toBe(404)
    expect(noTeam.body.error).toBe('team_not_found')
  })

  it('answers the role with its holders and tasks; grants and revokes holders', async () => {
    const r = await role('Deployer')
    const m = await member()
    const granted = await t.call('POST', `/v1/roles/${r.id}/members`, { body: { memberId: m.id } })
    expect(granted.status).toBe(201)
    expect(granted.body.holders).toEqual([{ id: m.id, name: m.name, email: m.email }])
    expect(granted.body.role.holderCount).toBe(1)
    expect((await t.call('DELETE', `/v1/roles/${r.id}/members/${m.id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/roles/${r.id}`)).body.holders).toEqual([])
  })

  it('makes a role run a task without publishing a version, and stops it', async () => {
    const r = await role('Runner')
    const taskId = await task('Nightly Build')
    const res = await t.call('POST', `/v1/roles/${r.id}/tasks`, { body: { taskId } })
    expect(res.status).toBe(201)
    expect(res.body.tasks).toEqual([{ id: taskId, slug: 'nightly-build', name: 'Nightly Build' }])
    const [row] =
      await t.sql`select assignee_role, current_version_id from tasks where id = ${taskId}`
    expect(row).toEqual({ assigneeRole: 'runner', currentVersionId: null })
    expect(await t.sql`select 1 from task_versions where task_id = ${taskId}`).toHaveLength(0)

    expect((await t.call('DELETE', `/v1/roles/${r.id}/tasks/${taskId}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/roles/${r.id}`)).body.tasks).toEqual([])
    const missing = await t.call('POST', `/v1/roles/${r.id}/tasks`, {
      body: { taskId: randomUUID() },
    })
    expect(missing.body.error).toBe('task_not_found')
  })

  it('runs tasks of its own team only: a team role takes a teamless task onto its team', async () => {
    const a = await team()
    const b = await team()
    const teamRole = await role('Builder', a.id)
    const teamless = await task('Teamless')
    expect(
      (await t.call('POST', `/v1/roles/${teamRole.id}/tasks`, { body: { taskId: teamless } }))
        .status,
    ).toBe(201)
    const [row] = await t.sql`select team_id from tasks where id = ${teamless}`
    expect(row!.teamId).toBe(a.id)
    const elsewhere = await task('Elsewhere', { team_id: b.id })
    const res = await t.call('POST', `/v1/roles/${teamRole.id}/tasks`, {
      body: { taskId: elsewhere },
    })
    expect(res.status).toBe(409)
    expect(res.body.error).toBe('role_team_mismatch')
  })

  it('lists, for an enterprise-wide role, the tasks whose team has no role of that slug', async () => {
    const a = await team()
    const wide = await role('Analyst')
    await role('Analyst', a.id)
    const onTeam = await task('On Team', { team_id: a.id, assignee_role: 'analyst' })
    const noTeam = await task('No Team', { assignee_role: 'analyst' })
    const detail = (await t.call('GET', `/v1/roles/${wide.id}`)).body
    expect(detail.tasks.map((x: { id: string }) => x.id)).toEqual([noTeam])
    expect(detail.tasks.map((x: { id: string }) => x.id)).not.toContain(onTeam)
  })

  it('refuses to delete a built-in role, and deletes others with their grants', async () => {
    const roles = (await t.call('GET', '/v1/roles')).body
    const ceo = roles.find((r: { slug: string }) => r.slug === 'ceo')
    const refused = await t.call('DELETE', `/v1/roles/${ceo.id}`)
    expect(refused.status).toBe(409)
    expect(refused.body.error).toBe('role_builtin')
    const r = await role()
    const m = await member()
    await t.call('POST', `/v1/roles/${r.id}/members`, { body: { memberId: m.id } })
    expect((await t.call('DELETE', `/v1/roles/${r.id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/members/${m.id}`)).body.roles).toEqual([])
  })
})

describe('GET /v1/orgs', () => {
  commonRouteChecks(() => t, { method: 'GET', path: () => '/v1/orgs' })

  it('draws teams, members, the roles each holds and the tasks of each role', async () => {
    const fresh = await t.createEnterprise('Tree Co')
    const as = { token: fresh.token }
    const eng = (await t.call('POST', '/v1/teams', { ...as, body: { name: 'Engineering' } })).body
    const reviewer = (
      await t.call('POST', '/v1/roles', { ...as, body: { name: 'Reviewer', teamId: eng.id } })
    ).body
    const ada = (await t.call('POST', '/v1/members', { ...as, body: { name: 'Ada' } })).body
    const loner = (await t.call('POST', '/v1/members', { ...as, body: { name: 'Loner' } })).body
    await t.call('POST', `/v1/teams/${eng.id}/members`, {
      ...as,
      body: { memberId: ada.id, roleId: reviewer.id },
    })
    const [taskRow] = await t.sql<{ id: string }[]>`
      insert into tasks (enterprise_id, slug, name, team_id, assignee_role)
      values (${fresh.id}, 'review-prs', 'Review PRs', ${eng.id}, 'reviewer') returning id`

    const tree = (await t.call('GET', '/v1/orgs', as)).body
    expect(tree.teams.map((x: { slug: string }) => x.slug)).toEqual(['engineering', 'general'])
    const engineering = tree.teams[0]
    expect(engineering.members).toEqual([
      {
        id: ada.id,
        name: 'Ada',
        email: ada.email,
        roles: [
          {
            id: reviewer.id,
            slug: 'reviewer',
            name: 'Reviewer',
            teamId: eng.id,
            tasks: [{ id: taskRow!.id, slug: 'review-prs', name: 'Review PRs' }],
          },
        ],
      },
    ])
    const general = tree.teams[1]
    expect(
      general.members.map((m: { roles: { slug: string }[] }) => m.roles[0]!.slug).sort(),
    ).toEqual(['ceo', 'coo'])
    expect(tree.unassigned.map((m: { id: string }) => m.id)).toEqual([loner.id])
  })

  it('answers in a bounded number of queries, however many members', async () => {
    const fresh = await t.createEnterprise('Big Co')
    const as = { token: fresh.token }
    const [general] = (await t.call('GET', '/v1/teams', as)).body
    for (let i = 0; i < 30; i++) {
      const m = (await t.call('POST', '/v1/members', { ...as, body: { name: `Worker ${i}` } })).body
      await t.call('POST', `/v1/teams/${general.id}/members`, { ...as, body: { memberId: m.id } })
    }
    // The statements the app sends while it answers, as postgres.js sends them. Not the database's
    // commit count: the writes above send their notifications after they commit, and under a loaded
    // machine some were still on their way, counted as the GET's (118 of them).
    const sent: string[] = []
    const options = (t.sql as unknown as { options: { debug?: unknown } }).options
    options.debug = (_connection: number, query: string) => sent.push(query)
    let res: Answer
    try {
      res = await t.call('GET', '/v1/orgs', as)
    } finally {
      options.debug = false
    }
    const used = sent.filter((query) => !/\bpg_notify\b/.test(query)).length
    expect(res.body.teams[0].members).toHaveLength(32)
    expect(used).toBeLessThanOrEqual(8)
  })
})
