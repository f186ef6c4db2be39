import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { serveTestApp, type Served, type ServedAnswer } from '../../helpers/served.js'
import { deterministicTask } from '../../helpers/runs.js'

// Two callers at once (spec: Retry safety of writes): a team, role or member deleted while something
// is being put on it or given to it, a task while its schedule is set or a note written to it. Each
// round fires the calls together over HTTP; the calls land in either order, never as a 500, never
// leaving a row on what was deleted.

let t: TestApp
let s: Served
beforeAll(async () => {
  t = await createTestApp()
  s = await serveTestApp(t)
})
afterAll(() => s.close())

/** Enough rounds that the old code's window (a read, then a write) was hit in most runs of a file. */
const rounds = 20

const send = (method: string, path: string, body?: unknown) =>
  s.send(method, path, { token: t.acme.token, body })
const made = async (path: string, body: unknown): Promise<{ id: string }> => {
  const res = await t.call('POST', path, { body })
  expect(res.status, res.text).toBe(201)
  return res.body
}
const named = (what: string) => `${what} ${randomUUID().slice(0, 8)}`
const outcome = (a: ServedAnswer) => `${a.status}${a.body?.error ? ` ${a.body.error}` : ''}`

describe('a team deleted while something is put on it', () => {
  it('a task made on it lands first (409 team_has_tasks) or finds it gone (404)', async () => {
    for (let i = 0; i < rounds; i++) {
      const team = await made('/v1/teams', { name: named('Team') })
      const [task, deleted] = await Promise.all([
        send('POST', '/v1/tasks', { name: named('Task'), teamId: team.id }),
        send('DELETE', `/v1/teams/${team.id}`),
      ])
      expect([
        ['201', '409 team_has_tasks'],
        ['404 team_not_found', '204'],
      ]).toContainEqual([outcome(task), outcome(deleted)])
    }
  })

  it('a role or a member put on it lands first and goes with it, or finds it gone', async () => {
    for (let i = 0; i < rounds; i++) {
      const team = await made('/v1/teams', { name: named('Team') })
      const member = await made('/v1/members', { name: named('Member') })
      const [role, joined, deleted] = await Promise.all([
        send('POST', '/v1/roles', { name: named('Role'), teamId: team.id }),
        send('POST', `/v1/teams/${team.id}/members`, { memberId: member.id }),
        send('DELETE', `/v1/teams/${team.id}`),
      ])
      expect(deleted.status, deleted.text).toBe(204)
      expect(['201', '404 team_not_found']).toContain(outcome(role))
      expect(['201', '404 team_not_found']).toContain(outcome(joined))
      expect(await t.sql`select 1 from roles where team_id = ${team.id}`).toHaveLength(0)
      expect(await t.sql`select 1 from team_members where team_id = ${team.id}`).toHaveLength(0)
    }
  })
})

describe('a member removed while given something', () => {
  it('a role, a team or a team’s lead given at once is taken away with the member, or refused', async () => {
    for (let i = 0; i < rounds; i++) {
      const [role, team] = await Promise.all([
        made('/v1/roles', { name: named('Role') }),
        made('/v1/teams', { name: named('Team') }),
      ])
      const member = await made('/v1/members', { name: named('Member') })
      const answers = await Promise.all([
        send('POST', `/v1/roles/${role.id}/members`, { memberId: member.id }),
        send('POST', `/v1/teams/${team.id}/members`, { memberId: member.id }),
        send('PATCH', `/v1/teams/${team.id}`, { leadMemberId: member.id }),
        send('POST', '/v1/teams', { name: named('Led'), leadMemberId: member.id }),
        send('DELETE', `/v1/members/${member.id}`),
      ])
      const [granted, joined, led, made2, removed] = answers.map(outcome)
      expect(removed).toBe('204')
      expect(['201', '404 member_not_found']).toContain(granted)
      expect(['201', '404 member_not_found']).toContain(joined)
      expect(['200', '404 member_not_found']).toContain(led)
      expect(['201', '404 member_not_found']).toContain(made2)
      // Nothing is held by, or led by, a removed member.
      expect(await t.sql`select 1 from role_members where member_id = ${member.id}`).toHaveLength(0)
      expect(await t.sql`select 1 from team_members where member_id = ${member.id}`).toHaveLength(0)
      expect(await t.sql`select 1 from teams where lead_member_id = ${member.id}`).toHaveLength(0)
    }
  })
})

describe('a role deleted while given', () => {
  it('a grant or a task’s assignment lands first and goes with it, or finds it gone (404)', async () => {
    for (let i = 0; i < rounds; i++) {
      const team = await made('/v1/teams', { name: named('Team') })
      const role = await made('/v1/roles', { name: named('Role'), teamId: team.id })
      const member = await made('/v1/members', { name: named('Member') })
      const task = await deterministicTask(t)
      const [granted, throughMember, assigned, deleted] = await Promise.all([
        send('POST', `/v1/roles/${role.id}/members`, { memberId: member.id }),
        send('POST', `/v1/members/${member.id}/roles`, { roleId: role.id }),
        send('POST', `/v1/roles/${role.id}/tasks`, { taskId: task.id }),
        send('DELETE', `/v1/roles/${role.id}`),
      ])
      expect(outcome(deleted)).toBe('204')
      expect(['201', '404 role_not_found']).toContain(outcome(granted))
      expect(['201', '404 role_not_found']).toContain(outcome(throughMember))
      expect(['201', '404 role_not_found']).toContain(outcome(assigned))
      expect(await t.sql`select 1 from role_members where role_id = ${role.id}`).toHaveLength(0)
    }
  })

  it('deleted twice at once: one 204, the other 404 role_not_found, as a repeat answers', async () => {
    for (let i = 0; i < rounds; i++) {
      const role = await made('/v1/roles', { name: named('Role') })
      const answers = await Promise.all([
        send('DELETE', `/v1/roles/${role.id}`),
        send('DELETE', `/v1/roles/${role.id}`),
      ])
      expect(answers.map(outcome).sort()).toEqual(['204', '404 role_not_found'])
    }
  })
})

describe('a task deleted while a row of it is written', () => {
  it('its schedule set at once is set first and goes with it, or finds it gone (404)', async () => {
    for (let i = 0; i < rounds; i++) {
      const task = await deterministicTask(t)
      const [set, deleted] = await Promise.all([
        send('PUT', `/v1/tasks/${task.id}/schedule`, { cron: '0 9 * * 1' }),
        send('DELETE', `/v1/tasks/${task.id}`),
      ])
      expect(outcome(deleted)).toBe('204')
      expect(['200', '404 task_not_found']).toContain(outcome(set))
      expect(await t.sql`select 1 from task_schedules where task_id = ${task.id}`).toHaveLength(0)
    }
  })

  it('a note written to it at once is written first and goes with it, or finds it gone (404)', async () => {
    for (let i = 0; i < rounds; i++) {
      const task = await deterministicTask(t)
      const [noted, deleted] = await Promise.all([
        send('POST', `/v1/tasks/${task.id}/memory`, { text: `Say hello ${randomUUID()}` }),
        send('DELETE', `/v1/tasks/${task.id}`),
      ])
      expect(outcome(deleted)).toBe('204')
      expect(['201', '404 task_not_found']).toContain(outcome(noted))
      expect(await t.sql`select 1 from memory_notes where task_id = ${task.id}`).toHaveLength(0)
    }
  })
})
