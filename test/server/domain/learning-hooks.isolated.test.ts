import { beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../../server/config.js'
import { transaction } from '../../../server/db/sql.js'
import { decideGate, openGate } from '../../../server/domain/gates/index.js'
import { installLearning } from '../../../server/domain/learning/index.js'
import {
  cancelRun,
  finishAll,
  finishRun,
  loadRun,
  transition,
} from '../../../server/domain/runs/index.js'
import { createTask } from '../../../server/domain/tasks/index.js'
import { createTestEnterprise, type TestEnterprise } from '../../helpers/app.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { apiStart } from '../../helpers/runs.js'

// What a run's end reports to learning (memory impact, self-improvement; DESIGN 10) is registered by
// installLearning, which createApp and startEngine call. A process that forgot it ended runs and
// skipped both without a word (issue 43): its ends now fail. This file makes no app and no engine, so
// nothing is registered until the last test registers it (this file runs in a process of its
// own).

let db: TestDatabase
let enterprise: TestEnterprise

beforeAll(async () => {
  db = await createTestDatabase()
  enterprise = await createTestEnterprise(db.sql, 'Hookless', loadConfig({}, {}))
})

/** A queued run of a new deterministic task (the enterprise's ceo holds its role). */
async function queuedRun() {
  const taskId = await createTask(db.sql, enterprise.id, {
    name: `Hooks ${Math.random().toString(36).slice(2, 8)}`,
    kind: 'deterministic',
    assigneeRole: 'ceo',
    overlapPolicy: 'os',
  })
  return (await apiStart(db.sql, enterprise.id, taskId, {})).run
}

const eventsOf = async (runId: string) =>
  (
    await db.sql<{ type: string }[]>`
      select type from run_events where run_id = ${runId} order by seq`
  ).map((e) => e.type)

describe('a run end with no learning registered (issue 43)', () => {
  it('fails loudly, succeeded or failed, and changes nothing', async () => {
    const run = await queuedRun()
    await expect(
      transaction(db.sql, (tx) => finishAll(tx, 'succeeded', [{ run }], { through: 'running' })),
    ).rejects.toThrow('nothing counts run outcomes: installLearning() was not called at start')
    await expect(transaction(db.sql, (tx) => finishRun(tx, run, 'failed'))).rejects.toThrow(
      'nothing answers setbacks: installLearning() was not called at start',
    )
    expect((await loadRun(db.sql, enterprise.id, run.id)).status).toBe('queued')
    expect(await eventsOf(run.id)).toEqual(['run.queued'])
  })

  it('fails a gate turned down loudly, and leaves the gate waiting', async () => {
    const queued = await queuedRun()
    // Running, as an engine would have it when its model calls for a gate.
    const gate = await transaction(db.sql, async (tx) =>
      openGate(tx, await transition(tx, queued, 'running'), {
        kind: 'tool',
        tool: 'demo.write',
        journalStep: 0,
      }),
    )
    await expect(
      decideGate(db.sql, enterprise.id, gate.id, { decision: 'reject' }, 'test'),
    ).rejects.toThrow('nothing answers setbacks')
    const [row] = await db.sql<{ status: string }[]>`select status from gates where id = ${gate.id}`
    expect(row!.status).toBe('waiting')
  })

  it('still cancels: a cancelled run reports nothing to learning', async () => {
    const run = await queuedRun()
    expect((await cancelRun(db.sql, enterprise.id, run.id)).status).toBe('cancelled')
  })

  // The last test: it registers learning for the rest of this process.
  it('ends runs once installLearning registered what they report to', async () => {
    installLearning()
    const done = await queuedRun()
    const [ended] = (
      await transaction(db.sql, (tx) =>
        finishAll(tx, 'succeeded', [{ run: done }], { through: 'running' }),
      )
    ).ended
    expect(ended!.status).toBe('succeeded')
    const failed = await queuedRun()
    expect((await transaction(db.sql, (tx) => finishRun(tx, failed, 'failed'))).status).toBe(
      'failed',
    )
  })
})
