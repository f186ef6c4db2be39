import type { Transporter } from 'nodemailer'
import type { Sql } from '../../db/sql.js'
import {
  claimMailPeople,
  composeMail,
  mailChannel,
  mailFailed,
  mailItemsOf,
  mailSent,
  nextMailDue,
  releaseMailPeople,
  renewMailPeople,
  type PersonToMail,
} from '../../domain/events/index.js'
import type { Logger } from '../../log.js'
import { LeaseLoop, type Leased, type WorkKind } from '../lease-loop.js'

// Mail to people (issue 47), as a kind of the lease loop: a person with mail waiting whose minute has
// passed is claimed (domain/events/notifications.ts), everything waiting for them goes in one mail
// through OSD_SMTP_URL (nodemailer: STARTTLS when the server offers it on smtp://, TLS from the start
// on smtps://), and they are not mailed again for a minute.

export interface MailerOptions {
  sql: Sql
  log: Logger
  engineId: string
  /** OSD_SMTP_URL: never logged (it may carry a password). */
  smtpUrl: string
  /** OSD_MAIL_FROM. */
  from: string
  leaseSeconds?: number
  sweepMs?: number
}

interface PersonWork extends Leased {
  person: PersonToMail
}

/** People one claim takes, and mails this process sends at once. */
const batch = 4

export class Mailer extends LeaseLoop<PersonWork> {
  private readonly transport: SmtpTransport

  constructor(options: MailerOptions) {
    const { sql, engineId, log } = options
    const leaseSeconds = options.leaseSeconds ?? 60
    const transport = new SmtpTransport(options.smtpUrl)
    let working = 0
    const kind: WorkKind<PersonWork> = {
      name: 'mail',
      logKey: 'userId',
      channel: mailChannel,
      // This process's sequencer wakes the mailer itself (engine/events/index.ts).
      listenLocally: () => () => undefined,
      async claim() {
        const people = await claimMailPeople(sql, engineId, batch - working, leaseSeconds)
        return {
          claimed: people.map((person) => ({ id: person.userId, wakeKey: '', person })),
          more: false,
        }
      },
      nextDue: () => nextMailDue(sql),
      async execute({ person }) {
        // Counted when its mail starts, not at the claim: a person claimed again while this engine
        // still mails them (their lease lapsed meanwhile) is not mailed twice (the lease loop lets the
        // first go on), so a count made at the claim went up for them and never came back down, and
        // after three such the process mailed one person at a time (as deliveries.ts).
        working++
        try {
          await mailPerson(options, transport, person)
        } finally {
          working--
        }
      },
      renew: (ids) => renewMailPeople(sql, engineId, ids, leaseSeconds),
      stillHeld: async () => true,
      release: (ids) => releaseMailPeople(sql, engineId, ids),
    }
    super(kind, { sql, log, sweepMs: options.sweepMs ?? 10_000, leaseSeconds })
    this.transport = transport
  }

  override async stop(graceMs?: number): Promise<void> {
    await super.stop(graceMs)
    await this.transport.close()
  }
}

/** The SMTP transport, made at its first mail (nodemailer loads only where mail is on). */
class SmtpTransport {
  private made: Promise<Transporter> | undefined
  constructor(private readonly url: string) {}

  get(): Promise<Transporter> {
    return (this.made ??= import('nodemailer').then(({ createTransport }) =>
      createTransport({
        url: this.url,
        // A server that does not answer is found out in seconds, not nodemailer's minutes.
        connectionTimeout: 10_000,
        greetingTimeout: 10_000,
        socketTimeout: 30_000,
      } as Parameters<typeof createTransport>[0]),
    ))
  }

  async close(): Promise<void> {
    const transport = await this.made?.catch(() => undefined)
    transport?.close()
  }
}

/** Everything waiting for a person, in one mail; marked sent once the server took it. */
async function mailPerson(
  options: MailerOptions,
  transport: SmtpTransport,
  person: PersonToMail,
): Promise<void> {
  const { sql, engineId, log, from } = options
  const items = await mailItemsOf(sql, person.userId)
  if (items.length === 0) {
    await mailSent(sql, engineId, person.userId, [])
    return
  }
  const mail = composeMail(items)
  try {
    await (
      await transport.get()
    ).sendMail({
      from,
      to: person.name ? { name: person.name, address: person.email } : person.email,
      subject: mail.subject,
      text: mail.text,
    })
  } catch (err) {
    // Never the url: it may carry the SMTP password.
    const e = err as { code?: string; responseCode?: number }
    log.warn(
      { userId: person.userId, code: e.code, responseCode: e.responseCode },
      'mail not sent; trying again later',
    )
    await mailFailed(sql, engineId, person.userId)
    return
  }
  await mailSent(
    sql,
    engineId,
    person.userId,
    items.map((i) => i.id),
  )
}
