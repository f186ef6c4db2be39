import { type Db } from '../../db/sql.js'

/** What the metrics read of runs and gates at each scrape (server/metrics.ts DatabaseGauges). */
export interface RunGauges {
  runsUnderWay: Record<string, number>
  oldestPendingSeconds: number
  gatesWaiting: number
}

/**
 * Runs under way by status, how long the oldest due pending run has waited, and the gates waiting: in
 * one statement, across every enterprise, for a scrape (issue 33). The runs are counted through the
 * partial index of lanes under way (runs_lane_busy) and the gates through gates_waiting, so a scrape
 * reads the work in progress, never the history. A pending run with a delay left (a successor's
 * `delayMinutes`, a back-off) is waited for from when it became due, so a delay is not a queue.
 */
export async function runGauges(db: Db): Promise<RunGauges> {
  const rows = await db<{ status: string; n: number; oldest: number | null }[]>`
    select status, count(*)::int as n,
           extract(epoch from now() - min(greatest(created_at, not_before))
                   filter (where status = 'pending' and (not_before is null or not_before <= now())))::float8 as oldest
      from runs
     where status in ('pending', 'queued', 'running', 'blocked', 'paused_spend')
     group by status
    union all
    select 'gate', count(*)::int, null from gates where status = 'waiting'`
  const gauges: RunGauges = { runsUnderWay: {}, oldestPendingSeconds: 0, gatesWaiting: 0 }
  for (const row of rows) {
    if (row.status === 'gate') gauges.gatesWaiting = row.n
    else gauges.runsUnderWay[row.status] = row.n
    if (row.oldest !== null) gauges.oldestPendingSeconds = Math.max(0, row.oldest)
  }
  return gauges
}
