import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  advance,
  dispatchQueued,
  finishAll,
  type RunRow,
} from '../../../server/domain/runs/index.js'
import { completeDeterministic } from '../../../server/engine/runs/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { apiStart, deterministicTask, llmTask } from '../../helpers/runs.js'

// An engine's step starts no more runs for an executor than the engine has free slots (issue 43): the
// first engine to wake took every queued run, and a second engine idled. Runs past the slots stay
// queued and unlocked, so another engine's dispatch takes them meanwhile; deterministic runs take no
// slot (they end inside the dispatch) and admission is not bounded by slots.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
  await t.sql`update enterprises set concurrent_run_limit = 100 where id = ${t.acme.id}`
})

async function loadRuns(ids: string[]) {
  return t.sql<RunRow[]>`select * from runs where id = any(${t.sql.array(ids)}::uuid[])`
}

async function statuses(ids: string[]) {
  return t.sql<{ id: string; status: string; leaseOwner: string | null }[]>`
    select id, status, lease_owner from runs where id = any(${t.sql.array(ids)}::uuid[])`
}

describe('dispatch within the free slots', () => {
  it('starts as many llm runs as slots, leaves the rest to another engine, and completes deterministic runs at no slot', async () => {
    const other = await t.createEnterprise(`Other ${randomUUID().slice(0, 6)}`)
    await t.sql`update enterprises set concurrent_run_limit = 100 where id = ${other.id}`
    const llm = await llmTask(t, { serializeOn: ['i'] })
    const det = await deterministicTask(t, { serializeOn: ['i'] })
    const otherLlm = await llmTask(t, { serializeOn: ['i'] }, other.token)
    const oldest = (await apiStart(t.sql, t.acme.id, llm.id, { i: 0 })).run.id
    const newer: string[] = []
    for (let i = 1; i < 4; i++)
      newer.push((await apiStart(t.sql, other.id, otherLlm.id, { i })).run.id)
    const detRuns: string[] = []
    for (let i = 0; i < 3; i++)
      detRuns.push((await apiStart(t.sql, t.acme.id, det.id, { i })).run.id)
    expect((await statuses([oldest, ...newer])).every((r) => r.status === 'queued')).toBe(true)

    // An engine with one free slot dispatches in a transaction still open when another engine's
    // dispatch runs: that one finds the three llm runs the first left, not locked by it. (Runs of
    // two enterprises: a dispatch waits for the running counts of the enterprises it starts runs of.)
    await t.sql.begin(async (tx) => {
      const full = await dispatchQueued(tx, 'one-slot', completeDeterministic, { slots: 1 })
      expect(full.started.map((r) => r.id)).toEqual([oldest])
      expect(full.completed).toBe(3)
      const roomy = await dispatchQueued(t.sql, 'roomy', completeDeterministic, { slots: 10 })
      expect(roomy.started.map((r) => r.id).sort()).toEqual([...newer].sort())
    })
    const owners = await statuses([oldest, ...newer])
    expect(owners.map((r) => `${r.status} ${r.leaseOwner}`).sort()).toEqual([
      'running one-slot',
      'running roomy',
      'running roomy',
      'running roomy',
    ])
    expect((await statuses(detRuns)).map((r) => r.status)).toEqual([
      'succeeded',
      'succeeded',
      'succeeded',
    ])
    await finishAll(
      t.sql,
      'cancelled',
      (await loadRuns([oldest, ...newer])).map((run) => ({ run })),
    )
  })

  it('at no free slot, a step still admits runs and completes deterministic ones, and starts no llm run', async () => {
    const llm = await llmTask(t, { serializeOn: ['i'] })
    const det = await deterministicTask(t, { serializeOn: ['i'] })
    // Pending, so that the step is what admits them.
    const llmRun = (await apiStart(t.sql, t.acme.id, llm.id, { i: 1 })).run.id
    const detRun = (await apiStart(t.sql, t.acme.id, det.id, { i: 1 })).run.id
    await t.sql`update runs set status = 'pending', queued_at = null
                 where id = any(${t.sql.array([llmRun, detRun])}::uuid[])`
    const step = await advance(t.sql, 'full-engine', completeDeterministic, { slots: 0 })
    expect(step.started).toEqual([])
    const after = Object.fromEntries((await statuses([llmRun, detRun])).map((r) => [r.id, r]))
    expect(after[llmRun]).toMatchObject({ status: 'queued', leaseOwner: null })
    expect(after[detRun]).toMatchObject({ status: 'succeeded' })
    // Across the rounds of one step the slots are spent once: two slots, three llm runs queued.
    const more: string[] = []
    for (let i = 2; i < 4; i++) more.push((await apiStart(t.sql, t.acme.id, llm.id, { i })).run.id)
    const two = await advance(t.sql, 'two-slots', completeDeterministic, { slots: 2 })
    expect(two.started).toHaveLength(2)
    const all = await statuses([llmRun, ...more])
    expect(all.filter((r) => r.status === 'queued')).toHaveLength(1)
    await finishAll(
      t.sql,
      'cancelled',
      (await loadRuns([llmRun, ...more])).map((run) => ({ run })),
    )
  })
})
