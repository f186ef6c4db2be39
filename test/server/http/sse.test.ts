import { Writable } from 'node:stream'
import type { Context } from 'hono'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '../../../server/http/app.js'
import { sseAnswer } from '../../../server/http/sse.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { SseReader } from '../../helpers/sse.js'

// What an open stream or a held page leaves behind in a daemon that runs for months (server/http/sse.ts).

let t: TestApp
const shutdown = new AbortController()
let app: ReturnType<typeof createApp>

beforeAll(async () => {
  t = await createTestApp()
  // The app as `osd serve` makes it: with the daemon's shutdown signal, which lives as long as osd.
  app = createApp({
    sql: t.sql,
    config: t.config,
    log: t.log,
    sealer: t.sealer,
    shutdown: shutdown.signal,
  })
})
afterAll(() => shutdown.abort())

/**
 * The signals that hang on `signal` (Node's AbortSignal.any keeps each composite it made from it
 * there; Node 20 never lets one go, and one with an abort listener stays whole in memory).
 */
function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find(
    (s) => s.description === 'kDependantSignals',
  )
  const set = key && (signal as unknown as Record<symbol, Set<unknown> | undefined>)[key]
  return set?.size ?? 0
}

describe("the daemon's shutdown signal", () => {
  it('holds nothing of the pages of the event feed once they are answered', async () => {
    const get = (query: string) =>
      app.request(`/v1/events${query}`, { headers: { authorization: `Bearer ${t.acme.token}` } })
    const before = dependants(shutdown.signal)
    // A page past the feed's head answers at once (its feed.reset), having waited: 1,000 pollers' pages.
    for (let i = 0; i < 1_000; i += 50) {
      const pages = await Promise.all(
        Array.from({ length: 50 }, (_, j) => get(`?after=${1e9 + i + j}&waitSeconds=5`)),
      )
      for (const res of pages) expect(res.status, await res.text()).toBe(200)
    }
    expect(dependants(shutdown.signal)).toBe(before)
  })

  it('holds nothing of the event streams that ended', async () => {
    const before = dependants(shutdown.signal)
    for (let i = 0; i < 20; i++) {
      const res = await app.request('/v1/events', {
        headers: { authorization: `Bearer ${t.acme.token}`, accept: 'text/event-stream' },
      })
      expect(res.status).toBe(200)
      // The client goes away.
      await new SseReader(res).cancel()
    }
    expect(dependants(shutdown.signal)).toBe(before)
  })
})

describe('a stream to a client that reads slowly', () => {
  it('waits for each drain without leaving a listener on the answer', async () => {
    // Node's answer as a slow client makes it: each frame fills its buffer, so every write waits to drain.
    const outgoing = Object.assign(
      new Writable({
        highWaterMark: 1,
        write: (_chunk, _encoding, done) => setImmediate(done),
      }),
      { writeHead: () => ({ flushHeaders: () => undefined }) },
    )
    const seen: number[] = []
    async function* events() {
      for (let i = 0; i < 200; i++) {
        seen.push(outgoing.listenerCount('close') + outgoing.listenerCount('error'))
        yield { event: 'tick', data: { i } }
      }
    }
    const c = { env: { outgoing } } as unknown as Context
    sseAnswer(c, events(), new AbortController())
    await new Promise((resolve) => outgoing.once('finish', resolve))
    expect(seen).toHaveLength(200)
    // A stream lives for months: what it listens with stays what it was at its first frame.
    expect(Math.max(...seen)).toBe(seen[0])
  })
})
