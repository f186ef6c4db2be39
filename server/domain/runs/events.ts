import { isUuid } from '../../../shared/ids.js'
import { type RunEvent } from '../../../shared/schemas/runs.js'
import { notifyAfterCommit, pipelinedTransaction, type Db, type Sql } from '../../db/sql.js'
import { type RunRow, runChannel } from './rows.js'

// A run's events: appended in order, in the caller's transaction, and told to listeners once committed.

export interface NewEvent {
  run: Pick<RunRow, 'id' | 'enterpriseId'>
  type: string
  payload?: Record<string, unknown>
}

/**
 * Appends events in one statement, in the order given, and tells listeners (engines, long-polls) the
 * runs moved once they are committed, one notification per run.
 */
export async function appendEvents(
  db: Db,
  events: readonly NewEvent[],
  { whileHeldBy }: { whileHeldBy?: string } = {},
): Promise<void> {
  if (events.length === 0) return
  const rows = events.map((e, n) => ({
    n,
    enterprise_id: e.run.enterpriseId,
    run_id: e.run.id,
    type: e.type,
    payload: e.payload ?? {},
  }))
  await db`
    insert into run_events (enterprise_id, run_id, type, payload)
    select e.enterprise_id, e.run_id, e.type, e.payload
      from jsonb_to_recordset(${db.json(rows as never)})
           as e(n int, enterprise_id uuid, run_id uuid, type text, payload jsonb)
     ${
       whileHeldBy === undefined
         ? db``
         : db`where exists (select 1 from runs r where r.id = e.run_id and r.status = 'running'
                                                  and r.lease_owner = ${whileHeldBy})`
     }
     order by e.n`
  notifyAfterCommit(db, runChannel, new Set(events.map((e) => e.run.id)))
}

/**
 * Appends events of a run this engine executes, under the run's lock and only while it is still
 * running under this engine's lease, in one round trip (begin, the lock, the events and the commit go
 * together): a run's start records its recall so, rather than in four (issue 30). Answers the run as
 * locked when it is still held, else undefined (nothing was written).
 */
export async function appendWhileHeld(
  pool: Sql,
  runId: string,
  engineId: string,
  events: readonly NewEvent[],
): Promise<RunRow | undefined> {
  return pipelinedTransaction(pool, async (tx, commit) => {
    const [[row]] = await Promise.all([
      tx<RunRow[]>`select * from runs where id = ${runId} for no key update`,
      appendEvents(tx, events, { whileHeldBy: engineId }),
      commit(),
    ])
    return row?.status === 'running' && row.leaseOwner === engineId ? row : undefined
  })
}

export function appendEvent(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId'>,
  type: string,
  payload: Record<string, unknown> = {},
): Promise<void> {
  return appendEvents(db, [{ run, type, payload }])
}

/**
 * A run's events in order; with `afterEventId`, only those after it. An id that is not one of this run's
 * events (malformed, another run's, unknown) reads from the first: a follower skips ids it knows.
 */
export async function listEvents(
  db: Db,
  runId: string,
  afterEventId?: string,
): Promise<RunEvent[]> {
  const after = afterEventId && isUuid(afterEventId) ? afterEventId : undefined
  const rows = await db<EventRow[]>`
    select id, type, payload, created_at from run_events
     where run_id = ${runId}
       ${after ? db`and seq > coalesce((select seq from run_events where id = ${after} and run_id = ${runId}), 0)` : db``}
     order by seq`
  return rows.map(toEvent)
}

export interface EventRow {
  id: string
  type: string
  payload: Record<string, unknown>
  createdAt: Date
}

export const toEvent = (e: EventRow): RunEvent => ({
  id: e.id,
  type: e.type,
  payload: e.payload,
  createdAt: e.createdAt.toISOString(),
})

/** The run's events of these types, in their order (what a run recorded at its first start, say). */
export async function eventsOfTypes(
  db: Db,
  runId: string,
  types: readonly string[],
): Promise<{ type: string; payload: Record<string, unknown> }[]> {
  return db<{ type: string; payload: Record<string, unknown> }[]>`
    select type, payload from run_events
     where run_id = ${runId} and type = any(${db.array([...types])}::text[])
     order by seq`
}
