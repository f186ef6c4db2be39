import { afterAll, beforeAll, expect, it } from 'vitest'
import { Scheduler } from '../../../server/engine/scheduler.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { deterministicTask } from '../../helpers/runs.js'

// DESIGN 7: the fires of one minute, claimed through schedule_fires' unique key by every engine process
// at once, in batches: each due schedule starts exactly one run, whichever process claims it.

let t: TestApp
const schedulers: Scheduler[] = []
beforeAll(async () => {
  t = await createTestApp()
})
afterAll(async () => {
  for (const scheduler of schedulers) await scheduler.stop()
})

/** A task of acme with this schedule (through the API, as a user sets it). */
async function scheduled(schedule: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const task = await deterministicTask(t, extra)
  const res = await t.call('PUT', `/v1/tasks/${task.id}/schedule`, { body: schedule })
  expect(res.status, JSON.stringify(res.body)).toBe(200)
  return task.id
}

it('starts exactly one run for each schedule due that minute however many processes fire it', async () => {
  const minute = new Date('2026-01-15T09:30:00.000Z') // 10:30 in Paris (UTC+1 in winter)
  const due: string[] = []
  for (let n = 0; n < 40; n++) due.push(await scheduled({ cron: '30 9 * * *', input: { n } }))
  due.push(
    await scheduled({ cron: '30 10 * * *', timezone: 'Europe/Paris', input: { n: 'paris' } }),
  )
  const notDue = [
    await scheduled({ cron: '31 9 * * *' }),
    await scheduled({ cron: '30 9 * * *', timezone: 'Europe/Paris' }),
    await scheduled({ cron: '30 9 * * *', enabled: false }),
    await scheduled({ cron: '30 9 * * *' }, { status: 'deprecated' }),
  ]
  const unrunnable = await scheduled({ cron: '30 9 * * *' }, { assigneeRole: 'nobody-holds-it' })

  // Two processes, batches of 7: their batches overlap, and each fires the minute twice.
  const a = new Scheduler(t.sql, t.log, 7)
  const b = new Scheduler(t.sql, t.log, 7)
  schedulers.push(a, b)
  await Promise.all([a.fireMinute(minute), b.fireMinute(minute), a.fireMinute(minute)])
  await b.fireMinute(minute)

  const runs = await t.sql<{ id: string; taskId: string; input: unknown; status: string }[]>`
    select id, task_id, input, status from runs where origin = 'schedule'`
  expect(runs.map((r) => r.taskId).sort()).toEqual([...due].sort())
  const fires = await t.sql<{ taskId: string; runId: string | null; outcome: string }[]>`
    select task_id, run_id, outcome from schedule_fires where fire_at = ${minute}`
  expect(fires).toHaveLength(due.length + 1)
  for (const [i, taskId] of due.entries()) {
    const run = runs.find((r) => r.taskId === taskId)!
    expect(run.input).toEqual({ n: i < 40 ? i : 'paris' })
    expect(run.status).toBe('pending') // admission moves it on (no engine runs here)
    expect(fires.find((f) => f.taskId === taskId)).toMatchObject({
      runId: run.id,
      outcome: 'started',
    })
  }
  for (const taskId of notDue) expect(fires.find((f) => f.taskId === taskId)).toBeUndefined()
  // A task nobody can run starts nothing; its fire says why.
  const refused = fires.find((f) => f.taskId === unrunnable)!
  expect(refused.runId).toBeNull()
  expect(refused.outcome).toMatch(/^task_not_runnable: /)

  // The next minute fires the schedules due then: 09:31 and every minute.
  const every = await scheduled({ cron: '* * * * *' })
  await Promise.all([
    a.fireMinute(new Date(minute.getTime() + 60_000)),
    b.fireMinute(new Date(minute.getTime() + 60_000)),
  ])
  const next = await t.sql<{ taskId: string }[]>`
    select task_id from schedule_fires where fire_at = ${new Date(minute.getTime() + 60_000)}`
  expect(next.map((f) => f.taskId).sort()).toEqual([every, notDue[0]].sort())
  expect(await t.sql`select 1 from runs where task_id = ${every}`).toHaveLength(1)
})
