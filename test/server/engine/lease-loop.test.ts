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

/** A kind whose claims, executions and answers the test decides. */
function handDriven() {
  const queue: Leased[] = []
  const executions: { work: Leased; signal: AbortSignal; done: () => void }[] = []
  const checks: { id: string; answer: (held: boolean) => void }[] = []
  let heard: ((payload: string) => void) | undefined
  const kind: WorkKind<Leased> = {
    name: 'hand',
    logKey: 'handId',
    channel: 'osd_test_hand',
    listenLocally: (h) => {
      heard = h
      return () => (heard = undefined)
    },
    claim: async () => ({ claimed: queue.splice(0), more: false }),
    execute: (work, signal) => {
      const finished = deferred<void>()
      executions.push({ work, signal, done: () => finished.resolve() })
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
  return { kind, queue, executions, checks, hear: (payload: string) => heard?.(payload) }
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
})
