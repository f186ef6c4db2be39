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

it('keeps summer time as cron does: a skipped time fires when the clocks jump, a doubled one once', async () => {
  await t.sql`update task_schedules set enabled = false`
  const berlin = (cron: string) => scheduled({ cron, timezone: 'Europe/Berlin' })
  const atHalfPastTwo = await berlin('30 2 * * *')
  const atQuarterPastThree = await berlin('15 3 * * *')
  const everyHalfHour = await berlin('*/30 * * * *')
  const scheduler = new Scheduler(t.sql, t.log)
  schedulers.push(scheduler)
  /** Fires each minute from `from` for `hours`, as an engine awake through the night does. */
  async function night(from: string, hours: number) {
    const start = Date.parse(from)
    for (let m = start; m < start + hours * 3_600_000; m += 60_000)
      await scheduler.fireMinute(new Date(m))
    const fires = await t.sql<{ taskId: string; fireAt: Date }[]>`
      select task_id, fire_at from schedule_fires
       where fire_at >= ${new Date(start)} and fire_at < ${new Date(start + hours * 3_600_000)}
       order by fire_at`
    return (taskId: string) =>
      fires.filter((f) => f.taskId === taskId).map((f) => f.fireAt.toISOString().slice(11, 16))
  }

  // 29 March 2026: at 02:00 (01:00 UTC) Berlin's clocks jump to 03:00; 02:30 never comes. It fires
  // at 03:00, when they jump.
  const spring = await night('2026-03-29T00:00:00Z', 3)
  expect(spring(atHalfPastTwo)).toEqual(['01:00'])
  expect(spring(atQuarterPastThree)).toEqual(['01:15'])
  expect(spring(everyHalfHour)).toEqual(['00:00', '00:30', '01:00', '01:30', '02:00', '02:30'])

  // 25 October 2026: at 03:00 (01:00 UTC) they go back to 02:00; 02:30 comes twice. It fires the
  // first time; every half hour fires by the clocks, in both of their 02:00s.
  const autumn = await night('2026-10-24T23:00:00Z', 4)
  expect(autumn(atHalfPastTwo)).toEqual(['00:30'])
  expect(autumn(atQuarterPastThree)).toEqual(['02:15'])
  expect(autumn(everyHalfHour)).toEqual([
    '23:00',
    '23:30',
    '00:00',
    '00:30',
    '01:00',
    '01:30',
    '02:00',
    '02:30',
  ])
})
