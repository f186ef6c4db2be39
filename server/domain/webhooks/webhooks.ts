import { metrics } from '../../metrics.js'
import { randomUUID } from 'node:crypto'
import { ApiError, frameworkBody, isErrorCode } from '../../../shared/errors.js'
import type { Paged } from '../../../shared/schemas/common.js'
import type { WebhookDelivery, webhookSorts } from '../../../shared/schemas/webhooks.js'
import { sealedColumns, type Sealer } from '../../crypto.js'
import { envelope, orderBy, type PageRequest } from '../../db/paging.js'
import { isUniqueViolation, onCommit, transaction, type Db } from '../../db/sql.js'
import { verifyWebhookSecret, type WebhookSecretHolder } from '../enterprises/index.js'
import { WebhookGateDecision } from '../../../shared/schemas/gates.js'
import { validationError } from '../../../shared/validation.js'
import { decideGate } from '../gates/index.js'
import { type RunRow, type RunStarts } from '../runs/index.js'
import { isUuid } from '../../../shared/ids.js'
import { storable } from '../../../shared/text.js'

// Inbound webhooks (spec: Routes without a token; Authentication 8; Webhook history; DESIGN 7).

export const secretHeader = 'x-os-webhook-secret'

// Headers that carry credentials are left out of a stored delivery; fields whose names say they are
// sensitive are redacted, wherever they are in the body.
const credentialHeaders = new Set([
  secretHeader,
  'authorization',
  'proxy-authorization',
  'cookie',
  'x-api-key',
])
const sensitive =
  /secret|token|password|passwd|api[-_]?key|authori[sz]ation|credential|private[-_]?key|session/i
const redacted = '[redacted]'

// What osd's own secrets look like (secrets.ts newSecret): a webhook secret, an API token, a person's
// session secret or an app's consent poll token is a secret wherever it appears, this enterprise's
// current one or not, and whatever header the call sent.
const secretShaped = /(?:whsec|osd[spi]?)_[A-Za-z0-9_-]{43}/
const everySecretShaped = new RegExp(secretShaped.source, 'g')

/** The caller's secret, if long enough to look for (a few characters would match everywhere). */
const findable = (secret: string | undefined) => (secret && secret.length >= 8 ? secret : undefined)

/** `text` with the caller's secret and anything shaped like a secret replaced by [redacted]. */
function scrubText(text: string, secret: string | undefined): string {
  const own = findable(secret)
  const cut = own && text.includes(own) ? text.split(own).join(redacted) : text
  return cut.replace(everySecretShaped, redacted)
}

/** Whether a JSON value holds the caller's secret or anything shaped like a secret, anywhere. */
export function holdsSecret(value: unknown, secret: string | undefined): boolean {
  const text = JSON.stringify(value ?? null)
  const own = findable(secret)
  return Boolean(own && text.includes(own)) || secretShaped.test(text)
}

/**
 * A JSON value with the secret, and anything shaped like one, replaced by [redacted] in every string
 * and every key: what a webhook hands on (a run's input, a gate's note) and what a delivery keeps.
 * With `sensitiveFields`, the values of fields whose names say they are sensitive go too.
 */
export function withoutSecret(
  value: unknown,
  secret: string | undefined,
  sensitiveFields = false,
): unknown {
  if (typeof value === 'string') return scrubText(value, secret)
  if (Array.isArray(value)) return value.map((v) => withoutSecret(v, secret, sensitiveFields))
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([key, v]) => [
        scrubText(key, secret),
        sensitiveFields && sensitive.test(key)
          ? redacted
          : withoutSecret(v, secret, sensitiveFields),
      ]),
    )
  }
  return value
}

export function redactHeaders(
  headers: Record<string, string>,
  secret?: string,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers)
      .filter(([name]) => !credentialHeaders.has(name.toLowerCase()))
      .map(([name, value]) => [name, sensitive.test(name) ? redacted : scrubText(value, secret)]),
  )
}

