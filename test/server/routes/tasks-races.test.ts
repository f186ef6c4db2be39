import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { serveTestApp, type Served, type ServedAnswer } from '../../helpers/served.js'
import { deterministicTask } from '../../helpers/runs.js'

// Two callers at once on a task (spec: Retry safety of writes): a task deleted while its schedule is
// set or a note is written to it. The calls land in either order, never as a 500.

let t: TestApp
let s: Served
beforeAll(async () => {
  t = await createTestApp()
  s = await serveTestApp(t)
})
afterAll(() => s.close())

const rounds = 20

const send = (method: string, path: string, body?: unknown) =>
  s.send(method, path, { token: t.acme.token, body })
const outcome = (a: ServedAnswer) => `${a.status}${a.body?.error ? ` ${a.body.error}` : ''}`

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
