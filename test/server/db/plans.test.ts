import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { createSql, type Fragment, type Sql } from '../../../server/db/sql.js'
import {
  admitPending,
  advance,
  getBlockers,
  getBoard,
  getCounts,
  getRunDetail,
  listExecutions,
  listRuns,
  nextDueRun,
  resumeDueHolds,
} from '../../../server/domain/runs/index.js'
import { readPage } from '../../../server/db/paging.js'
import { retentionPass } from '../../../server/domain/retention/index.js'
import {
  claimDeliveries,
  listDeliveries as listEventDeliveries,
  nextDeliveryDue,
} from '../../../server/domain/events/index.js'
import { executionSorts } from '../../../shared/schemas/executions.js'
import { runSorts } from '../../../shared/schemas/runs.js'
import { webhookSorts } from '../../../shared/schemas/webhooks.js'
import { listDeliveries } from '../../../server/domain/webhooks/index.js'
import { countUnread } from '../../../server/domain/chats/index.js'
import { listGates } from '../../../server/domain/gates/index.js'
import { completeDeterministic } from '../../../server/engine/runs/index.js'
import { createTestApp, type TestApp } from '../../helpers/app.js'
import { apiStart, deterministicTask } from '../../helpers/runs.js'

// What a start and an engine pass read and write, through an index whatever PostgreSQL knows of the
// table (issue 30). After a burst of starts, before autovacuum has analysed runs again (once a minute at
// best), the planner took runs for the small table it last analysed and scanned it; and a prepared
// statement planned generically (after five runs) cannot prove a partial index's predicate from a
// parameter. Either way: 5-9 ms a statement at 20,000 runs, one start 9 ms instead of 2.3. Here runs
// is analysed nearly empty and then holds thousands of runs it was not analysed with, every plan is
// generic, and auto_explain says each plan as a notice.
//
// The copies are made with the record function in a lateral join: `(jsonb_populate_record(...)).*`
// calls the function once per column of runs (PostgreSQL expands `.*` before it evaluates), which
// made the 20,000 copies of the first version take 27 s on one core, past vitest's 30 s with the rest.
// Now the first test takes 3-6 s under `taskset -c 0 npm test` (docs/developing.md: 6.1 s once the test
// files shared their workers, issue 40), and each has 20 s.

const burst = 5_000

let t: TestApp
let probe: Sql
const plans: string[] = []

beforeAll(async () => {
  t = await createTestApp()
  probe = createSql(t.dbUrl, {
    max: 1,
    onNotice: (message) => plans.push(message),
    settings: { plan_cache_mode: 'force_generic_plan' },
  })
  await probe`load 'auto_explain'`
  await probe`select set_config('auto_explain.log_min_duration', '0', false),
                     set_config('auto_explain.log_level', 'notice', false),
                     set_config('auto_explain.log_nested_statements', 'on', false)`
  return () => probe.end()
})

/**
 * `n` copies of a run (or of every run of a task), each with an id and a lane of its own, unknown to
 * the statistics; `changes` are more of `jsonb_build_object`'s pairs, over `r` (the run copied) and
 * `g` (1 to n).
 */
async function copyRuns(of: { run: string } | { task: string }, n: number, changes?: Fragment) {
  const where = 'run' in of ? t.sql`r.id = ${of.run}` : t.sql`r.task_id = ${of.task}`
  const more = changes ? t.sql`, ${changes}` : t.sql``
  await t.sql`
    insert into runs
    select copy.*
      from runs r, generate_series(1, ${n}::int) g,
           jsonb_populate_record(null::runs, to_jsonb(r) || jsonb_build_object(
             'id', gen_random_uuid(), 'lane', r.lane || ':' || g ${more})) copy
     where ${where}`
}

/**
 * An enterprise of its own and its one run, started by the API and copied `n` times (`changes` on each
 * copy) behind the statistics' back; with `ownExecutions`, each run its own execution.
 */
