import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LeaseLoop, type Leased, type WorkKind } from '../../../server/engine/lease-loop.js'
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js'
import { silentLog } from '../../helpers/app.js'
import { eventually } from '../../helpers/wait.js'

// The lease loop's own rules, with a kind of work the test drives by hand (the loop's claims, answers
// and wake-ups), on a real database for its LISTEN.

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(async () => {
  await db?.sql.end()
})

function deferred<T>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => (resolve = r))
  return { promise, resolve }
}

/**
 * A kind whose claims, executions and answers the test decides. A claim takes from `queue` no more than
 * the room the loop offers, and records that room beside the executions under way when it was asked.
 */
function handDriven() {
  const queue: Leased[] = []
  const executions: { work: Leased; signal: AbortSignal; done: () => void }[] = []
  const checks: { id: string; answer: (held: boolean) => void }[] = []
  const claims: { room: number; underWay: number }[] = []
  let underWay = 0
  let mostUnderWay = 0
  let heard: ((payload: string) => void) | undefined
  const kind: WorkKind<Leased> = {
    name: 'hand',
    logKey: 'handId',
    channel: 'osd_test_hand',
    listenLocally: (h) => {
      heard = h
      return () => (heard = undefined)
    },
    claim: async (room) => {
      claims.push({ room, underWay })
      const claimed = queue.splice(0, room)
      return { claimed, more: claimed.length > 0 && claimed.length === room }
    },
    execute: (work, signal) => {
      const finished = deferred<void>()
      mostUnderWay = Math.max(mostUnderWay, ++underWay)
      executions.push({
        work,
        signal,
        done: () => {
          underWay--
          finished.resolve()
        },
      })
      return finished.promise
    },
    renew: async (ids) => new Set(ids),
    stillHeld: (id) => {
      const answer = deferred<boolean>()
      checks.push({ id, answer: answer.resolve })
      return answer.promise
    },
    release: async () => undefined,
  }
  return {
    kind,
    queue,
    executions,
    checks,
    claims,
    mostUnderWay: () => mostUnderWay,
    hear: (payload: string) => heard?.(payload),
  }
}

describe('the lease loop', () => {
  it('aborts the execution a check was made for, never the next one of the same work', async () => {
    const hand = handDriven()
    const loop = new LeaseLoop(hand.kind, { sql: db.sql, log: silentLog, sweepMs: 60_000 })
    const work = { id: 'run-1', wakeKey: 'run-1' }
    hand.queue.push(work)
    await loop.start()
    try {
      await eventually(() => hand.executions.length === 1)
      // The work moved (a gate's decision put the run back in line): the loop asks whether it still
      // holds it, and the answer is slow to come.
      hand.hear('run-1')
      await eventually(() => hand.checks.length === 1)
      // Meanwhile the first execution ends, and the same work is claimed again and executed anew.
      hand.executions[0]!.done()
      hand.queue.push(work)
      loop.wake()
      await eventually(() => hand.executions.length === 2)
      // The slow answer is about the first execution: not held then. The second goes on.
      hand.checks[0]!.answer(false)
      await new Promise((r) => setTimeout(r, 50))
      expect(hand.executions[1]!.signal.aborted).toBe(false)

      // A check made for the second, answered not held, aborts it.
      hand.hear('run-1')
      await eventually(() => hand.checks.length === 2)
      hand.checks[1]!.answer(false)
      await eventually(() => hand.executions[1]!.signal.aborted)
      hand.executions[1]!.done()
    } finally {
      await loop.stop(100)
    }
  })

  it('claims only for its free slots, and claims again as each one frees (issue 43)', async () => {
    const hand = handDriven()
    const loop = new LeaseLoop(hand.kind, {
      sql: db.sql,
      log: silentLog,
      sweepMs: 60_000,
      capacity: 2,
    })
    for (let i = 0; i < 5; i++) hand.queue.push({ id: `work-${i}`, wakeKey: `work-${i}` })
    await loop.start()
    try {
      await eventually(() => hand.executions.length === 2)
      // Woken at capacity (a notification, the sweep): it asks with no room, and claims nothing.
      const asked = hand.claims.length
      loop.wake()
      await eventually(() => hand.claims.length > asked)
      expect(hand.claims.at(-1)).toEqual({ room: 0, underWay: 2 })
      expect(hand.executions).toHaveLength(2)
      expect(hand.queue).toHaveLength(3)
      expect(loop.inProgress).toEqual(['work-0', 'work-1'])

      // A slot frees: the loop wakes by itself and claims one, not more.
      hand.executions[0]!.done()
      await eventually(() => hand.executions.length === 3)
      await eventually(() => loop.inProgress.length === 2)
      expect(hand.queue).toHaveLength(2)
      // Two free at once: two claimed.
      hand.executions[1]!.done()
      hand.executions[2]!.done()
      await eventually(() => hand.executions.length === 5)
      expect(hand.queue).toHaveLength(0)
      for (const execution of hand.executions.slice(3)) execution.done()
      await eventually(() => loop.inProgress.length === 0)

      // Every claim offered at most the slots not under way, and never were more than two at once.
      for (const claim of hand.claims) expect(claim.room + claim.underWay).toBeLessThanOrEqual(2)
      expect(Math.max(...hand.claims.map((c) => c.room))).toBe(2)
      expect(hand.mostUnderWay()).toBe(2)
    } finally {
      await loop.stop(100)
    }
  })

  it('on stop, hands back what a claim under way takes, never left running (a stop during a pass)', async () => {
    // A kind whose second claim answers when the test says: the first takes `first`, which runs until
    // the test ends it; the second is under way when the loop is told to stop.
    const first = { id: 'run-1', wakeKey: 'run-1' }
    const late = { id: 'run-2', wakeKey: 'run-2' }
    const secondClaim = deferred<Leased[]>()
    const claiming = deferred<void>()
    const executions = new Map<string, { signal: AbortSignal; done: () => void }>()
    const released: string[] = []
    let claims = 0
    const kind: WorkKind<Leased> = {
      name: 'hand',
      logKey: 'handId',
      channel: 'osd_test_hand',
      listenLocally: () => () => undefined,
      claim: async () => {
        if (++claims === 1) return { claimed: [first], more: false }
        claiming.resolve()
        return { claimed: await secondClaim.promise, more: false }
      },
      execute: (work, signal) => {
        const finished = deferred<void>()
        executions.set(work.id, { signal, done: () => finished.resolve() })
        return finished.promise
      },
      renew: async (ids) => new Set(ids),
      stillHeld: async () => true,
      release: async (ids) => void released.push(...ids),
    }
    const loop = new LeaseLoop(kind, { sql: db.sql, log: silentLog, sweepMs: 60_000 })
    await loop.start()
    await eventually(() => executions.has('run-1'))
    loop.wake()
    await claiming.promise
    // Told to stop while the claim is out: the work in progress is aborted at once...
    const stopping = loop.stop(60_000)
    await eventually(() => executions.get('run-1')!.signal.aborted)
    // ...and then the claim answers with a piece of work this engine now holds the lease of.
    secondClaim.resolve([late])
    await new Promise((r) => setImmediate(r))
    executions.get('run-1')!.done()
    executions.get('run-2')?.done()
    await stopping
    // It was not left running here with nobody to stop it, and its lease went back with the other's,
    // for the next engine to take it at once rather than after the lease lapses.
    expect(executions.get('run-2')?.signal.aborted ?? true).toBe(true)
    expect(released.sort()).toEqual(['run-1', 'run-2'])
  })
})
