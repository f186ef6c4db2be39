import {
  spendLayers,
  type SpendCapInput,
  type SpendLayer,
  type SpendView,
} from '../../../shared/schemas/spend.js'
import type { ModelPrice } from '../../../shared/schemas/models.js'
import { finishedStatuses } from '../../../shared/schemas/runs.js'
import { literalIn, retryConflicts, transaction, unflushedCommit, type Db } from '../../db/sql.js'
import { moveTurns } from '../chats/index.js'
import { layerOwner } from '../tasks/index.js'
import { transitionAll, type RunRow } from '../runs/index.js'
import type { TokenUsage } from './provider.js'

// Spend (spec: Spend; DESIGN 6): daily caps per layer (enterprise, team, task, member), in cents, and what
// each layer spent today, in millionths of a dollar. Every model call first reserves its worst case on
// every layer under the layers' row locks, so concurrent runs cannot overshoot a cap; the call's real
// cost replaces the reservation when it answers.

const microsPerCent = 10_000

export function today(): string {
  return new Date().toISOString().slice(0, 10)
}

/**
 * Per spend layer, the highest share of a daily cap that today's spend and reservations take, across
 * every enterprise whose spend limits are on: for a scrape (issue 33; the alert on spend near a cap).
 * Reads only today's counters of layers that have a cap.
 */
export async function spendCapUse(db: Db): Promise<Record<string, number>> {
  const rows = await db<{ layer: string; ratio: number }[]>`
    select d.layer,
           max((d.spent_usd_micros + d.reserved_usd_micros)::float8 / (c.money_cents_day * ${microsPerCent}))::float8 as ratio
      from spend_days d
      join spend_caps c using (enterprise_id, layer, layer_id)
      join enterprises e on e.id = d.enterprise_id and e.spend_enabled
     where d.day = ${today()} and c.money_cents_day > 0
     group by d.layer`
  return Object.fromEntries(rows.map((row) => [row.layer, row.ratio]))
}

/** The four layers a run spends on; the enterprise's layer id is the enterprise's own. */
export interface RunLayers {
  enterpriseId: string
  teamId: string | null
  /** None for a chat reply, which spends on its enterprise, team and member (DESIGN 11). */
  taskId: string | null
  memberId: string | null
}

function layersOf(run: RunLayers): { layer: SpendLayer; layerId: string }[] {
  const layers: { layer: SpendLayer; layerId: string }[] = [
    { layer: 'enterprise', layerId: run.enterpriseId },
  ]
  if (run.taskId) layers.push({ layer: 'task', layerId: run.taskId })
  if (run.teamId) layers.push({ layer: 'team', layerId: run.teamId })
  if (run.memberId) layers.push({ layer: 'member', layerId: run.memberId })
  // A fixed order of locking, so two reservations never wait on each other in a circle.
  return layers.sort((a, b) => (a.layer + a.layerId).localeCompare(b.layer + b.layerId))
}

export type Reservation =
  { ok: true; day: string } | { ok: false; layer: SpendLayer; layerId: string; capCents: number }

/** Why a model call found no room: the capped layer it would pass. */
export type SpendRefusal = Extract<Reservation, { ok: false }>

/**
 * The reservation of a model call's worst case (DESIGN 6), in two halves sent in one transaction (the
 * model call step, engine/models/call.ts): this one locks the layers' counters of today (made if
 * missing) and answers whether `worstMicros` fits under every cap; holdReservation then reserves it.
 * Apart, so the caller sends the hold with its own last statements (pipelinedTransaction).
 */