async function enterpriseOfRuns(
  label: string,
  n: number,
  changes?: Fragment,
  options: { ownExecutions?: boolean } = {},
) {
  const e = await t.createEnterprise(label)
  const task = await deterministicTask(t, { serializeOn: ['n'] }, e.token)
  const { run } = await apiStart(t.sql, e.id, task.id, { n: label })
  await copyRuns({ run: run.id }, n, changes)
  if (options.ownExecutions)
    await t.sql`update runs set execution_id = id where enterprise_id = ${e.id}`
  return { e, task, run }
}

describe('the runs hot paths', () => {
  it('never scan runs: a start, an engine pass that runs it, and the due times read', async () => {
    const task = await deterministicTask(t, { serializeOn: ['n'] })
    await apiStart(t.sql, t.acme.id, task.id, { n: -1 })
    await advance(t.sql, 'plans-test', completeDeterministic)
    await t.sql`alter table runs set (autovacuum_enabled = false)`
    await t.sql`analyze runs`
    // The burst: the finished run, 5,000 times over, unknown to the statistics. The statements before
    // issue 30 scan runs at every size from 100 to 20,000; these stop scanning between 500 and 700
    // runs (a seq scan of a few pages is the cheaper plan below that): 5,000 stays well above.
    await copyRuns({ task: task.id }, burst)
    plans.length = 0
    // Each statement more than five times, so that a prepared one is planned generically.
    for (let n = 0; n < 7; n++) {
      await apiStart(probe, t.acme.id, task.id, { n })
      await advance(probe, 'plans-test', completeDeterministic)
      await resumeDueHolds(probe)
      await nextDueRun(probe)
    }
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns.length).toBeGreaterThan(20)
    const scans = ofRuns.filter((p) => /Seq Scan on runs\b/.test(p))
    expect(scans.map((p) => p.slice(0, 600))).toEqual([])
    const [succeeded] = await t.sql<{ count: number }[]>`
      select count(*)::int as count from runs where task_id = ${task.id} and status = 'succeeded'`
    expect(succeeded!.count).toBe(burst + 8)
  }, 20_000)

  it('admit a burst of pending runs through their lanes and keys, testing only the heads they reach', async () => {
    // A burst of schedule fires: 3,000 runs pending (a start queues its run at once when it can) in lanes of their own, unknown to the statistics
    // (which see the table as the first test analysed it). Before: each candidate's lane was probed
    // through a whole index, each pending run tested against the list of candidates, and every head
    // joined to its task and role before the oldest 200 were taken; 10,000 fires took 10-15 s to run.
    const task = await deterministicTask(t, { serializeOn: ['n'] })
    const { run } = await apiStart(t.sql, t.acme.id, task.id, { n: 'burst' })
    await copyRuns(
      { run: run.id },
      3000,
      t.sql`'status', 'pending', 'member_id', null, 'queued_at', null,
            'created_at', r.created_at + make_interval(secs => g / 1000.0)`,
    )
    await analysed(async () => {
      expect(await admitPending(probe, { limit: 200 })).toBe(200)
    })

    const candidates = plans.find((p) => /\bLockRows\b/.test(p) && /\bruns o\b/.test(p))
    expect(candidates, plans.join('\n---\n').slice(0, 3000)).toBeDefined()
    // Each candidate's lane is read by lane, each candidate by its key.
    expect(candidates).toMatch(
      /Index (Only )?Scan using runs_lane_busy on runs o[^\n]*\n\s*Index Cond: \(lane = r\w*\.lane\)/,
    )
    expect(candidates).toMatch(
      /Index Scan using runs_pkey on runs\b[^\n]*\n\s*Index Cond: \(id = wanted\.id\)/,
    )
    // The heads: no node runs once per pending head (3,001 of them) once past the sort.
    const heads = plans.find((p) => /\bCTE heads\b/.test(p))!
    const loops = [...heads.matchAll(/loops=(\d+)/g)].map((m) => Number(m[1]))
    expect(Math.max(...loops)).toBeLessThanOrEqual(200)
  }, 20_000)
})

