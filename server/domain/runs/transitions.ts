import { ApiError } from '../../../shared/errors.js'
import { type RunResult, type RunStatus } from '../../../shared/schemas/runs.js'
import { onCommit, type Db } from '../../db/sql.js'
import { metrics, metricsEnabled } from '../../metrics.js'
import { wakeEnginesFor } from '../engine-wake.js'
import { type RunRow, isFinished } from './rows.js'
import { appendEvents } from './events.js'

// Every status change of a run (spec: States and transitions; DESIGN 5): checked, written with its
// event and the running counts, in the caller's transaction.

// Which status may follow which (spec: States and transitions; DESIGN 5). A run that leaves a gate or
// a hold goes back to pending: admission puts it in its lane again, so a lane never has two under way.
const next: Record<RunStatus, readonly RunStatus[]> = {
  pending: ['queued', 'cancelled', 'failed'],
  queued: ['running', 'pending', 'cancelled', 'failed'],
  running: [
    'succeeded',
    'failed',
    'cancelled',
    'waiting_on_gate',
    'blocked',
    'paused_spend',
    'pending',
  ],
  waiting_on_gate: ['pending', 'cancelled', 'failed'],
  blocked: ['pending', 'cancelled', 'failed'],
  paused_spend: ['pending', 'cancelled', 'failed'],
  succeeded: [],
  failed: [],
  cancelled: [],
  skipped_overlap: [],
}

export interface TransitionFields {
  result?: RunResult
  reason?: string
  blockedReason?: string
  memberId?: string
  notBefore?: Date | null
  leaseOwner?: string | null
  /** How long the lease of a run going to running lasts (DESIGN 5; the engine renews it). */
  leaseSeconds?: number
}

/** One run's move: the fields it gets and what its event says besides them. */
export interface Move {
  run: RunRow
  fields?: TransitionFields
  event?: Record<string, unknown>
}

/**
 * Moves runs to `to`: checks each transition, writes the runs (timestamps, lease), keeps the running
 * counts of their enterprises and teams, and appends the events (`run.<to>`), all in `tx` and in a
 * fixed number of statements however many runs move. With `through`, each run passes through that
 * status on the way, in the same statement, and its event says so too (a deterministic run goes
 * queued -> running -> succeeded at once: admission.dispatchQueued). The caller holds the runs' row
 * locks and, for `to: running`, has checked the limits under the counts' row locks. Answers the moved
 * runs in order. Times are the statement's, not the transaction's: an engine step moves a pipeline
 * several steps in one transaction, and each step's times must follow the one before.
 */
