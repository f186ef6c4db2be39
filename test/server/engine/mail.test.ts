import { randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Notifications } from '../../../shared/schemas/events.js'
import type { Engine } from '../../../server/engine/index.js'
import { createTestApp, type TestApp, type TestEnterprise } from '../../helpers/app.js'
import { cheapPasswordHashesInFile, signIn, type TestPerson } from '../../helpers/people.js'
import { keyedEnterprise, startTestEngine, waitForRun } from '../../helpers/runs.js'
import { eventually } from '../../helpers/wait.js'
import { startFakeModelProvider, type FakeModelProvider } from '../../fakes/model-provider.js'

// Mail to people (issue 47): who is told of a waiting gate and a failed run, at most one mail a minute
// with what came meanwhile folded into the next, each kind turned off through
// /v1/auth/me/notifications; sent by the engine of this process through OSD_SMTP_URL to a real SMTP
// server in this process (npm smtp-server), as nodemailer speaks to any.

interface Mail {
  from: string
  to: string[]
  subject: string
  text: string
}

const mails: Mail[] = []
/** Recipients whose mail the server takes but does not answer until the test lets it go. */
const holdFor = new Map<string, { arrived: () => void; released: Promise<void> }>()
const smtp = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, session, callback) {
    let raw = ''
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => (raw += chunk))
    stream.on('end', () => {
      const split = raw.indexOf('\r\n\r\n')
      const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ')
      const header = (name: string) =>
        new RegExp(`^${name}: (.*)$`, 'im').exec(head)?.[1]?.trim() ?? ''
      // nodemailer sends plain text as 7bit or quoted-printable.
      const body = raw.slice(split + 4)
      const text = /quoted-printable/i.test(header('Content-Transfer-Encoding'))
        ? body
            .replace(/=\r\n/g, '')
            .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
        : body
      mails.push({
        from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        to: session.envelope.rcptTo.map((r) => r.address),
        subject: header('Subject'),
        text,
      })
      const hold = session.envelope.rcptTo.map((r) => holdFor.get(r.address)).find(Boolean)
      if (!hold) return callback()
      hold.arrived()
      void hold.released.then(() => callback())
    })
  },
})

cheapPasswordHashesInFile()

let t: TestApp
let engine: Engine
let model: FakeModelProvider

beforeAll(async () => {
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve))
  const { port } = smtp.server.address() as AddressInfo
  model = await startFakeModelProvider()
  t = await createTestApp({
    smtpUrl: `smtp://127.0.0.1:${port}`,
    mailFrom: 'osd <osd@example.com>',
    providerBaseUrls: { provider_a: model.url, provider_b: model.url },
  })
  engine = await startTestEngine(t, { sweepMs: 200 })
})
afterAll(async () => {
  await engine?.stop()
  await model?.close()
  await new Promise<void>((resolve) => smtp.close(resolve))
})

const mailsTo = (email: string) => mails.filter((m) => m.to.includes(email))

/** A gate that waits for the enterprise's chief executive (its owners decide it). */
async function gateFor(e: TestEnterprise, summary = 'Which supplier?') {
  const [gate] = await t.sql<{ id: string }[]>`
    insert into gates (enterprise_id, kind, tool, summary)
    values (${e.id}, 'question', 'os.ask_ceo', ${summary}) returning id`
  return gate!.id
}

/** An enterprise with an owner and a member, both signed in. */
async function team(label: string) {
  const e = await t.createEnterprise(`${label} ${randomUUID().slice(0, 6)}`)
  const owner = await signIn(t, 'owner', e)
  const member = await signIn(t, 'member', e)
  return { e, owner, member }
}

async function notifications(person: TestPerson, change?: Record<string, unknown>) {
  const res = await t.call(change ? 'PATCH' : 'GET', '/v1/auth/me/notifications', {
    token: person.session,
    ...(change && { body: change }),
  })
  expect(res.status, res.text).toBe(200)
  return Notifications.parse(res.body)
}

