import { z } from 'zod'
import { IsoTime, Uuid, idPrefixParameter, pageParameters } from './common.js'
import { gateDecisions, gateStatuses } from '../values.js'
export { gateDecisions, gateStatuses }

// Gates (spec: Gate; Endpoints Gates; DESIGN 6): a decision waiting for a person.

export const GateChoice = z
  .object({ key: z.string().min(1), label: z.string() })
  .meta({ id: 'GateChoice' })

export const Gate = z
  .object({
    id: Uuid,
    /** tool: a call a task must gate; question: os.ask_ceo (or a chat) waiting for answers. */
    kind: z.enum(['tool', 'question']),
    status: z.enum(['waiting', 'decided']),
    tool: z.string().nullable(),
    arguments: z.record(z.string(), z.unknown()).nullable(),
    owner: z.string().nullable(),
    approval: z.string().nullable(),
    /** What the run said it asks for (os.set_gate_summary). */
    summary: z.string().nullable(),
    choices: z.array(GateChoice).nullable(),
    questions: z.array(z.string()).nullable(),
    runId: Uuid.nullable(),
    /** The chat a question belongs to (os.ask_ceo in a chat's reply); null for a run's gate. */
    chatId: Uuid.nullable(),
    taskId: Uuid.nullable(),
    taskSlug: z.string().nullable(),
    decision: z.enum(gateDecisions).nullable(),
    note: z.string().nullable(),
    answers: z.unknown().nullable(),
    choice: z.string().nullable(),
    /** Who decided: token:<id>, user:<id>, webhook, or the run ending. */
    decidedBy: z.string().nullable(),
    decidedByName: z.string().nullable().meta({
      description:
        "who decided, in words (issue 51): the token's name for token:<id>, the person's name for user:<id> (never their email; null when they gave no name); null where decidedBy says it itself (webhook, the run ending)",
    }),
    decidedAt: IsoTime.nullable(),
    createdAt: IsoTime,
  })
  .meta({ id: 'Gate' })
export type Gate = z.infer<typeof Gate>

/** The answer of a gate decided by webhook: the gate, and the delivery that decided it. */
export const GateDecidedByWebhook = Gate.extend({
  deliveryId: Uuid.meta({ description: 'the stored delivery (GET /v1/webhooks/{id})' }),
}).meta({ id: 'GateDecidedByWebhook' })

export const GateDecision = z
  .object({
    decision: z.enum(gateDecisions),
    note: z.string().max(10_000).optional(),
    answers: z
      .union([z.array(z.string()), z.record(z.string(), z.unknown()), z.string()])
      .optional(),
    choice: z.string().optional().meta({ description: "the key of one of the gate's own choices" }),
  })
  .meta({ id: 'GateDecision' })
export type GateDecision = z.infer<typeof GateDecision>

export const GateListQuery = z.object({
  idPrefix: idPrefixParameter('gates'),
  taskId: z.string().optional(),
  runId: z.string().optional(),
  kind: z.string().optional(),
  status: z.enum(gateStatuses).optional().meta({
    description:
      'waiting (default): the gates waiting, newest first, all of them unless page or limit is given; decided: the gates decided, newest decision first, paged (limit 25 unless given), for audits',
  }),
  ...pageParameters,
})
export type GateListQuery = z.infer<typeof GateListQuery>

export const ChatGateDecision = GateDecision.extend({
  gateId: Uuid.optional().meta({
    description: 'the gate to answer; the newest waiting one if omitted',
  }),
}).meta({ id: 'ChatGateDecision' })

export const WebhookGateDecision = z
  .object({ decision: z.enum(gateDecisions), note: z.string().max(10_000).optional() })
  .meta({ id: 'WebhookGateDecision' })