export async function transitionAll(
  tx: Db,
  to: RunStatus,
  moves: readonly Move[],
  { through }: { through?: 'running' } = {},
): Promise<RunRow[]> {
  if (moves.length === 0) return []
  for (const { run } of moves) {
    const path = through ? [run.status, through, to] : [run.status, to]
    for (let i = 1; i < path.length; i++) {
      if (!next[path[i - 1]!].includes(path[i]!)) {
        throw new ApiError('illegal_transition', `A ${run.status} run cannot become ${to}.`, {
          status: run.status,
        })
      }
    }
  }
  const finishing = isFinished(to)
  // Every value is decided here from the locked row, so one statement writes every run.
  const rows = moves.map(({ run, fields = {} }) => ({
    id: run.id,
    from_status: run.status,
    result: fields.result ?? run.result,
    reason: fields.reason ?? (finishing ? run.reason : null),
    blocked_reason: to === 'blocked' ? (fields.blockedReason ?? null) : null,
    member_id: fields.memberId ?? run.memberId,
    not_before:
      fields.notBefore === undefined ? (to === 'pending' ? run.notBefore : null) : fields.notBefore,
    lease_owner: to === 'running' ? (fields.leaseOwner ?? null) : null,
    lease_seconds: fields.leaseSeconds ?? 30,
  }))
  // The gates, the counts and the events are decided from the caller's rows, as the update is: all
  // go to the server together (one round trip, not four). Should the update find a run that moved,
  // the throw below undoes them all with the caller's transaction.
  const atGate = finishing
    ? moves.filter((m) => m.run.status === 'waiting_on_gate').map((m) => m.run.id)
    : []
  const [written] = await Promise.all([
    tx<RunRow[]>`
    update runs r
       set status = ${to},
           result = d.result,
           reason = d.reason,
           blocked_reason = d.blocked_reason,
           member_id = d.member_id,
           not_before = d.not_before,
           lease_owner = d.lease_owner,
           lease_expires_at = ${to === 'running' ? tx`statement_timestamp() + make_interval(secs => d.lease_seconds)` : null},
           queued_at = ${to === 'queued' ? tx`statement_timestamp()` : tx`r.queued_at`},
           started_at = ${to === 'running' || through === 'running' ? tx`coalesce(r.started_at, statement_timestamp())` : tx`r.started_at`},
           finished_at = ${finishing ? tx`statement_timestamp()` : null},
           updated_at = statement_timestamp()
      from jsonb_to_recordset(${tx.json(rows as never)})
           as d(id uuid, from_status text, result jsonb, reason text, blocked_reason text, member_id uuid,
                not_before timestamptz, lease_owner text, lease_seconds int)
     where r.id = any(${moves.map((m) => m.run.id)}::uuid[]) and r.id = d.id and r.status = d.from_status
    returning r.*`,
    atGate.length ? closeGatesOf(tx, atGate, `run ${to}`) : undefined,
    keepRunningCounts(
      tx,
      moves.map(({ run }) => ({
        run,
        change: to === 'running' ? 1 : run.status === 'running' ? -1 : 0,
      })),
    ),
    appendEvents(
      tx,
      moves.flatMap(({ run, fields = {}, event = {} }) => {
        const payload: Record<string, unknown> = { ...event }
        if (to === 'succeeded' && fields.result) payload.result = fields.result
        if (fields.reason) payload.reason = fields.reason
        if (to === 'blocked' && fields.blockedReason) payload.blockedReason = fields.blockedReason
        if (fields.memberId) payload.memberId = fields.memberId
        const passed = through ? [{ run, type: `run.${through}` }] : []
        return [...passed, { run, type: `run.${to}`, payload }]
      }),
    ),
  ])
  // The check above and the running counts were decided from the caller's rows: a run that moved
  // since would be written over (an end undone, a count off for good). Callers lock and re-read the
  // runs they move, so this never happens; if it does, nothing of this change is kept.
  if (written.length !== moves.length)
    throw new Error(`${moves.length - written.length} run(s) moved under their lock`)
  const byId = new Map(written.map((r) => [r.id, r]))
  const moved = moves.map(({ run }) => byId.get(run.id)!)
  // Counted once the change is committed: a transaction rolled back (a deadlock broken, a run that
  // moved under its lock) counts nothing. A caller's transaction not made by transaction() has no
  // commit to wait for, and is counted at the statement.
  if (metricsEnabled()) {
    const counted = moved.map((run, i) => ({
      createdAt: run.createdAt,
      startedAt: run.startedAt,
      finishedAt: run.finishedAt,
      firstStart: moves[i]!.run.startedAt === null,
    }))
    onCommit(tx, () => metrics.runsMoved(to, counted))
  }
  wakeEnginesFor(
    tx,
    moved.map((run) => run.id),
  )
  return moved
}

/** The running counts of enterprises and teams (DESIGN 5: the limits read them under row locks). */
async function keepRunningCounts(
  tx: Db,
  changes: readonly { run: RunRow; change: number }[],
): Promise<void> {
  const enterprises = new Map<string, number>()
  const teams = new Map<string, number>()
  for (const { run, change } of changes) {
    if (change === 0) continue
    enterprises.set(run.enterpriseId, (enterprises.get(run.enterpriseId) ?? 0) + change)
    if (run.teamId) teams.set(run.teamId, (teams.get(run.teamId) ?? 0) + change)
  }
  const deltas = (m: Map<string, number>) =>
    tx.json([...m].filter(([, n]) => n !== 0).map(([id, n]) => ({ id, n })) as never)
  // Several rows are locked in id order first, as dispatch locks them: an update locks its rows in
  // whatever order its plan reads them, and two transactions locking two enterprises in opposite
  // orders wait for each other in a circle (docs/locks.md; issue 42). The statements go together.
  const inOrder = (table: 'enterprises' | 'teams', m: Map<string, number>) =>
    m.size > 1
      ? tx`select 1 from ${tx(table)} where id = any(${tx.array([...m.keys()])}::uuid[])
            order by id for no key update`
      : undefined
  await Promise.all([
    inOrder('enterprises', enterprises),
    enterprises.size &&
      tx`
        update enterprises e set running_count = running_count + d.n
          from jsonb_to_recordset(${deltas(enterprises)}) as d(id uuid, n int) where e.id = d.id`,
    inOrder('teams', teams),
    teams.size &&
      tx`
        update teams t set running_count = running_count + d.n
          from jsonb_to_recordset(${deltas(teams)}) as d(id uuid, n int) where t.id = d.id`,
  ])
}

/**
 * Runs that end while waiting close their waiting gates: nothing is left to decide. Part of a status
 * change, so here and not in gates.ts (which opens and decides gates through transition()).
 */
async function closeGatesOf(tx: Db, runIds: string[], why: string): Promise<void> {
  await tx`
    update gates set status = 'decided', decided_by = ${why}, decided_at = now()
     where run_id = any(${tx.array(runIds)}::uuid[]) and status = 'waiting'`
}

/** One run's transition (transitionAll with one move). */
export async function transition(
  tx: Db,
  run: RunRow,
  to: RunStatus,
  fields: TransitionFields = {},
  event: Record<string, unknown> = {},
): Promise<RunRow> {
  const [moved] = await transitionAll(tx, to, [{ run, fields, event }])
  return moved!
}