/** The body as a delivery keeps it: sensitive fields, and the secret anywhere, replaced by [redacted]. */
export const redactBody = (value: unknown, secret?: string) => withoutSecret(value, secret, true)

export interface Inbound {
  enterpriseSlug: string
  target: string
  secret: string | undefined
  method: string
  path: string
  headers: Record<string, string>
  body: unknown
  /**
   * Reads the body, when `body` is not it yet: called only once the secret is right, so that a caller
   * osd does not know makes it read no body (issue 44).
   */
  readBody?: () => Promise<unknown>
  /** Where the call came from (http/limits.ts) and how large its body was, when known. */
  clientAddress?: string
  sizeBytes?: number
  /** The request's span as a traceparent (issue 49), when traced. */
  traceParent?: string
}

export interface Outcome {
  status: number
  body: Record<string, unknown>
  runId?: string
  executionId?: string
  gateId?: string
}

/**
 * Applies a delivery's body to its target. What it decides it keeps with `keep` in its own transaction,
 * so the delivery and what followed commit together; a refusal (ApiError) it throws is written after.
 * A task's run starts through `starts` (the app's, batched with its other starts).
 */
export type DeliveryHandler = (
  db: Db,
  starts: RunStarts,
  enterpriseId: string,
  target: string,
  body: Record<string, unknown>,
  keep: Keep,
  /** The request's trace (issue 49): a run it starts is part of it. */
  traceParent: string | undefined,
) => Promise<Outcome>

/** Writes a delivery's answer in the transaction `tx`. */
export type Keep = (tx: Db, outcome: Outcome) => Promise<void>

interface DeliveryRow {
  id: string
  enterpriseId: string
  kind: 'task' | 'gate'
  target: string
  status: WebhookDelivery['status']
  authenticated: boolean
  request: WebhookDelivery['request']
  sealedBody: Buffer | null
  containedSecret: boolean
  responseStatus: number | null
  responseBody: Record<string, unknown> | null
  durationMs: number | null
  runId: string | null
  executionId: string | null
  gateId: string | null
  replayOf: string | null
  idempotencyKey: string | null
  clientAddress: string | null
  sizeBytes: number | null
  receivedAt: Date
  finishedAt: Date | null
}

function toDelivery(row: DeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    kind: row.kind,
    target: row.target,
    status: row.status,
    authenticated: row.authenticated,
    request: row.request,
    response:
      row.responseStatus === null ? null : { status: row.responseStatus, body: row.responseBody },
    durationMs: row.durationMs,
    runId: row.runId,
    executionId: row.executionId,
    gateId: row.gateId,
    replayOf: row.replayOf,
    replayable: replayRefusal(row) === undefined,
    clientAddress: row.clientAddress,
    sizeBytes: row.sizeBytes,
    receivedAt: row.receivedAt.toISOString(),
    finishedAt: row.finishedAt?.toISOString() ?? null,
  }
}

/**
 * Starts a task (spec: Routes without a token) like an API start that waits instead of being refused:
 * the run goes at once when its lane and a holder of the role are free, and otherwise waits pending.
 */
export const startTaskHandler: DeliveryHandler = async (
  _db,
  starts,
  enterpriseId,
  slug,
  body,
  keep,
  traceParent,
) => {
  const { run } = await starts.start({
    enterpriseId,
    task: { slug },
    input: body,
    origin: 'webhook',
    // The inbound request's span, whose parent is the sender's traceparent (issue 49).
    traceParent,
    keep: (tx, started) =>
      keep(tx, started instanceof ApiError ? refused(started) : accepted(started.run)),
  })
  return accepted(run)
}

function accepted(run: RunRow): Outcome {
  return {
    status: 202,
    body: { runId: run.id, executionId: run.executionId, status: run.status },
    runId: run.id,
    executionId: run.executionId,
  }
}

function refused(err: ApiError): Outcome {
  return { status: err.status, body: err.toBody() as Record<string, unknown> }
}

