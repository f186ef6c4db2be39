import { z } from 'zod'
import { IsoTime, Uuid } from './common.js'

// A member's inbox (spec: Endpoints Members, emails): mail other members and runs sent it.

export const Attachment = z
  .object({ id: Uuid, filename: z.string(), contentType: z.string(), bytes: z.number().int() })
  .meta({ id: 'EmailAttachment' })

export const Email = z
  .object({
    id: Uuid,
    from: z.string(),
    to: z.string(),
    subject: z.string(),
    body: z.string(),
    runId: Uuid.nullable(),
    read: z.boolean(),
    receivedAt: IsoTime,
    attachments: z.array(Attachment),
  })
  .meta({ id: 'Email' })
export type Email = z.infer<typeof Email>
