import { underWayStatuses } from '../../../shared/schemas/runs.js'
import { defaultLeaseSeconds } from '../../config.js'
import { metrics } from '../../metrics.js'
import { laneKey } from '../../db/locks.js'
import { genericPlans, literalIn, transaction, type Db } from '../../db/sql.js'
import { wakeEnginesFor } from '../engine-wake.js'
import { pausedWhere } from '../pauses/index.js'
import { appendEvents } from './events.js'
import { lockMembers, memberBusy, membersFor } from './members.js'
import { type RunRow } from './rows.js'
import { assigneeRoleJoin } from './start.js'
import { transitionAll, type Move } from './transitions.js'
import { finishAll } from './ends.js'

// Admission (pending -> queued), dispatch (queued -> running) and leases (DESIGN 5). Each step works on
// many runs in one transaction and a fixed number of statements, so the engine keeps up with starts
// however many arrive: a start costs one transaction, and so does every batch of runs the engine moves.

/** What one engine step did: how many runs it moved, and the runs it started for an executor. */
export interface Advanced {
  moved: number
  started: RunRow[]
}

/**
 * Completes queued deterministic runs in the dispatch's transaction (executor.completeDeterministic);
 * answers how many runs their successors started.
 */
export type Complete = (tx: Db, runs: RunRow[]) => Promise<number>

/** Queued runs of each sort one dispatch statement takes, when no smaller number of slots is given. */
const dispatchBatch = 200

/**
 * One engine step, in one transaction: holds whose back-off is over go back to pending, pending runs
 * are admitted and queued runs dispatched. While the deterministic runs it completes start successors
 * it goes round again, within `rounds` and `budgetMs`, so a pipeline of deterministic steps moves on
 * without a commit and a wake-up per step; runs that merely arrived meanwhile wait for the next step,
 * so what this one ended is committed without delay. Runs started for an executor are answered after
 * the commit, so an executor never sees a run its dispatch has not made visible.
 *
 * `slots`: how many runs the engine has room to execute (its free slots), across every round: dispatch
 * starts no more runs for an executor than that, so a run is never left running under a lease that
 * nobody executes (it would lapse and be taken over), and a second engine finds the rest. Admission is
 * not bounded by it (it only moves runs to queued), nor are deterministic runs, which end in the step.
 */
export async function advance(
  db: Db,
  engineId: string,
  complete: Complete,
  options: { leaseSeconds?: number; rounds?: number; budgetMs?: number; slots?: number } = {},
): Promise<Advanced> {
  const { rounds = 20, budgetMs = 25, slots = dispatchBatch, leaseSeconds } = options
  return transaction(db, async (tx) => {
    const until = performance.now() + budgetMs
    const [, held] = await Promise.all([genericPlans(tx), resumeDueHolds(tx)])
    const step: Advanced = { moved: held, started: [] }
    for (let round = 0; round < rounds; round++) {
      // Rounds after the first hold the locks of those before, taken in another order than the rows
      // they want now: waiting could close a circle with another engine's step (a deadlock). They take
      // what is free and leave the rest to the next step, which waits in its first round.
      const wait = round === 0
      const admitted = await admitPending(tx, { wait })
      const dispatched = await dispatchQueued(tx, engineId, complete, {
        leaseSeconds,
        wait,
        slots: slots - step.started.length,
      })
      step.moved += admitted + dispatched.completed + dispatched.started.length
      step.started.push(...dispatched.started)
      if (dispatched.followed === 0 || performance.now() > until) break
    }
    return step
  })
}

/**
 * Admits pending runs: the oldest due run of each lane becomes queued when no run of its lane is
 * queued, running, blocked or paused, and a holder of the role is free (the holder it already had, for
 * a run coming back from a gate), unless its task or enterprise is paused (issue 50). Lane heads that
 * cannot move now (their lane is busy, its task paused, or nobody who could take them is free) are
 * passed over before the oldest are taken, so a backlog that waits (one
 * enterprise's busy holder, say) never keeps other runs from being looked at. Lanes are taken with
 * try-locks, so engines and starts working on a lane are skipped, never waited for; the lanes are read
 * again by a later statement, whose snapshot sees every change made under those locks. Answers how many
 * runs moved (admitted or failed).
 */
