import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { createSql } from '../../../server/db/sql.js'
import {
  feedFilter,
  pruneFeed,
  readFeed,
  sequenceFeed,
} from '../../../server/domain/events/index.js'
import { allScopes } from '../../../shared/scopes.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { apiStart, llmTask } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

// The event feed's order (issue 47; DESIGN 15; migration 0033): positions only grow, one by one, and a
// reader that asks after N never misses an event that commits later, however the writers' transactions
// interleave. Positions are given by sequencing passes after the writers commit (feed.ts).

let t: TestApp
const every = feedFilter(new Set(allScopes), undefined)

beforeAll(async () => {
  t = await createTestApp()
})

/** Passes until the inbox is empty, as the engines' sequencer does. */
async function sequence() {
  for (;;) {
    const done = await sequenceFeed(t.sql, { mail: false })
    if (!done.more) return
  }
}

/** Everything the enterprise's feed holds after `after`, read page by page. */
async function readAll(enterpriseId: string, after = 0) {
  const events = []
  for (let cursor = after; ;) {
    const page = await readFeed(t.sql, enterpriseId, cursor, every, 200)
    events.push(...page.events)
    cursor = page.next
    if (!page.more) return events
  }
}

describe('the feed of an enterprise', () => {
  it("gets a run's events in order, with their run and task, and positions one by one", async () => {
    const e = await t.createEnterprise(`Feed ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, { n: 1 })
    await t.call('POST', `/v1/runs/${run.id}/cancel`, { token: e.token })
    await sequence()
    const events = await readAll(e.id)
    expect(events.map((ev) => ev.type)).toEqual(['run.queued', 'run.cancelled'])
    expect(events.map((ev) => ev.position)).toEqual([1, 2])
    expect(events[0]!.subject).toEqual({
      runId: run.id,
      taskId: task.id,
      taskSlug: task.slug,
      executionId: run.id,
    })
    // Nothing of it reaches another enterprise's feed.
    expect((await readAll(t.other.id)).filter((ev) => ev.subject.runId === run.id)).toEqual([])
  })

  it('gives a transaction that commits late a later position: a reader after the earlier misses nothing', async () => {
    const e = await t.createEnterprise(`Late ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    const head = (await readAll(e.id)).at(-1)!.position
    const other = createSql(t.dbUrl, { max: 1 })
    try {
      // The late writer takes its inbox row (its id is the smaller) and holds its transaction open...
      const reserved = await other.reserve()
      await reserved`begin`
      await reserved`insert into run_events (enterprise_id, run_id, type) values (${e.id}, ${run.id}, 'model.called')`
      // ...while a second one commits and is sequenced.
      await t.sql`insert into run_events (enterprise_id, run_id, type) values (${e.id}, ${run.id}, 'tool.called')`
      await sequence()
      const first = await readFeed(t.sql, e.id, head, every, 200)
      expect(first.events.map((ev) => [ev.position, ev.type])).toEqual([[head + 1, 'tool.called']])
      // The late one commits: the reader asking after what it saw gets it, with the next position.
      await reserved`commit`
      reserved.release()
      await sequence()
      const second = await readFeed(t.sql, e.id, first.next, every, 200)
      expect(second.events.map((ev) => [ev.position, ev.type])).toEqual([
        [head + 2, 'model.called'],
      ])
    } finally {
      await other.end()
    }
  })

  it('has no hole and no repeat under writers committing out of order and two passes at once', async () => {
    const e = await t.createEnterprise(`Busy ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    const start = (await readAll(e.id)).at(-1)!.position
    const writers = createSql(t.dbUrl, { max: 8 })
    const passes = [createSql(t.dbUrl, { max: 2 }), createSql(t.dbUrl, { max: 2 })]
    const seen: { position: number; n: unknown }[] = []
    let writing = true
    let sequenced = false
    try {
      // A reader that follows the feed as it grows, as a client with after= does, until everything
      // is sequenced and read.
      const reader = (async () => {
        for (let cursor = start; ;) {
          const last = sequenced
          const page = await readFeed(t.sql, e.id, cursor, every, 50)
          for (const ev of page.events) seen.push({ position: ev.position, n: ev.payload.n })
          cursor = page.next
          if (last && !page.more) return
          await new Promise((r) => setTimeout(r, 2))
        }
      })()
      const sequencers = passes.map(async (pass) => {
        while (writing) {
          await sequenceFeed(pass, { mail: false })
          await new Promise((r) => setTimeout(r, 1))
        }
      })
      // 200 transactions of 1 to 3 events each, each held open for a random while before its commit.
      let n = 0
      await Promise.all(
        Array.from({ length: 200 }, async (_, w) => {
          await new Promise((r) => setTimeout(r, Math.random() * 200))
          await writers.begin(async (tx) => {
            for (let k = 0; k < 1 + (w % 3); k++)
              await tx`insert into run_events (enterprise_id, run_id, type, payload)
                       values (${e.id}, ${run.id}, 'model.called', ${tx.json({ n: n++ })})`
            await new Promise((r) => setTimeout(r, Math.random() * 20))
          })
        }),
      )
      writing = false
      await Promise.all(sequencers)
      await sequence()
      sequenced = true
      await reader
      const written = n
      expect(seen.map((s) => s.position)).toEqual(
        Array.from({ length: written }, (_, i) => start + 1 + i),
      )
      expect(new Set(seen.map((s) => s.n)).size).toBe(written)
    } finally {
      writing = false
      await Promise.all([writers.end(), ...passes.map((p) => p.end())])
    }
  }, 60_000)
})

describe('what a reader sees', () => {
  let e: Awaited<ReturnType<TestApp['createEnterprise']>>
  beforeAll(async () => {
    e = await t.createEnterprise(`Filters ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, {})
    await t.sql`
      insert into gates (enterprise_id, run_id, task_id, kind, tool, summary)
      values (${e.id}, ${run.id}, ${task.id}, 'tool', 'vcs.merge_pull_request', 'Merge #8?')`
    await t.sql`insert into execution_closures (execution_id, enterprise_id) values (${run.id}, ${e.id})`
    await sequence()
  })

  it('keeps only the types asked for: a family, or one type', async () => {
    const gates = feedFilter(new Set(allScopes), ['gate.waiting'])
    const runs = feedFilter(new Set(allScopes), ['run.*', 'execution.closed'])
    const of = async (filter: typeof gates) =>
      (await readFeed(t.sql, e.id, 0, filter, 200)).events.map((ev) => ev.type)
    expect(await of(gates)).toEqual(['gate.waiting'])
    expect(await of(runs)).toEqual(['run.queued', 'execution.closed'])
    const gate = (await readFeed(t.sql, e.id, 0, gates, 200)).events[0]!
    expect(gate.payload).toMatchObject({
      kind: 'tool',
      tool: 'vcs.merge_pull_request',
      summary: 'Merge #8?',
    })
  })

  it('shows a token the types of the resources it may read, and refuses what it may not', () => {
    expect(feedFilter(new Set(['gates:read']), undefined).families).toEqual(['gate'])
    expect(feedFilter(new Set(['runs:read']), undefined).families).toEqual([
      'run',
      'model',
      'tool',
      'improvement',
    ])
    expect(() => feedFilter(new Set(['runs:read']), ['gate.waiting'])).toThrow(/gates:read/)
    // tasks:read reads the task.* family (pauses, issue 50); teams:read reads none.
    expect(feedFilter(new Set(['tasks:read']), undefined).families).toEqual(['task'])
    expect(() => feedFilter(new Set(['teams:read', 'events:read']), undefined)).toThrow(
      /reads none/,
    )
  })

  it('moves the page on past what the filter leaves out', async () => {
    const gates = feedFilter(new Set(allScopes), ['chat.*'])
    const page = await readFeed(t.sql, e.id, 0, gates, 200)
    expect(page.events).toEqual([])
    expect(page.next).toBe(3)
    expect(page.more).toBe(false)
  })

  it('says feed.reset to a reader asking from before what it keeps, or from past its head', async () => {
    const pruned = await t.createEnterprise(`Pruned ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, pruned.token)
    await apiStart(t.sql, pruned.id, task.id, {})
    await sequence()
    await t.sql`update events set created_at = now() - interval '8 days' where enterprise_id = ${pruned.id}`
    await apiStart(t.sql, pruned.id, task.id, {})
    await sequence()
    expect(await pruneFeed(t.sql)).toBeGreaterThanOrEqual(1)
    const read = await readFeed(t.sql, pruned.id, 0, every, 200)
    expect(read.reset).toMatchObject({
      type: 'feed.reset',
      position: 1,
      payload: { after: 0, firstPosition: 2 },
    })
    expect(read.events.map((ev) => ev.position)).toEqual([2])
    expect((await readFeed(t.sql, pruned.id, 1, every, 200)).reset).toBeUndefined()
    const ahead = await readFeed(t.sql, pruned.id, 99, every, 200)
    expect(ahead.reset).toMatchObject({ position: 2, payload: { after: 99 } })
    expect(ahead.next).toBe(2)
  })

  it('prunes from the start of the feed up to its first event still kept, leaving no hole', async () => {
    const e = await t.createEnterprise(`Prefix ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    for (let n = 0; n < 5; n++) await apiStart(t.sql, e.id, task.id, { n })
    await sequence()
    // Positions 1, 2 and 4 older than the cut-off; 4 is a late commit's (an older time after a newer).
    await t.sql`
      update events set created_at = now() - interval '8 days'
       where enterprise_id = ${e.id} and position in (1, 2, 4)`
    const other = await t.createEnterprise(`Kept ${randomUUID().slice(0, 6)}`)
    await apiStart(t.sql, other.id, (await llmTask(t, {}, other.token)).id, {})
    await sequence()
    expect(await pruneFeed(t.sql)).toBeGreaterThanOrEqual(2)
    expect((await readAll(e.id, 2)).map((ev) => ev.position)).toEqual([3, 4, 5])
    expect((await readFeed(t.sql, e.id, 0, every, 200)).reset?.payload).toMatchObject({
      firstPosition: 3,
    })
    expect((await readAll(other.id)).map((ev) => ev.position)).toEqual([1])
    // Once the events before it are gone, the late one goes too.
    await t.sql`
      update events set created_at = now() - interval '8 days'
       where enterprise_id = ${e.id} and position = 3`
    await pruneFeed(t.sql)
    expect((await readAll(e.id, 4)).map((ev) => ev.position)).toEqual([5])
    expect((await readFeed(t.sql, e.id, 0, every, 200)).reset?.payload).toMatchObject({
      firstPosition: 5,
    })
  })

  it('goes with its enterprise, and so does what waits in the inbox (no foreign key since 0051)', async () => {
    const e = await t.createEnterprise(`Gone ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    await apiStart(t.sql, e.id, task.id, {})
    const held = async () => {
      const [row] = await t.sql<{ events: number; inbox: number; heads: number }[]>`
        select (select count(*)::int from events where enterprise_id = ${e.id}) as events,
               (select count(*)::int from event_inbox where enterprise_id = ${e.id}) as inbox,
               (select count(*)::int from event_feed_heads where enterprise_id = ${e.id}) as heads`
      return row!
    }
    expect(await held()).toEqual({ events: 1, inbox: 1, heads: 1 })
    await t.sql`delete from enterprises where id = ${e.id}`
    expect(await held()).toEqual({ events: 0, inbox: 0, heads: 0 })
  })
})

describe('the feed sequencer', () => {
  it('stops while a pass is planned but not yet begun (it spun in microtasks before: a hung run)', async () => {
    const { FeedSequencer } = await import('../../../server/engine/events/index.js')
    const sequencer = new FeedSequencer({ sql: t.sql, log: t.log, mail: false, sweepMs: 60_000 })
    await sequencer.start()
    // Right after a pass ends, a wake plans the next on a timer (gapUnderLoadMs); stop() comes before
    // the timer fires.
    const passing = () => (sequencer as unknown as { passing: boolean }).passing
    sequencer.wake()
    while (passing()) await new Promise((r) => setImmediate(r))
    sequencer.wake()
    await sequencer.stop()
    sequencer.wake() // nothing planned once stopped
    await sequencer.stop()
  })

  it('keeps what OSD_FEED_KEEP_HOURS says, no longer', async () => {
    const { FeedSequencer } = await import('../../../server/engine/events/index.js')
    const e = await t.createEnterprise(`Keep ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    const positions = async () =>
      (
        await t.sql<{ position: number }[]>`
          select position from events where enterprise_id = ${e.id} order by position`
      ).map((r) => Number(r.position))
    const older = await positions()
    // Two hours old, where the feed keeps one; then a run started now.
    await t.sql`update events set created_at = now() - interval '2 hours' where enterprise_id = ${e.id}`
    await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    const newer = (await positions()).filter((p) => !older.includes(p))
    expect(older.length * newer.length).toBeGreaterThan(0)
    const sequencer = new FeedSequencer({
      sql: t.sql,
      log: t.log,
      mail: false,
      sweepMs: 60_000,
      keepMs: 3_600_000,
      pruneMs: 100,
    })
    await sequencer.start()
    try {
      await eventually(async () => (await positions())[0] === newer[0], 10_000, 'a prune')
      expect(await positions()).toEqual(newer)
    } finally {
      await sequencer.stop()
    }
  })

  it('vacuums the inbox once it has moved enough of its rows (issue 47)', async () => {
    const { FeedSequencer } = await import('../../../server/engine/events/index.js')
    const vacuums = async () => {
      const [row] = await t.sql<{ n: number }[]>`
        select (vacuum_count + autovacuum_count)::int as n from pg_stat_user_tables
         where relname = 'event_inbox'`
      return row!.n
    }
    const e = await t.createEnterprise(`Vacuum ${randomUUID().slice(0, 6)}`)
    const task = await llmTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, {})
    await sequence()
    const before = await vacuums()
    const sequencer = new FeedSequencer({
      sql: t.sql,
      log: t.log,
      mail: false,
      sweepMs: 60_000,
      vacuumEveryRows: 3,
      vacuumGapMs: 0,
    })
    await sequencer.start()
    try {
      await t.sql`
        insert into run_events (enterprise_id, run_id, type)
        select ${e.id}, ${run.id}, 'tool.called' from generate_series(1, 3)`
      sequencer.wake()
      await eventually(async () => (await vacuums()) > before, 10_000, 'a vacuum of the inbox')
      const [left] = await t.sql<{ n: number }[]>`
        select count(*)::int as n from event_inbox where enterprise_id = ${e.id}`
      expect(left!.n).toBe(0)
    } finally {
      await sequencer.stop()
    }
  })
})