export async function checkRoom(tx: Db, run: RunLayers, worstMicros: number): Promise<Reservation> {
  const day = today()
  const layers = layersOf(run)
  const kinds = tx.array(layers.map((l) => l.layer))
  const ids = tx.array(layers.map((l) => l.layerId))
  // Three statements in one round trip (pipelined on the transaction's connection). First the layers'
  // caps, key share locked: a cap's change (setCap) or limits turned off (setEnabled) waits for this
  // transaction, and then finds the run or reply it pauses for want of room and queues it again; or
  // it went first, and the statements after this one read what it wrote. Read in the statement that
  // locked the counters alone, a cap raised meanwhile was missed by both: the run stayed paused with
  // room there for it until the cap's next change. Then the day's counters, created in the layers'
  // fixed order, then locked, read with their caps and whether limits are on.
  const [, , counters] = await Promise.all([
    tx`
      select 1 from spend_caps
       where enterprise_id = ${run.enterpriseId}
         and (layer, layer_id) in (select * from unnest(${kinds}::text[], ${ids}::uuid[]))
       order by layer, layer_id
         for key share`,
    tx`
      insert into spend_days (enterprise_id, day, layer, layer_id)
      select ${run.enterpriseId}, ${day}, l, i from unnest(${kinds}::text[], ${ids}::uuid[]) with ordinality as x(l, i, n)
       order by n
      on conflict do nothing`,
    tx<
      {
        layer: SpendLayer
        layerId: string
        spentUsdMicros: number
        reservedUsdMicros: number
        moneyCentsDay: number | null
        spendEnabled: boolean | null
      }[]
    >`
      select d.layer, d.layer_id, d.spent_usd_micros, d.reserved_usd_micros,
             (select money_cents_day from spend_caps c
               where c.enterprise_id = d.enterprise_id and c.layer = d.layer and c.layer_id = d.layer_id) as money_cents_day,
             (select spend_enabled from enterprises e where e.id = d.enterprise_id) as spend_enabled
        from spend_days d
       where d.enterprise_id = ${run.enterpriseId} and d.day = ${day}
         and (d.layer, d.layer_id) in (select * from unnest(${kinds}::text[], ${ids}::uuid[]))
       order by d.layer || d.layer_id::text
       for update of d`,
  ])
  for (const counter of counters) {
    if (!counter.spendEnabled || counter.moneyCentsDay === null) continue
    if (
      counter.spentUsdMicros + counter.reservedUsdMicros + worstMicros >
      counter.moneyCentsDay * microsPerCent
    ) {
      return {
        ok: false,
        layer: counter.layer,
        layerId: counter.layerId,
        capCents: counter.moneyCentsDay,
      }
    }
  }
  return { ok: true, day }
}

/** What a reservation is for: a run's model call, or a chat turn's. */
export type ReservedFor = { runId: string } | { turnId: string }

/**
 * The reservation's second half: `worstMicros` on the layers of `day` (checkRoom locked them), and the
 * reservation's row naming the work it is for (spend_reservations: the one place it lives until it is
 * released, issue 43). `unflushed`: the commit does not wait for the WAL flush (a chat reply's: DESIGN 3,
 * a reservation lost in a database crash releases itself).
 */
export function holdReservation(
  tx: Db,
  run: RunLayers,
  day: string,
  worstMicros: number,
  held: { id: string; for: ReservedFor },
  { unflushed = false }: { unflushed?: boolean } = {},
) {
  const layers = layersOf(run)
  const runId = 'runId' in held.for ? held.for.runId : null
  const turnId = 'turnId' in held.for ? held.for.turnId : null
  return Promise.all([
    tx`
      update spend_days set reserved_usd_micros = reserved_usd_micros + ${worstMicros}
       where enterprise_id = ${run.enterpriseId} and day = ${day}
         and (layer, layer_id) in (select * from unnest(${tx.array(layers.map((l) => l.layer))}::text[], ${tx.array(layers.map((l) => l.layerId))}::uuid[]))`,
    tx`
      insert into spend_reservations (id, enterprise_id, run_id, turn_id, day, micros, team_id, task_id,
                                      member_id)
      values (${held.id}, ${run.enterpriseId}, ${runId}, ${turnId}, ${day}, ${worstMicros},
              ${run.teamId}, ${run.taskId}, ${run.memberId})
      ${unflushed ? tx`returning ${unflushedCommit(tx)}` : tx``}`,
  ])
}

/**
 * Takes a call's reservation back at its settlement: true when it was still held, and then this
 * settlement releases it; false when the engine that took the work over after a crash released it
 * already (releaseInterrupted). Deleting the row is what makes the release happen once.
 */
export async function takeReservation(tx: Db, id: string): Promise<boolean> {
  const [row] = await tx`delete from spend_reservations where id = ${id} returning id`
  return row !== undefined
}

/**
 * Releases what calls a crash interrupted kept reserved for a run or a chat turn (the process died or
 * stopped during them), once: an engine taking the work over calls it before it goes on. Answers how
 * many it released.
 */
export async function releaseInterrupted(tx: Db, work: ReservedFor): Promise<number> {
  const released = await tx<
    {
      enterpriseId: string
      day: string
      micros: number
      teamId: string | null
      taskId: string | null
      memberId: string | null
    }[]
  >`
    delete from spend_reservations
     where ${'runId' in work ? tx`run_id = ${work.runId}` : tx`turn_id = ${work.turnId}`}
    returning enterprise_id, day::text as day, micros, team_id, task_id, member_id`
  for (const held of released) await settle(tx, held, held.day, held.micros, 0, false)
  return released.length
}

/**
 * Releases what calls kept reserved for runs that ended over `graceSeconds` ago (a lease's length):
 * answers how many runs' reservations it released. A run cancelled while its engine was dead (or
 * failed for its takeovers, maxTakeovers) is never taken over, so the call its engine died in was
 * settled by nobody, and its worst case stayed reserved on every layer for the rest of the day. A
 * living engine has heard of the end by then and settled its call (which then finds its reservation
 * gone, and counts the cost alone, as after a takeover).
 */
