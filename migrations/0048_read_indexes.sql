-- osd:no-transaction
-- Reads that a client, a dashboard or the engine makes often, each through an index of its own
-- (test/server/db/plans.test.ts).
--
-- The delivery loop's claim takes each subscription's oldest due deliveries: through
-- event_deliveries_due (next_at) it walked every subscription's pending deliveries in time order and
-- kept its own, so behind a dead receiver's backlog (3 days of events) each claim read all of it, once
-- per subscription: 3.5 s a claim at 400,000 pending. This index is each subscription's own; the next
-- due time is read by subscription too (nextDeliveryDue), and the index by time alone goes.
drop index concurrently if exists event_deliveries_pending;
create index concurrently event_deliveries_pending on event_deliveries (subscription_id, next_at)
  where status = 'pending';
drop index concurrently if exists event_deliveries_due;

-- A run's detail (GET /v1/runs/{id}, each read of its long-poll, osctl runs watch) lists the runs that
-- came after it, its successors and retries, by previous_run_id: only retries had an index
-- (runs_retried), so each detail read every run of the enterprise, 0.3 s at 500,000 runs.
drop index concurrently if exists runs_previous;
create index concurrently runs_previous on runs (previous_run_id) where previous_run_id is not null;

-- Blockers (GET /v1/blockers) lists the failed runs nobody has cleared, pages them, counts them, and
-- lists the stopped pipelines among them: three reads of every run of the enterprise (1.1 s at
-- 500,000 runs). This index holds only those runs, newest end first.
drop index concurrently if exists runs_failed_open;
create index concurrently runs_failed_open on runs (enterprise_id, finished_at desc, id desc)
  where status = 'failed' and cleared_at is null;