describe('an id prefix (issue 51 item 8)', () => {
  it('finds runs by a range of the primary key, never a scan of the enterprise’s runs', async () => {
    // 2,000 runs of one enterprise the statistics have not seen, most of them one prefix away from
    // the one asked for: a plan that read the enterprise's runs and filtered them would read them all.
    const task = await deterministicTask(t)
    const { run } = await apiStart(t.sql, t.acme.id, task.id, { n: 'prefix' })
    await t.sql`analyze runs`
    await copyRuns({ run: run.id }, 2000, t.sql`'status', 'succeeded'`)
    const prefix = run.id.slice(0, 8)
    plans.length = 0
    for (let n = 0; n < 7; n++) {
      const page = await listRuns(
        probe,
        t.acme.id,
        { idPrefix: prefix },
        readPage({ limit: 11 }, runSorts),
      )
      expect(page.data.map((r) => r.id)).toContain(run.id)
    }
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns.length).toBeGreaterThanOrEqual(14)
    // Both the page and its count, each time: the primary key's range, nothing else read of runs.
    for (const plan of ofRuns) {
      expect(plan, plan.slice(0, 1500)).toMatch(
        /Index (Only )?Scan using runs_pkey on runs\b|Bitmap Index Scan on runs_pkey\b/,
      )
      expect(plan).toMatch(/Index Cond: \(\(?id >= /)
      expect(plan).not.toMatch(/Seq Scan on runs\b/)
      expect(plan).not.toMatch(/::text ~~/)
    }
  }, 20_000)
})

describe('the retention pass (issue 46)', () => {
  it('walks runs past their window by runs_enterprise_created, never a scan of the enterprise’s runs', async () => {
    // 3,000 finished runs of an enterprise of their own past the window. With the whole test in one
    // statement, the planner misjudged how few runs pass it and, at 190,000 runs analysed, read every
    // run of the enterprise and sorted them: 2.5 s a batch (bench:retention steady). At this size it
    // still walked the index, so what is held here is the walk's own bound: each batch reads its 500
    // and starts where the last stopped, whatever the plan around it.
    const { e } = await enterpriseOfRuns('Retention plans', 3000)
    // Each its own execution, finished 200 days ago.
    await t.sql`
      update runs set execution_id = id, status = 'succeeded',
                      created_at = now() - interval '200 days', finished_at = now() - interval '200 days'
       where enterprise_id = ${e.id}`
    // Analysed as they are: the planner knows how many runs there are, and still cannot know how
    // few of them an execution's first run, finished, its execution done, leaves out.
    await t.sql`analyze runs`
    const kept = await t.call('PATCH', '/v1/enterprise/retention', {
      token: e.token,
      body: { archive: false },
    })
    expect(kept.status, JSON.stringify(kept.body)).toBe(200)
    const archiveDir = await mkdtemp(join(tmpdir(), 'osd-plans-archive-'))
    // With rows counted: a plan may take an index and still read every run of the enterprise.
    try {
      await analysed(async () => {
        const [moved] = await retentionPass(probe, {
          archiveDir,
          enterpriseId: e.id,
          batchSize: 500,
        })
        expect(moved).toMatchObject({ runs: 3001, executions: 3001 })
      })
    } finally {
      await rm(archiveDir, { recursive: true, force: true })
    }
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns.length).toBeGreaterThan(20)
    const scans = ofRuns.filter((p) => /Seq Scan on runs\b/.test(p))
    expect(scans.map((p) => p.slice(0, 600))).toEqual([])
    // No node reads more runs than a batch's worth (500 walked, their executions probed), in any
    // batch: the walk starts where the last batch stopped.
    const read = rowsRead(ofRuns, 'runs')
    expect(read.length).toBeGreaterThan(20)
    expect(Math.max(...read)).toBeLessThanOrEqual(1000)
  }, 20_000)
})

/**
 * Runs `fn` with auto_explain's row counts on (log_analyze) and `plans` emptied first: what it read, as
 * PostgreSQL counted it.
 */
async function analysed(fn: () => Promise<void>): Promise<void> {
  await probe`select set_config('auto_explain.log_analyze', 'on', false)`
  plans.length = 0
  try {
    await fn()
  } finally {
    await probe`select set_config('auto_explain.log_analyze', 'off', false)`
  }
}