describe('GET/PATCH /v1/auth/me/notifications', () => {
  it('answers owners both kinds on, members the gates only, and turns each off and on', async () => {
    const { owner, member } = await team('Prefs')
    expect(await notifications(owner)).toEqual({
      email: owner.email,
      gates: true,
      runFailures: true,
      mailConfigured: true,
    })
    expect(await notifications(member)).toMatchObject({ gates: true, runFailures: false })
    expect(await notifications(member, { runFailures: true })).toMatchObject({
      gates: true,
      runFailures: true,
    })
    expect(await notifications(member, { gates: false })).toMatchObject({
      gates: false,
      runFailures: true, // a field left out keeps its value
    })
    expect(await notifications(member)).toMatchObject({ gates: false, runFailures: true })
    expect(await notifications(owner)).toMatchObject({ gates: true, runFailures: true })
  })

  it('is for signed-in people: a token is refused, no credential is 401, a wrong value 400', async () => {
    const { e, owner } = await team('Prefs auth')
    const byToken = await t.call('GET', '/v1/auth/me/notifications', { token: e.token })
    expect(byToken.status).toBe(403)
    expect(byToken.body.error).toBe('api_token_scope')
    const anonymous = await t.app.request('/v1/auth/me/notifications')
    expect(anonymous.status).toBe(401)
    const wrong = await t.call('PATCH', '/v1/auth/me/notifications', {
      token: owner.session,
      body: { gates: 'no' },
    })
    expect(wrong.status).toBe(400)
  })

  it('keeps each enterprise of a person apart', async () => {
    const a = await team('Prefs A')
    const b = await t.createEnterprise(`Prefs B ${randomUUID().slice(0, 6)}`)
    const inB = await signIn(t, 'member', b, a.owner.email.replace('@', '+b@'))
    await notifications(a.owner, { gates: false })
    expect(await notifications(inB)).toMatchObject({ gates: true })
    expect(await notifications(a.owner)).toMatchObject({ gates: false })
  })
})

