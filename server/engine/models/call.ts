import { randomUUID } from 'node:crypto'
import type { Provider } from '../../../shared/schemas/models.js'
import { storable, storableJson } from '../../../shared/text.js'
import { pipelinedTransaction, retryConflicts, type Sql, type Tx } from '../../db/sql.js'
import {
  callCostMicros,
  checkRoom,
  countUsage,
  holdReservation,
  takeReservation,
  type ReservedFor,
  priceForCall,
  ProviderError,
  settle,
  worstCaseMicros,
  type ModelProvider,
  type ModelReply,
  type ModelRequest,
  type OnText,
  type ResolvedKey,
  type RunLayers,
  type CallPrice,
  type SpendRefusal,
} from '../../domain/models/index.js'
import { withCallSignal } from '../call-signal.js'
import { metrics } from '../../metrics.js'
import { modelSpan, span, type Trace } from '../../traces/index.js'
import { throttles } from './throttles.js'

// The one model call step (DESIGN 6, 11; STYLE: one step for a model call) that the agent loop and the
// chat reply both go through: the worst case priced, reserved on every spend layer under the counters'
// row locks and kept on the caller's record (the run's journal, the chat turn) in the same commit; the
// call, streamed when asked; its failure classified; its cost settled in place of the reservation and
// counted on the key's usage, with the caller's record of the answer in the same commit. A reservation
// is released exactly once: by the settlement while it is still on the record, else by the engine that
// took the work over and found it there. A connection the provider throttles is not called until its
// wait is over (throttles.ts): the work is told how long to wait, with no reservation made.

/** The model and key a call is made with (domain/models/llm.ts chooseModel). */
export interface ModelChoice {
  key: ResolvedKey
  model: string
  /** The tier the model was chosen for, or exact (a task names its model): a metrics label. */
  tier?: string
}

/** A call's reservation: kept on the caller's record until the call is settled. */
export interface HeldCall {
  /** Tells this reservation apart from another call's on the same record. */
  id: string
  day: string
  micros: number
  provider: Provider
  model: string
  connectionId: string
}

/** `unpriced`: the call's model had no price (domain/models/prices.ts); its cost is 0. */
export type CallOutcome =
  | { reply: ModelReply; costMicros: number; unpriced?: boolean }
  | { failure: ProviderError; costMicros: number }

/**
 * What a settlement finds: the call's reservation still held (ours: this settlement releases it, not
 * an engine that took the work over), and the work still this engine's (mine).
 */
export interface Claimed {
  ours: boolean
  mine: boolean
}

/** What the step needs of the work that makes the call (a run, a chat turn). */
export interface CallOwner {
  /** The spend layers the call is charged to. */
  layers: RunLayers
  /** The work the reservation is for: released by its settlement, or by the engine taking it over. */
  reservedFor: ReservedFor
  /** The reservation's commit does not wait for the WAL flush (DESIGN 3: a chat reply's). */
  unflushedReservation?: boolean
  /** Sent with the spend counters' locks at the reservation: whether the work is still this engine's. */
  lock(tx: Tx): Promise<boolean>
  /** The work's own record of the call it is about to make (a run's journal step), if it keeps one. */
  hold?(tx: Tx, held: HeldCall): Promise<unknown>
  /**
   * After the call, before its settlement's transaction begins: reads the work needs to record the
   * outcome (through the pool: inside the transaction they would hold its connection waiting on another).
   */
  beforeSettle?(outcome: CallOutcome): Promise<void>
  /** No room under a cap: what the work does in the reservation's transaction (a run pauses), if any. */
  refused?(tx: Tx, refusal: SpendRefusal): Promise<unknown>
  /**
   * Sent first at the settlement, with the taking of the reservation: locks the work and answers
   * whether it is still this engine's (mine).
   */
  claim(tx: Tx, held: HeldCall, outcome: CallOutcome): Promise<{ mine: boolean }>
  /**
   * The work's record of the outcome, in the settlement's transaction. `last` sends the key's usage
   * (every call of the enterprise on that key writes its row) and the commit: the work calls it with its
   * last statements, so that row's lock is held only for the commit's round trip.
   */
  record(
    tx: Tx,
    outcome: CallOutcome,
    claimed: Claimed,
    last: () => Promise<unknown>,
  ): Promise<void>
}