/**
 * Of the plans that read `table` (under an alias or none), how many rows each node on it read: those
 * it kept and those it removed.
 */
function rowsRead(plans: string[], table: string): number[] {
  const node = new RegExp(
    `on ${table}\\b(?: \\w+)? .*?rows=(\\d+) loops=\\d+\\)(?:\\n.*?Rows Removed by Filter: (\\d+))?`,
    'g',
  )
  return plans.flatMap((plan) =>
    [...plan.matchAll(node)].map((m) => Number(m[1]) + Number(m[2] ?? 0)),
  )
}

describe('the delivery loop behind a dead receiver (docs/events.md)', () => {
  it('claims each subscription’s oldest due by its own index, never reading the backlog of another', async () => {
    // A dead receiver's backlog: 3,000 deliveries due, older than the 5 of a live subscription (and its
    // sixth, due tomorrow). Through
    // an index of due times alone, the live subscription's claim read past all of them to its own, and
    // the claim joined the rows it took to a scan of every delivery kept (3.5 s at 400,000 due).
    const e = await t.createEnterprise('Deliveries plans')
    const subscriptions = await t.sql<{ id: string }[]>`
      insert into event_subscriptions (enterprise_id, url, types, families, secret_sealed, secret_hint, created_by)
      select ${e.id}, 'https://receiver.example/' || g, '{*}', '{run}', '\\x00', 'abcd', 'plans-test'
        from generate_series(1, 2) g
      returning id`
    const [dead, live] = subscriptions.map((s) => s.id)
    await t.sql`analyze event_deliveries`
    await t.sql`
      insert into event_deliveries (enterprise_id, subscription_id, position, type, next_at)
      select ${e.id}, ${dead!}, g, 'run.step', now() - interval '1 day' + g * interval '1 s'
        from generate_series(1, 3000) g`
    await t.sql`
      insert into event_deliveries (enterprise_id, subscription_id, position, type, next_at)
      select ${e.id}, ${live!}, g, 'run.step', now() - interval '1 minute' + (g / 6) * interval '1 day'
        from generate_series(1, 6) g`
    let claimed = 0
    await analysed(async () => {
      // Six times, so that the plan is the generic one, as a loop's claims are.
      for (let n = 0; n < 6; n++) {
        const taken = await claimDeliveries(probe, `plans-test-${n}`, {
          firstRoom: 256,
          sharedRoom: 64,
          perSubscription: 16,
          inFlight: new Map(),
          leaseSeconds: 30,
        })
        claimed += taken.length
        expect(await nextDeliveryDue(probe)).toBeGreaterThan(0)
      }
    })
    // The first claim takes the live one's 5 and 16 of the dead one's, each later one 16 more.
    expect(claimed).toBe(5 + 6 * 16)
    const ofDeliveries = plans.filter((p) => /\bon event_deliveries\b/.test(p))
    expect(ofDeliveries.length).toBeGreaterThanOrEqual(12)
    expect(ofDeliveries.filter((p) => /Seq Scan on event_deliveries\b/.test(p))).toEqual([])
    const read = rowsRead(ofDeliveries, 'event_deliveries')
    expect(read.length).toBeGreaterThan(12)
    expect(Math.max(...read), ofDeliveries.join('\n---\n').slice(0, 3000)).toBeLessThanOrEqual(100)
  }, 20_000)
})