export async function admitPending(
  db: Db,
  { limit = 200, wait = true }: { limit?: number; wait?: boolean } = {},
): Promise<number> {
  const began = performance.now()
  const moved = await transaction(db, async (tx) => {
    const lanes = await tx<{ id: string }[]>`
      with heads as materialized (
        select distinct on (lane) id, lane, created_at, enterprise_id, task_id, member_id, overlap_policy
          from runs
         where status = 'pending' and (not_before is null or not_before <= now())
         order by lane, created_at, id
      ), busy as materialized (
        -- Read once, not per head: a per-head probe of runs is planned as a scan of runs per head when
        -- the statistics still see runs nearly empty (a burst of fires), which took seconds a step.
        select distinct lane from runs where status in ('queued', 'running', 'blocked', 'paused_spend')
      ), ready as materialized (
        -- Oldest heads first, tested one by one until the limit is met: the member test (a task, its
        -- role, the role's holders) is made for a head only when it is reached, and only for a head
        -- whose policy waits for a free holder. Joined before the limit, it was made for every head:
        -- 5,300 heads of a burst of fires, 30-60 ms a round (issue 30).
        select h.id, h.lane
          from (select * from heads order by created_at, id) h
         where h.lane not in (select lane from busy)
           -- A paused task's lane (a lane is one task's) waits for the resume (issue 50).
           and not ${pausedWhere(tx, tx`h.enterprise_id`, tx`h.task_id`)}
           and (h.overlap_policy = 'os'
                or case when h.member_id is not null then not ${memberBusy(tx, tx`h.member_id`)}
                        -- no role (or no task): admission fails the run, so it is taken too
                        else not exists (
                               select 1 from tasks t ${assigneeRoleJoin(tx)}
                                where t.id = h.task_id and assignee_role.id is not null
                                  and not exists (
                                        select 1 from role_members rm
                                          join members m on m.id = rm.member_id
                                         where rm.role_id = assignee_role.id and m.removed_at is null
                                           and not ${memberBusy(tx, tx`rm.member_id`)}))
                   end)
         limit ${limit})
      select id from ready where pg_try_advisory_xact_lock(${laneKey(tx, tx`lane`)})`
    if (lanes.length === 0) return 0
    const candidates = await tx<
      (RunRow & { roleId: string | null; assigneeRole: string | null })[]
    >`
      select r.*, assignee_role.id as role_id, t.assignee_role
        from unnest(${tx.array(lanes.map((l) => l.id))}::uuid[]) as wanted(id)
        -- Each run read and locked by its key alone, then tested: offset 0 keeps the tests out of
        -- the read, so the planner cannot take runs_pending for it. With statistics that still saw
        -- few pending runs it did, and tested each pending run against the whole list (3,000 x 200,
        -- 70 ms; issue 30). A run locked here that the tests then leave out moved since the lanes
        -- were read a moment ago, which is rare, and is let go with the step.
        join lateral (select * from runs where id = wanted.id offset 0) r on true
        left join tasks t on t.id = r.task_id
        ${assigneeRoleJoin(tx)}
       where r.status = 'pending' and (r.not_before is null or r.not_before <= now())
         and not ${pausedWhere(tx, tx`r.enterprise_id`, tx`r.task_id`)}
         and not exists (
           -- A probe of the run's lane through runs_lane_busy, for each run: the status list is the
           -- index's own, and offset 0 keeps the planner from making it a join it plans from what it
           -- believes of the table. Planned so after a burst, it read the whole index once per
           -- candidate (15,000 entries) or matched each candidate against every run under way
           -- (3,000 x 200); issue 30.
           select 1 from runs o
            where o.lane = r.lane and o.id <> r.id
              and ${literalIn(tx, 'o.status', underWayStatuses)}
              and (o.status <> 'pending'
                   or ((o.created_at, o.id) < (r.created_at, r.id)
                       and (o.not_before is null or o.not_before <= now())))
           offset 0)
       order by r.created_at, r.id
       for no key update of r skip locked`

    const lost = candidates.filter((run) => !run.memberId && !run.roleId)
    const assignable = candidates.filter((run) => run.memberId || run.roleId)
    const roleIds = [...new Set(assignable.map((run) => run.roleId).filter((id) => id !== null))]
    const memberIds = [
      ...new Set(assignable.map((run) => run.memberId).filter((id) => id !== null)),
    ]
    const waiting = assignable.filter((run) => run.overlapPolicy !== 'os')
    const locked = await lockMembers(
      tx,
      {
        roleIds: [...new Set(waiting.map((run) => run.roleId).filter((id) => id !== null))],
        memberIds: [...new Set(waiting.map((run) => run.memberId).filter((id) => id !== null))],
      },
      { wait },
    )
    // Another transaction is assigning one of these members: the next step decides, under its lock.
    if (!locked) return 0
    const members = await membersFor(tx, { roleIds, memberIds })

    const admitted: Move[] = []
    for (const run of assignable) {
      if (run.memberId) {
        if (members.retake(run.memberId, run.overlapPolicy)) admitted.push({ run })
        continue
      }
      const memberId = members.take(run.roleId!, run.overlapPolicy)
      if (memberId) admitted.push({ run, fields: { memberId } })
    }
    await transitionAll(tx, 'queued', admitted)
    await finishAll(
      tx,
      'failed',
      lost.map((run) => ({
        run,
        fields: {
          reason: run.assigneeRole
            ? `Nobody can take the role ${run.assigneeRole} any more.`
            : 'The task was deleted or has no assigneeRole.',
        },
      })),
    )
    return admitted.length + lost.length
  })
  metrics.admissionPass((performance.now() - began) / 1000)
  return moved
}

