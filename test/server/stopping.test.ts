import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../server/config.js'
import { createTask } from '../../server/domain/tasks/index.js'
import { createApp } from '../../server/http/app.js'
import { startDaemon, type Running } from '../../server/serve.js'
import { ErrorBody, Probe } from '../../shared/schemas/common.js'
import { createTestApp, silentLog, type TestApp } from '../helpers/app.js'
import { holdLock } from '../helpers/db.js'
import { apiStart } from '../helpers/runs.js'
import { eventually } from '../helpers/wait.js'

// Stopping osd (issue 51): streams and long-polls end at once, a request that still reaches osd is
// refused with 503 shutting_down, no connection is kept alive, and osd stops within 2 s of its last
// real request. In process: the app, and the daemon of `osd serve` (startDaemon) on DATABASE_URL; the
// signals and the embedded server's stop are daemon.test.ts's.

let t: TestApp
beforeAll(async () => {
  t = await createTestApp()
})

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('a request while osd stops', () => {
  it('is 503 shutting_down with Retry-After and Connection: close, before its token is read; the probes still answer', async () => {
    const shutdown = new AbortController()
    shutdown.abort()
    const stopping = createApp({
      sql: t.sql,
      config: t.config,
      log: t.log,
      sealer: t.sealer,
      shutdown: shutdown.signal,
    })
    const ask = async (method: string, path: string, token: string | null, body?: unknown) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' }
      if (token) headers.authorization = `Bearer ${token}`
      const res = await stopping.request(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      await t.expectDocumented(method, path, res)
      return res
    }
    const before =
      await t.sql`select count(*)::int as n from tasks where enterprise_id = ${t.acme.id}`
    for (const [method, path, token, body] of [
      ['GET', '/v1/tasks', t.acme.token],
      ['POST', '/v1/tasks', t.acme.token, { name: 'Made while stopping', kind: 'deterministic' }],
      // No token, or a wrong one: the same answer, and nothing of the caller is looked at.
      ['GET', '/v1/tasks', null],
      ['GET', '/v1/tasks', 'osd_not_a_token'],
      ['GET', '/v1/openapi.json', null],
    ] as const) {
      const res = await ask(method, path, token, body)
      expect(res.status, `${method} ${path}`).toBe(503)
      expect(res.headers.get('retry-after')).toBe('2')
      expect(res.headers.get('connection')).toBe('close')
      expect(res.headers.get('x-request-id')).toBeTruthy()
      expect(ErrorBody.parse(await res.json())).toEqual({
        error: 'shutting_down',
        message: 'osd is stopping; try again shortly.',
      })
    }
    const after =
      await t.sql`select count(*)::int as n from tasks where enterprise_id = ${t.acme.id}`
    expect(after).toEqual(before)

    // An orchestrator's probes: alive, not ready (as documented), and the connection closes.
    const live = await ask('GET', '/v1/health/live', null)
    expect(live.status).toBe(200)
    expect(live.headers.get('connection')).toBe('close')
    const ready = await ask('GET', '/v1/health/ready', null)
    expect(ready.status).toBe(503)
    expect(ready.headers.get('connection')).toBe('close')
    expect(Probe.parse(await ready.json())).toEqual({
      status: 'unavailable',
      reason: 'osd is stopping',
    })
  })
})

