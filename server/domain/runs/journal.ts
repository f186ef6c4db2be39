import type { Db } from '../../db/sql.js'

// A run's journal (DESIGN 5, 6): every model call and tool call of a kind llm run, written before the run
// moves on, so a run that comes back continues from it: no model call paid twice, no tool call that may
// have acted made again. This module owns the run_journal table (STYLE: one module owns each table).

export interface JournalEntry {
  step: number
  kind: 'model' | 'tool'
  /** started: sent, answer not yet kept (a crash here means the call may have happened); done; failed. */
  state: 'started' | 'done' | 'failed'
  request: Record<string, any>
  response: Record<string, any> | null
  costUsdMicros: number
  connectionId: string | null
}

/** What a tool step's request keeps: the model's call, and the gate it waits on if any. */
export interface ToolRequest {
  callId: string
  name: string
  arguments: Record<string, unknown>
  gateId?: string
  /** An approved gated call about to be made (a crash after it means it may have happened). */
  executing?: boolean
}

type RunRef = { id: string; enterpriseId: string }

/**
 * A run's journal from `fromStep` on, in step order. The agent loop reads it when it (re)starts a run and
 * keeps it in memory from then on; a step never reads it again.
 */
export async function readJournal(db: Db, runId: string, fromStep = 0): Promise<JournalEntry[]> {
  return db<JournalEntry[]>`
    select step, kind, state, request, response, cost_usd_micros, connection_id
      from run_journal where run_id = ${runId} and step >= ${fromStep} order by step`
}

/** A run's model calls (its detail answers them): how many were journaled, and their tokens of each kind. */
export interface ModelCallTotals {
  modelCalls: number
  inputTokens: number
  cacheReadTokens: number
  cacheWriteTokens: number
  outputTokens: number
}

/**
 * How many model calls a run has journaled, and the tokens their answers were billed for (each answer's
 * usage, as the agent loop journals it; one journaled before prompt caching has no cache counts).
 */
export async function modelCallTotals(db: Db, runId: string): Promise<ModelCallTotals> {
  const [row] = await db<ModelCallTotals[]>`
    select count(*)::int as model_calls,
           coalesce(sum((response -> 'usage' ->> 'input')::bigint), 0)::bigint as input_tokens,
           coalesce(sum((response -> 'usage' ->> 'cacheRead')::bigint), 0)::bigint as cache_read_tokens,
           coalesce(sum((response -> 'usage' ->> 'cacheWrite')::bigint), 0)::bigint as cache_write_tokens,
           coalesce(sum((response -> 'usage' ->> 'output')::bigint), 0)::bigint as output_tokens
      from run_journal where run_id = ${runId} and kind = 'model' and not copied`
  return row!
}

/** A journal entry as GET /v1/runs/{id}/steps reads it: the entry, its times, and its gate if any. */
export interface StepRow extends JournalEntry {
  copied: boolean
  createdAt: Date
  finishedAt: Date | null
  gateStatus: 'waiting' | 'decided' | null
  gateDecision: string | null
}

/**
 * A run's journal with each step's times and the gate of a gated call (the gate its request names:
 * a copied step's gate is its original's).
 */
export async function readSteps(db: Db, runId: string): Promise<StepRow[]> {
  return db<StepRow[]>`
    select j.step, j.kind, j.state, j.request, j.response, j.cost_usd_micros, j.connection_id,
           j.copied, j.created_at, j.finished_at, g.status as gate_status, g.decision as gate_decision
      from run_journal j
      left join gates g on j.kind = 'tool' and g.id = (j.request ->> 'gateId')::uuid
     where j.run_id = ${runId}
     order by j.step`
}

/**
 * Copies a run's journal entries before `beforeStep` (journal numbering, from 0) to a fork, as they
 * were but at no cost: the original paid for them, and the fork's agent loop replays them as it does
 * its own journal after a takeover (issue 50). No reservation goes with them (none is held for an
 * ended step), so nothing is released or counted for them either.
 */
export async function copyJournal(
  db: Db,
  from: string,
  to: { id: string; enterpriseId: string },
  beforeStep: number,
): Promise<number> {
  const copied = await db`
    insert into run_journal (enterprise_id, run_id, step, kind, state, request, response,
                             cost_usd_micros, connection_id, created_at, finished_at, copied)
    select ${to.enterpriseId}, ${to.id}, step, kind, state, request, response, 0, connection_id,
           created_at, finished_at, true
      from run_journal where run_id = ${from} and step < ${beforeStep}
     order by step`
  return copied.count
}

