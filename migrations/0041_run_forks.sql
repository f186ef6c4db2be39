-- Fork from a step (issue 50): a run started from another run's journal. The fork's steps before its
-- fork point are copies of the original's journal entries (copied = true): they were paid for by the
-- original, so the fork counts none of them (no cost, no usage, no tokens in its totals), and the agent
-- loop replays them as it does a run's own journal after a takeover. forked_from_* say where it came
-- from (the step numbered from 1, as GET /v1/runs/{id}/steps numbers them); model_tier, when set, is
-- the tier its model calls use instead of its version's.
alter table runs
  add column forked_from_run_id uuid,
  add column forked_from_step integer,
  add column model_tier text check (model_tier in ('economical', 'mid', 'frontier'));

alter table run_journal add column copied boolean not null default false;
