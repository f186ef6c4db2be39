import cron from 'node-cron'
import { ApiError } from '../../../shared/errors.js'
import type { Schedule, ScheduleInput } from '../../../shared/schemas/tasks.js'
import type { Db } from '../../db/sql.js'

// A task's schedule (DESIGN 7): a 5-field cron in an IANA time zone, with the input its runs start with.

/** A cron of exactly five fields (minute hour day-of-month month day-of-week) that node-cron accepts. */
export function validCron(expression: string): string {
  const trimmed = expression.trim().replace(/\s+/g, ' ')
  const fields = trimmed.split(' ')
  if (fields.length !== 5) {
    throw new ApiError(
      'invalid_request',
      `cron: expected five fields (minute hour day-of-month month day-of-week); got ${fields.length}.`,
    )
  }
  const checked = cron.validateDetailed(trimmed)
  if (!checked.valid) {
    throw new ApiError(
      'invalid_request',
      `cron: ${checked.errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
    )
  }
  return trimmed
}

export function validTimeZone(zone: string): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone
  } catch {
    throw new ApiError(
      'invalid_request',
      `timezone: "${zone}" is not an IANA time zone (e.g. Europe/Paris).`,
    )
  }
}

/** When a schedule next fires, or null. */
export function nextFire(expression: string, timezone: string): Date | null {
  const task = cron.createTask(expression, () => undefined, { timezone })
  try {
    return task.getNextRuns(1)[0] ?? null // getNextRun() answers null for a task not started
  } finally {
    void task.destroy()
  }
}

interface ScheduleRow {
  cron: string
  timezone: string
  input: Record<string, unknown>
  enabled: boolean
  updatedAt: Date
}

export async function getSchedule(
  db: Db,
  enterpriseId: string,
  taskId: string,
  taskStatus: string,
): Promise<Schedule | null> {
  const [row] = await db<ScheduleRow[]>`
    select cron, timezone, input, enabled, updated_at from task_schedules
     where enterprise_id = ${enterpriseId} and task_id = ${taskId}`
  if (!row) return null
  const fires = row.enabled && taskStatus === 'active'
  return {
    cron: row.cron,
    timezone: row.timezone,
    input: row.input,
    enabled: row.enabled,
    nextFireAt: fires ? (nextFire(row.cron, row.timezone)?.toISOString() ?? null) : null,
    updatedAt: row.updatedAt.toISOString(),
  }
}

/** Sets the schedule; setting the same value twice leaves the same value (spec: Retry safety). */
export async function setSchedule(
  db: Db,
  enterpriseId: string,
  taskId: string,
  input: ScheduleInput,
): Promise<void> {
  const expression = validCron(input.cron)
  const timezone = validTimeZone(input.timezone ?? 'UTC')
  await db`
    insert into task_schedules (task_id, enterprise_id, cron, timezone, input, enabled)
    values (${taskId}, ${enterpriseId}, ${expression}, ${timezone}, ${db.json((input.input ?? {}) as never)},
            ${input.enabled ?? true})
    on conflict (task_id) do update
       set cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
           enabled = excluded.enabled, updated_at = now()`
}

export async function deleteSchedule(db: Db, enterpriseId: string, taskId: string): Promise<void> {
  await db`delete from task_schedules where enterprise_id = ${enterpriseId} and task_id = ${taskId}`
}

// --- fires (DESIGN 7): the engine's scheduler asks these -------------------------------------------

/** An enabled schedule of an active task, as the scheduler matches it against each minute. */
export interface DueSchedule {
  taskId: string
  enterpriseId: string
  cron: string
  timezone: string
  input: Record<string, unknown>
}

/** Every enabled schedule of an active task, in task id order. */
export function enabledSchedules(db: Db): Promise<DueSchedule[]> {
  return db<DueSchedule[]>`
    select s.task_id, s.enterprise_id, s.cron, s.timezone, s.input
      from task_schedules s join tasks t on t.id = s.task_id
     where s.enabled and t.status = 'active'
     order by s.task_id`
}

/**
 * Claims the fires of `schedules` at `minute`: a row per (task, minute), whose unique key lets exactly
 * one process claim each however many try; inserted in task id order, as every process does, so two
 * processes claiming overlapping batches wait on each other in one order and never deadlock. Answers
 * the tasks whose fires this transaction claimed.
 */
export async function claimFires(
  tx: Db,
  minute: Date,
  schedules: readonly Pick<DueSchedule, 'taskId' | 'enterpriseId'>[],
): Promise<Set<string>> {
  const claimed = await tx<{ taskId: string }[]>`
    insert into schedule_fires (task_id, fire_at, enterprise_id, outcome)
    select f.task_id, ${minute}, f.enterprise_id, 'claimed'
      from unnest(${tx.array(schedules.map((s) => s.taskId))}::uuid[],
                  ${tx.array(schedules.map((s) => s.enterpriseId))}::uuid[]) as f(task_id, enterprise_id)
     order by f.task_id
    on conflict do nothing
    returning task_id`
  return new Set(claimed.map((c) => c.taskId))
}

/** What each claimed fire did: the run it started, or why it started none. */
export async function recordFires(
  tx: Db,
  minute: Date,
  fires: readonly { taskId: string; runId: string | null; outcome: string }[],
): Promise<void> {
  await tx`
    update schedule_fires f set run_id = o.run_id, outcome = o.outcome
      from jsonb_to_recordset(${tx.json(fires.map((f) => ({ task_id: f.taskId, run_id: f.runId, outcome: f.outcome })) as never)})
             as o(task_id uuid, run_id uuid, outcome text)
     where f.task_id = o.task_id and f.fire_at = ${minute}`
}
