import type { VersionDefinition } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'
import type { RunRow } from './rows.js'

// What the engine's agent loop reads and writes of a run while it works on it (issue 43: the engine asks
// the domain; one writer per table). The loop holds no SQL of its own: its run's context, its lock, its
// cost and its log are these functions.

/** What an llm run works with, read at the start of an execution. */
export interface RunContext {
  definition: VersionDefinition
  /** The member the run went to; none for a run without one (the daemon then writes its mail). */
  member?: { name: string; email: string; persona: string }
  enterpriseName?: string
  /** The input of the run whose conversation this one continues (a successor's resumeConversation). */
  resumedInput?: Record<string, unknown>
}

/** A run's version, member, enterprise and the run it resumes, in one round trip. */
export async function runContext(
  db: Db,
  run: Pick<RunRow, 'taskVersionId' | 'memberId' | 'enterpriseId' | 'resumeFromRunId'>,
): Promise<RunContext> {
  const [row] = await db<
    {
      definition: VersionDefinition
      member: RunContext['member'] | null
      enterpriseName: string | null
      resumedInput: Record<string, unknown> | null
    }[]
  >`
    select v.definition,
           (select json_build_object('name', m.name, 'email', m.email, 'persona', m.persona)
              from members m where m.id = ${run.memberId}) as member,
           (select name from enterprises where id = ${run.enterpriseId}) as enterprise_name,
           (select input from runs where id = ${run.resumeFromRunId}) as resumed_input
      from task_versions v where v.id = ${run.taskVersionId}`
  if (!row) throw new Error(`run's task version ${run.taskVersionId} is gone`)
  return {
    definition: row.definition,
    member: row.member ?? undefined,
    enterpriseName: row.enterpriseName ?? undefined,
    resumedInput: row.resumedInput ?? undefined,
  }
}

/**
 * Locks the run in `tx` and answers it while it is still running under this engine's lease; undefined
 * (the lock kept, nothing else) when it is not: cancelled, or taken over after the lease lapsed. Every
 * write of the agent loop goes through it, so a worker that lost its run writes nothing for it, and the
 * lock keeps a run's events in the order they commit (docs/locks.md, runs).
 */
export async function lockHeldRun(
  tx: Db,
  engineId: string,
  runId: string,
): Promise<RunRow | undefined> {
  const [row] = await tx<RunRow[]>`select * from runs where id = ${runId} for no key update`
  if (!row || row.status !== 'running' || row.leaseOwner !== engineId) return undefined
  return row
}

/**
 * Adds a model call's cost to the run's, and counts it when it had no price (issue 51: the run then
 * says "unpriced"); answers the run's total, in micro-dollars.
 */
export async function addRunCost(
  tx: Db,
  runId: string,
  micros: number,
  unpriced = false,
): Promise<number> {
  const [row] = await tx<{ costUsdMicros: number }[]>`
    update runs set cost_usd_micros = cost_usd_micros + ${micros},
                    unpriced_calls = unpriced_calls + ${unpriced ? 1 : 0}, updated_at = now()
     where id = ${runId} returning cost_usd_micros`
  return row!.costUsdMicros
}

/** Writes the run's log (GET /v1/runs/{id}/log): the whole transcript, in place of the last. */
export async function writeRunLog(
  db: Db,
  run: Pick<RunRow, 'id' | 'enterpriseId'>,
  body: string,
): Promise<void> {
  await db`
    insert into run_logs (run_id, enterprise_id, body) values (${run.id}, ${run.enterpriseId}, ${body})
    on conflict (run_id) do update set body = excluded.body, updated_at = now()`
}
