import type { Email } from '../../../shared/schemas/mail.js'
import { ApiError } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import { envelope, type PageRequest } from '../../db/paging.js'
import type { Db } from '../../db/sql.js'
import { requireMember } from './members.js'

// Members' inboxes (spec: Endpoints Members, emails) and mail that runs send (os.mail_send).

interface EmailRow {
  id: string
  fromAddress: string
  toAddress: string
  subject: string
  body: string
  runId: string | null
  readAt: Date | null
  receivedAt: Date
}

function toEmail(row: EmailRow, attachments: Email['attachments'] = []): Email {
  return {
    id: row.id,
    from: row.fromAddress,
    to: row.toAddress,
    subject: row.subject,
    body: row.body,
    runId: row.runId,
    read: row.readAt !== null,
    receivedAt: row.receivedAt.toISOString(),
    attachments,
  }
}

/**
 * Sends mail from a run: to a member's address it lands in that member's inbox; to any other address it
 * is recorded as sent (the service delivers no mail outside). Answers where it went.
 */
export async function sendMail(
  tx: Db,
  enterpriseId: string,
  runId: string,
  mail: { from: string; to: string; subject: string; body: string },
): Promise<{ delivered: 'inbox' | 'recorded'; memberId?: string }> {
  const [member] = await tx<{ id: string }[]>`
    select id from members where enterprise_id = ${enterpriseId} and lower(email) = lower(${mail.to}) and removed_at is null`
  if (member) {
    await tx`
      insert into member_emails (enterprise_id, member_id, from_address, to_address, subject, body, run_id)
      values (${enterpriseId}, ${member.id}, ${mail.from}, ${mail.to}, ${mail.subject}, ${mail.body}, ${runId})`
    return { delivered: 'inbox', memberId: member.id }
  }
  await tx`
    insert into sent_emails (enterprise_id, run_id, from_address, to_address, subject, body)
    values (${enterpriseId}, ${runId}, ${mail.from}, ${mail.to}, ${mail.subject}, ${mail.body})`
  return { delivered: 'recorded' }
}

/** A member's inbox, by arrival (spec: Paged envelope; order still applies); unreadOnly=true narrows. */
export async function listEmails(
  db: Db,
  enterpriseId: string,
  memberId: string,
  unreadOnly: boolean,
  page: PageRequest,
): Promise<Paged<Email>> {
  await requireMember(db, enterpriseId, memberId)
  const where = db`enterprise_id = ${enterpriseId} and member_id = ${memberId} ${unreadOnly ? db`and read_at is null` : db``}`
  const [rows, [count]] = await Promise.all([
    db<EmailRow[]>`
      select * from member_emails where ${where}
       order by received_at ${page.order === 'asc' ? db`asc` : db`desc`}, id
       limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from member_emails where ${where}`,
  ])
  return envelope(
    rows.map((r) => toEmail(r)),
    count!.n,
    page,
  )
}

/** One email, with its attachments; opening it marks it read (spec: Retry safety). */
export async function openEmail(
  db: Db,
  enterpriseId: string,
  memberId: string,
  emailId: string,
): Promise<Email> {
  await requireMember(db, enterpriseId, memberId)
  const [row] = await db<EmailRow[]>`
    update member_emails set read_at = coalesce(read_at, now())
     where enterprise_id = ${enterpriseId} and member_id = ${memberId} and id = ${emailId}
     returning *`
  if (!row) throw new ApiError('email_not_found', `Member ${memberId} has no email ${emailId}.`)
  const attachments = await db<
    { id: string; filename: string; contentType: string; bytes: number }[]
  >`
    select id, filename, content_type, octet_length(data)::int as bytes from email_attachments where email_id = ${emailId}`
  return toEmail(row, attachments)
}

export async function getAttachment(
  db: Db,
  enterpriseId: string,
  memberId: string,
  emailId: string,
  attachmentId: string,
) {
  await requireMember(db, enterpriseId, memberId)
  const [email] = await db<{ id: string }[]>`
    select id from member_emails where enterprise_id = ${enterpriseId} and member_id = ${memberId} and id = ${emailId}`
  if (!email) throw new ApiError('email_not_found', `Member ${memberId} has no email ${emailId}.`)
  const [row] = await db<{ filename: string; contentType: string; data: Buffer }[]>`
    select filename, content_type, data from email_attachments where email_id = ${emailId} and id = ${attachmentId}`
  if (!row)
    throw new ApiError(
      'attachment_not_found',
      `Email ${emailId} has no attachment ${attachmentId}.`,
    )
  return row
}
