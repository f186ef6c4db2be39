-- osd:no-transaction
-- Reads that a client or an audit makes, each through an index of its own
-- (test/server/db/plans.test.ts), as in 0048.
--
-- The decided gates of a task (GET /v1/gates?status=decided&taskId=): through gates_decided the list
-- read the enterprise's decisions newest first and kept the task's, so a task with few gates, or none,
-- read every decision kept (a scan of gates, 157 ms at 121,000). Through runs_task and gates_run it
-- would read every run of the task, gated or not. This index holds the decided gates by task.
drop index concurrently if exists gates_task_decided;
create index concurrently gates_task_decided on gates (task_id, decided_at desc, id desc)
  where status = 'decided';

-- A subscription's failed deliveries (GET /v1/event-subscriptions/{id}/deliveries?status=failed), the
-- page and its count: through event_deliveries_list the page read a dead receiver's pending backlog,
-- newer than its failures, to reach them (1.15 s at 400,000 pending), and the count scanned the table
-- (453 ms at 1.35 million deliveries). This index holds the failed ones only, in the list's order: the
-- page reads its own and the count only the subscription's failures, from the index alone.
drop index concurrently if exists event_deliveries_failed;
create index concurrently event_deliveries_failed on event_deliveries (subscription_id, created_at desc, id desc)
  where status = 'failed';
