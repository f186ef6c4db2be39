-- osd:no-transaction
-- The board and the counts (GET /v1/executions/board, /counts) read what is open and what moved last,
-- not every run the enterprise kept (a busy one keeps hundreds of thousands for its window of finished
-- runs): each grouped all of them by execution, 3.3 s for the counts and 10 s for the board at
-- 500,000 runs (bench:views).
--
-- An execution is running, waiting, blocked or queued only if one of its runs is open: those are
-- found here.
drop index concurrently if exists runs_open;
create index concurrently runs_open on runs (enterprise_id)
  where status in ('pending', 'queued', 'running', 'waiting_on_gate', 'blocked', 'paused_spend');

-- The finished lanes hold the 100 executions that moved last each, and an execution moved when its
-- latest run did (updated_at): they are found walking this index down from the newest until each lane
-- has its 100, reading each run's execution and status from the index.
drop index concurrently if exists runs_enterprise_updated;
create index concurrently runs_enterprise_updated on runs (enterprise_id, updated_at desc)
  include (execution_id, status);
