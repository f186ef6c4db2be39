import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type {
  BulkAction,
  RunBulkCount,
  RunBulkOperation,
  RunFilter,
} from '../../shared/schemas/run-bulk.js'
import { finishedStatuses, runStatuses, type RunStatus } from '../../shared/values.js'
import { confirmDestructive } from '../command.js'
import type { Deps } from '../deps.js'
import { CliError, UsageError, exitCodes } from '../errors.js'
import { printFields, show } from '../output.js'
import { taskId } from '../resolve.js'
import { startSpinner } from '../spinner.js'

// `osctl runs cancel|retry` with a filter instead of a run id (issue 50: Act on a filter): the count
// first (a dry run), a question on a terminal (--yes otherwise), then the operation followed to its
// end, and what became of the runs: matched, done, failed, skipped.

export interface BulkFlags {
  task?: string
  status?: RunStatus
  origin?: string
  since?: string
  until?: string
  dryRun?: boolean
  yes?: boolean
  /** Why: kept with the operation (and in each cancelled run's reason). */
  reason?: string
}

/** Whether any flag of the filter form was given (then no run id may be). */
export function hasFilter(opts: BulkFlags): boolean {
  return [opts.task, opts.status, opts.origin, opts.since, opts.until].some((v) => v !== undefined)
}

const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }

/**
 * A time from --since/--until: an ISO 8601 time or date, or how long ago (30m, 2h, 7d), as `docker
 * logs --since` takes it.
 */
export function timeFlag(flag: string, value: string, now = Date.now()): string {
  const ago = /^(\d+)([smhdw])$/.exec(value.trim())
  if (ago) return new Date(now - Number(ago[1]) * units[ago[2]!]! * 1000).toISOString()
  const at = Date.parse(value)
  if (Number.isNaN(at))
    throw new UsageError(
      `--${flag} takes an ISO 8601 time (2026-11-28T09:00:00Z, 2026-11-28) or an age (30m, 2h, 7d); got "${value}"`,
    )
  return new Date(at).toISOString()
}

/**
 * The statuses each action acts on, as osd matches them (server/domain/runs/bulk.ts): a cancel the runs
 * not ended, a retry the ended ones.
 */
const actsOn: Record<BulkAction, readonly RunStatus[]> = {
  cancel: runStatuses.filter((s) => !finishedStatuses.includes(s)),
  retry: finishedStatuses,
}

/**
 * What osctl says when nothing matches, in the filter's words: the runs the action acts on (of the
 * status given, else every one it acts on), and for a retry, that a run retried already is left to
 * its retry (osd retries a chain of retries once, from its last run).
 */
function noneMatches(action: BulkAction, status: RunStatus | undefined): string {
  const runs =
    action === 'cancel'
      ? status
        ? `no ${status} run`
        : 'no run that has not ended'
      : `no ${status ?? 'ended'} run not yet retried`
  return `${runs} matches the filter: nothing to ${action}`
}

/** How often a followed operation is read again. */
const pollMs = 500

export async function bulkRuns(deps: Deps, action: BulkAction, opts: BulkFlags): Promise<void> {
  // A status the action never acts on could match nothing: the flags contradict each other, as
  // --timeout without --wait does, so it is said as a usage error before anything is sent.
  if (opts.status && !actsOn[action].includes(opts.status))
    throw new UsageError(
      `--status ${opts.status}: a ${action} acts on ${action === 'cancel' ? 'runs not ended' : 'ended runs'} only (${actsOn[action].join(', ')})`,
    )
  const client = deps.client()
  const filter: RunFilter = {}
  if (opts.task) filter.taskId = await taskId(client, opts.task)
  if (opts.status) filter.status = opts.status
  if (opts.origin) filter.origin = opts.origin as RunFilter['origin']
  if (opts.since) filter.startedAfter = timeFlag('since', opts.since)
  if (opts.until) filter.startedBefore = timeFlag('until', opts.until)
  const count = await client.post<RunBulkCount>('/runs/bulk', {
    action,
    filter,
    dryRun: true,
    idempotencyKey: randomUUID(),
  })
  // An older osd answers no bound: it has none.
  const tooMany = count.maxRuns !== undefined && count.matched > count.maxRuns
  if (opts.dryRun) {
    show(deps.out, count, () =>
      deps.out.write(
        `${count.matched} run${count.matched === 1 ? '' : 's'} would be ${action === 'cancel' ? 'cancelled' : 'retried'}${tooMany ? `: more than one operation acts on (${count.maxRuns}); narrow the filter` : ''}\n`,
      ),
    )
    return
  }
  // Said before asking: the operation would be refused (400 bulk_too_many_runs).
  if (tooMany)
    throw new CliError(
      `${count.matched} runs match, more than one operation acts on (${count.maxRuns}): narrow the filter (--since, --until, --status, --origin)`,
      exitCodes.failed,
    )
  if (count.matched === 0) {
    deps.out.error(`${noneMatches(action, opts.status)}\n`)
    show(deps.out, count, () => undefined)
    return
  }
  await confirmDestructive(
    deps,
    opts.yes,
    `${action === 'cancel' ? 'Cancel' : 'Retry'} ${count.matched} run${count.matched === 1 ? '' : 's'}`,
  )
  // A key of this invocation: a request sent again (a lost answer) answers the same operation.
  let op = await client.post<RunBulkOperation>('/runs/bulk', {
    action,
    filter,
    idempotencyKey: randomUUID(),
    ...(opts.reason ? { reason: opts.reason } : {}),
  })
  const spinner = startSpinner(deps.out, progress(op))
  // Ctrl+C stops the following, not the operation: it goes on in osd, and osctl says so.
  const stopped = new AbortController()
  const stopListening = deps.onInterrupt(() => stopped.abort())
  try {
    while (op.status !== 'completed') {
      await sleep(pollMs, undefined, { signal: stopped.signal })
      op = await client.get<RunBulkOperation>(`/runs/bulk/${op.id}`, undefined, stopped.signal)
      spinner.update(progress(op))
    }
  } catch (err) {
    if (!stopped.signal.aborted) throw err
    throw Object.assign(
      new CliError(
        `stopped following bulk operation ${op.id}: it goes on in osd`,
        exitCodes.interrupted,
      ),
      { hint: `read it again with: osctl api GET /runs/bulk/${op.id}` },
    )
  } finally {
    stopListening()
    spinner.stop()
  }
  show(deps.out, op, () =>
    printFields(deps.out, [
      ['operation', op.id],
      ['action', op.action],
      ['matched', op.matched],
      ['done', op.done],
      ['failed', op.failed],
      ['skipped', op.skipped],
    ]),
  )
  // Skipped runs moved meanwhile, which is no failure; a retry its task refused is.
  if (op.failed > 0)
    throw new CliError(
      `${op.failed} of ${op.matched} runs could not be ${action === 'cancel' ? 'cancelled' : 'retried'} (operation ${op.id})`,
      exitCodes.failed,
    )
}

function progress(op: RunBulkOperation): string {
  const settled = op.done + op.failed + op.skipped
  return `${op.action} ${settled}/${op.matched} (done ${op.done}, failed ${op.failed}, skipped ${op.skipped})`
}