/**
 * Blocked runs whose back-off is over go back to pending (DESIGN 6: they retry by themselves); with an
 * enterprise named, all of its blocked runs go at once (a key was bound).
 */
export async function resumeDueHolds(db: Db, enterpriseId?: string): Promise<number> {
  return transaction(db, async (tx) => {
    const held = await tx<RunRow[]>`
      select * from runs
       where status = 'blocked'
         and ${enterpriseId ? tx`enterprise_id = ${enterpriseId}` : tx`(not_before is null or not_before <= now())`}
       order by not_before nulls first limit 200
       for no key update skip locked`
    const because = enterpriseId ? 'a model key was bound' : 'retrying after a hold'
    await transitionAll(
      tx,
      'pending',
      held.map((run) => ({ run, fields: { notBefore: null }, event: { because } })),
    )
    return held.length
  })
}

/**
 * What a dispatch pass did: runs it completed itself, the runs their successors started, and runs it
 * started for an executor.
 */
export interface Dispatched {
  completed: number
  followed: number
  started: RunRow[]
}

/**
 * Moves queued runs to running, oldest first, within the enterprise's and each team's
 * concurrentRunLimit (DESIGN 5). Runs are claimed with `skip locked`, so engines share the queue; the
 * enterprises' and teams' rows are locked before their counts are read, so no two engines exceed a
 * limit. Rows are locked `for no key update` here and everywhere a row others point at is locked: that
 * does not conflict with the key-share lock an insert of a run (or an event) takes on the rows its
 * foreign keys name, so starts never wait for the engine. A deterministic run runs no model and acts on
 * nothing: `complete` takes it from queued through running to succeeded in this same transaction.
 *
 * `slots`: the most runs it starts for an executor (the engine's free slots; 0 takes deterministic runs
 * only). Only that many are locked, so runs past them stay free for another engine's dispatch meanwhile.
 */