describe('mail', () => {
  it('tells the owners of a gate waiting for the chief executive, and nobody else', async () => {
    const { e, owner, member } = await team('Gates')
    const other = await team('Elsewhere')
    const gateId = await gateFor(e)
    await eventually(() => mailsTo(owner.email).length === 1, 15_000, 'the owner mailed')
    const [mail] = mailsTo(owner.email)
    expect(mail!.from).toBe('osd@example.com')
    expect(mail!.subject).toContain('Gate waiting: Which supplier?')
    expect(mail!.text).toContain(`Gate: ${gateId}`)
    expect(mail!.text).toContain('Question: Which supplier?')
    expect(mail!.text).toMatch(/Decide: osctl gates /)
    expect(mail!.text).toContain('osctl auth notifications')
    expect(mailsTo(member.email)).toEqual([])
    expect(mailsTo(other.owner.email)).toEqual([])
  })

  it('folds what comes within the minute into the next mail, one mail a minute', async () => {
    const { e, owner } = await team('Folded')
    await gateFor(e, 'First?')
    await eventually(() => mailsTo(owner.email).length === 1, 15_000, 'the first mail')
    await gateFor(e, 'Second?')
    await gateFor(e, 'Third?')
    await eventually(
      async () =>
        (
          await t.sql`select 1 from mail_items i join users u on u.id = i.user_id
                       where u.email = ${owner.email} and i.sent_at is null`
        ).length === 2,
      15_000,
      'two items waiting',
    )
    // Not before the minute is up: the engine sweeps every 200 ms here.
    await new Promise((r) => setTimeout(r, 1_000))
    expect(mailsTo(owner.email)).toHaveLength(1)
    // The minute passes.
    await t.sql`
      update mail_people set not_before = now()
       where user_id = (select id from users where email = ${owner.email})`
    engine.events.mailer!.wake()
    await eventually(() => mailsTo(owner.email).length === 2, 15_000, 'the folded mail')
    const folded = mailsTo(owner.email)[1]!
    expect(folded.subject).toMatch(/^2 things for you in osd .*: 2 gates waiting$/)
    expect(folded.text).toContain('Question: Second?')
    expect(folded.text).toContain('Question: Third?')
  })

  it('sends nothing of a kind the person turned off', async () => {
    const { e, owner } = await team('Quiet')
    const second = await signIn(t, 'owner', e)
    await notifications(owner, { gates: false })
    await gateFor(e)
    await eventually(() => mailsTo(second.email).length === 1, 15_000, 'the other owner mailed')
    expect(mailsTo(owner.email)).toEqual([])
  })

  it('never lets a question carry a header into the mail', async () => {
    const { e, owner } = await team('Headers')
    await gateFor(e, 'Approve?\r\nBcc: evil@example.com\r\nSubject: pwned')
    await eventually(() => mailsTo(owner.email).length === 1, 15_000, 'the owner mailed')
    const [mail] = mailsTo(owner.email)
    expect(mail!.to).toEqual([owner.email])
    expect(mails.some((m) => m.to.includes('evil@example.com'))).toBe(false)
    expect(mail!.subject).not.toMatch(/pwned/)
  })

  it('tells the person who started a run that failed', async () => {
    const { e, key } = await keyedEnterprise(t, 'Failing')
    const owner = await signIn(t, 'owner', e)
    const task = await t.call('POST', '/v1/tasks', {
      token: e.token,
      body: {
        name: `Failing ${randomUUID().slice(0, 6)}`,
        assigneeRole: 'ceo',
        overlapPolicy: 'os',
      },
    })
    expect(task.status, task.text).toBe(201)
    model.script(key, {
      toolCalls: [
        { name: 'os.finish', arguments: { outcome: 'failed', summary: 'the supplier said no' } },
      ],
    })
    const started = await t.call('POST', `/v1/tasks/${task.body.id}/runs`, {
      token: owner.session,
      body: {},
    })
    expect(started.status, started.text).toBe(201)
    const run = await waitForRun(t, started.body.id, ['failed', 'succeeded'], 20_000, e.token)
    expect(run.run.status).toBe('failed')
    await eventually(() => mailsTo(owner.email).length === 1, 15_000, 'the starter mailed')
    const [mail] = mailsTo(owner.email)
    expect(mail!.subject).toContain(`Run failed: ${task.body.slug}`)
    expect(mail!.text).toContain(`Run: ${started.body.id}`)
    const [row] = await t.sql<{ startedBy: string }[]>`
      select started_by from runs where id = ${started.body.id}`
    expect(row!.startedBy).toBe(owner.id)
  }, 40_000)

  it('mails on after mails that outlasted their lease: each person claimed again while being mailed', async () => {
    /** A person whose mail the server holds until `release`, once it has arrived there. */
    const slow = async (label: string) => {
      const { e, owner } = await team(label)
      let arrived!: () => void
      const there = new Promise<void>((resolve) => (arrived = resolve))
      let release!: () => void
      const released = new Promise<void>((resolve) => (release = resolve))
      holdFor.set(owner.email, { arrived, released })
      await gateFor(e)
      await there
      return { owner, release }
    }
    // Three mails the server is slow to take, each with its lease lapsing meanwhile (the engine
    // stalled, or its renewals failed while the database was away), so that this engine claims the
    // person again while still mailing them.
    for (let i = 0; i < 3; i++) {
      const { owner, release } = await slow(`Slow ${i}`)
      await t.sql`
        update mail_people set lease_expires_at = now() - interval '1 second'
         where user_id = ${owner.id}`
      engine.events.mailer!.wake()
      await eventually(
        async () =>
          (
            await t.sql`select 1 from mail_people
                         where user_id = ${owner.id} and lease_expires_at > now()`
          ).length === 1,
        5_000,
        'the person claimed again',
      )
      release()
      await eventually(
        async () =>
          (
            await t.sql`select 1 from mail_items
                         where user_id = ${owner.id} and sent_at is not null`
          ).length === 1,
        5_000,
        'the slow mail sent',
      )
    }
    // The process sends four mails at once: while one is slow, another person is mailed. Each claim
    // again took one of the four for good, and the last was the slow one's.
    const { release } = await slow('Slow again')
    try {
      const { e, owner } = await team('Beside it')
      await gateFor(e)
      await eventually(() => mailsTo(owner.email).length === 1, 15_000, 'the other person mailed')
    } finally {
      release()
    }
  })
})
