import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { ChangeWatch } from '../../../server/db/change-watch.js'

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
