import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createSql, type Sql } from '../../../server/db/sql.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { startTestEngine } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'

// How long the engine's loops sleep until work waiting for a time falls due (a delivery's retry, a
// person's next mail): once for that time, never a pass after a pass while work stays due that this
// engine cannot claim, nor while this process's clock says it is due and the database's does not.
// The engine runs on a pool of its own that counts its claims; no sweep comes within a test (a
// minute apart).

let t: TestApp
let engine: Engine
let enginePool: Sql
const sent: string[] = []
const claimsOf = (what: RegExp) => sent.filter((q) => what.test(q)).length
const deliveryClaim = /update event_deliveries d\s+set lease_owner/
const mailClaim = /update mail_people m\s+set lease_owner/

beforeAll(async () => {
  // A mailer that is never asked to send: the person of its test is another engine's to mail.
  t = await createTestApp({ smtpUrl: 'smtp://127.0.0.1:9', mailFrom: 'osd <osd@example.com>' })
  enginePool = createSql(t.dbUrl, { onQuery: (query) => void sent.push(query) })
  engine = await startTestEngine(t, { sql: enginePool, sweepMs: 60_000 })
})
afterAll(async () => {
  await engine?.stop()
  await enginePool?.end()
})

/** Wakes `loop`, waits for its pass to claim, and answers how many more claims follow in 300 ms. */
/** A subscription turned off by its maker, whose deliveries no engine claims. */
async function disabledSubscription(): Promise<string> {
  const [subscription] = await t.sql<{ id: string }[]>`
    insert into event_subscriptions (enterprise_id, url, types, families, secret_sealed, secret_hint,
                                     status, disabled_reason, created_by)
    values (${t.acme.id}, 'https://hooks.example.com/osd', '{*}', '{*}', '\\x00', 'whsec_…',
            'disabled', 'turned off by its maker', 'token:test')
    returning id`
  return subscription!.id
}

async function claimsAfterAWake(loop: { wake(): void }, claim: RegExp): Promise<number> {
  const before = claimsOf(claim)
  loop.wake()
  await eventually(() => claimsOf(claim) > before, 10_000, 'a pass')
  const woken = claimsOf(claim)
  await new Promise((r) => setTimeout(r, 300))
  return claimsOf(claim) - woken
}

describe('the engine waits for what falls due', () => {
  it('does not pass again and again for a pending delivery of a disabled subscription', async () => {
    const subscription = await disabledSubscription()
    await t.sql`
      insert into event_deliveries (enterprise_id, subscription_id, position, type, next_at)
      values (${t.acme.id}, ${subscription}, 1, 'gate.waiting', now() - interval '1 minute')`
    // Before: every pass found it due, claimed nothing and woke the next at once (hundreds a second).
    expect(await claimsAfterAWake(engine.events.deliveries, deliveryClaim)).toBeLessThanOrEqual(1)
  })

  it('does not pass again and again for a person another engine is mailing', async () => {
    const [user] = await t.sql<{ id: string }[]>`
      insert into users (email, password_hash) values ('mailed-elsewhere@example.com', 'x') returning id`
    await t.sql`
      insert into mail_items (enterprise_id, user_id, kind, subject, payload)
      values (${t.acme.id}, ${user!.id}, 'gate', '{}', '{}')`
    await t.sql`
      insert into mail_people (user_id, not_before, lease_owner, lease_expires_at)
      values (${user!.id}, now() - interval '1 minute', 'another engine', now() + interval '1 minute')`
    const mailer = engine.events.mailer
    expect(mailer).toBeDefined()
    expect(await claimsAfterAWake(mailer!, mailClaim)).toBeLessThanOrEqual(1)
  })

  it('sleeps until the database says a time has come, in a process whose clock runs ahead of it', async () => {
    const subscription = await disabledSubscription()
    // Due in 10 s by the database's clock, which wrote the time and decides when it is due.
    await t.sql`
      insert into event_deliveries (enterprise_id, subscription_id, position, type, next_at)
      values (${t.acme.id}, ${subscription}, 2, 'gate.waiting', now() + interval '10 seconds')`
    // This process's clock a minute ahead of the database's (a host whose NTP stepped, a VM resumed):
    // by it the delivery was due already, and the loop passed again and again until the database's
    // clock came to it.
    vi.setSystemTime(Date.now() + 60_000)
    try {
      expect(await claimsAfterAWake(engine.events.deliveries, deliveryClaim)).toBeLessThanOrEqual(1)
    } finally {
      vi.useRealTimers()
    }
  })
})
