import { isUuid } from '../../../shared/ids.js'
import { type RunEvent } from '../../../shared/schemas/runs.js'
import { notifyAfterCommit, type Db } from '../../db/sql.js'
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
export async function appendEvents(db: Db, events: readonly NewEvent[]): Promise<void> {
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
     order by e.n`
  notifyAfterCommit(db, runChannel, new Set(events.map((e) => e.run.id)))
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