/** Decides a gate by webhook, under the same rules as a decision by token (spec: Routes without a token). */
export const decideGateHandler: DeliveryHandler = async (
  db,
  _starts,
  enterpriseId,
  gateId,
  body,
  keep,
) => {
  if (!isUuid(gateId)) throw new ApiError('gate_not_found', `No gate ${gateId} in this enterprise.`)
  const parsed = WebhookGateDecision.safeParse(body)
  if (!parsed.success) throw validationError(parsed.error, 'body')
  return transaction(db, async (tx) => {
    const gate = await decideGate(tx, enterpriseId, gateId, parsed.data, 'webhook')
    const [run] = gate.runId
      ? await tx<{ executionId: string }[]>`select execution_id from runs where id = ${gate.runId}`
      : []
    const outcome: Outcome = {
      status: 201,
      body: gate as unknown as Record<string, unknown>,
      gateId: gate.id,
      runId: gate.runId ?? undefined,
      executionId: run?.executionId,
    }
    await keep(tx, outcome)
    return outcome
  })
}

const handlers: Record<DeliveryRow['kind'], DeliveryHandler> = {
  task: startTaskHandler,
  gate: decideGateHandler,
}

const unauthorized: Outcome = { status: 401, body: frameworkBody(401, 'Unauthorized') }

/** A delivery as it is first written: the request as stored, before its answer. */
interface NewDelivery {
  id: string
  enterpriseId: string
  kind: DeliveryRow['kind']
  target: string
  authenticated: boolean
  request: WebhookDelivery['request']
  sealedBody: Buffer | null
  containedSecret: boolean
  replayOf?: string
  idempotencyKey?: string
  clientAddress?: string
  sizeBytes?: number
}

/** Headers a call that never authenticated keeps (issue 44): nothing the caller chose to say. */
const safeHeaders = new Set(['content-type', 'content-length', 'user-agent'])

/** How long calls that never authenticated are kept (pruneRefusedDeliveries). */
export const refusedKeepDays = 3

/** Refused calls being written at once; past this, a flood's records are dropped rather than queued. */
const refusedWritesAtOnce = 32
let refusedWriting = 0

/**
 * Keeps the metadata of a call that never authenticated (issue 44): time, route, client address, size,
 * status, the safe headers; no body. Written after the answer, not awaited, so that the 401 of a known
 * enterprise takes the time of an unknown one's (spec: Authentication 8); at most a few at once.
 */
function keepRefused(db: Db, delivery: () => NewDelivery, started: number): void {
  if (refusedWriting >= refusedWritesAtOnce) return
  refusedWriting++
  // After the answer has gone: even making the record (its headers sifted, its path scrubbed) and
  // sending the statement is work the unknown enterprise's answer has not, and a loaded machine made
  // the known one's 401 measurably slower. A record of a refusal is best effort: nobody waits on it.
  setImmediate(() => {
    insertDelivery(db, delivery(), { outcome: unauthorized, started })
      .catch(() => undefined)
      .finally(() => refusedWriting--)
  })
}

/**
 * Deletes the calls that never authenticated after 3 days (issue 44); called by the scheduler's pass
 * once a minute in every engine process (idempotent). Answers how many went.
 */
export async function pruneRefusedDeliveries(db: Db): Promise<number> {
  const gone = await db`
    delete from webhook_deliveries
     where not authenticated and received_at < now() - make_interval(days => ${refusedKeepDays})`
  return gone.count
}

/**
 * Handles an inbound webhook call and stores it as a delivery. `holderOf` finds the enterprise and its
 * secret's hash by slug (osd keeps them in a cache, unknown slugs too); `starts` starts a task's run
 * (the app's StartBatcher). A wrong secret and an unknown enterprise answer the same 401 after the same
 * work: an unknown enterprise has nobody to store the call for, and a known one stores only its
 * metadata, after the answer.
 */
