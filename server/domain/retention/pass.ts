import { finishedStatuses } from '../../../shared/values.js'
import { tryLockRetention } from '../../db/locks.js'
import { literalIn, transaction, type Db, type Fragment, type Sql, type Tx } from '../../db/sql.js'
import { appendMembers, archiveFile, memberTargetBytes } from './files.js'
import { Pace, type PaceOptions } from './pace.js'
import { listRetention } from './settings.js'

// The retention pass (issue 46; DESIGN 15): what is past its enterprise's window leaves the live
// tables, in small transactions, each written to the archive first when the enterprise keeps one.
//
// - Runs leave by execution: an execution whose runs have all finished, the last of them longer ago
//   than finishedRuns, with no gate waiting, moves whole (its runs with their events, journal, log and
//   gates, and its closure). Successors and retries join their predecessor's execution, and a run's
//   previousRunId and resumeFromRunId name a run of its own execution, so nothing a run still under
//   way (or waiting at a gate) reads ever leaves before it.
// - A closed chat leaves with its messages, turns and question gates once closed longer than
//   closedChats; grants are the caller's, not the chat's, and stay.
// - Webhook deliveries leave after webhookDeliveries; those of calls that never authenticated after
//   three days whatever the setting, and are never archived (what a stranger sends is not kept).
// - A schedule's fires and a finished bulk operation (with its items) leave with the finished-runs
//   window, as the runs they started or acted on do: without it they would grow for ever (a schedule
//   every minute fires 525,600 times a year). A fire stays an hour at least (fireKeptAtLeast). A bulk
//   operation that left answers 404.
// - Spend totals, memory notes and their evidence, recommendations, plans and mail stay: their run ids
//   may then name an archived run.
//
// Two processes never move the same rows: a batch first tries its enterprise's retention lock
// (docs/locks.md) and leaves the enterprise to whoever holds it; the rows a batch moves are locked, and
// those another transaction holds are skipped (`skip locked`).

/** Executions (or chats, or deliveries) moved per transaction: small, so a pass never holds the engine. */
export const defaultBatchSize = 500

/** What a call that never authenticated left is kept this long, whatever the enterprise's setting. */
export const unauthenticatedWindow = 'P3D'

/** A pass: what it moves, and its pace (pace.ts: duty, catchUpMs, signal, onDuty). */
export interface PassOptions extends PaceOptions {
  /** OSD_ARCHIVE_DIR: where the archive files are written. */
  archiveDir: string
  /** Only this enterprise (osd admin prune --enterprise). */
  enterpriseId?: string
  batchSize?: number
}

/** The engines' background pass: a tenth of the time working, the rest resting (PassOptions.duty). */
export const backgroundDuty = 0.1

/** What a pass moved (or, dry, would move) of one enterprise, by kind. */
export interface Moved {
  enterpriseId: string
  slug: string
  archive: boolean
  runs: number
  executions: number
  chats: number
  webhookDeliveries: number
  /** Deliveries of calls that never authenticated (three days, never archived). */
  unauthenticatedDeliveries: number
  /** Schedule fires older than the finished-runs window. */
  scheduleFires: number
  /** Finished bulk operations (their items with them) older than the finished-runs window. */
  bulkOperations: number
  /** Another process held the enterprise's retention lock: its work was left to that one. */
  busy: boolean
}

interface Enterprise {
  enterpriseId: string
  slug: string
  finishedRuns: string | null
  closedChats: string | null
  webhookDeliveries: string | null
  archive: boolean
}

const cutoffOf = (db: Db, window: string) => db`(now() - ${window}::interval)`

/**
 * Whether every run of `execution` has finished before `cutoff` and none of its gates waits: the
 * execution may leave. A run not finished, or finished later, or a gate waiting, keeps it.
 */
function executionDone(db: Db, execution: Fragment, cutoff: Fragment): Fragment {
  return db`
    not exists (
      select 1 from runs o
       where o.execution_id = ${execution}
         and (not (${literalIn(db, 'o.status', finishedStatuses)})
              or coalesce(o.finished_at, o.updated_at) >= ${cutoff}))
    and not exists (
      select 1 from runs o join gates g on g.run_id = o.id
       where o.execution_id = ${execution} and g.status = 'waiting')`
}