export async function dispatchQueued(
  db: Db,
  engineId: string,
  complete: Complete,
  options: { slots?: number; leaseSeconds?: number; wait?: boolean } = {},
): Promise<Dispatched> {
  const { leaseSeconds = defaultLeaseSeconds, wait = true } = options
  const slots = Math.max(0, options.slots ?? dispatchBatch)
  return transaction(db, async (tx) => {
    // Only runs whose enterprise and team had room when this statement began: runs held back by a
    // limit stay queued without keeping later runs of others from being claimed. The counts are read
    // again below under their row locks, which decides.
    const hasRoom = tx`
      exists (select 1 from enterprises e
               where e.id = r.enterprise_id and e.running_count < e.concurrent_run_limit)
      and (r.team_id is null
           or exists (select 1 from teams tm
                       where tm.id = r.team_id
                         and (tm.concurrent_run_limit is null or tm.running_count < tm.concurrent_run_limit)))
      -- A run queued as its task or enterprise was paused (a start that committed meanwhile) waits
      -- queued for the resume instead of starting (issue 50).
      and not ${pausedWhere(tx, tx`r.enterprise_id`, tx`r.task_id`)}`
    // Deterministic runs and the others apart, each the oldest first: the deterministic ones through
    // their own index (runs_queued_deterministic, migration 0032), so a backlog of runs waiting for a
    // free slot is not read past at every step; the others no more than the slots.
    const claimed = await tx<RunRow[]>`
      with deterministic as (
        select r.* from runs r
         where r.status = 'queued' and r.kind = 'deterministic' and ${hasRoom}
         order by r.queued_at, r.id
         limit ${dispatchBatch}
         for no key update of r skip locked
      ), slotted as (
        select r.* from runs r
         where r.status = 'queued' and r.kind <> 'deterministic' and ${hasRoom}
         order by r.queued_at, r.id
         limit ${slots}
         for no key update of r skip locked
      )
      select * from deterministic union all select * from slotted
       order by queued_at, id`
    if (claimed.length === 0) return { completed: 0, followed: 0, started: [] }
    const enterpriseIds = [...new Set(claimed.map((r) => r.enterpriseId))]
    const teamIds = [...new Set(claimed.map((r) => r.teamId).filter((id) => id !== null))]
    // Without waiting, a limit's row that another transaction holds is no room this time.
    const lock = wait ? tx`for no key update` : tx`for no key update skip locked`
    const [enterprises, teams] = await Promise.all([
      tx<{ id: string; runningCount: number; concurrentRunLimit: number }[]>`
        select id, running_count, concurrent_run_limit from enterprises
         where id = any(${tx.array(enterpriseIds)}::uuid[]) order by id ${lock}`,
      teamIds.length
        ? tx<{ id: string; runningCount: number; concurrentRunLimit: number | null }[]>`
            select id, running_count, concurrent_run_limit from teams
             where id = any(${tx.array(teamIds)}::uuid[]) order by id ${lock}`
        : [],
    ])
    const room = new Map<string, number>()
    if (!wait) for (const id of teamIds) room.set(id, 0)
    for (const e of enterprises) room.set(e.id, e.concurrentRunLimit - e.runningCount)
    for (const t of teams)
      room.set(
        t.id,
        t.concurrentRunLimit === null ? Infinity : t.concurrentRunLimit - t.runningCount,
      )

    // A deterministic run ends in this transaction, so it leaves the room as it found it.
    const going = claimed.filter((run) => {
      if ((room.get(run.enterpriseId) ?? 0) <= 0) return false
      if (run.teamId && (room.get(run.teamId) ?? Infinity) <= 0) return false
      if (run.kind !== 'deterministic') {
        room.set(run.enterpriseId, room.get(run.enterpriseId)! - 1)
        if (run.teamId) room.set(run.teamId, room.get(run.teamId)! - 1)
      }
      return true
    })
    const deterministic = going.filter((run) => run.kind === 'deterministic')
    // Together, one round trip: the runs an executor carries on, and those that end here.
    const [started, followed] = await Promise.all([
      transitionAll(
        tx,
        'running',
        going
          .filter((run) => run.kind !== 'deterministic')
          .map((run) => ({ run, fields: { leaseOwner: engineId, leaseSeconds } })),
      ),
      complete(tx, deterministic),
    ])
    return { completed: deterministic.length, followed, started }
  })
}

/**
 * Keeps `traceParent` as the run's trace when it has none (issue 49): a run started while tracing was
 * off gets the trace of its first pass made with tracing on, and every later pass, in whichever
 * process, continues it instead of starting one of its own. Only while this engine holds the run.
 */
export async function keepRunTrace(
  db: Db,
  engineId: string,
  runId: string,
  traceParent: string,
): Promise<void> {
  await db`
    update runs set trace_parent = ${traceParent}
     where id = ${runId} and trace_parent is null and lease_owner = ${engineId}`
}

// --- leases (DESIGN 5: a run whose worker died is taken over) ----------------------------------------

