import { randomUUID } from 'node:crypto'
import { beforeAll, describe, expect, it } from 'vitest'
import { sendMail } from '../../../server/domain/org/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { commonRouteChecks } from '../../helpers/route-checks.js'

// Members' inboxes (spec: Endpoints Members, emails): mail a run sends to a member's address lands
// there; opening an email marks it read; an attachment answers as the file itself.
let t: TestApp
let member: { id: string; email: string }
let theirs: { member: string; email: string; attachment: string }

async function inboxOf(app: TestApp, enterpriseId: string, token?: string) {
  const created = await app.call('POST', '/v1/members', {
    body: { name: `Inbox ${randomUUID().slice(0, 6)}` },
    ...(token ? { token } : {}),
  })
  expect(created.status).toBe(201)
  return created.body as { id: string; email: string }
}

async function mail(enterpriseId: string, to: string, subject: string) {
  const result = await sendMail(t.sql, enterpriseId, randomUUID(), {
    from: 'sender@acme.osd.local',
    to,
    subject,
    body: `Body of ${subject}`,
  })
  const [row] = await t.sql<{ id: string }[]>`
    select id from member_emails where subject = ${subject} and enterprise_id = ${enterpriseId}`
  return { ...result, id: row?.id }
}

async function attach(emailId: string, filename: string, contentType: string, data: Buffer) {
  const [row] = await t.sql<{ id: string }[]>`
    insert into email_attachments (email_id, filename, content_type, data)
    values (${emailId}, ${filename}, ${contentType}, ${data}) returning id`
  return row!.id
}

beforeAll(async () => {
  t = await createTestApp()
  member = await inboxOf(t, t.acme.id)
  const other = await inboxOf(t, t.other.id, t.other.token)
  const sent = await mail(t.other.id, other.email, `Theirs ${randomUUID()}`)
  theirs = {
    member: other.id,
    email: sent.id!,
    attachment: await attach(sent.id!, 'x.txt', 'text/plain', Buffer.from('x')),
  }
})

describe('route checks', () => {
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/members/${member.id}/emails`,
    foreign: () => ({ path: `/v1/members/${theirs.member}/emails` }),
    notFoundCode: 'member_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/members/${theirs.member}/emails/${theirs.email}`,
    foreign: () => ({ path: `/v1/members/${theirs.member}/emails/${theirs.email}` }),
    notFoundCode: 'member_not_found',
  })
  commonRouteChecks(() => t, {
    method: 'GET',
    path: () => `/v1/members/${member.id}/emails/${randomUUID()}/attachments/${randomUUID()}`,
    foreign: () => ({
      path: `/v1/members/${theirs.member}/emails/${theirs.email}/attachments/${theirs.attachment}`,
    }),
    notFoundCode: 'member_not_found',
  })
})

describe('a member inbox', () => {
  it('receives mail sent to the member address, case aside; other addresses are only recorded', async () => {
    const inbox = await inboxOf(t, t.acme.id)
    const delivered = await mail(t.acme.id, inbox.email.toUpperCase(), `Hello ${randomUUID()}`)
    expect(delivered).toMatchObject({ delivered: 'inbox', memberId: inbox.id })
    const outside = await sendMail(t.sql, t.acme.id, randomUUID(), {
      from: inbox.email,
      to: 'someone@example.com',
      subject: 'Out',
      body: 'b',
    })
    expect(outside).toEqual({ delivered: 'recorded' })
    const [recorded] = await t.sql`select to_address from sent_emails where subject = 'Out'`
    expect(recorded).toEqual({ toAddress: 'someone@example.com' })
  })

  it('lists newest first, paged, and narrows to unread; opening marks read, again and again', async () => {
    const inbox = await inboxOf(t, t.acme.id)
    const ids: string[] = []
    for (const subject of ['first', 'second', 'third']) {
      ids.push((await mail(t.acme.id, inbox.email, `${subject} ${inbox.id}`)).id!)
    }
    const page = await t.call('GET', `/v1/members/${inbox.id}/emails?limit=2`)
    expect(page.status).toBe(200)
    expect(page.body.total).toBe(3)
    expect(page.body.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]])
    expect(page.body.data[0]).toMatchObject({
      subject: `third ${inbox.id}`,
      to: inbox.email,
      read: false,
      attachments: [],
    })

    const opened = await t.call('GET', `/v1/members/${inbox.id}/emails/${ids[0]}`)
    expect(opened.status).toBe(200)
    expect(opened.body).toMatchObject({ id: ids[0], read: true, body: `Body of first ${inbox.id}` })
    expect((await t.call('GET', `/v1/members/${inbox.id}/emails/${ids[0]}`)).body.read).toBe(true)

    const unread = await t.call('GET', `/v1/members/${inbox.id}/emails?unreadOnly=true`)
    expect(unread.body.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]])
    expect(unread.body.total).toBe(2)
  })

  it('answers an attachment as the file, with its type and name', async () => {
    const sent = await mail(t.acme.id, member.email, `With file ${randomUUID()}`)
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255])
    const id = await attach(sent.id!, 'chart "q3".png', 'image/png', bytes)
    const email = await t.call('GET', `/v1/members/${member.id}/emails/${sent.id}`)
    expect(email.body.attachments).toEqual([
      { id, filename: 'chart "q3".png', contentType: 'image/png', bytes: 8 },
    ])
    const path = `/v1/members/${member.id}/emails/${sent.id}/attachments/${id}`
    const file = await t.app.request(path, {
      headers: { authorization: `Bearer ${t.acme.token}` },
    })
    await t.expectDocumented('GET', path, file)
    expect(file.status).toBe(200)
    expect(file.headers.get('content-type')).toBe('image/png')
    expect(file.headers.get('content-disposition')).toBe('attachment; filename="chart _q3_.png"')
    expect(Buffer.from(await file.arrayBuffer())).toEqual(bytes)
  })

  it('answers 404 email_not_found and attachment_not_found for what is not there', async () => {
    const sent = await mail(t.acme.id, member.email, `Plain ${randomUUID()}`)
    const missingEmail = await t.call('GET', `/v1/members/${member.id}/emails/${randomUUID()}`)
    expect(missingEmail.status).toBe(404)
    expect(missingEmail.body.error).toBe('email_not_found')
    const noFile = await t.call(
      'GET',
      `/v1/members/${member.id}/emails/${sent.id}/attachments/${randomUUID()}`,
    )
    expect(noFile.status).toBe(404)
    expect(noFile.body.error).toBe('attachment_not_found')
    const wrongEmail = await t.call(
      'GET',
      `/v1/members/${member.id}/emails/${randomUUID()}/attachments/${randomUUID()}`,
    )
    expect(wrongEmail.body.error).toBe('email_not_found')
    // Another member's email is not this member's.
    const someoneElse = await inboxOf(t, t.acme.id)
    const read = await t.call('GET', `/v1/members/${someoneElse.id}/emails/${sent.id}`)
    expect(read.body.error).toBe('email_not_found')
    const notAnId = await t.call('GET', `/v1/members/${member.id}/emails/not-a-uuid`)
    expect(notAnId.status).toBe(404)
    expect(notAnId.body.error).toBe('email_not_found')
    const notAFile = await t.call(
      'GET',
      `/v1/members/${member.id}/emails/${sent.id}/attachments/not-a-uuid`,
    )
    expect(notAFile.body.error).toBe('attachment_not_found')
  })
})