export interface ModelCall {
  sql: Sql
  providers: Record<Provider, ModelProvider>
  choice: ModelChoice
  request: Omit<ModelRequest, 'model'>
  /** The prompt's size in characters (system, messages and tools), for its worst case. */
  promptChars: number
  owner: CallOwner
  signal: AbortSignal
  /** Streams the call: its text as it comes. */
  onText?: OnText
  /** The run's first call also counts as a run of the day on the spend layers. */
  firstCall?: boolean
  /** The owner's own limit on the worst case (a run's spend.moneyUsdPerRun): why it refuses, if it does. */
  overLimit?: (worstMicros: number) => string | undefined
  /** The span the call is part of (a run's pass, a chat's reply): its reservation's and its own parent. */
  trace: Trace
}

export type ModelCallResult =
  | { kind: 'gone' }
  | { kind: 'over_limit'; reason: string }
  | { kind: 'no_room'; refusal: SpendRefusal }
  /** Not called: the connection is throttled; `failure.retryAfterMs` says how long to wait. */
  | { kind: 'throttled'; failure: ProviderError }
  | { kind: 'failed'; failure: ProviderError; held: HeldCall }
  | {
      kind: 'answered'
      reply: ModelReply
      costMicros: number
      unpriced: boolean
      mine: boolean
      held: HeldCall
    }

/**
 * The most a call may cost, priced at its model's rates, in micro-dollars: its prompt as uncached input
 * (DESIGN 13), so what the provider's cache saves never lets a cap be passed. A call with no price
 * (unpriced) has a worst case of 0: the caps hold for every priced call all the same.
 */
export function worstCaseOf(price: CallPrice, promptChars: number, maxTokens: number): number {
  return worstCaseMicros(price.price, promptChars, maxTokens)
}

/**
 * What a call that ended without an answer after it began to stream one costs (stopped, as a chat reply
 * is on Esc, issue 51; or cut by the provider): no usage is reported for a stream cut short, but the
 * provider bills the prompt and what it produced. Counted as the worst case counts (a token for every
 * three characters, the prompt as uncached input), never above the call's reservation; 0 when nothing
 * streamed. Were it 0, anyone who may stop a reply could spend past every cap by stopping each one
 * just before its end.
 */
function stoppedCostMicros(
  price: CallPrice,
  call: ModelCall,
  streamedChars: number,
  worst: number,
): number {
  if (streamedChars === 0) return 0
  return Math.min(
    worst,
    worstCaseMicros(price.price, call.promptChars, Math.ceil(streamedChars / 3)),
  )
}

/** How deep a tool call's arguments may nest: as deep as a request's body may (http/body.ts). */
const maxArgumentDepth = 100

/**
 * The answer with each tool call's arguments nested deeper than maxArgumentDepth said so, as arguments
 * that are not JSON are (wire/shared.ts parseArguments): a model may write thousands of brackets, and
 * whatever walked them after (the database driver writing the journal) overflowed its stack, so the
 * run was taken over and the call paid again, for good.
 */
function shallowArguments(reply: ModelReply): ModelReply {
  if (!reply.toolCalls.some((c) => nestedDeeper(c.arguments, maxArgumentDepth))) return reply
  return {
    ...reply,
    toolCalls: reply.toolCalls.map((c) =>
      nestedDeeper(c.arguments, maxArgumentDepth)
        ? {
            ...c,
            arguments: { unparsed: `arguments nested deeper than ${maxArgumentDepth} levels` },
          }
        : c,
    ),
  }
}