describe('a run’s detail', () => {
  it('reads the runs after it by previous_run_id, never a scan of the enterprise’s runs', async () => {
    // 2,000 runs of an enterprise the statistics have not seen. A detail's runs after it (successors
    // and retries) were read by previous_run_id with no index but the retries': every run of the
    // enterprise was read, at each read of a run followed (long-poll, osctl runs watch).
    const e = await t.createEnterprise('Detail plans')
    const task = await deterministicTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, { n: 'detail' })
    await t.sql`analyze runs`
    await copyRuns({ run: run.id }, 2000, t.sql`'status', 'succeeded'`)
    // One of them a successor of the run.
    await t.sql`
      update runs set previous_run_id = ${run.id}, origin = 'successor'
       where id = (select id from runs where enterprise_id = ${e.id} and id <> ${run.id} limit 1)`
    plans.length = 0
    for (let n = 0; n < 7; n++) {
      const detail = await getRunDetail(probe, e.id, run.id)
      expect(detail.next).toHaveLength(1)
    }
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns.length).toBeGreaterThanOrEqual(14)
    expect(ofRuns.filter((p) => /Seq Scan on runs\b/.test(p)).map((p) => p.slice(0, 800))).toEqual(
      [],
    )
    // The runs after it: by their index, each time.
    const after = ofRuns.filter((p) => /previous_run_id = /.test(p))
    expect(after).toHaveLength(7)
    for (const plan of after) expect(plan).toMatch(/Index (Only )?Scan (using|on) runs_previous\b/)
  }, 20_000)
})

describe('Blockers', () => {
  it('reads the failed runs nobody cleared through their index, never a scan of the enterprise’s runs', async () => {
    // 2,000 succeeded runs and 20 failed, of an enterprise the statistics have not seen: the failed
    // section, its count and the stopped pipelines read every run of the enterprise to find them.
    const e = await t.createEnterprise('Blockers plans')
    const task = await deterministicTask(t, {}, e.token)
    const { run } = await apiStart(t.sql, e.id, task.id, { n: 'blockers' })
    await t.sql`analyze runs`
    await copyRuns(
      { run: run.id },
      2020,
      t.sql`'status', case when g <= 20 then 'failed' else 'succeeded' end,
            'finished_at', now() - make_interval(secs => g)`,
    )
    plans.length = 0
    for (let n = 0; n < 7; n++) {
      const blockers = await getBlockers(
        probe,
        e.id,
        readPage({ limit: 10 }, ['createdAt']),
        async () => [],
      )
      expect(blockers.failed.total).toBe(20)
    }
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p) && /'failed'/.test(p))
    expect(ofRuns.length).toBeGreaterThanOrEqual(21)
    for (const plan of ofRuns)
      expect(plan, plan.slice(0, 1500)).toMatch(/Index (Only )?Scan (using|on) runs_failed_open\b/)
  }, 20_000)
})

describe('the webhook deliveries list', () => {
  it('pages by received_at down webhook_deliveries_received, either way, never sorting them all', async () => {
    // 2,000 deliveries of an enterprise the statistics have not seen. Ordered `desc nulls last`, the
    // order of no index, the first page read every delivery the enterprise kept and sorted them (0.37 s
    // at 300,000).
    const e = await t.createEnterprise('Webhook plans')
    await t.sql`analyze webhook_deliveries`
    await t.sql`
      insert into webhook_deliveries (enterprise_id, kind, target, status, authenticated, request, received_at)
      select ${e.id}, 'task', 'task-' || g, 'accepted', true, '{}', now() - make_interval(secs => g)
        from generate_series(1, 2000) g`
    plans.length = 0
    for (let n = 0; n < 7; n++)
      for (const order of ['desc', 'asc']) {
        const page = await listDeliveries(probe, e.id, {}, readPage({ order }, webhookSorts))
        expect(page.data).toHaveLength(25)
        expect(page.total).toBe(2000)
      }
    const pages = plans.filter((p) => /\bon webhook_deliveries\b/.test(p) && /\bLimit\b/.test(p))
    expect(pages).toHaveLength(14)
    for (const plan of pages) {
      expect(plan, plan.slice(0, 1500)).toMatch(
        /Index Scan (Backward )?using webhook_deliveries_received on webhook_deliveries\b/,
      )
      expect(plan).not.toMatch(/\bSort\b/)
    }
  }, 20_000)
})

