import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Sql } from '../db/sql.js'
import type { Logger } from '../log.js'
import type { Executor } from './executor.js'
import { RunLoop } from './run-loop.js'
import { Scheduler } from './scheduler.js'

export interface Engine {
  id: string
  runs: RunLoop
  stop(): Promise<void>
}

export interface EngineOptions {
  sql: Sql
  log: Logger
  executors?: Partial<Record<'llm' | 'deterministic', Executor>>
}

/** Everything osd does in the background (DESIGN 1, 5, 7): runs, schedules, timers. */
export async function startEngine({ sql, log, executors = {} }: EngineOptions): Promise<Engine> {
  // Names this process in leases and events, so a takeover says whose run it took.
  const id = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`
  const runs = new RunLoop({ sql, log, engineId: id, executors })
  const scheduler = new Scheduler(sql, log)
  await runs.start()
  await scheduler.start()
  log.info({ engine: id }, 'engine started')
  return {
    id,
    runs,
    async stop() {
      await scheduler.stop()
      await runs.stop()
    },
  }
}