export async function releaseAbandoned(db: Db, graceSeconds: number, limit = 50): Promise<number> {
  const runs = await db<{ runId: string }[]>`
    select distinct s.run_id from spend_reservations s join runs r on r.id = s.run_id
     where ${literalIn(db, 'r.status', finishedStatuses)}
       and r.finished_at < now() - make_interval(secs => ${graceSeconds})
     limit ${limit}`
  for (const { runId } of runs)
    await retryConflicts(() => transaction(db, (tx) => releaseInterrupted(tx, { runId })))
  return runs.length
}

/**
 * Replaces a reservation by what the call cost; the run's first call also counts it as a run of the
 * day, and a call with no price as an unpriced one (its cost 0).
 */
export async function settle(
  tx: Db,
  run: RunLayers,
  day: string,
  reservedMicros: number,
  costMicros: number,
  firstCall: boolean,
  unpriced = false,
): Promise<void> {
  const layers = layersOf(run)
  const kinds = tx.array(layers.map((l) => l.layer))
  const ids = tx.array(layers.map((l) => l.layerId))
  // The counters locked in checkRoom's order first, in the same round trip: an update alone locks
  // its rows in whatever order its plan reads them, and two settlements of calls on different layers
  // (a run's task and team beside a chat's member) deadlocked that way (docs/locks.md; issue 42).
  await Promise.all([
    tx`
      select 1 from spend_days
       where enterprise_id = ${run.enterpriseId} and day = ${day}
         and (layer, layer_id) in (select * from unnest(${kinds}::text[], ${ids}::uuid[]))
       order by layer || layer_id::text
       for update`,
    tx`
    update spend_days
       set reserved_usd_micros = greatest(0, reserved_usd_micros - ${reservedMicros}),
           spent_usd_micros = spent_usd_micros + ${costMicros},
           runs = runs + ${firstCall ? 1 : 0},
           unpriced_calls = unpriced_calls + ${unpriced ? 1 : 0}
     where enterprise_id = ${run.enterpriseId} and day = ${day}
       and (layer, layer_id) in (select * from unnest(${kinds}::text[], ${ids}::uuid[]))`,
  ])
}

// --- the routes' side -------------------------------------------------------------------------------

export async function getSpend(db: Db, enterpriseId: string): Promise<SpendView> {
  const day = today()
  const [[enterprise], rows, caps] = await Promise.all([
    db<
      { spendEnabled: boolean }[]
    >`select spend_enabled from enterprises where id = ${enterpriseId}`,
    db<
      {
        layer: SpendLayer
        layerId: string
        spentUsdMicros: number
        runs: number
        unpricedCalls: number
      }[]
    >`
      select layer, layer_id, spent_usd_micros, runs, unpriced_calls from spend_days
       where enterprise_id = ${enterpriseId} and day = ${day}
         and (spent_usd_micros > 0 or runs > 0 or unpriced_calls > 0)
       order by layer, layer_id`,
    db<{ layer: SpendLayer; layerId: string; moneyCentsDay: number }[]>`
      select layer, layer_id, money_cents_day from spend_caps where enterprise_id = ${enterpriseId} order by layer, layer_id`,
  ])
  return {
    day,
    enabled: enterprise?.spendEnabled ?? true,
    today: rows.map((r) => ({
      layer: r.layer,
      layerId: r.layerId,
      usdCents: r.spentUsdMicros / microsPerCent,
      runs: r.runs,
      unpriced: r.unpricedCalls > 0,
    })),
    caps,
  }
}

/**
 * Sets (or with null removes) a layer's daily cap. Raising or removing a cap puts paused runs back in
 * line (spec: States and transitions, paused_spend); they pause again if there is still no room.
 */
export async function setCap(
  db: Db,
  enterpriseId: string,
  input: SpendCapInput,
): Promise<SpendView> {
  const layerId = await layerOwner(db, enterpriseId, spendLayers, input.layer, input.layerId)
  await transaction(db, async (tx) => {
    const [before] = await tx<{ moneyCentsDay: number }[]>`
      select money_cents_day from spend_caps where enterprise_id = ${enterpriseId} and layer = ${input.layer}
         and layer_id = ${layerId} for update`
    if (input.moneyCentsDay === null) {
      await tx`delete from spend_caps where enterprise_id = ${enterpriseId} and layer = ${input.layer} and layer_id = ${layerId}`
    } else {
      await tx`
        insert into spend_caps (enterprise_id, layer, layer_id, money_cents_day)
        values (${enterpriseId}, ${input.layer}, ${layerId}, ${input.moneyCentsDay})
        on conflict (enterprise_id, layer, layer_id) do update set money_cents_day = excluded.money_cents_day, updated_at = now()`
    }
    const raised =
      before && (input.moneyCentsDay === null || input.moneyCentsDay > before.moneyCentsDay)
    if (raised) await requeuePaused(tx, enterpriseId, 'the spend cap was raised')
  })
  return getSpend(db, enterpriseId)
}