describe('the unread count', () => {
  it('counts each chat after its read mark by chat_messages_chat, never reading the messages read', async () => {
    // 20 chats, one of 3,000 messages, all read but 3 member replies in 3 chats (one a purpose chat,
    // which the list does not show): joined to the chats, the count hashed every message kept, read
    // or not (97 ms at 110,000 messages).
    const e = await t.createEnterprise('Unread plans')
    const [member] = await t.sql<{ id: string }[]>`
      insert into members (enterprise_id, name, email)
      values (${e.id}, 'Reader', 'reader@unread.example') returning id`
    const chats = await t.sql<{ id: string }[]>`
      insert into chats (enterprise_id, member_id, purpose, last_message_at)
      select ${e.id}, ${member!.id}, case when g = 20 then 'create_task' end, now()
        from generate_series(1, 20) g
      returning id`
    await t.sql`
      insert into chat_messages (enterprise_id, chat_id, role, content)
      select ${e.id}, c.id, (array['person', 'member', 'tool'])[1 + g % 3], 'message ' || g
        from unnest(${chats.map((c) => c.id)}::uuid[]) with ordinality c(id, n),
             generate_series(1, case when c.n = 1 then 3000 else 10 end) g
       order by c.n, g`
    await t.sql`
      update chats c set read_seq = (select max(seq) from chat_messages m where m.chat_id = c.id)
       where c.enterprise_id = ${e.id}`
    await t.sql`
      insert into chat_messages (enterprise_id, chat_id, role, content)
      select ${e.id}, id, 'member', 'unread' from chats where id = any(${[
        chats[1]!.id,
        chats[2]!.id,
        chats[19]!.id,
      ]}::uuid[])`
    await t.sql`analyze chats, chat_messages`
    await analysed(async () => {
      for (let n = 0; n < 7; n++) expect(await countUnread(probe, e.id)).toEqual({ count: 2 })
    })
    const ofMessages = plans.filter((p) => /\bon chat_messages\b/.test(p))
    expect(ofMessages).toHaveLength(7)
    for (const plan of ofMessages) {
      expect(plan, plan.slice(0, 1500)).toMatch(
        /(Index|Index Only|Bitmap Index) Scan (using|on) chat_messages_chat\b/,
      )
      expect(plan).not.toMatch(/Seq Scan on chat_messages\b/)
    }
    const read = rowsRead(ofMessages, 'chat_messages')
    expect(Math.max(...read), ofMessages[0]!.slice(0, 3000)).toBeLessThanOrEqual(10)
  }, 20_000)
})

describe('a task’s decided gates', () => {
  it('reads them by gates_task_decided, never the decisions of the enterprise’s other tasks', async () => {
    // 2,000 decisions of one task, newer than the 5 of another, in an enterprise the statistics have
    // not seen: through gates_decided the list read every decision to find the 5, and at a year's
    // size it scanned gates (157 ms at 121,000).
    const e = await t.createEnterprise('Gate plans')
    const [busy, quiet] = [randomUUID(), randomUUID()]
    await t.sql`analyze gates`
    await t.sql`
      insert into gates (enterprise_id, task_id, kind, status, decision, decided_by, decided_at)
      select ${e.id}, case when g <= 5 then ${quiet}::uuid else ${busy}::uuid end, 'tool', 'decided',
             'approve', 'plans-test', now() - make_interval(secs => 3000 - g)
        from generate_series(1, 2005) g`
    await analysed(async () => {
      for (let n = 0; n < 7; n++) {
        const gates = await listGates(probe, e.id, { status: 'decided', taskId: quiet })
        expect(gates).toHaveLength(5)
      }
    })
    const ofGates = plans.filter((p) => /\bon gates\b/.test(p))
    expect(ofGates).toHaveLength(7)
    for (const plan of ofGates)
      expect(plan, plan.slice(0, 1500)).toMatch(/Index Scan using gates_task_decided on gates\b/)
    expect(Math.max(...rowsRead(ofGates, 'gates'))).toBeLessThanOrEqual(5)
  }, 20_000)
})