export async function receiveWebhook(
  db: Db,
  starts: RunStarts,
  sealer: Sealer,
  holderOf: (enterpriseSlug: string) => Promise<WebhookSecretHolder | undefined>,
  kind: DeliveryRow['kind'],
  inbound: Inbound,
): Promise<Outcome & { deliveryId?: string }> {
  const started = performance.now()
  const known = await holderOf(inbound.enterpriseSlug)
  const enterprise = verifyWebhookSecret(known, inbound.secret)
  if (!enterprise) {
    if (known)
      keepRefused(
        db,
        () => ({
          id: randomUUID(),
          enterpriseId: known.id,
          kind,
          target: inbound.target,
          authenticated: false,
          request: {
            method: inbound.method,
            path: scrubText(storable(inbound.path), inbound.secret),
            headers: Object.fromEntries(
              Object.entries(inbound.headers).filter(([name]) =>
                safeHeaders.has(name.toLowerCase()),
              ),
            ),
            body: null,
          },
          sealedBody: null,
          containedSecret: false,
          clientAddress: inbound.clientAddress,
          sizeBytes: inbound.sizeBytes,
        }),
        started,
      )
    return unauthorized
  }

  const sent = inbound.readBody ? await inbound.readBody() : inbound.body
  // A body that held the secret is handed on without it, and is never kept whole, so never replayed.
  const containedSecret = holdsSecret(sent, inbound.secret)
  const body = containedSecret ? withoutSecret(sent, inbound.secret) : sent
  const id = randomUUID()
  const delivery: NewDelivery = {
    id,
    enterpriseId: enterprise.id,
    kind,
    target: inbound.target,
    authenticated: true,
    request: {
      method: inbound.method,
      path: scrubText(storable(inbound.path), inbound.secret),
      headers: redactHeaders(inbound.headers, inbound.secret),
      body: redactBody(sent, inbound.secret),
    },
    sealedBody:
      !containedSecret && sent !== undefined
        ? sealer.seal(JSON.stringify(sent), sealedColumns.webhookBody, id)
        : null,
    containedSecret,
    clientAddress: inbound.clientAddress,
    sizeBytes:
      inbound.sizeBytes ??
      (sent === undefined ? undefined : Buffer.byteLength(JSON.stringify(sent))),
  }
  const outcome = await handle(
    db,
    starts,
    kind,
    enterprise.id,
    inbound.target,
    body,
    (tx, outcome) => insertDelivery(tx, delivery, { outcome, started }),
    inbound.traceParent,
  )
  return { ...outcome, deliveryId: delivery.id }
}

/**
 * Runs the handler of a delivery, and writes the answer with `write` exactly once: in the handler's
 * transaction when the handler kept it there, else after (a refusal, or a failure, written as such
 * before it goes on up).
 */
async function handle(
  db: Db,
  starts: RunStarts,
  kind: DeliveryRow['kind'],
  enterpriseId: string,
  target: string,
  body: unknown,
  write: Keep,
  traceParent?: string,
): Promise<Outcome> {
  let kept = false
  const keep: Keep = async (tx, outcome) => {
    await write(tx, outcome)
    onCommit(tx, () => (kept = true))
  }
  let outcome: Outcome
  try {
    if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
      throw new ApiError('invalid_request', 'body: the webhook body must be a JSON object.')
    }
    outcome = await handlers[kind](
      db,
      starts,
      enterpriseId,
      target,
      (body ?? {}) as Record<string, unknown>,
      keep,
      traceParent,
    )
  } catch (err) {
    if (!(err instanceof ApiError)) {
      if (!kept) await write(db, failed).catch(() => undefined)
      throw err
    }
    outcome = refused(err)
  }
  if (!kept) await write(db, outcome)
  return outcome
}

const failed: Outcome = { status: 500, body: frameworkBody(500, 'Internal server error') }

function deliveryStatus(outcome: Outcome): WebhookDelivery['status'] {
  return outcome.status < 300 ? 'accepted' : outcome.status < 500 ? 'refused' : 'failed'
}

/**
 * Writes a new delivery: with its answer, or in progress (a replay claims its idempotency key before it
 * is applied). A key another replay holds is a unique violation.
 */
