import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  EventDelivery,
  EventDeliveryPage,
  EventSubscription,
  EventSubscriptionWithSecret,
} from '../../../shared/schemas/events.js'
import { nextAttemptAt } from '../../../server/domain/events/index.js'
import { parseEgressAllow, type Resolve } from '../../../server/egress.js'
import { deliveriesInFlight, deliveryWindow } from '../../../server/engine/events/deliveries.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'
import { startTestEngine } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

// Outbound event subscriptions (issue 47): their routes, and their deliveries by an engine of this
// process to a receiver on 127.0.0.1 (allowed here as in the rest of the suite), each checked with the
// Standard Webhooks reference library (npm standardwebhooks), not with code of ours.

/** A name that resolves to a public address when saved and to the metadata address when connected. */
const rebound = 'hooks.rebind.test'
const publicAt: Resolve = async (name) =>
  name === rebound ? [{ address: '93.184.216.34', family: 4 }] : []
const metadataAt: Resolve = async (name) =>
  name === rebound ? [{ address: '169.254.169.254', family: 4 }] : []
const allow = parseEgressAllow('127.0.0.0/8,::1')
/** The engine's attempts wait this long for an answer (10 s in production). */
const timeoutMs = 4_000

interface Received {
  path: string
  headers: Record<string, string>
  body: string
  at: number
}

/** The receiver: what it got, and how each path answers (`/fail/<key>` fails while fails[key] > 0). */
const received: Received[] = []
const fails = new Map<string, number>()
/** Requests to /hang, held open until the test ends. */
const hanging = new Set<ServerResponse>()
/** The most requests to /hang held open at once. */
let mostHanging = 0
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let body = ''
  req.on('data', (chunk) => (body += chunk))
  req.on('end', () => {
    const path = req.url ?? '/'
    received.push({ path, headers: req.headers as Record<string, string>, body, at: Date.now() })
    if (path.startsWith('/hang')) {
      hanging.add(res)
      mostHanging = Math.max(mostHanging, hanging.size)
      res.on('close', () => hanging.delete(res))
      return
    }
    const key = path.startsWith('/fail/') ? path.slice(6) : undefined
    if (key && (fails.get(key) ?? 0) > 0) {
      fails.set(key, fails.get(key)! - 1)
      res.writeHead(503, { 'content-type': 'text/plain' }).end(`busy ${'x'.repeat(3000)}`)
      return
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  })
})
let base: string

let t: TestApp
let engine: Engine

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t = await createTestApp({ egress: { allow, resolve: publicAt } })
  engine = await startTestEngine(t, {
    sweepMs: 200,
    config: { ...t.config, egress: { allow, resolve: metadataAt } },
    deliveries: { timeoutMs },
  })
})
afterAll(async () => {
  for (const res of hanging) res.destroy()
  await engine?.stop()
  await new Promise((resolve) => server.close(resolve))
})

/** A fresh enterprise, so deliveries of one test never mix with another's. */
async function tenant() {
  const e = await t.createEnterprise(`Subs ${randomUUID().slice(0, 6)}`)
  const subscribe = async (body: Record<string, unknown>) => {
    const res = await t.call('POST', '/v1/event-subscriptions', { token: e.token, body })
    expect(res.status, res.text).toBe(201)
    return EventSubscriptionWithSecret.parse(res.body)
  }
  /** Opens a gate: a gate.waiting event once sequenced. */
  const gate = async (summary = 'Ship it?') => {
    const [row] = await t.sql<{ id: string }[]>`
      insert into gates (enterprise_id, kind, tool, summary)
      values (${e.id}, 'question', 'os.ask_ceo', ${summary}) returning id`
    return row!.id
  }
  const deliveries = async (subscriptionId: string) => {
    const res = await t.call('GET', `/v1/event-subscriptions/${subscriptionId}/deliveries`, {
      token: e.token,
    })
    expect(res.status, res.text).toBe(200)
    return EventDeliveryPage.parse(res.body).data
  }
  return { e, subscribe, gate, deliveries }
}

const at = (path: string) => received.filter((r) => r.path === path)