describe('a dead receiver’s failed deliveries', () => {
  it('pages and counts them by event_deliveries_failed, never reading its pending backlog', async () => {
    // A dead receiver: 20 deliveries failed, older than the 3,000 pending since, unknown to the
    // statistics. Through event_deliveries_list the page read the pending backlog to reach the
    // failures (1.15 s at 400,000 pending), and the count scanned every delivery kept (453 ms at 1.35
    // million).
    const e = await t.createEnterprise('Failed deliveries plans')
    const [dead] = await t.sql<{ id: string }[]>`
      insert into event_subscriptions (enterprise_id, url, types, families, secret_sealed, secret_hint, created_by)
      values (${e.id}, 'https://dead.example/', '{*}', '{run}', '\\x00', 'abcd', 'plans-test')
      returning id`
    await t.sql`analyze event_deliveries`
    await t.sql`
      insert into event_deliveries (enterprise_id, subscription_id, position, type, status, next_at, created_at)
      select ${e.id}, ${dead!.id}, g, 'run.step', case when g <= 20 then 'failed' else 'pending' end,
             case when g > 20 then now() + interval '1 hour' end, now() - make_interval(secs => 4000 - g)
        from generate_series(1, 3020) g`
    await analysed(async () => {
      for (let n = 0; n < 7; n++) {
        const page = await listEventDeliveries(probe, e.id, dead!.id, { status: 'failed' })
        expect(page.data).toHaveLength(20)
        expect(page.total).toBe(20)
      }
    })
    // The page and its count, each time.
    const ofDeliveries = plans.filter((p) => /\bon event_deliveries\b/.test(p))
    expect(ofDeliveries).toHaveLength(14)
    for (const plan of ofDeliveries)
      expect(plan, plan.slice(0, 1500)).toMatch(
        /Index (Only )?Scan using event_deliveries_failed on event_deliveries\b/,
      )
    expect(Math.max(...rowsRead(ofDeliveries, 'event_deliveries'))).toBeLessThanOrEqual(20)
  }, 20_000)
})

describe('the board and the counts (bench:views)', () => {
  it('read the open executions and the runs that moved last, never every run of the enterprise', async () => {
    // 4,000 runs of an enterprise of their own the statistics have not seen, each its own execution:
    // finished in the three finished lanes in turn, a second apart, and one in 500 running. Before,
    // each call grouped every run of the enterprise by execution (37 s at 2 million runs); now the
    // open ones are found through runs_open and the finished lanes by walking runs_enterprise_updated
    // down from the newest: 1,000 runs give each lane its 100.
    const { e } = await enterpriseOfRuns(
      'Board plans',
      4000,
      t.sql`'status', case when g % 500 = 0 then 'running'
                           else (array['succeeded', 'failed', 'cancelled'])[1 + g % 3] end,
            'updated_at', r.created_at - make_interval(secs => g)`,
      { ownExecutions: true },
    )
    await analysed(async () => {
      const board = await getBoard(probe, e.id, {})
      expect(Object.fromEntries(board.lanes.map((l) => [l.lane, l.executions.length]))).toEqual({
        queued: 1,
        running: 8,
        waiting: 0,
        blocked: 0,
        failed: 100,
        cancelled: 100,
        complete: 100,
      })
      expect((await getCounts(probe, e.id)).executions).toEqual({
        running: 8,
        queued: 1,
        waiting: 0,
      })
    })
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns.length).toBeGreaterThanOrEqual(3)
    expect(ofRuns.filter((p) => /Seq Scan on runs\b/.test(p)).map((p) => p.slice(0, 600))).toEqual(
      [],
    )
    // No node reads more runs than the walk's 1,000 (and the run started first), nor filters more out.
    const read = rowsRead(ofRuns, 'runs')
    expect(read.length).toBeGreaterThanOrEqual(4)
    expect(Math.max(...read), ofRuns.join('\n---\n').slice(0, 4000)).toBeLessThanOrEqual(1001)
  }, 20_000)
})

