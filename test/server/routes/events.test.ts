import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FeedEvent, FeedPage } from '../../../shared/schemas/events.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { deterministicTask, llmTask, startTestEngine } from '../../helpers/runs.js'
import { SseReader } from '../../helpers/sse.js'
import { cheapPasswordHashes, signIn } from '../../helpers/people.js'
import { createToken } from '../../../server/domain/people/index.js'
import { eventually } from '../../helpers/wait.js'

// GET /v1/events (issue 47; DESIGN 15): the enterprise's one feed as pages and as a stream; what a token
// sees of it; resuming with nothing missed or repeated. The engine in this process gives positions.

let t: TestApp
let engine: Engine

beforeAll(async () => {
  t = await createTestApp()
  engine = await startTestEngine(t, { sweepMs: 200 })
})
afterAll(async () => {
  await engine?.stop()
})

async function page(query: string, token?: string) {
  const res = await t.call('GET', `/v1/events${query}`, token ? { token } : {})
  expect(res.status, res.text).toBe(200)
  return FeedPage.parse(res.body)
}

/** A fresh enterprise with a deterministic task: its runs succeed at once under the engine. */
async function tenant() {
  const e = await t.createEnterprise(`Events ${randomUUID().slice(0, 6)}`)
  // A lane per run (serializeOn n): starts in a row never wait on each other.
  const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
  const start = async (input: Record<string, unknown> = { n: randomUUID() }) => {
    const res = await t.call('POST', `/v1/tasks/${task.id}/runs`, { token: e.token, body: input })
    expect(res.status, res.text).toBe(201)
    return res.body.id as string
  }
  /** Waits until the feed holds `n` events and answers them. */
  const feed = async (n: number, query = '') => {
    let events: FeedEvent[] = []
    await eventually(
      async () => {
        events = (await page(`?limit=200${query}`, e.token)).data
        return events.length >= n
      },
      10_000,
      `${n} events in the feed`,
    )
    return events
  }
  return { e, task, start, feed }
}

async function stream(token: string, query = '', lastEventId?: string) {
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    accept: 'text/event-stream',
  }
  if (lastEventId) headers['last-event-id'] = lastEventId
  const res = await t.app.request(`/v1/events${query}`, { headers })
  await t.expectDocumented('GET', `/v1/events${query}`, res)
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
  return new SseReader(res)
}

describe('GET /v1/events as pages', () => {
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => '/v1/events',
    alsoNeeds: ['runs:read'],
  })

  it("gives a run's life in order, with positions one by one, and the next position to ask after", async () => {
    const { e, start, feed } = await tenant()
    const runId = await start({ n: 1 })
    const events = await feed(3)
    expect(events.map((ev) => ev.type)).toEqual(['run.queued', 'run.running', 'run.succeeded'])
    expect(events.map((ev) => ev.position)).toEqual([1, 2, 3])
    expect(events[0]!.subject).toMatchObject({ runId })
    expect(events[2]!.payload).toMatchObject({ result: { output: { n: 1 } } })
    const after = await page(`?after=2&limit=1`, await t.tokenWith(['events:read', 'runs:read'], e))
    expect(after).toMatchObject({ next: 3, more: true })
    expect(after.data.map((e) => e.position)).toEqual([3])
  })

  it('filters by types, and shows a token only the types of what it may read', async () => {
    const { e, start, feed } = await tenant()
    await start()
    await feed(3)
    const gate = await t.sql<{ id: string }[]>`
      insert into gates (enterprise_id, kind, tool, summary) values (${e.id}, 'question', 'os.ask_ceo', 'Which?')
      returning id`
    await feed(4)
    const onlyGates = await page('?types=gate.waiting', e.token)
    expect(onlyGates.data.map((ev) => ev.type)).toEqual(['gate.waiting'])
    expect(onlyGates.data[0]!.subject).toEqual({ gateId: gate[0]!.id })
    const runReader = await t.tokenWith(['events:read', 'runs:read'], e)
    const seen = await page('?limit=200', runReader)
    expect(seen.data.map((ev) => ev.type)).not.toContain('gate.waiting')
    expect(seen.data.length).toBeGreaterThanOrEqual(3)
    const asked = await t.call('GET', '/v1/events?types=gate.*', { token: runReader })
    expect(asked.status).toBe(403)
    expect(asked.body).toMatchObject({ error: 'api_token_scope', needed: 'gates:read' })
    expect(asked.body.message).toContain('runs:read')
    // teams:read reads no family of the feed (tasks:read reads task.*, issue 50).
    const readsNothing = await t.call('GET', '/v1/events', {
      token: await t.tokenWith(['events:read', 'teams:read'], e),
    })
    expect(readsNothing.status).toBe(403)
    expect(readsNothing.body.error).toBe('api_token_scope')
  })

  it("never shows another enterprise's events", async () => {
    const a = await tenant()
    const b = await tenant()
    const runId = await a.start()
    await a.feed(3)
    await b.start()
    const seenByB = await b.feed(3)
    expect(seenByB.some((ev) => ev.subject.runId === runId)).toBe(false)
  })

  it('refuses a malformed position or types filter', async () => {
    for (const query of ['?after=-1', '?after=abc', '?types=run.%', '?types=RUN.*']) {
      const res = await t.call('GET', `/v1/events${query}`)
      expect(res.status, query).toBe(400)
      expect(res.body.error).toBe('invalid_request')
    }
  })

  it('refuses a family the feed does not have as a bad request, not a missing scope', async () => {
    const runReader = await t.tokenWith(['events:read', 'runs:read'])
    for (const query of ['?types=foo.*', '?types=foo.bar', '?types=run.*,foo.bar'])
      for (const token of [undefined, runReader]) {
        const res = await t.call('GET', `/v1/events${query}`, { token })
        expect(res.status, query).toBe(400)
        expect(res.body).toMatchObject({
          error: 'invalid_request',
          issues: [{ field: 'types' }],
        })
      }
  })

  it('holds an empty page with waitSeconds until the next event', async () => {
    const { e, start, feed } = await tenant()
    await start()
    const events = await feed(3)
    const head = events.at(-1)!.position
    const waiting = t.call('GET', `/v1/events?after=${head}&waitSeconds=10`, { token: e.token })
    await new Promise((r) => setTimeout(r, 100))
    await start()
    const res = await waiting
    expect(res.status).toBe(200)
    expect(FeedPage.parse(res.body).data[0]).toMatchObject({
      position: head + 1,
      type: 'run.queued',
    })
  })

  it('says feed.reset when asked from before what it keeps (7 days)', async () => {
    const { e, start, feed } = await tenant()
    await start()
    await feed(3)
    await t.sql`update events set created_at = now() - interval '8 days' where enterprise_id = ${e.id}`
    await engine.events.sequencer.pruneNow()
    await start()
    await feed(3)
    const read = await page('?after=0', e.token)
    expect(read.data[0]).toMatchObject({
      type: 'feed.reset',
      position: 3,
      payload: { firstPosition: 4 },
    })
    expect(read.data.slice(1).map((ev) => ev.position)).toEqual([4, 5, 6])
  })
})

