import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Sql } from '../../../server/db/sql.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { deterministicTask, startTestEngine, waitForRun } from '../../helpers/runs.js'

// An engine in the process that serves the API (osd serve) hears of a start at its commit, not after
// its NOTIFY has gone to PostgreSQL and come back (issue 15: bench:runs, one process).

let t: TestApp
let engine: Engine
beforeAll(async () => {
  t = await createTestApp()
  // The engine's own connection hears no NOTIFY at all, and it would not look again by itself for
  // a minute: only this process's commits can wake it.
  const deaf = new Proxy(t.sql, {
    get(target, key, receiver) {
      if (key === 'listen') return async () => ({ unlisten: async () => undefined })
      return Reflect.get(target, key, receiver) as unknown
    },
  }) as Sql
  engine = await startTestEngine(t, { sql: deaf, sweepMs: 60_000 })
  await new Promise((r) => setTimeout(r, 100)) // its first pass, at start, is over
})
afterAll(async () => engine?.stop())

it('runs an API start made in its own process without waiting for the NOTIFY or the sweep', async () => {
  const task = await deterministicTask(t)
  for (let i = 0; i < 3; i++) {
    const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, { body: { i } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    const done = await waitForRun(t, res.body.id, ['succeeded'], 3000)
    expect(done.run.result).toMatchObject({ outcome: 'succeeded', output: { i } })
  }
})
