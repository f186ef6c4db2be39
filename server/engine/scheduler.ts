import cron, { type ScheduledTask } from 'node-cron'
import { ApiError } from '../../shared/errors.js'
import { transaction, type Sql } from '../db/sql.js'
import { enqueueRun } from '../domain/runs.js'
import { schedulesChangedChannel } from '../domain/schedules.js'
import type { Logger } from '../log.js'

interface ScheduleRow {
  taskId: string
  enterpriseId: string
  cron: string
  timezone: string
  input: Record<string, unknown>
}

/**
 * Fires task schedules (DESIGN 7). Every engine process runs the crons (node-cron); a fire is claimed
 * by inserting (task, minute) into schedule_fires, whose unique key lets exactly one process start the
 * run however many fire. The claim and the run are one transaction.
 */
export class Scheduler {
  private jobs = new Map<string, { key: string; job: ScheduledTask }>()
  private timers: NodeJS.Timeout[] = []
  private listener: { unlisten(): Promise<void> } | undefined
  private reloading: Promise<void> | undefined

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.listener = await this.sql.listen(
      schedulesChangedChannel,
      () => void this.reload(),
      () => void this.reload(),
    )
    // The safety net: schedules are also read again every minute, notification or not.
    this.timers.push(setInterval(() => void this.reload(), 60_000))
    await this.reload()
  }

  /** Reads the enabled schedules of active tasks and makes the crons match them. */
  reload(): Promise<void> {
    this.reloading ??= this.load().finally(() => (this.reloading = undefined))
    return this.reloading
  }

  private async load(): Promise<void> {
    try {
      const rows = await this.sql<ScheduleRow[]>`
        select s.task_id, s.enterprise_id, s.cron, s.timezone, s.input
          from task_schedules s join tasks t on t.id = s.task_id
         where s.enabled and t.status = 'active'`
      const wanted = new Map(rows.map((row) => [row.taskId, row]))
      for (const [taskId, { job }] of this.jobs) {
        if (!wanted.has(taskId)) {
          await job.destroy()
          this.jobs.delete(taskId)
        }
      }
      for (const row of rows) {
        const key = `${row.cron}|${row.timezone}|${JSON.stringify(row.input)}`
        const existing = this.jobs.get(row.taskId)
        if (existing?.key === key) continue
        await existing?.job.destroy()
        const job = cron.schedule(row.cron, (context) => void this.fire(row, context.date), {
          timezone: row.timezone,
          name: `task-${row.taskId}`,
          noOverlap: false,
        })
        this.jobs.set(row.taskId, { key, job })
      }
    } catch (err) {
      this.log.error({ err }, 'could not load schedules')
    }
  }

  /** Claims the fire of this minute; the one process whose insert lands starts the run. */
  async fire(schedule: ScheduleRow, when: Date): Promise<void> {
    const minute = new Date(Math.floor(when.getTime() / 60_000) * 60_000)
    try {
      await transaction(this.sql, async (tx) => {
        const [claim] = await tx`
          insert into schedule_fires (task_id, fire_at, enterprise_id, outcome)
          values (${schedule.taskId}, ${minute}, ${schedule.enterpriseId}, 'claimed')
          on conflict do nothing
          returning task_id`
        if (!claim) return // another process fired this minute
        try {
          const run = await tx.savepoint((sp) =>
            enqueueRun(sp, schedule.enterpriseId, schedule.taskId, schedule.input, {
              origin: 'schedule',
            }),
          )
          await tx`
            update schedule_fires set run_id = ${run.id}, outcome = 'started'
             where task_id = ${schedule.taskId} and fire_at = ${minute}`
          this.log.info(
            { taskId: schedule.taskId, runId: run.id, fireAt: minute },
            'schedule fired',
          )
        } catch (err) {
          if (!(err instanceof ApiError)) throw err
          // A deprecated task's schedule starts nothing (spec: Task status); the fire says why.
          await tx`
            update schedule_fires set outcome = ${`${err.code}: ${err.message}`}
             where task_id = ${schedule.taskId} and fire_at = ${minute}`
        }
      })
    } catch (err) {
      this.log.error({ err, taskId: schedule.taskId }, 'schedule fire failed')
    }
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer)
    await this.listener?.unlisten().catch(() => undefined)
    await this.reloading
    for (const { job } of this.jobs.values()) await job.destroy()
    this.jobs.clear()
  }
}