/** Turns spend limits on or off; turning them off puts paused runs back in line. */
export async function setEnabled(
  db: Db,
  enterpriseId: string,
  enabled: boolean,
): Promise<SpendView> {
  await transaction(db, async (tx) => {
    // The caps' whole locks: a model call checking for room (checkRoom's key share locks) pauses its
    // run first and is queued again below, or reads limits off after this commits.
    if (!enabled)
      await tx`
        select 1 from spend_caps where enterprise_id = ${enterpriseId}
         order by layer, layer_id for update`
    await tx`update enterprises set spend_enabled = ${enabled} where id = ${enterpriseId}`
    if (!enabled) await requeuePaused(tx, enterpriseId, 'spend limits were turned off')
  })
  return getSpend(db, enterpriseId)
}

/**
 * paused_spend -> pending for the enterprise's paused runs (admission queues them again) and for its
 * chat replies a cap held (the engines' chat loops claim them again).
 */
export async function requeuePaused(tx: Db, enterpriseId: string, why: string): Promise<number> {
  await moveTurns(tx, 'pending', { enterpriseId, from: ['paused_spend'] })
  const paused = await tx<RunRow[]>`
    select * from runs where enterprise_id = ${enterpriseId} and status = 'paused_spend'
     order by id for no key update`
  await transitionAll(
    tx,
    'pending',
    paused.map((run) => ({ run, fields: { notBefore: null }, event: { because: why } })),
  )
  return paused.length
}

/**
 * A model's price per token of each kind, in micro-dollars (shared/schemas/models.ts priceOf: dollars
 * per million tokens are micro-dollars per token).
 */
export type TokenPrice = ModelPrice

/**
 * The most a model call may cost, in micro-dollars, for its reservation: the prompt (system, messages
 * and tools; about a token per 3 characters) and every token it may answer with. The prompt is priced
 * as uncached input (DESIGN 13): what the provider's cache will read is not known before the call, and a
 * cap must never be passed on a hope.
 */
export function worstCaseMicros(price: TokenPrice, promptChars: number, maxTokens: number): number {
  return Math.ceil(Math.ceil(promptChars / 3) * price.input + maxTokens * price.output)
}

/**
 * What a model call cost, in micro-dollars, from the usage it answered with: each kind of token at its
 * price, rounded up to a whole micro-dollar (less a float's noise: 10 tokens at $0.3/MTok are 3, not 4).
 */
export function callCostMicros(price: TokenPrice, usage: TokenUsage): number {
  const micros =
    usage.input * price.input +
    usage.cacheRead * price.cacheRead +
    usage.cacheWrite * price.cacheWrite +
    usage.output * price.output
  return Math.ceil(micros - 1e-6)
}

/**
 * Counts a model call on its key's usage row (one per connection, day and model: every call of the
 * enterprise on that key writes it, so callers send it late in their transaction). Returned unawaited,
 * for a pipelined transaction to send with its other statements.
 */
export function countUsage(
  db: Db,
  call: {
    connectionId: string
    enterpriseId: string
    day: string
    model: string
    usage: TokenUsage
    costMicros: number
    /** The call had no price (prices.ts): its cost is 0, and the row says some calls were unpriced. */
    unpriced?: boolean
  },
) {
  const { usage } = call
  const unpriced = call.unpriced ? 1 : 0
  return db`
    insert into llm_usage (connection_id, enterprise_id, day, model, calls, input_tokens, cache_read_tokens,
                           cache_write_tokens, output_tokens, cost_usd_micros, unpriced_calls)
    values (${call.connectionId}, ${call.enterpriseId}, ${call.day}, ${call.model}, 1, ${usage.input},
            ${usage.cacheRead}, ${usage.cacheWrite}, ${usage.output}, ${call.costMicros}, ${unpriced})
    on conflict (connection_id, day, model) do update
       set calls = llm_usage.calls + 1, input_tokens = llm_usage.input_tokens + excluded.input_tokens,
           cache_read_tokens = llm_usage.cache_read_tokens + excluded.cache_read_tokens,
           cache_write_tokens = llm_usage.cache_write_tokens + excluded.cache_write_tokens,
           output_tokens = llm_usage.output_tokens + excluded.output_tokens,
           cost_usd_micros = llm_usage.cost_usd_micros + excluded.cost_usd_micros,
           unpriced_calls = llm_usage.unpriced_calls + excluded.unpriced_calls`
}