describe('GET /v1/events as a stream', () => {
  it('starts from now, sends each event with its position as the SSE id, and resumes from Last-Event-ID', async () => {
    const { e, start, feed } = await tenant()
    await start()
    const before = await feed(3)
    const reader = await stream(e.token)
    await start()
    await start()
    const live = await reader.until((events) => events.filter((x) => !x.comment).length >= 6)
    const sent = live.filter((x) => !x.comment).map((x) => FeedEvent.parse(x.data))
    expect(sent[0]!.position).toBe(before.at(-1)!.position + 1)
    expect(live.filter((x) => !x.comment).map((x) => Number(x.id))).toEqual(
      sent.map((x) => x.position),
    )
    expect(live.filter((x) => !x.comment).map((x) => x.event)).toEqual(sent.map((x) => x.type))
    await reader.cancel()
    // Gone for a while: what happened meanwhile comes first on the next stream, nothing twice.
    const last = sent.at(-1)!.position
    await start()
    await feed(last + 3)
    const resumed = await stream(e.token, '', String(last))
    const again = await resumed.until((events) => events.filter((x) => !x.comment).length >= 3)
    expect(again.slice(0, 3).map((x) => Number(x.id))).toEqual([last + 1, last + 2, last + 3])
    await resumed.cancel()
  })

  it('keeps to the types asked for, and resumes from after= too', async () => {
    const { e, start, feed } = await tenant()
    await start()
    await feed(3)
    const reader = await stream(e.token, '?types=run.succeeded&after=0')
    const got = await reader.until((events) => events.filter((x) => !x.comment).length >= 1)
    expect(got.map((x) => x.event)).toEqual(['run.succeeded'])
    await start()
    const more = await reader.until((events) => events.filter((x) => !x.comment).length >= 2)
    expect(more.map((x) => x.event)).toEqual(['run.succeeded', 'run.succeeded'])
    await reader.cancel()
  })

  it("after catching up on more than one read's worth, wakes at the next event, not at its ping", async () => {
    const { e, start } = await tenant()
    // More than one read's worth (200) waiting: 70 runs, three events each.
    for (let i = 0; i < 70; i += 10) await Promise.all(Array.from({ length: 10 }, () => start()))
    await eventually(
      async () => (await page('?after=200&limit=200', e.token)).data.length >= 10,
      20_000,
      '210 events in the feed',
    )
    const reader = await stream(e.token, '?after=0')
    await reader.until((got) => got.filter((x) => !x.comment).length >= 210, 10_000)
    // The wait after the first read was dropped with the second's start: the run below reached the
    // stream only at its 15 s ping.
    const caughtUp = reader.named().length
    await start()
    await reader.until((got) => got.filter((x) => !x.comment).length >= caughtUp + 3, 5000)
    await reader.cancel()
  })

  it('refuses before streaming: a types filter the token may not read, a malformed Last-Event-ID', async () => {
    const token = await t.tokenWith(['events:read', 'runs:read'])
    const res = await t.app.request('/v1/events?types=chat.*', {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    })
    expect(res.status).toBe(403)
    const bad = await t.app.request('/v1/events', {
      headers: {
        authorization: `Bearer ${t.acme.token}`,
        accept: 'text/event-stream',
        'last-event-id': 'message-7',
      },
    })
    expect(bad.status).toBe(400)
  })

  it("never sends another enterprise's events, whatever position it asks after", async () => {
    const a = await tenant()
    const b = await tenant()
    await b.start()
    const bEvents = await b.feed(3)
    const reader = await stream(b.e.token, '?after=0')
    const runId = await a.start()
    await a.feed(3)
    await b.start()
    const got = await reader.until((events) => events.filter((x) => !x.comment).length >= 6)
    expect(got.some((x) => x.data.subject.runId === runId)).toBe(false)
    expect(got.slice(0, 3).map((x) => x.data)).toEqual(bEvents)
    await reader.cancel()
  })

  it('holds at most 50 streams of a token open at once: one more is 429 until one closes', async () => {
    const { e } = await tenant()
    const token = await t.tokenWith(['events:read', 'runs:read'], e)
    const readers = await Promise.all(Array.from({ length: 50 }, () => stream(token)))
    const refused = await t.app.request('/v1/events', {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    })
    await t.expectDocumented('GET', '/v1/events', refused)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBeTruthy()
    expect(await refused.json()).toMatchObject({ error: 'too_many_streams' })
    // Another token of the same enterprise has its own 50; pages are not streams.
    const other = await stream(e.token)
    await other.cancel()
    expect((await t.call('GET', '/v1/events', { token })).status).toBe(200)
    await readers[0]!.cancel()
    await eventually(
      async () => {
        const again = await t.app.request('/v1/events', {
          headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
        })
        if (again.status !== 200) return false
        await new SseReader(again).cancel()
        return true
      },
      5_000,
      'a stream again once one closed',
    )
    await Promise.all(readers.slice(1).map((r) => r.cancel()))
  })

  it('ends a stream when its credential stops: revoked, changed, expired, its person removed', async () => {
    cheapPasswordHashes()
    const { e } = await tenant()
    const owner = await signIn(t, 'owner', e)
    const member = await signIn(t, 'member', e)
    const portal = (method: string, path: string, body?: unknown) =>
      t.call(method, path, { token: owner.session, body })
    const made = async () => {
      const res = await portal('POST', '/v1/enterprise/api-tokens', {
        name: 'stream',
        scopes: ['events:read', 'runs:read'],
      })
      expect(res.status, res.text).toBe(201)
      return { id: res.body.id as string, token: res.body.token as string }
    }
    // Revoked: the stream ends as the next request would be refused.
    const revoked = await made()
    const first = await stream(revoked.token)
    expect((await portal('DELETE', `/v1/enterprise/api-tokens/${revoked.id}`)).status).toBe(200)
    await first.end(5_000)
    expect(first.ended).toBe(true)
    // Changed (its scopes): the stream ends, and one opened again holds to the new scopes.
    const changed = await made()
    const second = await stream(changed.token)
    const patched = await portal('PATCH', `/v1/enterprise/api-tokens/${changed.id}`, {
      scopes: ['tasks:read'],
    })
    expect(patched.status).toBe(200)
    await second.end(5_000)
    expect(second.ended).toBe(true)
    // Past its expiry, with nobody changing anything.
    const expiring = await createToken(t.sql, e.id, {
      name: 'expiring',
      scopes: ['events:read', 'runs:read'],
      expiresAt: new Date(Date.now() + 1_500),
    })
    const third = await stream(expiring.token)
    await third.end(6_000)
    expect(third.ended).toBe(true)
    expect((await t.call('GET', '/v1/events', { token: expiring.token })).status).toBe(401)
    // The person removed from the enterprise: their session's stream ends.
    const fourth = await stream(member.session)
    expect((await portal('DELETE', `/v1/users/${member.id}`)).status).toBe(200)
    await fourth.end(5_000)
    expect(fourth.ended).toBe(true)
  })

  it('shows llm runs too', async () => {
    const { e } = await tenant()
    const task = await llmTask(t, {}, e.token)
    const reader = await stream(e.token)
    await t.call('POST', `/v1/tasks/${task.id}/runs`, { token: e.token, body: {} })
    const got = await reader.until((events) => events.some((x) => x.event === 'run.queued'))
    expect(got.find((x) => x.event === 'run.queued')!.data.subject.taskSlug).toBe(task.slug)
    await reader.cancel()
  })
})
