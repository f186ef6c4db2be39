import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { ChangeWatch, type Watch } from '../../../server/db/change-watch.js'
import { createTestDatabase } from '../../helpers/db.js'

// The long-poll waiters (runs and chats) and the daemon's shutdown signal: many concurrent waits put one
// listener on the signal, not one each (50 chat long-polls made Node warn of a listener leak).

describe('ChangeWatch', () => {
  it('holds one listener on the shutdown signal however many wait, and wakes them all on abort', async () => {
    const watch = new ChangeWatch('osd_test')
    const shutdown = new AbortController()
    const waits = Array.from({ length: 50 }, (_, i) =>
      watch.subscribe(`run-${i}`, 60_000, shutdown.signal),
    )
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1)
    shutdown.abort()
    await Promise.all(waits.map((w) => w.ready))
  })

  it('wakes a wait on a signal already aborted at once, and a cancelled wait no longer counts', async () => {
    const watch = new ChangeWatch('osd_test')
    const shutdown = new AbortController()
    const first = watch.subscribe('a', 60_000, shutdown.signal)
    first.cancel()
    await first.ready
    shutdown.abort()
    await watch.subscribe('b', 60_000, shutdown.signal).ready
  })
})

// A wait that ends (woken, timed out or cancelled) took its key out of the waits however the key's
// waits stood by then: a second reader's wait, started meanwhile, was dropped with it. That reader then
// slept through every NOTIFY until its own time ran out: an event stream 15 s late (its ping), a
// long-poll at its waitSeconds. Two readers of one run or one enterprise's feed, or one stream with
// more than one read's worth waiting, were enough.
describe('ChangeWatch, a wait started while another on its key ends', () => {
  /** Whether `watch` wakes before `ms`: the NOTIFY's wake, not its own time (60 s). */
  const wakesWithin = (w: Watch, ms: number) =>
    Promise.race([w.ready.then(() => true), new Promise((r) => setTimeout(() => r(false), ms))])

  it('keeps it: the next NOTIFY wakes it, whether the one before ended by a wake or by cancel', async () => {
    const db = await createTestDatabase()
    const watch = new ChangeWatch('osd_test_keys')
    watch.follow(db.sql, (err) => {
      throw err
    })
    // The LISTEN is in place once a NOTIFY sent now wakes a wait.
    for (;;) {
      const probe = watch.subscribe('probe', 60_000)
      await db.sql.notify('osd_test_keys', 'probe')
      if (await wakesWithin(probe, 200)) break
      probe.cancel()
    }

    // Two readers of one key are woken together; the first waits again before the second ends its
    // wait (a stream's cancel after its wake, a long-poll's finally).
    const first = watch.subscribe('k', 60_000)
    const second = watch.subscribe('k', 60_000)
    await db.sql.notify('osd_test_keys', 'k')
    await first.ready
    await second.ready
    const again = watch.subscribe('k', 60_000)
    first.cancel()
    second.cancel()
    expect(watch.waiting).toBe(1)
    await db.sql.notify('osd_test_keys', 'k')
    expect(await wakesWithin(again, 5000)).toBe(true)

    // One reader that cancels its wait and waits again at once (a stream with more than one read's
    // worth of events: the next read follows without a pause).
    const cancelled = watch.subscribe('k', 60_000)
    cancelled.cancel()
    const next = watch.subscribe('k', 60_000)
    await new Promise((r) => setImmediate(r))
    expect(watch.waiting).toBe(1)
    await db.sql.notify('osd_test_keys', 'k')
    expect(await wakesWithin(next, 5000)).toBe(true)
    expect(watch.waiting).toBe(0)
  })
})
