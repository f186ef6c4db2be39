import { defaultLeaseSeconds } from '../../config.js'
import type { Sql } from '../../db/sql.js'
import {
  advance,
  holdsRun,
  keepRunTrace,
  nextDueRun,
  releaseLeases,
  renewLeases,
  takeOverLapsed,
} from '../../domain/runs/index.js'
import { engineChannel, listenLocally } from '../../domain/engine-wake.js'
import { releaseAbandoned } from '../../domain/models/index.js'
import type { RunRow } from '../../domain/runs/index.js'
import type { Logger } from '../../log.js'
import { completeDeterministic, passAttributes, type Executor } from './executor.js'
import { LeaseLoop, type Leased, type WorkKind } from '../lease-loop.js'
import { recordSpan, span, traceLog, traceParentOf, tracingOn } from '../../traces/index.js'

export interface RunLoopOptions {
  sql: Sql
  log: Logger
  engineId: string
  /** Executors by task kind, for runs that outlive their dispatch (kind llm). */
  executors: Partial<Record<RunRow['kind'], Executor>>
  /** The safety net: a pass this often even if no notification arrives. */
  sweepMs?: number
  /** How long a lease lasts; runs being executed renew theirs every third of it (DESIGN 5). */
  leaseSeconds?: number
  /** How many runs this engine executes at once (OSD_ENGINE_CONCURRENCY). */
  capacity?: number
}

/** A run this engine executes: dispatched here (`resumed` false), or taken over from a lapsed lease. */
interface RunWork extends Leased {
  run: RunRow
  resumed: boolean
}

/**
 * The engine's work on runs (DESIGN 5), as a kind of the lease loop: each step is admission (pending ->
 * queued) and dispatch (queued -> running) under locks, then the takeover of runs whose lease lapsed;
 * a run is executed by the executor of its task's kind. Every decision is a locking query: correctness
 * never depends on a notification. Dispatch and takeovers claim only for the free slots; admission and
 * deterministic runs (which end inside their dispatch) take none, so they go on at capacity too.
 */
export class RunLoop extends LeaseLoop<RunWork> {
  constructor(options: RunLoopOptions) {
    const { sql, log, engineId, executors } = options
    const leaseSeconds = options.leaseSeconds ?? defaultLeaseSeconds
    const work = (run: RunRow, resumed: boolean): RunWork => ({
      id: run.id,
      wakeKey: run.id,
      run,
      resumed,
    })
    // When this engine last released what ended runs kept reserved (releaseAbandoned): once a lease.
    let released = -Infinity
    const kind: WorkKind<RunWork> = {
      name: 'run',
      logKey: 'runId',
      channel: engineChannel,
      listenLocally,
      async claim(room) {
        const began = tracingOn() ? new Date() : undefined
        const step = await advance(sql, engineId, completeDeterministic, {
          leaseSeconds,
          slots: room,
        })
        // Each run the step dispatched, its admission in its own trace (issue 49): one step admits
        // and dispatches many runs, so the span is recorded once the step is done, with its times.
        if (began && step.started.length) {
          const end = new Date()
          for (const run of step.started)
            recordSpan(
              'run admission',
              { 'osd.run.id': run.id, 'osd.enterprise.id': run.enterpriseId },
              { start: began, end },
              run.traceParent,
            )
        }
        const left = room - step.started.length
        const lapsed = left > 0 ? await takeOverLapsed(sql, engineId, leaseSeconds, left) : []
        if (performance.now() - released >= leaseSeconds * 1000) {
          released = performance.now()
          await releaseAbandoned(sql, leaseSeconds)
        }
        const claimed = [
          ...step.started.map((run) => work(run, false)),
          ...lapsed.map((run) => work(run, true)),
        ].filter((w) => executors[w.run.kind])
        return { claimed, more: step.moved > 0 }
      },
      nextDue: () => nextDueRun(sql),
      // A pass (issue 49): a span in the run's own trace, stored with it, whichever engine makes it.
      execute: ({ run, resumed }, signal) =>
        span(
          'run pass',
          { ...passAttributes(run, undefined), 'osd.run.resumed': resumed },
          async (pass) => {
            // A run started while tracing was off: this pass's trace becomes the run's (issue 49).
            const traceParent = run.traceParent ? undefined : traceParentOf(pass.trace)
            if (traceParent) {
              await keepRunTrace(sql, engineId, run.id, traceParent)
              run.traceParent = traceParent
            }
            const status = await executors[run.kind]!.execute(run, {
              sql,
              log: traceLog(log, pass.trace),
              engineId,
              signal,
              resumed,
              trace: pass.trace,
            })
            pass.set({ 'osd.run.status': status })
          },
          { parent: run.traceParent },
        ),
      renew: (ids) => renewLeases(sql, engineId, ids, leaseSeconds),
      stillHeld: (id) => holdsRun(sql, engineId, id),
      release: (ids) => releaseLeases(sql, engineId, ids),
    }
    super(kind, { sql, log, sweepMs: options.sweepMs, leaseSeconds, capacity: options.capacity })
  }
}