/** The first runs (an execution's id is its first run's) of executions that may leave. */
function leavingExecutions(db: Db, enterpriseId: string, cutoff: Fragment): Fragment {
  // Every run of such an execution was created before its end, so before the cut-off: a batch walks
  // runs_enterprise_created from the oldest, up to the cut-off (moveRuns), and tests what it walked.
  return db`
    r.enterprise_id = ${enterpriseId} and r.created_at < ${cutoff} and r.id = r.execution_id
    and ${literalIn(db, 'r.status', finishedStatuses)}
    and ${executionDone(db, db`r.id`, cutoff)}`
}

function leavingChats(db: Db, enterpriseId: string, cutoff: Fragment): Fragment {
  return db`
    c.enterprise_id = ${enterpriseId} and c.status = 'closed' and c.closed_at < ${cutoff}
    and not exists (select 1 from chat_turns t where t.chat_id = c.id and t.status <> 'done')`
}

/** Deliveries past their window: the enterprise's, and the short one of unauthenticated calls. */
function leavingDeliveries(db: Db, enterpriseId: string, window: string | null): Fragment {
  return db`
    d.enterprise_id = ${enterpriseId} and d.status <> 'in_progress'
    and (${window ? db`d.received_at < ${cutoffOf(db, window)}` : db`false`}
         or (not d.authenticated and d.received_at < ${cutoffOf(db, unauthenticatedWindow)}))`
}

/**
 * A fire stays at least this long whatever the window: its row is how a process that stalled (and
 * fires the minutes it missed, up to ten: engine/scheduler.ts) finds the minute fired already. Gone
 * sooner, a window of a minute would let that process start the minute's run a second time.
 */
const fireKeptAtLeast = '1 hour'

function leavingFires(db: Db, enterpriseId: string, cutoff: Fragment): Fragment {
  return db`
    f.enterprise_id = ${enterpriseId} and f.fire_at < ${cutoff}
    and f.fire_at < now() - ${fireKeptAtLeast}::interval`
}

function leavingBulkOperations(db: Db, enterpriseId: string, cutoff: Fragment): Fragment {
  return db`
    o.enterprise_id = ${enterpriseId} and o.status = 'completed' and o.finished_at < ${cutoff}`
}

/** One JSON line of the archive: its kind and id first, so a read finds it without parsing others. */
function archiveLine(
  type: 'run' | 'chat' | 'delivery' | 'scheduleFire' | 'bulkOperation',
  id: string,
  data: string,
  extra = '',
): string {
  return `{"type":"${type}","id":"${id}"${extra},"data":${data}}\n`
}

/**
 * Writes a batch's lines to the enterprise's archive file of the day (groups of lines kept together in
 * one member: an execution's runs), fsynced before the caller deletes their rows, and indexes the runs
 * and chats among them. In the batch's transaction, under the enterprise's retention lock.
 */
async function archive(
  tx: Tx,
  enterpriseId: string,
  archiveDir: string,
  groups: { ids: string[]; lines: string[] }[],
): Promise<void> {
  if (groups.length === 0) return
  const members: { ids: string[]; lines: string[]; bytes: number }[] = []
  for (const group of groups) {
    const bytes = group.lines.reduce((n, line) => n + line.length, 0)
    const last = members.at(-1)
    if (last && last.bytes + bytes <= memberTargetBytes) {
      last.ids.push(...group.ids)
      last.lines.push(...group.lines)
      last.bytes += bytes
    } else members.push({ ids: [...group.ids], lines: [...group.lines], bytes })
  }
  const file = archiveFile(enterpriseId, new Date())
  const [last] = await tx<{ end: number }[]>`
    select byte_offset + byte_length as end from archive_members
     where file = ${file} order by byte_offset desc limit 1`
  const written = await appendMembers(
    archiveDir,
    file,
    last?.end ?? 0,
    members.map((m) => m.lines),
  )
  const ids = members.flatMap((m) => m.ids)
  const offsets = members.flatMap((m, i) => m.ids.map(() => written[i]!.offset))
  await tx`
    with m as (
      insert into archive_members (enterprise_id, file, byte_offset, byte_length)
      select ${enterpriseId}, ${file}, w.byte_offset, w.byte_length
        from unnest(${tx.array(written.map((w) => w.offset))}::bigint[],
                    ${tx.array(written.map((w) => w.length))}::int[]) as w(byte_offset, byte_length)
      returning id, byte_offset)
    insert into archive_index (id, member_id)
    select x.id, m.id from unnest(${tx.array(ids)}::uuid[], ${tx.array(offsets)}::bigint[]) as x(id, byte_offset)
      join m on m.byte_offset = x.byte_offset`
}

