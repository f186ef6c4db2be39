import { connect, createServer, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSql } from '../../../server/db/sql.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { holdLock, statementUnderWay } from '../../helpers/db.js'
import { keyedEnterprise, llmTask, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Spend reservations and caps when things happen at once (DESIGN 3, 6): what a call reserved is
// released once, whoever ends the work and whenever.

let t: TestApp
let fake: FakeModelProvider

beforeAll(async () => {
  fake = await startFakeModelProvider()
  t = await createTestApp({ providerBaseUrls: { provider_a: fake.url, provider_b: fake.url } })
})
afterAll(async () => {
  await fake?.close()
})

/**
 * A way to the database that can be cut, as a process's death cuts it: `url` reaches the test's
 * database through it; `cut` closes every connection made through it and refuses new ones.
 */
async function severableDatabase() {
  const target = new URL(t.dbUrl)
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => undefined)
      s.on('close', () => sockets.delete(s))
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = new URL(t.dbUrl)
  url.hostname = '127.0.0.1'
  url.port = String((server.address() as { port: number }).port)
  return {
    url: url.toString(),
    cut: async () => {
      const closed = new Promise((resolve) => server.close(resolve))
      for (const s of sockets) s.destroy()
      await closed
    },
  }
}

async function tenant() {
  const { e, key, as } = await keyedEnterprise(t, 'Spend races')
  const task = () => llmTask(t, {}, e.token)
  const start = async (taskId: string) => {
    const res = await t.call('POST', `/v1/tasks/${taskId}/runs`, { ...as, body: {} })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body as { id: string }
  }
  const reserved = async () =>
    (
      await t.sql<{ n: number }[]>`
        select coalesce(sum(reserved_usd_micros), 0)::int as n from spend_days
         where enterprise_id = ${e.id}`
    )[0]!.n
  return { e, key, as, task, start, reserved }
}

describe('a run ended while the engine calling its model is dead', () => {
  it('has its call reservation released once a lease has passed, though nobody takes the run over', async () => {
    const { e, key, as, task, start, reserved } = await tenant()
    // The call is held unanswered: its engine dies during it.
    let answer!: () => void
    const held = new Promise<void>((resolve) => (answer = resolve))
    fake.onRequest(async (request) => {
      if (request.key !== key) return undefined
      await held
      return { text: 'too late' }
    })
    const config = { ...t.config, leaseSeconds: 1 }
    const way = await severableDatabase()
    const doomed = createSql(way.url)
    const dying = await startTestEngine(t, { sql: doomed, config })
    try {
      const run = await start((await task()).id)
      await eventually(() => fake.callsWith(key).length === 1, 10_000, 'the model call')
      expect(await reserved()).toBeGreaterThan(0)
      // The engine's process dies: nothing it does reaches the database again.
      await way.cut()
      const cancelled = await t.call('POST', `/v1/runs/${run.id}/cancel`, as)
      expect(cancelled.status).toBe(200)
      // A living engine: a cancelled run is never taken over, yet the cap gets its room back.
      await startTestEngine(t, { config })
      // A lease (1 s) and the loop's next pass: 1-2 s on two cores; the whole test took 13 s on one
      // loaded core.
      await eventually(async () => (await reserved()) === 0, 20_000, 'the reservation released')
      expect((await waitForRun(t, run.id, ['cancelled'], 5_000, e.token)).run.status).toBe(
        'cancelled',
      )
      const [left] = await t.sql<{ n: number }[]>`
        select count(*)::int as n from spend_reservations where run_id = ${run.id}`
      expect(left!.n).toBe(0)
    } finally {
      answer()
      await dying.stop().catch(() => undefined)
      await doomed.end({ timeout: 0 })
    }
  }, 45_000)
})

describe('a cap raised while a model call finds no room under it', () => {
  it('queues the run the call paused again: the raise waits for the pause, or the call reads the raise', async () => {
    const { e, key, as, task, start } = await tenant()
    const cap = (moneyCentsDay: number) =>
      t.call('PATCH', '/v1/spend/caps', { ...as, body: { layer: 'enterprise', moneyCentsDay } })
    expect((await cap(0)).status).toBe(200)
    fake.script(key, {
      toolCalls: [{ name: 'os.finish', arguments: { outcome: 'succeeded', summary: 'ok' } }],
    })
    // The enterprise's counters of the day (made first: the call's insert of them then waits on
    // nothing), held: the call's check for room waits on them, having read the cap of $0.00 in the
    // statement that locks them.
    const day = new Date().toISOString().slice(0, 10)
    await t.sql`
      insert into spend_days (enterprise_id, day, layer, layer_id)
      values (${e.id}, ${day}, 'enterprise', ${e.id}) on conflict do nothing`
    const counters = await holdLock(t.sql, async (tx) => {
      await tx`
        select 1 from spend_days
         where enterprise_id = ${e.id} and day = ${day} and layer = 'enterprise' for update`
    })
    const engine = await startTestEngine(t)
    try {
      const run = await start((await task()).id)
      await eventually(() => counters.waitedOn(), 10_000, 'the check for room to wait')
      // Raised meanwhile. It went through at once, before the call paused the run, and found no run
      // to queue again: the run stayed paused with room for it until the cap's next change.
      let raised = false
      const raising = cap(100_000).then((res) => ((raised = true), res))
      await eventually(
        async () =>
          raised ||
          (await statementUnderWay(t.sql, '%from spend_caps%for update%', { lockWait: true })),
        10_000,
        'the raise to land or wait',
      )
      // It waits for the call's check (the cap's key share lock) however long that takes.
      expect(raised).toBe(false)
      await counters.release()
      expect((await raising).status).toBe(200)
      expect((await waitForRun(t, run.id, ['succeeded'], 15_000, e.token)).run.status).toBe(
        'succeeded',
      )
    } finally {
      await engine.stop()
    }
  })
})