/** Whether `value` holds objects and arrays more than `limit` deep, found without recursion. */
function nestedDeeper(value: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[value, 0]]
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [item, depth] = next
    if (item === null || typeof item !== 'object') continue
    if (depth + 1 > limit) return true
    for (const child of Object.values(item)) pending.push([child, depth + 1])
  }
  return false
}

export async function callModel(call: ModelCall): Promise<ModelCallResult> {
  const { sql, choice, owner } = call
  const { key, model } = choice
  const price = await priceForCall(
    sql,
    owner.layers.enterpriseId,
    key.provider,
    model,
    call.providers[key.provider].baseUrlSetByOperator === true,
  )
  const worst = worstCaseOf(price, call.promptChars, call.request.maxTokens)
  const over = call.overLimit?.(worst)
  if (over) return { kind: 'over_limit', reason: over }
  const wait = throttles.admit(key.connectionId)
  if (wait !== undefined)
    return {
      kind: 'throttled',
      // Not made, so no status: the chat and the run say the provider asked for fewer calls, not
      // that it answered 429 to a call it never saw.
      failure: new ProviderError(
        'throttled',
        'the provider asked for fewer calls on this key a moment ago',
        { retryAfterMs: wait, called: false },
      ),
    }

  const held: HeldCall = {
    id: randomUUID(),
    day: '',
    micros: worst,
    provider: key.provider,
    model,
    connectionId: key.connectionId,
  }
  // Two round trips: begin, the work's lock and the counters' (checkRoom); then the reservation held
  // on the counters and on the work's record, with the commit. Both transactions go again at once if
  // PostgreSQL cancels one to break a deadlock (retryConflicts): a settlement lost so would leave an
  // answered call to be made again by whoever resumes the work.
  const reserve = () =>
    retryConflicts(() =>
      pipelinedTransaction(sql, async (tx, commit) => {
        const [mine, room] = await Promise.all([owner.lock(tx), checkRoom(tx, owner.layers, worst)])
        if (!mine) return { kind: 'gone' } as const
        if (!room.ok) {
          metrics.spendRefused(room.layer)
          await Promise.all([owner.refused?.(tx, room), commit()])
          return { kind: 'no_room', refusal: room } as const
        }
        held.day = room.day
        await Promise.all([
          holdReservation(
            tx,
            owner.layers,
            room.day,
            worst,
            { id: held.id, for: owner.reservedFor },
            { unflushed: owner.unflushedReservation },
          ),
          owner.hold?.(tx, held),
          commit(),
        ])
        return undefined
      }),
    )
  const reserved = await span(
    'spend reservation',
    { 'osd.spend.worst_case_usd': worst / 1_000_000 },
    async (reservation) => {
      const refused = await reserve()
      reservation.set({ 'osd.spend.outcome': refused?.kind ?? 'reserved' })
      return refused
    },
    { parent: call.trace },
  )
  if (reserved) return reserved

  let outcome: CallOutcome
  const calledAt = performance.now()
  // What streamed of the answer: a call stopped part way (a chat reply stopped, issue 51) reports no
  // usage, yet the provider bills its prompt and what it produced (below).
  let streamedChars = 0
  // What a provider answers is stored (the journal, a run's result, a chat's messages) as text
  // PostgreSQL can keep: U+0000 and halves of surrogate pairs, which a model may write, become U+FFFD
  // here, once for every caller. Else each write of the answer failed, and whoever took the work over
  // paid for the call again and failed again.
  const onText =
    call.onText &&
    ((text: string) => {
      streamedChars += text.length
      call.onText!(storable(text))
    })
  try {
    // The inference span (issue 49), around the provider's call alone: what it was asked, what it
    // answered, its tokens and cost; the provider is sent its traceparent (wire/).
    const made = await modelSpan(
      {
        provider: key.provider,
        model,
        maxTokens: call.request.maxTokens,
        streamed: call.onText !== undefined,
        system: call.request.system,
        messages: call.request.messages,
        trace: call.trace,
      },
      async (inference) => {
        try {
          const answer = storableJson(
            shallowArguments(
              await withCallSignal(call.signal, (signal) =>
                call.providers[key.provider].call(
                  { ...call.request, model },
                  { key: key.key, connectionId: key.connectionId },
                  signal,
                  onText,
                  inference.headers,
                ),
              ),
            ),
          )
          inference.answered(answer, callCostMicros(price.price, answer.usage))
          return { answer }
        } catch (err) {
          // Said by the span as the failure's kind (outage, throttled, ...), then handled below.
          inference.failed(
            err instanceof ProviderError
              ? err.kind
              : call.signal.aborted
                ? 'aborted'
                : 'bad_request',
            (err as Error).message,
          )
          return { err }
        }
      },
    )
    if ('err' in made) throw made.err
    const reply = made.answer
    const costMicros = callCostMicros(price.price, reply.usage)
    outcome = { reply, costMicros, unpriced: price.unpriced }
  } catch (err) {
    const failure =
      err instanceof ProviderError
        ? err
        : call.signal.aborted
          ? new ProviderError('aborted', 'aborted')
          : new ProviderError('bad_request', (err as Error).message)
    outcome = { failure, costMicros: stoppedCostMicros(price, call, streamedChars, worst) }
  }
  metrics.modelCall(
    { provider: key.provider, tier: choice.tier ?? 'unknown' },
    (performance.now() - calledAt) / 1000,
    'reply' in outcome
      ? { usage: outcome.reply.usage, costMicros: outcome.costMicros }
      : {
          kind: outcome.failure.kind,
          timedOut: outcome.failure.timedOut,
        },
  )
  if ('reply' in outcome) throttles.answered(key.connectionId)
  else if (outcome.failure.throttled)
    outcome = {
      failure: outcome.failure.waiting(
        throttles.throttled(key.connectionId, outcome.failure.retryAfterMs),
      ),
      costMicros: 0,
    }
  else if (outcome.failure.kind === 'aborted') throttles.abandoned(key.connectionId)
  else throttles.answered(key.connectionId)

  await owner.beforeSettle?.(outcome)
  // The call was made and is paid for in any case: its cost is counted whoever holds the work now.
  // Two round trips: begin, the work's lock and record; then the spend settled, the work's record of
  // the outcome, the usage and the commit.
  const mine = await retryConflicts(() =>
    pipelinedTransaction(sql, async (tx, commit) => {
      const [{ mine }, ours] = await Promise.all([
        owner.claim(tx, held, outcome),
        takeReservation(tx, held.id),
      ])
      const claimed: Claimed = { ours, mine }
      const settled = settle(
        tx,
        owner.layers,
        held.day,
        claimed.ours ? held.micros : 0,
        outcome.costMicros,
        call.firstCall === true && 'reply' in outcome,
        'reply' in outcome && outcome.unpriced === true,
      )
      let sent: Promise<unknown> | undefined
      const last = () =>
        (sent ??= Promise.all([
          'reply' in outcome
            ? countUsage(tx, {
                connectionId: key.connectionId,
                enterpriseId: owner.layers.enterpriseId,
                day: held.day,
                model,
                usage: outcome.reply.usage,
                costMicros: outcome.costMicros,
                unpriced: outcome.unpriced,
              })
            : undefined,
          commit(),
        ]))
      await Promise.all([settled, owner.record(tx, outcome, claimed, last)])
      await last()
      return claimed.mine
    }),
  )
  if ('failure' in outcome) return { kind: 'failed', failure: outcome.failure, held }
  const { reply, costMicros } = outcome
  return { kind: 'answered', reply, costMicros, unpriced: outcome.unpriced === true, mine, held }
}