/**
 * One batch of an enterprise's work: a transaction that first tries the enterprise's retention lock,
 * and answers undefined, doing nothing, when another process holds it.
 */
function underRetentionLock<T>(
  sql: Sql,
  e: Enterprise,
  batch: (tx: Tx) => Promise<T>,
): Promise<T | undefined> {
  return transaction(sql, async (tx) =>
    (await tryLockRetention(tx, e.enterpriseId)) ? batch(tx) : undefined,
  )
}

/**
 * How many of an enterprise's executions are past the finished-runs window by their first run (the
 * catch-up's count: an index range, without the checks a batch makes of each).
 */
async function executionsLeft(sql: Sql, e: Enterprise): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from runs r
     where r.enterprise_id = ${e.enterpriseId} and r.created_at < ${cutoffOf(sql, e.finishedRuns!)}
       and r.id = r.execution_id and ${literalIn(sql, 'r.status', finishedStatuses)}`
  return row!.n
}

/** Where a pass's walk over an enterprise's runs stopped: the last run it read, in index order. */
interface RunsWalked {
  createdAt: string
  id: string
}

/**
 * Moves one batch of an enterprise's finished executions; undefined when another process has it.
 * The batch looks at the next `batchSize` runs past the window from where the pass's last batch
 * stopped (`after`), and answers where it stopped.
 */
async function moveRuns(
  sql: Sql,
  e: Enterprise,
  options: PassOptions,
  after: RunsWalked | undefined,
): Promise<
  { candidates: number; executions: number; runs: number; walked?: RunsWalked } | undefined
> {
  const batch = options.batchSize ?? defaultBatchSize
  return underRetentionLock(sql, e, async (tx) => {
    const cutoff = cutoffOf(tx, e.finishedRuns!)
    // The walk names only runs_enterprise_created's columns, so its plan is that index's range
    // however the statistics stand. With the whole test in one statement, the planner misjudged how
    // many runs pass it (an execution's first run, finished, its execution done), read every run of
    // the enterprise and sorted them: 2.5 s a batch at 190,000 live runs, slower the further behind
    // (bench:retention steady). The cursor's time goes as text both ways: a parameter typed timestamptz
    // goes through a JavaScript Date, which drops its microseconds, and the walk would not move.
    const walk = await tx<{ id: string; at: string }[]>`
      select r.id, r.created_at::text as at from runs r
       where r.enterprise_id = ${e.enterpriseId} and r.created_at < ${cutoff}
         ${after ? tx`and (r.created_at, r.id) > (${after.createdAt}::text::timestamptz, ${after.id}::uuid)` : tx``}
       order by r.created_at, r.id
       limit ${batch}`
    if (walk.length === 0) return { candidates: 0, executions: 0, runs: 0 }
    const walked = { createdAt: walk[walk.length - 1]!.at, id: walk[walk.length - 1]!.id }
    const first = await tx<{ id: string }[]>`
      select r.id from runs r
       where r.id = any(${tx.array(walk.map((r) => r.id))}::uuid[])
         and ${leavingExecutions(tx, e.enterpriseId, cutoff)}
       order by r.created_at
         for update of r skip locked`
    if (first.length === 0) return { candidates: walk.length, executions: 0, runs: 0, walked }
    // Every run of those executions, locked: a retry of one of them (which locks the run it retries)
    // now waits for this batch, and finds the run gone.
    const locked = await tx<{ id: string; executionId: string }[]>`
      select id, execution_id from runs
       where execution_id = any(${tx.array(first.map((r) => r.id))}::uuid[])
         for update`
    const counts = new Map<string, number>()
    for (const run of locked) counts.set(run.executionId, (counts.get(run.executionId) ?? 0) + 1)
    // Looked at again, in a statement that sees what committed while the locks were taken: a run
    // added to an execution meanwhile, or a run not finished after all, keeps the execution.
    const still = await tx<{ id: string }[]>`
      select x.id from unnest(${tx.array([...counts.keys()])}::uuid[],
                              ${tx.array([...counts.values()])}::int[]) as x(id, n)
       where (select count(*) from runs o where o.execution_id = x.id) = x.n
         and ${executionDone(tx, tx`x.id`, cutoff)}`
    const executions = still.map((x) => x.id)
    const leaving = new Set(executions)
    const runIds = locked.filter((r) => leaving.has(r.executionId)).map((r) => r.id)
    if (runIds.length === 0) return { candidates: walk.length, executions: 0, runs: 0, walked }
    if (e.archive) {
      const records = await tx<{ id: string; executionId: string; data: string }[]>`
        select r.id, r.execution_id, jsonb_build_object(
                 'run', to_jsonb(r),
                 'events', coalesce((select jsonb_agg(to_jsonb(x) order by x.seq)
                                       from run_events x where x.run_id = r.id), '[]'),
                 'journal', coalesce((select jsonb_agg(to_jsonb(x) order by x.step)
                                        from run_journal x where x.run_id = r.id), '[]'),
                 'log', (select to_jsonb(x) from run_logs x where x.run_id = r.id),
                 'gates', coalesce((select jsonb_agg(to_jsonb(x) order by x.created_at, x.id)
                                      from gates x where x.run_id = r.id), '[]'),
                 'closure', (select to_jsonb(x) from execution_closures x where x.execution_id = r.id)
               )::text as data
          from runs r where r.id = any(${tx.array(runIds)}::uuid[])
         order by r.execution_id, r.created_at, r.id`
      const byExecution = new Map<string, { ids: string[]; lines: string[] }>()
      for (const r of records) {
        let group = byExecution.get(r.executionId)
        if (!group) byExecution.set(r.executionId, (group = { ids: [], lines: [] }))
        group.ids.push(r.id)
        group.lines.push(archiveLine('run', r.id, r.data, `,"executionId":"${r.executionId}"`))
      }
      await archive(tx, e.enterpriseId, options.archiveDir, [...byExecution.values()])
    }
    const ids = tx.array(runIds)
    const [deleted] = await tx<{ n: number }[]>`
      with events as (delete from run_events where run_id = any(${ids}::uuid[])),
           journal as (delete from run_journal where run_id = any(${ids}::uuid[])),
           logs as (delete from run_logs where run_id = any(${ids}::uuid[])),
           gates as (delete from gates where run_id = any(${ids}::uuid[])),
           closures as (delete from execution_closures
                         where execution_id = any(${tx.array(executions)}::uuid[])),
           moved as (delete from runs where id = any(${ids}::uuid[]) returning id)
      select count(*)::int as n from moved`
    return { candidates: walk.length, executions: executions.length, runs: deleted!.n, walked }
  })
}

/** Moves one batch of an enterprise's closed chats; undefined when another process has it. */
async function moveChats(
  sql: Sql,
  e: Enterprise,
  options: PassOptions,
): Promise<{ candidates: number; chats: number } | undefined> {
  const batch = Math.max(1, Math.floor((options.batchSize ?? defaultBatchSize) / 5))
  return underRetentionLock(sql, e, async (tx) => {
    const chats = await tx<{ id: string }[]>`
      select c.id from chats c where ${leavingChats(tx, e.enterpriseId, cutoffOf(tx, e.closedChats!))}
       order by c.closed_at
       limit ${batch}
         for update of c skip locked`
    if (chats.length === 0) return { candidates: 0, chats: 0 }
    const ids = tx.array(chats.map((c) => c.id))
    if (e.archive) {
      const records = await tx<{ id: string; data: string }[]>`
        select c.id, jsonb_build_object(
                 'chat', to_jsonb(c),
                 'messages', coalesce((select jsonb_agg(to_jsonb(x) order by x.seq)
                                         from chat_messages x where x.chat_id = c.id), '[]'),
                 'turns', coalesce((select jsonb_agg(to_jsonb(x) order by x.created_at, x.id)
                                      from chat_turns x where x.chat_id = c.id), '[]'),
                 'gates', coalesce((select jsonb_agg(to_jsonb(x) order by x.created_at, x.id)
                                      from gates x where x.chat_id = c.id), '[]')
               )::text as data
          from chats c where c.id = any(${ids}::uuid[])
         order by c.closed_at, c.id`
      await archive(
        tx,
        e.enterpriseId,
        options.archiveDir,
        records.map((r) => ({ ids: [r.id], lines: [archiveLine('chat', r.id, r.data)] })),
      )
    }
    // A chat's messages and turns go with it (on delete cascade).
    const [deleted] = await tx<{ n: number }[]>`
      with gates as (delete from gates where chat_id = any(${ids}::uuid[])),
           readers as (delete from chat_readers where chat_id = any(${ids}::uuid[])),
           moved as (delete from chats where id = any(${ids}::uuid[]) returning id)
      select count(*)::int as n from moved`
    return { candidates: chats.length, chats: deleted!.n }
  })
}

/** Moves one batch of an enterprise's old webhook deliveries; undefined when another process has it. */
async function moveDeliveries(
  sql: Sql,
  e: Enterprise,
  options: PassOptions,
): Promise<{ candidates: number; authenticated: number; unauthenticated: number } | undefined> {
  const batch = (options.batchSize ?? defaultBatchSize) * 2
  return underRetentionLock(sql, e, async (tx) => {
    // The sealed body (a replay's copy, under the server key) is not archived: a replay needs the
    // delivery live anyway.
    const rows = await tx<{ id: string; authenticated: boolean; data: string }[]>`
      with d as (
        select d.id from webhook_deliveries d
         where ${leavingDeliveries(tx, e.enterpriseId, e.webhookDeliveries)}
         order by d.received_at
         limit ${batch}
           for update skip locked)
      delete from webhook_deliveries w using d where w.id = d.id
      returning w.id, w.authenticated, (to_jsonb(w) - 'sealed_body')::text as data`
    const kept = e.archive ? rows.filter((r) => r.authenticated) : []
    if (kept.length > 0)
      await archive(tx, e.enterpriseId, options.archiveDir, [
        { ids: [], lines: kept.map((r) => archiveLine('delivery', r.id, r.data)) },
      ])
    const authenticated = rows.filter((r) => r.authenticated).length
    return {
      candidates: rows.length,
      authenticated,
      unauthenticated: rows.length - authenticated,
    }
  })
}

/**
 * Moves one batch of an enterprise's schedule fires and finished bulk operations older than the
 * finished-runs window; undefined when another process has the enterprise.
 */
async function moveRecords(
  sql: Sql,
  e: Enterprise,
  options: PassOptions,
): Promise<{ candidates: number; fires: number; bulkOperations: number } | undefined> {
  const batch = (options.batchSize ?? defaultBatchSize) * 2
  // An operation's items come with it, up to the runs a filter matched: a few at a time.
  const operations = Math.max(1, Math.floor(batch / 100))
  return underRetentionLock(sql, e, async (tx) => {
    const cutoff = cutoffOf(tx, e.finishedRuns!)
    const fires = await tx<{ id: string; data: string }[]>`
      with leaving as (
        select f.task_id, f.fire_at from schedule_fires f
         where ${leavingFires(tx, e.enterpriseId, cutoff)}
         order by f.fire_at
         limit ${batch}
           for update skip locked)
      delete from schedule_fires s using leaving l
       where s.task_id = l.task_id and s.fire_at = l.fire_at
      returning s.task_id || '@' || to_char(s.fire_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as id,
                to_jsonb(s)::text as data`
    const bulk = await tx<{ id: string; data: string }[]>`
      with leaving as (
        select o.id from run_bulk_operations o
         where ${leavingBulkOperations(tx, e.enterpriseId, cutoff)}
         order by o.finished_at
         limit ${operations}
           for update skip locked)
      select o.id, jsonb_build_object(
               'operation', to_jsonb(o),
               'items', coalesce((select jsonb_agg(to_jsonb(i) order by i.run_id)
                                    from run_bulk_items i where i.operation_id = o.id), '[]')
             )::text as data
        from run_bulk_operations o where o.id in (select id from leaving)
       order by o.id`
    // The items go with their operation (on delete cascade).
    if (bulk.length > 0)
      await tx`delete from run_bulk_operations where id = any(${tx.array(bulk.map((b) => b.id))}::uuid[])`
    const lines = [
      ...fires.map((f) => archiveLine('scheduleFire', f.id, f.data)),
      ...bulk.map((b) => archiveLine('bulkOperation', b.id, b.data)),
    ]
    if (e.archive && lines.length > 0)
      await archive(tx, e.enterpriseId, options.archiveDir, [{ ids: [], lines }])
    return {
      candidates: Math.max(fires.length, bulk.length === operations ? batch : 0),
      fires: fires.length,
      bulkOperations: bulk.length,
    }
  })
}

/**
 * A pass that could not finish some enterprises' work: the others' went on (one enterprise whose
 * batches fail, its archive file unwritable or a statement refused, must not leave every enterprise
 * after it to grow). `moved` is what the pass did move.
 */
export class RetentionPassError extends Error {
  constructor(
    readonly moved: Moved[],
    readonly failures: { enterpriseId: string; slug: string; error: unknown }[],
  ) {
    super(
      `the retention pass failed for ${failures.length === 1 ? 'enterprise' : 'enterprises'} ` +
        failures
          .map((f) => `${f.slug} (${f.error instanceof Error ? f.error.message : String(f.error)})`)
          .join(', ') +
        '; the others were done',
      { cause: failures[0]?.error },
    )
    this.name = 'RetentionPassError'
  }
}

/** Every row a pass has moved of the enterprise so far, of any kind. */
const movedSoFar = (m: Moved) =>
  m.runs +
  m.chats +
  m.webhookDeliveries +
  m.unauthenticatedDeliveries +
  m.scheduleFires +
  m.bulkOperations

const nothing = (e: Enterprise): Moved => ({
  enterpriseId: e.enterpriseId,
  slug: e.slug,
  archive: e.archive,
  runs: 0,
  executions: 0,
  chats: 0,
  webhookDeliveries: 0,
  unauthenticatedDeliveries: 0,
  scheduleFires: 0,
  bulkOperations: 0,
  busy: false,
})

/**
 * One pass over every enterprise (or one): batches until nothing is left past its window, or the
 * signal stops it between two batches. Answers what moved, per enterprise where anything did (or where
 * another process had the enterprise). An enterprise whose batch fails is left for the next pass and
 * the others are done; then RetentionPassError names it, with what moved.
 */
export async function retentionPass(sql: Sql, options: PassOptions): Promise<Moved[]> {
  const batch = options.batchSize ?? defaultBatchSize
  const pace = new Pace(options)
  const report: Moved[] = []
  const failures: RetentionPassError['failures'] = []
  for (const e of await listRetention(sql, options.enterpriseId)) {
    const moved = nothing(e)
    try {
      await moveAll(e, moved)
    } catch (error) {
      failures.push({ enterpriseId: e.enterpriseId, slug: e.slug, error })
    }
    if (moved.busy || movedSoFar(moved) > 0) report.push(moved)
  }
  if (failures.length > 0) throw new RetentionPassError(report, failures)
  return report

  /** An enterprise's batches, kind after kind, until nothing is left or the signal stops them. */
  async function moveAll(e: Enterprise, moved: Moved): Promise<void> {
    /**
     * One kind's batches until one comes back short of `full`: true. False when the signal stopped
     * them or another process has the enterprise (busy), and the enterprise's other kinds wait too.
     */
    async function drain<T extends { candidates: number }>(
      move: () => Promise<T | undefined>,
      full: number,
      count: (done: T) => void,
    ): Promise<boolean> {
      for (;;) {
        if (options.signal?.aborted) return false
        const began = performance.now()
        const done = await move()
        if (!done) {
          moved.busy = true
          return false
        }
        const before = movedSoFar(moved)
        count(done)
        if (done.candidates < full) return true
        await pace.rest(began, movedSoFar(moved) > before)
      }
    }
    if (e.finishedRuns) {
      pace.counting(() => executionsLeft(sql, e))
      let walked: RunsWalked | undefined
      const runs = await drain(
        async () => {
          const done = await moveRuns(sql, e, options, walked)
          walked = done?.walked ?? walked
          return done
        },
        batch,
        (done) => {
          moved.runs += done.runs
          moved.executions += done.executions
        },
      )
      pace.counting(undefined)
      if (!runs) return
      const records = await drain(
        () => moveRecords(sql, e, options),
        batch * 2,
        (done) => {
          moved.scheduleFires += done.fires
          moved.bulkOperations += done.bulkOperations
        },
      )
      if (!records) return
    }
    if (e.closedChats) {
      const chats = await drain(
        () => moveChats(sql, e, options),
        Math.max(1, Math.floor(batch / 5)),
        (done) => {
          moved.chats += done.chats
        },
      )
      if (!chats) return
    }
    await drain(
      () => moveDeliveries(sql, e, options),
      batch * 2,
      (done) => {
        moved.webhookDeliveries += done.authenticated
        moved.unauthenticatedDeliveries += done.unauthenticated
      },
    )
  }
}

/**
 * What a pass would move now, per enterprise and kind (osd admin prune --dry-run): counted with the
 * pass's own conditions, nothing locked or moved. Every enterprise is answered.
 */
export async function planRetention(
  db: Db,
  options: { enterpriseId?: string } = {},
): Promise<Moved[]> {
  const plans: Moved[] = []
  for (const e of await listRetention(db, options.enterpriseId)) {
    const plan = nothing(e)
    if (e.finishedRuns) {
      const [row] = await db<{ executions: number; runs: number }[]>`
        with x as (
          select r.id from runs r
           where ${leavingExecutions(db, e.enterpriseId, cutoffOf(db, e.finishedRuns))})
        select (select count(*)::int from x) as executions,
               (select count(*)::int from runs o where o.execution_id in (select id from x)) as runs`
      plan.executions = row!.executions
      plan.runs = row!.runs
      const cutoff = cutoffOf(db, e.finishedRuns)
      const [records] = await db<{ fires: number; bulkOperations: number }[]>`
        select (select count(*)::int from schedule_fires f
                 where ${leavingFires(db, e.enterpriseId, cutoff)}) as fires,
               (select count(*)::int from run_bulk_operations o
                 where ${leavingBulkOperations(db, e.enterpriseId, cutoff)}) as bulk_operations`
      plan.scheduleFires = records!.fires
      plan.bulkOperations = records!.bulkOperations
    }
    if (e.closedChats) {
      const [row] = await db<{ n: number }[]>`
        select count(*)::int as n from chats c
         where ${leavingChats(db, e.enterpriseId, cutoffOf(db, e.closedChats))}`
      plan.chats = row!.n
    }
    const [deliveries] = await db<{ authenticated: number; unauthenticated: number }[]>`
      select count(*) filter (where d.authenticated)::int as authenticated,
             count(*) filter (where not d.authenticated)::int as unauthenticated
        from webhook_deliveries d
       where ${leavingDeliveries(db, e.enterpriseId, e.webhookDeliveries)}`
    plan.webhookDeliveries = deliveries!.authenticated
    plan.unauthenticatedDeliveries = deliveries!.unauthenticated
    plans.push(plan)
  }
  return plans
}