async function insertDelivery(
  db: Db,
  delivery: NewDelivery,
  answered?: { outcome: Outcome; started: number },
): Promise<void> {
  const outcome = answered?.outcome
  await db`
    insert into webhook_deliveries (id, enterprise_id, kind, target, authenticated, request, sealed_body,
                                    contained_secret, replay_of, idempotency_key, status, response_status,
                                    response_body, duration_ms, run_id, execution_id, gate_id, finished_at,
                                    client_address, size_bytes)
    values (${delivery.id}, ${delivery.enterpriseId}, ${delivery.kind}, ${delivery.target}, ${delivery.authenticated},
            ${db.json(delivery.request as never)}, ${delivery.sealedBody}, ${delivery.containedSecret},
            ${delivery.replayOf ?? null}, ${delivery.idempotencyKey ?? null},
            ${outcome ? deliveryStatus(outcome) : 'in_progress'}, ${outcome?.status ?? null},
            ${outcome ? db.json(keptAnswer(outcome)) : null},
            ${answered ? Math.round(performance.now() - answered.started) : null},
            ${outcome?.runId ?? null}, ${outcome?.executionId ?? null}, ${outcome?.gateId ?? null},
            ${outcome ? db`now()` : null}, ${delivery.clientAddress ?? null},
            ${delivery.sizeBytes ?? null})`
  // Counted once it is committed (at once when db is the pool).
  if (outcome) onCommit(db, () => metrics.webhookDelivery(deliveryStatus(outcome)))
}

/** A delivery's answer as it is kept: nothing shaped like a secret (a gate's tool arguments may be). */
const keptAnswer = (outcome: Outcome) => withoutSecret(outcome.body, undefined) as never

/** Writes the answer of a delivery that was stored in progress. */
async function record(db: Db, id: string, outcome: Outcome, started: number): Promise<void> {
  await db`
    update webhook_deliveries
       set status = ${deliveryStatus(outcome)}, response_status = ${outcome.status},
           response_body = ${db.json(keptAnswer(outcome))},
           duration_ms = ${Math.round(performance.now() - started)}, run_id = ${outcome.runId ?? null},
           execution_id = ${outcome.executionId ?? null}, gate_id = ${outcome.gateId ?? null}, finished_at = now()
     where id = ${id}`
  onCommit(db, () => metrics.webhookDelivery(deliveryStatus(outcome)))
}

// --- history and replay -----------------------------------------------------------------------------

type DeliverySort = (typeof webhookSorts)[number]
const sortColumns: Record<DeliverySort, string> = {
  receivedAt: 'received_at',
  status: 'status',
  target: 'target',
  responseStatus: 'response_status',
  durationMs: 'duration_ms',
}

