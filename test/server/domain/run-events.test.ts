import { beforeAll, describe, expect, it } from 'vitest'
import { appendWhileHeld } from '../../../server/domain/runs/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { apiStart, llmTask } from '../../helpers/runs.js'

// appendWhileHeld: what an executing engine records of a run (its recall at its start), in one round
// trip, only while the run is still running under that engine's lease.

let t: TestApp

beforeAll(async () => {
  t = await createTestApp()
})

async function runningRun(owner: string) {
  const task = await llmTask(t)
  const { run } = await apiStart(t.sql, t.acme.id, task.id, {})
  await t.sql`
    update runs set status = 'running', lease_owner = ${owner}, lease_expires_at = now() + interval '1 minute'
     where id = ${run.id}`
  return run
}

const events = async (runId: string) =>
  (
    await t.sql<
      { type: string }[]
    >`select type from run_events where run_id = ${runId} order by seq`
  ).map((e) => e.type)

describe('appendWhileHeld', () => {
  it('writes the events of a run this engine holds and answers the run as locked', async () => {
    const run = await runningRun('engine-a')
    const held = await appendWhileHeld(t.sql, run.id, 'engine-a', [
      { run, type: 'memory.recalled', payload: { noteIds: [] } },
      { run, type: 'memory.training_material', payload: {} },
    ])
    expect(held).toMatchObject({ id: run.id, status: 'running', leaseOwner: 'engine-a' })
    expect((await events(run.id)).slice(-2)).toEqual([
      'memory.recalled',
      'memory.training_material',
    ])
  })

  it('writes nothing for a run another engine holds, or one that is no longer running', async () => {
    const taken = await runningRun('engine-b')
    const before = await events(taken.id)
    expect(
      await appendWhileHeld(t.sql, taken.id, 'engine-a', [{ run: taken, type: 'memory.recalled' }]),
    ).toBeUndefined()
    expect(await events(taken.id)).toEqual(before)

    const cancelled = await runningRun('engine-a')
    await t.sql`update runs set status = 'cancelled' where id = ${cancelled.id}`
    const was = await events(cancelled.id)
    expect(
      await appendWhileHeld(t.sql, cancelled.id, 'engine-a', [
        { run: cancelled, type: 'memory.recalled' },
      ]),
    ).toBeUndefined()
    expect(await events(cancelled.id)).toEqual(was)
  })
})