/**
 * Journals a model call as started, before it is made, in the transaction of its spend reservation.
 * The reservation itself lives in spend_reservations (domain/models/spend.ts), released from there;
 * the step keeps the amount reserved as a record of the call, read by nobody who releases.
 */
export async function startModelStep(
  db: Db,
  run: RunRef,
  entry: Pick<JournalEntry, 'step' | 'connectionId'> & {
    request: { provider: string; model: string }
    reservedUsdMicros: number
  },
): Promise<JournalEntry> {
  await db`
    insert into run_journal (enterprise_id, run_id, step, kind, state, request, reserved_usd_micros, connection_id)
    values (${run.enterpriseId}, ${run.id}, ${entry.step}, 'model', 'started', ${db.json(entry.request)},
            ${entry.reservedUsdMicros}, ${entry.connectionId})`
  const { reservedUsdMicros: _, ...rest } = entry
  return { ...rest, kind: 'model', state: 'started', response: null, costUsdMicros: 0 }
}

/**
 * The run's last journaled step, or -1: sent with a model call's reservation, so a worker whose journal
 * in memory is behind the database's (a settlement that committed though its answer never reached the
 * worker, say) reads it again instead of paying for a call that was already answered (issue 42).
 */
export async function journalHead(db: Db, runId: string): Promise<number> {
  const [row] = await db<{ step: number | null }[]>`
    select max(step) as step from run_journal where run_id = ${runId}`
  return row?.step ?? -1
}

/**
 * Moves a model call's step out of `started`, once: the worker that made the call and a worker resuming
 * the run after it may both try. Answers whether this one did (and so releases the call's reservation).
 */
export async function endModelStep(
  db: Db,
  runId: string,
  step: number,
  to: { state: 'done' | 'failed'; response: Record<string, unknown>; costUsdMicros?: number },
): Promise<boolean> {
  const [ended] = await db`
    update run_journal set state = ${to.state}, response = ${db.json(to.response as never)},
                           cost_usd_micros = ${to.costUsdMicros ?? 0}, finished_at = now()
     where run_id = ${runId} and step = ${step} and state = 'started'
    returning step`
  return Boolean(ended)
}

/** Records what a model call cost when another worker had already ended its step. */
export async function setStepCost(
  db: Db,
  runId: string,
  step: number,
  costUsdMicros: number,
): Promise<void> {
  await db`update run_journal set cost_usd_micros = ${costUsdMicros} where run_id = ${runId} and step = ${step}`
}

/** Journals a tool call as started: before a tool server is called, or while its gate waits. */
export async function startToolStep(
  db: Db,
  run: RunRef,
  step: number,
  request: ToolRequest,
): Promise<JournalEntry> {
  await db`
    insert into run_journal (enterprise_id, run_id, step, kind, state, request)
    values (${run.enterpriseId}, ${run.id}, ${step}, 'tool', 'started', ${db.json(request as never)})`
  return toolEntry(step, 'started', request, null)
}

/** Journals a tool call together with its answer: one that acted on nothing outside, or was refused. */
export async function insertToolDone(
  db: Db,
  run: RunRef,
  step: number,
  request: ToolRequest,
  response: { content: string; isError: boolean },
): Promise<JournalEntry> {
  await db`
    insert into run_journal (enterprise_id, run_id, step, kind, state, request, response, finished_at)
    values (${run.enterpriseId}, ${run.id}, ${step}, 'tool', 'done', ${db.json(request as never)},
            ${db.json(response)}, now())`
  return toolEntry(step, 'done', request, stored(response))
}

/** Keeps the answer of a started tool call. */
export async function answerToolStep(
  db: Db,
  runId: string,
  step: number,
  response: { content: string; isError: boolean },
): Promise<void> {
  await db`
    update run_journal set state = 'done', response = ${db.json(response)}, finished_at = now()
     where run_id = ${runId} and step = ${step}`
}

/** Marks an approved gated call as being made, before it is: a crash during it never makes it twice. */
export async function markExecuting(db: Db, runId: string, step: number): Promise<void> {
  await db`
    update run_journal set request = request || '{"executing": true}'
     where run_id = ${runId} and step = ${step}`
}

/** A value as the journal gives it back once stored (JSON: no undefined fields). */
export function stored<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T
}

function toolEntry(
  step: number,
  state: JournalEntry['state'],
  request: ToolRequest,
  response: Record<string, unknown> | null,
): JournalEntry {
  return {
    step,
    kind: 'tool',
    state,
    request: stored(request),
    response,
    costUsdMicros: 0,
    connectionId: null,
  }
}