describe('the runs list (bench:views)', () => {
  it('reads its first page down runs_enterprise_created and runs_task, never a sort of the enterprise’s runs', async () => {
    // 2,000 runs of an enterprise of their own the statistics have not seen. Ordered `desc nulls
    // last`, the order of no index, the page read every run of the enterprise and sorted them (1.4 s at
    // 500,000 runs, bench:views); its count still reads them all, through an index only.
    const { e, task, run } = await enterpriseOfRuns(
      'Runs list plans',
      2000,
      t.sql`'status', 'succeeded', 'created_at', r.created_at - make_interval(secs => g)`,
    )
    await analysed(async () => {
      for (const [filters, order] of [
        [{}, 'desc'],
        [{}, 'asc'],
        [{ taskId: task.id }, 'desc'],
      ] as const) {
        const page = await listRuns(probe, e.id, filters, readPage({ limit: 50, order }, runSorts))
        expect(page.total).toBe(2001)
        expect(page.data[0]!.id).toBe(order === 'desc' ? run.id : page.data[0]!.id)
      }
    })
    const pages = plans.filter((p) => /\bon runs\b/.test(p) && /^\s*Limit\b/m.test(p))
    expect(pages).toHaveLength(3)
    for (const plan of pages) {
      expect(plan).toMatch(
        /Index Scan (Backward )?using (runs_enterprise_created|runs_task) on runs\b/,
      )
      // An incremental sort of the ties runs_task leaves (it holds no id) reads one run past the page.
      expect(plan).not.toMatch(/^\s*(->\s*)?Sort  \(/m)
      const read = [...plan.matchAll(/on runs\b[^\n]*rows=(\d+) loops=\d+\)/g)].map((m) =>
        Number(m[1]),
      )
      expect(Math.max(...read), plan).toBeLessThanOrEqual(51)
    }
  }, 20_000)
})

describe('the executions list (bench:views)', () => {
  it('reads the first and last runs of its page’s executions only', async () => {
    // 2,000 executions of an enterprise of their own. Its order and total need every execution, one
    // pass over the runs; before, each execution's first and last runs were read by their keys too,
    // and its runs sorted to find the last: five times the pass (10 s at 500,000 runs, bench:views).
    const { e } = await enterpriseOfRuns(
      'Executions list plans',
      2000,
      t.sql`'status', 'succeeded', 'updated_at', r.created_at - make_interval(secs => g)`,
      { ownExecutions: true },
    )
    await analysed(async () => {
      for (const sort of ['updatedAt', 'runCount'] as const) {
        const page = await listExecutions(
          probe,
          e.id,
          {},
          readPage({ limit: 20, sort }, executionSorts),
        )
        expect(page.total).toBe(2001)
        expect(page.data).toHaveLength(20)
      }
    })
    // The pages' statements (their count joins no run now, and read every execution's before).
    const pages = plans.filter((p) => /\bon runs last\b/.test(p) && !/select count\(\*\)/.test(p))
    expect(pages).toHaveLength(2)
    for (const plan of pages) {
      const probes = [...plan.matchAll(/on runs (?:last|first)\b[^\n]*loops=(\d+)\)/g)]
      expect(probes, plan).toHaveLength(2)
      expect(Math.max(...probes.map((m) => Number(m[1]))), plan).toBeLessThanOrEqual(20)
    }
  }, 20_000)

  it('reads an open status through the open runs only', async () => {
    // 2,000 executions of an enterprise of their own, one in 200 running. `status=running` (or
    // waiting, blocked, queued) read and grouped every run of the enterprise (5-10 s at 500,000 runs,
    // bench:views); an execution of an open status has a run not ended, found through runs_open.
    const { e } = await enterpriseOfRuns(
      'Open executions plans',
      2000,
      t.sql`'status', case when g % 200 = 0 then 'running' else 'succeeded' end,
            'updated_at', r.created_at - make_interval(secs => g)`,
      { ownExecutions: true },
    )
    await analysed(async () => {
      const page = await listExecutions(
        probe,
        e.id,
        { status: 'running' },
        readPage({ limit: 20 }, executionSorts),
      )
      expect(page.total).toBe(10)
      expect(page.data.map((x) => x.status)).toEqual(Array(10).fill('running'))
    })
    // The page and its count; no node reads more than the open runs (10 running, the seed queued).
    const ofRuns = plans.filter((p) => /\bon runs\b/.test(p))
    expect(ofRuns).toHaveLength(2)
    expect(
      Math.max(...rowsRead(ofRuns, 'runs')),
      ofRuns.join('\n---\n').slice(0, 4000),
    ).toBeLessThanOrEqual(11)
  }, 20_000)
})
