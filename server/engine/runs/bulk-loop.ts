import { setTimeout as sleep } from 'node:timers/promises'
import { defaultLeaseSeconds } from '../../config.js'
import { retryConflicts, type Sql } from '../../db/sql.js'
import {
  bulkBatch,
  bulkChannel,
  claimBulkOperations,
  holdsBulkOperation,
  listenBulkLocally,
  releaseBulkOperations,
  renewBulkOperations,
} from '../../domain/runs/index.js'
import type { Logger } from '../../log.js'
import { LeaseLoop, type Leased, type WorkKind } from '../lease-loop.js'

// Bulk operations on runs (issue 50: Act on a filter), as a kind of the lease loop: an operation is
// claimed with `for update skip locked` and a lease, renewed while this engine works through its
// items a batch per transaction (domain/runs/bulk.ts), and taken over by any engine once the lease
// lapses, so a crash mid-way loses at most the batch under way, which rolled back. Here and not in
// the API process: a request's process may stop at any time, and the work must go on without it.
//
// Its own loop with its own small capacity, beside the runs' loop and not inside its slots: an
// operation of 10,000 runs takes one connection a batch at a time and never a slot a run would run in.

export interface BulkLoopOptions {
  sql: Sql
  log: Logger
  engineId: string
  leaseSeconds?: number
  sweepMs?: number
  /** Operations this engine works on at once (2 unless told). */
  capacity?: number
  /** Runs per batch (the domain's bulkBatchSize unless told). */
  batchSize?: number
}

/** How long to wait before trying again when every run left was locked by another transaction. */
const busyWaitMs = 100

export class BulkLoop extends LeaseLoop<Leased> {
  constructor(options: BulkLoopOptions) {
    const { sql, engineId } = options
    const leaseSeconds = options.leaseSeconds ?? defaultLeaseSeconds
    const kind: WorkKind<Leased> = {
      name: 'bulk operation',
      logKey: 'bulkOperationId',
      channel: bulkChannel,
      listenLocally: listenBulkLocally,
      async claim(room) {
        const claimed = await claimBulkOperations(sql, engineId, leaseSeconds, room)
        return {
          claimed: claimed.map(({ id }) => ({ id, wakeKey: id })),
          more: claimed.length > 0 && claimed.length === room,
        }
      },
      async execute({ id }, signal) {
        while (!signal.aborted) {
          // A batch PostgreSQL stopped to break a deadlock did nothing: it goes again.
          const step = await retryConflicts(() => bulkBatch(sql, engineId, id, options.batchSize))
          if (step.completed) return
          // Every run left is locked by another transaction just now: it is tried again shortly.
          if (step.settled === 0) await sleep(busyWaitMs, undefined, { signal }).catch(() => {})
        }
      },
      renew: (ids) => renewBulkOperations(sql, engineId, ids, leaseSeconds),
      stillHeld: (id) => holdsBulkOperation(sql, engineId, id),
      release: (ids) => releaseBulkOperations(sql, engineId, ids),
    }
    super(kind, {
      sql,
      log: options.log,
      sweepMs: options.sweepMs,
      leaseSeconds,
      capacity: options.capacity ?? 2,
    })
  }
}