describe('event subscriptions: the routes', () => {
  let id: string
  let foreignId: string
  beforeAll(async () => {
    const res = await t.call('POST', '/v1/event-subscriptions', {
      body: { url: `${base}/checks`, types: ['gate.*'] },
    })
    id = res.body.id
    const theirs = await t.call('POST', '/v1/event-subscriptions', {
      token: t.other.token,
      body: { url: `${base}/checks`, types: ['gate.*'] },
    })
    foreignId = theirs.body.id
  })

  commonRouteChecks(() => t, {
    method: 'POST',
    path: () => '/v1/event-subscriptions',
    body: () => ({ url: `${base}/checks`, types: ['run.failed'] }),
    alsoNeeds: ['runs:read'],
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/event-subscriptions/${id}`,
    foreign: () => ({ path: `/v1/event-subscriptions/${foreignId}` }),
    notFoundCode: 'subscription_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/event-subscriptions/${id}/deliveries`,
    notFoundCode: 'subscription_not_found',
  })

  it('shows the signing secret once, whsec_ and 32 bytes, and stores it sealed', async () => {
    const { e, subscribe } = await tenant()
    const made = await subscribe({ url: `${base}/once`, types: ['gate.waiting', 'run.*'] })
    expect(made.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(made.secret.slice(6), 'base64')).toHaveLength(32)
    expect(made).toMatchObject({ format: 'standard', status: 'enabled' })
    const got = await t.call('GET', `/v1/event-subscriptions/${made.id}`, { token: e.token })
    expect(EventSubscription.strict().parse(got.body).secretHint).toBe(`…${made.secret.slice(-4)}`)
    const listed = await t.call('GET', '/v1/event-subscriptions', { token: e.token })
    expect(JSON.stringify(listed.body)).not.toContain(made.secret.slice(6, 30))
    const [row] = await t.sql<{ sealed: Buffer }[]>`
      select secret_sealed as sealed from event_subscriptions where id = ${made.id}`
    expect(row!.sealed.toString('latin1')).not.toContain(made.secret.slice(6, 30))
  })

  it('refuses a url the egress rule refuses, on create and on change (400 url_not_allowed)', async () => {
    const { e, subscribe } = await tenant()
    for (const url of [
      'http://10.1.2.3/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://metadata.google.internal/hook',
      'ftp://127.0.0.1/hook',
    ]) {
      const res = await t.call('POST', '/v1/event-subscriptions', {
        token: e.token,
        body: { url, types: ['gate.*'] },
      })
      expect(res.status, url).toBe(400)
      expect(res.body.error, url).toBe('url_not_allowed')
    }
    const made = await subscribe({ url: `${base}/fine`, types: ['gate.*'] })
    const changed = await t.call('PATCH', `/v1/event-subscriptions/${made.id}`, {
      token: e.token,
      body: { url: 'http://192.168.1.10/hook' },
    })
    expect(changed.status).toBe(400)
    expect(changed.body.error).toBe('url_not_allowed')
  })

  it('carries only what its maker may read: types of a family the token cannot read are 403', async () => {
    const { e } = await tenant()
    const token = await t.tokenWith(['webhooks:write', 'runs:read'], e)
    const refused = await t.call('POST', '/v1/event-subscriptions', {
      token,
      body: { url: `${base}/scoped`, types: ['gate.waiting'] },
    })
    expect(refused.status).toBe(403)
    // As every 403 of a scope (spec: Authentication 4): the scope needed and those held.
    expect(refused.body).toMatchObject({
      error: 'api_token_scope',
      needed: 'gates:read',
      held: expect.arrayContaining(['webhooks:write', 'runs:read']),
    })
    expect(refused.body.message).toContain('gates:read')
    expect(refused.body.message).toContain('webhooks:write, runs:read')
    const unknown = await t.call('POST', '/v1/event-subscriptions', {
      token,
      body: { url: `${base}/scoped`, types: ['foo.*'] },
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body).toMatchObject({ error: 'invalid_request', issues: [{ field: 'types' }] })
    const made = await t.call('POST', '/v1/event-subscriptions', {
      token,
      body: { url: `${base}/scoped`, types: ['*'] },
    })
    expect(made.status).toBe(201)
    const [row] = await t.sql<{ families: string[] }[]>`
      select families from event_subscriptions where id = ${made.body.id}`
    expect(row!.families.sort()).toEqual(['improvement', 'model', 'run', 'tool'])
  })

  it('keeps what it carries on a change of neither types nor url; a change of either narrows it', async () => {
    const { e, subscribe } = await tenant()
    const made = await subscribe({ url: `${base}/narrow`, types: ['*'] })
    expect(made.families).toContain('gate')
    const runsOnly = await t.tokenWith(['webhooks:write', 'runs:read'], e)
    const patch = async (body: Record<string, unknown>) => {
      const res = await t.call('PATCH', `/v1/event-subscriptions/${made.id}`, {
        token: runsOnly,
        body,
      })
      expect(res.status, res.text).toBe(200)
      return EventSubscription.parse(res.body)
    }
    const described = await patch({ description: 'ops', format: 'slack' })
    expect(described.families).toEqual(made.families)
    const got = await t.call('GET', `/v1/event-subscriptions/${made.id}`, { token: e.token })
    expect(EventSubscription.parse(got.body).families).toEqual(made.families)
    // A new url is somewhere else: it carries only what this changer reads too.
    const moved = await patch({ url: `${base}/narrow/elsewhere` })
    expect(moved.families.sort()).toEqual(['improvement', 'model', 'run', 'tool'])
    expect(moved.types).toEqual(['*'])
  })

  it("changes, disables and deletes; another enterprise's subscription is not found", async () => {
    const { e, subscribe } = await tenant()
    const made = await subscribe({ url: `${base}/changes`, types: ['gate.*'] })
    const changed = await t.call('PATCH', `/v1/event-subscriptions/${made.id}`, {
      token: e.token,
      body: { types: ['run.failed'], format: 'slack', description: 'ops', status: 'disabled' },
    })
    expect(changed.status, changed.text).toBe(200)
    expect(EventSubscription.parse(changed.body)).toMatchObject({
      types: ['run.failed'],
      format: 'slack',
      description: 'ops',
      status: 'disabled',
    })
    for (const [method, path] of [
      ['GET', `/v1/event-subscriptions/${made.id}`],
      ['PATCH', `/v1/event-subscriptions/${made.id}`],
      ['DELETE', `/v1/event-subscriptions/${made.id}`],
      ['POST', `/v1/event-subscriptions/${made.id}/rotate-secret`],
      ['GET', `/v1/event-subscriptions/${made.id}/deliveries`],
    ] as const) {
      const res = await t.call(method, path, { token: t.other.token, body: {} })
      expect(res.status, `${method} ${path}`).toBe(404)
      expect(res.body.error).toBe('subscription_not_found')
    }
    expect(
      (await t.call('DELETE', `/v1/event-subscriptions/${made.id}`, { token: e.token })).status,
    ).toBe(204)
    const gone = await t.call('GET', `/v1/event-subscriptions/${made.id}`, { token: e.token })
    expect(gone.status).toBe(404)
  })
})

describe('event subscriptions: deliveries', () => {
  it('POSTs each event signed as Standard Webhooks asks, verified by the reference library', async () => {
    const { e, subscribe, gate, deliveries } = await tenant()
    const path = `/ok/${e.id}`
    const made = await subscribe({ url: `${base}${path}`, types: ['gate.waiting'] })
    const gateId = await gate('Deploy on Friday?')
    await eventually(() => at(path).length === 1, 15_000, 'the delivery')
    const [got] = at(path)
    const payload = new Webhook(made.secret).verify(got!.body, got!.headers) as any
    expect(payload).toMatchObject({
      type: 'gate.waiting',
      data: { position: expect.any(Number), subject: { gateId } },
    })
    expect(got!.headers['content-type']).toBe('application/json')
    // Any other key fails the check: the signature is of this body with this secret.
    const other = `whsec_${Buffer.alloc(32, 7).toString('base64')}`
    expect(() => new Webhook(other).verify(got!.body, got!.headers)).toThrow()
    await eventually(async () => (await deliveries(made.id))[0]?.status === 'succeeded', 10_000)
    const [delivery] = await deliveries(made.id)
    expect(delivery!.id).toBe(got!.headers['webhook-id'])
    expect(delivery!.attempts).toHaveLength(1)
    expect(delivery!.attempts[0]).toMatchObject({ statusCode: 200, answer: '{"ok":true}' })
    expect(delivery!.nextAttemptAt).toBeNull()
  })

  it('tries again with growing waits and the same webhook-id, keeping 1 KB of each answer', async () => {
    const { e, subscribe, gate, deliveries } = await tenant()
    const key = e.id
    fails.set(key, 2)
    const path = `/fail/${key}`
    const made = await subscribe({ url: `${base}${path}`, types: ['gate.*'] })
    await gate()
    let delivery: EventDelivery | undefined
    await eventually(
      async () => ((delivery = (await deliveries(made.id))[0])?.attempts.length ?? 0) === 1,
      15_000,
      'the first attempt',
    )
    const first = delivery!.attempts[0]!
    expect(first.statusCode).toBe(503)
    expect(first.answer).toHaveLength(1024)
    const wait1 = Date.parse(delivery!.nextAttemptAt!) - Date.parse(first.at)
    expect(wait1).toBeGreaterThanOrEqual(4_000)
    expect(wait1).toBeLessThan(8_000)
    // The waits are the schedule's; the test does not sit through them: the next is due now.
    await t.sql`update event_deliveries set next_at = now() where id = ${delivery!.id}`
    await eventually(
      async () => ((delivery = (await deliveries(made.id))[0])?.attempts.length ?? 0) === 2,
      15_000,
      'the second attempt',
    )
    const wait2 = Date.parse(delivery!.nextAttemptAt!) - Date.parse(delivery!.attempts[1]!.at)
    expect(wait2).toBeGreaterThanOrEqual(28_000)
    expect(wait2).toBeLessThan(33_000)
    await t.sql`update event_deliveries set next_at = now() where id = ${delivery!.id}`
    await eventually(
      async () => (delivery = (await deliveries(made.id))[0])?.status === 'succeeded',
      15_000,
      'the third attempt',
    )
    expect(delivery!.attempts.map((a) => a.statusCode)).toEqual([503, 503, 200])
    const ids = at(path).map((r) => r.headers['webhook-id'])
    expect(ids).toEqual([delivery!.id, delivery!.id, delivery!.id])
    // Each attempt is signed anew, and each verifies.
    for (const r of at(path))
      expect(() => new Webhook(made.secret).verify(r.body, r.headers)).not.toThrow()
  })

  it('follows the schedule: 5 s, 30 s, 2 min, 10 min, 1 h, then every 6 h, for 3 days', () => {
    const since = new Date('2026-11-01T00:00:00Z')
    const waits = [1, 2, 3, 4, 5, 6, 7].map(
      (n) => (nextAttemptAt(n, since, since)!.getTime() - since.getTime()) / 1000,
    )
    expect(waits).toEqual([5, 30, 120, 600, 3600, 21600, 21600])
    const late = new Date(since.getTime() + 3 * 86_400_000 - 3600_000)
    expect(nextAttemptAt(9, since, late)).toBeNull()
  })

  it('gives up on an attempt with no answer, and a receiver that hangs never delays another', async () => {
    const { subscribe, gate, deliveries, e } = await tenant()
    const slow = await subscribe({ url: `${base}/hang/${e.id}`, types: ['gate.*'] })
    const fastPath = `/ok/fast-${e.id}`
    await subscribe({ url: `${base}${fastPath}`, types: ['gate.*'] })
    // More than a subscription's window, so the hanging receiver could hold more than its share.
    const gates = deliveryWindow + 4
    for (let i = 0; i < gates; i++) await gate(`Gate ${i}?`)
    await eventually(() => at(fastPath).length === gates, 15_000, 'the deliveries to the fast one')
    // All went while the hanging receiver held its share (a window of a subscription) unanswered.
    expect(at(`/hang/${e.id}`).length).toBeGreaterThan(0)
    expect(mostHanging).toBeLessThanOrEqual(deliveryWindow)
    let pending: EventDelivery[] = []
    await eventually(
      async () => (pending = await deliveries(slow.id)).some((d) => d.attempts.length > 0),
      timeoutMs + 10_000,
      'an attempt that timed out',
    )
    const attempt = pending.find((d) => d.attempts.length > 0)!.attempts[0]!
    expect(attempt).toMatchObject({
      statusCode: null,
      answer: `no answer within ${timeoutMs / 1000} s`,
    })
    expect(attempt.latencyMs).toBeGreaterThanOrEqual(timeoutMs - 100)
    await t.call('PATCH', `/v1/event-subscriptions/${slow.id}`, {
      token: e.token,
      body: { status: 'disabled' },
    })
  })

  it("sends another's event at once while five hanging receivers hold every shared slot", async () => {
    const slow = await tenant()
    const healthy = await tenant()
    const path = `/ok/healthy-${healthy.e.id}`
    await healthy.subscribe({ url: `${base}${path}`, types: ['gate.*'] })
    const subscriptions = await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        slow.subscribe({ url: `${base}/hang/${slow.e.id}/${i}`, types: ['gate.*'] }),
      ),
    )
    // 5 x 13 deliveries at once: more than the 64 slots the subscriptions share, each within its window.
    await t.sql`
      insert into gates (enterprise_id, kind, tool, summary)
      select ${slow.e.id}, 'question', 'os.ask_ceo', 'Gate ' || i from generate_series(1, 13) i`
    const held = () => [...hanging].filter((r) => r.req.url!.includes(slow.e.id)).length
    // Theirs alone: no slot another test's receiver holds frees meanwhile.
    await eventually(
      () => held() >= deliveriesInFlight && held() === hanging.size,
      15_000,
      'the hanging ones holding 64, and nothing else held',
    )
    const opened = Date.now()
    await healthy.gate()
    await eventually(() => at(path).length === 1, timeoutMs * 2, 'the healthy delivery')
    // Long before a hanging attempt gives up (4 s here) and frees a slot: it waited for none of theirs.
    expect(at(path)[0]!.at - opened).toBeLessThan(timeoutMs / 2)
    for (const { id } of subscriptions)
      await t.call('PATCH', `/v1/event-subscriptions/${id}`, {
        token: slow.e.token,
        body: { status: 'disabled' },
      })
    // About 1 s (4.5 s when the hanging ones held every slot); 15 s leaves a loaded machine room.
  }, 15_000)

  it('checks the address again when it connects: a name that now resolves to metadata is not sent to', async () => {
    const { subscribe, gate, deliveries } = await tenant()
    const port = (server.address() as AddressInfo).port
    const made = await subscribe({ url: `http://${rebound}:${port}/rebound`, types: ['gate.*'] })
    await gate()
    let delivery: EventDelivery | undefined
    await eventually(
      async () => ((delivery = (await deliveries(made.id))[0])?.attempts.length ?? 0) > 0,
      15_000,
      'the attempt',
    )
    expect(delivery!.attempts[0]!.statusCode).toBeNull()
    expect(delivery!.attempts[0]!.answer).toMatch(/^not sent: .*169\.254\.169\.254/)
    expect(at('/rebound')).toHaveLength(0)
  })

  it('sends a delivery again on retry, with the same webhook-id; a foreign or missing one is 404', async () => {
    const { e, subscribe, gate, deliveries } = await tenant()
    const path = `/ok/retry-${e.id}`
    const made = await subscribe({ url: `${base}${path}`, types: ['gate.*'] })
    await gate()
    await eventually(async () => (await deliveries(made.id))[0]?.status === 'succeeded', 15_000)
    const [delivery] = await deliveries(made.id)
    const res = await t.call(
      'POST',
      `/v1/event-subscriptions/${made.id}/deliveries/${delivery!.id}/retry`,
      { token: e.token },
    )
    expect(res.status, res.text).toBe(202)
    expect(EventDelivery.parse(res.body)).toMatchObject({ id: delivery!.id, status: 'pending' })
    await eventually(() => at(path).length === 2, 15_000, 'the retry')
    expect(at(path).map((r) => r.headers['webhook-id'])).toEqual([delivery!.id, delivery!.id])
    const missing = await t.call(
      'POST',
      `/v1/event-subscriptions/${made.id}/deliveries/${randomUUID()}/retry`,
      { token: e.token },
    )
    expect(missing.status).toBe(404)
    expect(missing.body.error).toBe('delivery_not_found')
    const foreign = await t.call(
      'POST',
      `/v1/event-subscriptions/${made.id}/deliveries/${delivery!.id}/retry`,
      { token: t.other.token },
    )
    expect(foreign.status).toBe(404)
    expect(foreign.body.error).toBe('subscription_not_found')
    await t.call('PATCH', `/v1/event-subscriptions/${made.id}`, {
      token: e.token,
      body: { status: 'disabled' },
    })
    const disabled = await t.call(
      'POST',
      `/v1/event-subscriptions/${made.id}/deliveries/${delivery!.id}/retry`,
      { token: e.token },
    )
    expect(disabled.status).toBe(409)
    expect(disabled.body.error).toBe('subscription_disabled')
  })

  it('signs with the new secret once rotated; the old one no longer verifies', async () => {
    const { e, subscribe, gate } = await tenant()
    const path = `/ok/rotate-${e.id}`
    const made = await subscribe({ url: `${base}${path}`, types: ['gate.*'] })
    const rotated = await t.call('POST', `/v1/event-subscriptions/${made.id}/rotate-secret`, {
      token: e.token,
    })
    expect(rotated.status, rotated.text).toBe(200)
    const { secret } = EventSubscriptionWithSecret.parse(rotated.body)
    expect(secret).not.toBe(made.secret)
    await gate()
    await eventually(() => at(path).length === 1, 15_000, 'the delivery')
    const [got] = at(path)
    expect(() => new Webhook(secret).verify(got!.body, got!.headers)).not.toThrow()
    expect(() => new Webhook(made.secret).verify(got!.body, got!.headers)).toThrow()
  })

  it("never sends one enterprise's events to another's subscription", async () => {
    const a = await tenant()
    const b = await tenant()
    const path = `/ok/only-${b.e.id}`
    await b.subscribe({ url: `${base}${path}`, types: ['*'] })
    const aGate = await a.gate('Secret of A?')
    const bGate = await b.gate('Of B?')
    await eventually(() => at(path).length >= 1, 15_000, "b's delivery")
    // a's gate was sequenced too (its own feed) before b's check ends.
    await eventually(async () => {
      const [row] = await t.sql<{ n: number }[]>`
        select count(*)::int as n from events where enterprise_id = ${a.e.id} and type = 'gate.waiting'`
      return row!.n === 1
    }, 10_000)
    const bodies = at(path).map((r) => r.body)
    expect(bodies.some((body) => body.includes(bGate))).toBe(true)
    expect(bodies.some((body) => body.includes(aGate) || body.includes('Secret of A'))).toBe(false)
  })

  it('posts {text, blocks} for Slack: the question and the osctl command that decides it', async () => {
    const { e, subscribe, gate } = await tenant()
    const path = `/ok/slack-${e.id}`
    const made = await subscribe({
      url: `${base}${path}`,
      types: ['gate.waiting'],
      format: 'slack',
    })
    const gateId = await gate('Merge <main> & deploy?')
    await eventually(() => at(path).length === 1, 15_000, 'the delivery')
    const [got] = at(path)
    // Signed too: a receiver that checks signatures takes it as any other.
    expect(() => new Webhook(made.secret).verify(got!.body, got!.headers)).not.toThrow()
    const body = JSON.parse(got!.body)
    expect(typeof body.text).toBe('string')
    expect(Array.isArray(body.blocks)).toBe(true)
    const text = JSON.stringify(body.blocks)
    expect(text).toContain('Merge &lt;main&gt; &amp; deploy?')
    expect(text).toContain(`osctl gates`)
    expect(text).toContain(gateId)
  })
})