// Each test starts a daemon in process: about 1 s on one busy core; the stop waits on a held request.
describe('osd stopping (startDaemon)', { timeout: 60_000 }, () => {
  let running: Running | undefined
  afterAll(async () => {
    await running?.halt()
  })

  const start = async () => {
    const config = loadConfig(
      { port: 0, host: '127.0.0.1', role: 'api' },
      { DATABASE_URL: t.dbUrl, OSD_LOG_LEVEL: 'silent' },
    )
    running = await startDaemon(config, silentLog)
    return running
  }
  const auth = () => ({ authorization: `Bearer ${t.acme.token}` })

  /** A queued run (no engine here moves it) and its newest event, to long-poll after. */
  async function queuedRun() {
    const taskId = await createTask(t.sql, t.acme.id, {
      name: `Stop ${Math.random().toString(36).slice(2, 8)}`,
      kind: 'deterministic',
      assigneeRole: 'ceo',
      overlapPolicy: 'os',
    })
    const { run } = await apiStart(t.sql, t.acme.id, taskId, {})
    const [event] = await t.sql<{ id: string }[]>`
      select id from run_events where run_id = ${run.id} order by seq desc limit 1`
    return `/runs/${run.id}?afterEventId=${event!.id}&waitSeconds=30`
  }

  /** A change of the enterprise held by a row lock this test takes: a real request in flight. */
  function heldRequest(base: string) {
    const lock = holdLock(
      t.sql,
      (tx) => tx`select 1 from enterprises where id = ${t.acme.id} for no key update`,
    )
    return {
      async send() {
        const held = await lock
        const answer = fetch(`${base}/enterprise/concurrency`, {
          method: 'PATCH',
          headers: { ...auth(), 'content-type': 'application/json' },
          body: JSON.stringify({ concurrentRunLimit: 7 }),
        })
        await eventually(() => held.waitedOn(), 10_000, 'the request to wait on the lock')
        // In an object: an async function returning the promise itself would wait for the answer.
        return { answer }
      },
      async release() {
        await (await lock).release()
      },
    }
  }

  interface Seen {
    at: number
    status: number
    type: string | null
    connection: string | null
    retryAfter: string | null
    body: string
  }

  /**
   * A client that asks again the moment it is answered, as osctl's followers do (an event stream that
   * ends is opened again, a long-poll answered is sent again), on the connection kept alive. It ends at
   * the first request that fails (osd no longer listens). Every answer is noted.
   */
  function reconnecting(ask: () => Promise<Response>, seen: Seen[]) {
    let answers = 0
    const done = (async () => {
      for (;;) {
        let res: Response
        try {
          res = await ask()
        } catch {
          return
        }
        const at = performance.now()
        answers++
        const body = await res.text().catch(() => '')
        seen.push({
          at,
          status: res.status,
          type: res.headers.get('content-type'),
          connection: res.headers.get('connection'),
          retryAfter: res.headers.get('retry-after'),
          body,
        })
      }
    })()
    return { done, answers: () => answers }
  }

  it('ends event streams and long-polls at once, refuses what reconnects, and stops within 2 s of its last real request', async () => {
    const daemon = await start()
    const base = daemon.url!
    const poll = await queuedRun()
    const seen: Seen[] = []
    const stream = reconnecting(
      () =>
        fetch(`${base}/events?after=0`, { headers: { ...auth(), accept: 'text/event-stream' } }),
      seen,
    )
    const longPoll = reconnecting(() => fetch(`${base}${poll}`, { headers: auth() }), seen)
    // The stream is open once its headers came. The long-poll is held from about when it is sent; were
    // it not yet, its first read answers at once and it is sent again: its connection is as busy.
    await eventually(() => stream.answers() === 1, 10_000, 'the event stream to open')

    // An idle connection kept alive: closed when osd stops.
    const idle = await idleConnection(new URL(base))
    const held = heldRequest(base)
    const { answer: change } = await held.send()

    const stopAt = performance.now()
    let stoppedAt: number | undefined
    const stopping = daemon.stop().then(() => (stoppedAt = performance.now()))
    // Both clients find osd gone (their connections closed, new ones refused) while a real request is
    // still in flight: nothing they do holds the stop.
    await Promise.race([
      Promise.all([stream.done, longPoll.done, idle.closed]),
      sleep(10_000).then(() => {
        throw new Error('a stream, a long-poll or an idle connection still holds osd after 10 s')
      }),
    ])
    expect(stoppedAt).toBeUndefined()

    // What they were answered after the stop began: the long-poll's read at once, and any request
    // that still reached osd refused. No stream was opened again.
    const after = seen.filter((s) => s.at > stopAt)
    expect(after.length).toBeGreaterThan(0)
    for (const answer of after) {
      expect(answer.connection, JSON.stringify(answer)).toBe('close')
      if (answer.status === 503) {
        expect(answer.retryAfter).toBe('2')
        expect(JSON.parse(answer.body)).toMatchObject({ error: 'shutting_down' })
      } else {
        expect(answer.status).toBe(200)
        expect(answer.type).toContain('application/json')
      }
    }

    await held.release()
    const answer = await change
    const answeredAt = performance.now()
    expect(answer.status).toBe(200)
    expect(answer.headers.get('connection')).toBe('close')
    expect(await answer.json()).toEqual({ concurrentRunLimit: 7 })
    await stopping
    expect(stoppedAt! - answeredAt).toBeLessThan(2000)
    running = undefined
  })

  it('halt() stops at once, a request in flight or not', async () => {
    const daemon = await start()
    const held = heldRequest(daemon.url!)
    const { answer: change } = await held.send()
    // Its end is taken as it comes: it is cut during halt(), before the test looks.
    const ended = change.then(
      () => 'answered',
      () => 'cut',
    )
    void daemon.stop()
    const haltAt = performance.now()
    await daemon.halt()
    expect(performance.now() - haltAt).toBeLessThan(2000)
    // The request in flight is cut, not answered.
    expect(await ended).toBe('cut')
    await held.release()
    running = undefined
  })
})

/** A connection to `url`'s host that asked once and is kept alive; `closed` resolves when osd closes it. */
async function idleConnection(url: URL): Promise<{ socket: Socket; closed: Promise<void> }> {
  const socket = connect(Number(url.port), url.hostname)
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  let text = ''
  const answered = new Promise<void>((resolve) =>
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      if (text.includes('\r\n\r\n') && text.endsWith('}')) resolve()
    }),
  )
  socket.write(
    `GET /v1/health/live HTTP/1.1\r\nHost: ${url.host}\r\nConnection: keep-alive\r\n\r\n`,
  )
  await answered
  expect(text).toMatch(/^HTTP\/1\.1 200 /)
  expect(text.toLowerCase()).toContain('connection: keep-alive')
  return { socket, closed }
}