export async function listDeliveries(
  db: Db,
  enterpriseId: string,
  filters: { status?: string; kind?: string },
  page: PageRequest<DeliverySort>,
): Promise<Paged<WebhookDelivery>> {
  const where = db`
    enterprise_id = ${enterpriseId}
    ${filters.status ? db`and status = ${filters.status}` : db``}
    ${filters.kind ? db`and kind = ${filters.kind}` : db``}`
  const [rows, [count]] = await Promise.all([
    db<DeliveryRow[]>`
      select * from webhook_deliveries where ${where}
      ${orderBy(db, page, sortColumns, 'id', ['receivedAt'])} limit ${page.limit} offset ${page.offset}`,
    db<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where ${where}`,
  ])
  return envelope(rows.map(toDelivery), count!.n, page)
}

async function loadDelivery(db: Db, enterpriseId: string, id: string): Promise<DeliveryRow> {
  const [row] = await db<DeliveryRow[]>`
    select * from webhook_deliveries where enterprise_id = ${enterpriseId} and id = ${id}`
  if (!row)
    throw new ApiError('delivery_not_found', `No webhook delivery ${id} in this enterprise.`)
  return row
}

export async function getDelivery(
  db: Db,
  enterpriseId: string,
  id: string,
): Promise<WebhookDelivery> {
  return toDelivery(await loadDelivery(db, enterpriseId, id))
}

/** Why a delivery cannot be replayed (spec: Webhook history), or undefined. */
function replayRefusal(row: DeliveryRow): string | undefined {
  if (!row.authenticated) return 'it never authenticated'
  if (row.status === 'in_progress') return 'it is still in progress'
  if (row.containedSecret) return 'its body contained the webhook secret'
  return undefined
}

/**
 * Applies a delivery's request again through the current rules, as a new delivery linked to the
 * original (spec: Webhook history). The same key on the same delivery answers the same replay; the same
 * key on another delivery is 409 replay_idempotency_key_reused.
 */
export async function replayDelivery(
  db: Db,
  starts: RunStarts,
  sealer: Sealer,
  enterpriseId: string,
  id: string,
  idempotencyKey: string,
  traceParent?: string,
): Promise<{ delivery: WebhookDelivery; created: boolean }> {
  const original = await loadDelivery(db, enterpriseId, id)
  const previous = await replayByKey(db, enterpriseId, id, idempotencyKey)
  if (previous) return answered(previous, false)
  const refusal = replayRefusal(original)
  if (refusal) {
    throw new ApiError('delivery_not_replayable', `Delivery ${id} cannot be replayed: ${refusal}.`)
  }
  const started = performance.now()
  // The original's body, sealed again for the replay's own row: a sealed value opens only in its row.
  const plain = original.sealedBody
    ? sealer.open(original.sealedBody, sealedColumns.webhookBody, original.id)
    : undefined
  const replayId = randomUUID()
  const replay: NewDelivery = {
    id: replayId,
    enterpriseId,
    kind: original.kind,
    target: original.target,
    authenticated: true,
    request: original.request,
    sealedBody:
      plain === undefined ? null : sealer.seal(plain, sealedColumns.webhookBody, replayId),
    containedSecret: false,
    replayOf: id,
    idempotencyKey,
  }
  try {
    await insertDelivery(db, replay)
  } catch (err) {
    // A concurrent replay with this key landed first: answer it, or refuse a different delivery's.
    if (!isUniqueViolation(err)) throw err
    const raced = await replayByKey(db, enterpriseId, id, idempotencyKey)
    if (!raced) throw err
    return answered(raced, false)
  }
  const body = plain === undefined ? undefined : (JSON.parse(plain) as unknown)
  await handle(
    db,
    starts,
    original.kind,
    enterpriseId,
    original.target,
    body,
    (tx, outcome) => record(tx, replay.id, outcome, started),
    traceParent,
  )
  return answered(await getDelivery(db, enterpriseId, replay.id), true)
}

/**
 * What a replay answers: the replay, or, when its target refused it (a gate decided since, a task
 * deprecated or gone), that refusal's status and code (spec: Webhook history: such a replay "is
 * refused"), with the refused replay's id in deliveryId; it is kept all the same, linked to the original.
 * The same key answers the same again.
 */
function answered(delivery: WebhookDelivery, created: boolean) {
  const refusal =
    delivery.status === 'refused'
      ? (delivery.response?.body as Record<string, unknown> | null | undefined)
      : undefined
  if (refusal && isErrorCode(refusal.error)) {
    const { error, message, ...extra } = refusal
    throw new ApiError(error, typeof message === 'string' ? message : undefined, {
      ...extra,
      deliveryId: delivery.id,
    })
  }
  return { delivery, created }
}

async function replayByKey(
  db: Db,
  enterpriseId: string,
  id: string,
  key: string,
): Promise<WebhookDelivery | undefined> {
  const [row] = await db<DeliveryRow[]>`
    select * from webhook_deliveries where enterprise_id = ${enterpriseId} and idempotency_key = ${key}`
  if (!row) return undefined
  if (row.replayOf !== id) {
    throw new ApiError(
      'replay_idempotency_key_reused',
      `The idempotency key was used to replay another delivery (${row.replayOf}).`,
    )
  }
  return toDelivery(row)
}
