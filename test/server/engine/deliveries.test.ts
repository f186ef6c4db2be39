import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EventSubscriptionWithSecret } from '../../../shared/schemas/events.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { startTestEngine } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

// The engine's delivery loop (issue 47), in process: how many deliveries of a subscription it has in
// flight, whatever the order of a lease's lapse, its claim and a sending's end, and how many it sends
// at once. The receiver holds each answer until the test lets it go.

/** Requests held unanswered, by path, in the order they came. */
const held = new Map<string, ServerResponse[]>()
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  req.resume()
  req.on('end', () => {
    const path = req.url ?? '/'
    held.set(path, [...(held.get(path) ?? []), res])
  })
})
const heldAt = (path: string) => held.get(path) ?? []
/** Answers every request held at `path` with `status`. */
function answer(path: string, status = 200) {
  for (const res of heldAt(path)) res.writeHead(status).end()
  held.delete(path)
}

let base: string
let t: TestApp
let engine: Engine

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t = await createTestApp()
  engine = await startTestEngine(t, {
    sweepMs: 200,
    // A lease renewed only every 100 s: the test lapses it itself, and no renewal puts it back
    // meanwhile. Attempts wait a minute for their answer: the receiver holds them as long as the
    // test needs, on a loaded machine too.
    config: { ...t.config, leaseSeconds: 300 },
    deliveries: { timeoutMs: 60_000, perSubscription: 2, maxInFlight: 4 },
  })
})
afterAll(async () => {
  for (const responses of held.values()) for (const res of responses) res.destroy()
  await engine?.stop()
  await new Promise((resolve) => server.close(resolve))
})

async function subscribe(path: string) {
  const e = await t.createEnterprise(`Deliveries ${path.replaceAll('/', ' ')}`)
  const res = await t.call('POST', '/v1/event-subscriptions', {
    token: e.token,
    body: { url: `${base}${path}`, types: ['gate.waiting'] },
  })
  expect(res.status, res.text).toBe(201)
  const subscription = EventSubscriptionWithSecret.parse(res.body)
  const gate = async (summary = 'Ship it?') => {
    await t.sql`
      insert into gates (enterprise_id, kind, tool, summary)
      values (${e.id}, 'question', 'os.ask_ceo', ${summary})`
  }
  const rows = () =>
    t.sql<{ status: string; attempts: number; leaseOwner: string | null; leased: boolean }[]>`
      select status, attempts, lease_owner, coalesce(lease_expires_at > now(), false) as leased
        from event_deliveries where subscription_id = ${subscription.id} order by position`
  return { e, subscription, gate, rows }
}

describe('the delivery loop', () => {
  it('counts a delivery once when its lease lapses mid-send and this engine claims it again', async () => {
    const path = '/hold/lapse'
    const { subscription, gate, rows } = await subscribe(path)
    const inFlight = () => engine.events.deliveries.inFlightBySubscription.get(subscription.id) ?? 0
    await gate()
    await eventually(() => heldAt(path).length === 1, 15_000, 'the first sending')
    expect(inFlight()).toBe(1)

    // The lease lapses while the receiver still holds the answer (as when this engine stalled past
    // it), and this engine's next pass claims the delivery again.
    await t.sql`
      update event_deliveries set lease_expires_at = now() - interval '1 second'
       where subscription_id = ${subscription.id}`
    engine.events.deliveries.wake()
    await eventually(
      async () => (await rows())[0]?.attempts === 2 && (await rows())[0]!.leased,
      15_000,
      'the claim again',
    )
    // Sent once, counted once: the first sending goes on under the new lease.
    expect(heldAt(path)).toHaveLength(1)
    expect(inFlight()).toBe(1)

    answer(path)
    await eventually(async () => (await rows())[0]?.status === 'succeeded', 15_000, 'the answer')
    await eventually(() => inFlight() === 0, 5_000, 'the count back to 0')
    expect(engine.events.deliveries.inFlightBySubscription.has(subscription.id)).toBe(false)

    // The subscription keeps its whole share (2 here): the next two events go out at once.
    for (let i = 0; i < 2; i++) await gate(`Gate ${i}?`)
    await eventually(() => heldAt(path).length === 2, 15_000, 'the next two at once')
    answer(path)
    await eventually(
      async () => (await rows()).every((r) => r.status === 'succeeded'),
      15_000,
      'all answered',
    )
    await eventually(() => inFlight() === 0, 5_000, 'the count back to 0 again')
  })

  it('counts exactly when the first sending ends after the lapse and before any claim', async () => {
    const path = '/hold/ended'
    const { subscription, gate, rows } = await subscribe(path)
    const inFlight = () => engine.events.deliveries.inFlightBySubscription.get(subscription.id) ?? 0
    await gate()
    await eventually(() => heldAt(path).length === 1, 15_000, 'the first sending')
    // Lapsed, but not due (its next time an hour on): no pass claims it before its sending ends.
    await t.sql`
      update event_deliveries
         set lease_expires_at = now() - interval '1 second', next_at = now() + interval '1 hour'
       where subscription_id = ${subscription.id}`
    // The answer is a failure: the delivery is pending again, for its next time, and no longer
    // leased; this engine still held it (nobody took it over), so the attempt is recorded.
    answer(path, 503)
    await eventually(
      async () => (await rows())[0]?.leaseOwner === null,
      15_000,
      'the attempt recorded',
    )
    await eventually(() => inFlight() === 0, 5_000, 'the count back to 0')
    // Its next time now: claimed and sent again, counted once, and uncounted at its end.
    await t.sql`update event_deliveries set next_at = now() where subscription_id = ${subscription.id}`
    engine.events.deliveries.wake()
    await eventually(() => heldAt(path).length === 1, 15_000, 'the second sending')
    expect(inFlight()).toBe(1)
    answer(path)
    await eventually(async () => (await rows())[0]?.status === 'succeeded', 15_000, 'the answer')
    await eventually(() => inFlight() === 0, 5_000, 'the count back to 0 again')
  })
})