/** Extends this engine's leases; answers the ids it still holds (a cancelled run is no longer held). */
export async function renewLeases(
  db: Db,
  engineId: string,
  runIds: string[],
  leaseSeconds = defaultLeaseSeconds,
): Promise<Set<string>> {
  if (runIds.length === 0) return new Set()
  // Locked in id order first: an update alone locks its rows in its plan's order, and renewals of two
  // engines (a run taken over from one that still renews it) deadlocked with a worker's lock of one
  // of those runs between them (docs/locks.md; issue 42's stress test).
  const rows = await db<{ id: string }[]>`
    with mine as (
      select id from runs
       where id = any(${db.array(runIds)}::uuid[]) and status = 'running' and lease_owner = ${engineId}
       order by id
       for no key update)
    update runs r set lease_expires_at = now() + make_interval(secs => ${leaseSeconds})
      from mine where r.id = mine.id
    returning r.id`
  return new Set(rows.map((r) => r.id))
}

/**
 * Hands this engine's leases of these runs back at once (it is stopping): released with no owner, so the
 * engine that takes them over does not count it as a death.
 */
export async function releaseLeases(db: Db, engineId: string, runIds: string[]): Promise<void> {
  await db`
    update runs set lease_expires_at = now(), lease_owner = null
     where id = any(${db.array(runIds)}::uuid[]) and lease_owner = ${engineId} and status = 'running'`
}

/** Whether the run is still running under this engine's lease (it may have been cancelled). */
export async function holdsRun(db: Db, engineId: string, runId: string): Promise<boolean> {
  const [row] = await db<{ status: string; leaseOwner: string | null }[]>`
    select status, lease_owner from runs where id = ${runId}`
  return row?.status === 'running' && row.leaseOwner === engineId
}

/**
 * How long (ms, by the database's clock) until the next delayed pending run (a successor's delay) or
 * held run (a back-off) becomes due.
 */
export async function nextDueRun(db: Db): Promise<number | null> {
  // Each status from its own partial index (migration 0025): the first entry after now, not a scan.
  const [next] = await db<{ inMs: number | null }[]>`
    select extract(epoch from least(
             (select min(not_before) from runs where status = 'pending' and not_before > now()),
             (select min(not_before) from runs where status = 'blocked' and not_before > now())
           ) - now())::float8 * 1000 as in_ms`
  return next?.inMs ?? null
}

/**
 * How many times a run may be taken over from a worker that died with it before it is failed instead:
 * a run that kills its worker (or whose executor fails) each time must end, not hold its slot forever.
 * A run handed over by an engine that stopped in good order does not count.
 */
export const maxTakeovers = 5

/**
 * Takes over running runs whose lease lapsed (their worker died), and says so in their events; a run
 * taken over maxTakeovers times is failed instead.
 */
export async function takeOverLapsed(
  db: Db,
  engineId: string,
  leaseSeconds = defaultLeaseSeconds,
  limit = 20,
): Promise<RunRow[]> {
  // Most passes find nothing: one indexed read decides whether a transaction is needed at all.
  const [any] = await db`
    select 1 from runs where status = 'running' and lease_expires_at < now() limit 1`
  if (!any) return []
  return transaction(db, async (tx) => {
    // A lease released by a stopping engine has no owner left: that handover is not a death.
    const taken = await tx<(RunRow & { previousOwner: string | null })[]>`
      with lapsed as (
        select id, lease_owner from runs
         where status = 'running' and lease_expires_at < now()
         order by lease_expires_at limit ${limit}
         for no key update skip locked)
      update runs r
         set lease_owner = ${engineId}, lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
             attempts = attempts + case when lapsed.lease_owner is null then 0 else 1 end,
             updated_at = now()
        from lapsed
       where r.id = lapsed.id
      returning r.*, lapsed.lease_owner as previous_owner`
    await appendEvents(
      tx,
      taken.map((run) => ({
        run,
        type: 'run.lease_taken_over',
        payload: { previousOwner: run.previousOwner, engine: engineId, takeovers: run.attempts },
      })),
    )
    const given = taken.map(({ previousOwner, ...run }) => run)
    const failing = given.filter((run) => run.attempts >= maxTakeovers)
    await finishAll(
      tx,
      'failed',
      failing.map((run) => ({
        run,
        fields: {
          reason: `The engine working on this run stopped without finishing it ${run.attempts} times; it is not tried again.`,
        },
      })),
    )
    // The engine that lost a lease may still be at work on the run: it stops when it hears.
    wakeEnginesFor(
      tx,
      taken.map((run) => run.id),
    )
    return given.filter((run) => run.attempts < maxTakeovers)
  })
}
