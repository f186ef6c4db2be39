-- Runs, their events, and what admission and dispatch count (spec: Run, States and transitions;
-- DESIGN 5). A run keeps what it needs of its task, because runs outlive the task (DELETE keeps them).

create table runs (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  task_id uuid not null,
  task_version_id uuid not null,
  task_slug text not null,
  task_name text not null,
  team_id uuid,
  kind text not null,
  overlap_policy text not null,
  -- Two runs of one lane are never both queued or running (DESIGN 5).
  lane text not null,
  member_id uuid,
  status text not null check (status in ('pending', 'queued', 'running', 'waiting_on_gate', 'blocked',
    'paused_spend', 'succeeded', 'failed', 'cancelled', 'skipped_overlap')),
  -- What started it: api, schedule, webhook, successor, retry.
  origin text not null,
  input jsonb not null,
  result jsonb,
  reason text,
  blocked_reason text,
  -- An execution is the set of runs linked by successors and retries; its id is its first run's id.
  execution_id uuid not null,
  previous_run_id uuid,
  -- A successor run: the edge that started it (predecessor task -> slug) and the issue its predecessor
  -- named, for maxRunsPerIssue; and the run whose conversation it continues (resumeConversation).
  successor_edge text,
  issue_key text,
  resume_from_run_id uuid,
  -- A failed run's successors that therefore never started: a stopped pipeline on Blockers.
  stopped_successors jsonb,
  -- Millionths of a US dollar: exact sums; answered as costUsdCents.
  cost_usd_micros bigint not null default 0,
  -- A pending run is not admitted before this (successor delays, blocked back-off).
  not_before timestamptz,
  -- The worker executing a running run, and until when its claim holds (renewed while it works).
  lease_owner text,
  lease_expires_at timestamptz,
  attempts integer not null default 0,
  -- Taken off Blockers (POST /v1/runs/{id}/clear).
  cleared_at timestamptz,
  -- Times are the statement's, not the transaction's: one engine transaction may carry a pipeline of
  -- deterministic runs several steps, and each step's times must follow the one before.
  created_at timestamptz not null default statement_timestamp(),
  queued_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz,
  updated_at timestamptz not null default statement_timestamp(),
  unique (enterprise_id, id)
);
create index runs_enterprise_created on runs (enterprise_id, created_at desc, id desc);
create index runs_task on runs (enterprise_id, task_id, created_at desc);
create index runs_version on runs (task_version_id);
create index runs_execution on runs (execution_id);
create index runs_lane_busy on runs (lane)
  where status in ('pending', 'queued', 'running', 'blocked', 'paused_spend');
create index runs_pending on runs (created_at) where status = 'pending';
create index runs_queued on runs (queued_at) where status = 'queued';
create index runs_member_busy on runs (member_id) where status in ('queued', 'running');
-- A member's last assignment, for the "waited longest" order (DESIGN 5), is its latest queued_at: derived
-- from the runs, so assigning a run writes no hot row of the member.
create index runs_member_queued on runs (member_id, queued_at desc);
create index runs_leases on runs (lease_expires_at) where status = 'running';
create index runs_successor_edge on runs (enterprise_id, successor_edge, issue_key) where successor_edge is not null;

-- Executions derive their status and cost from their runs; only being closed is their own.
create table execution_closures (
  execution_id uuid primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  closed_at timestamptz not null default now()
);

create table run_events (
  id uuid primary key default gen_random_uuid(),
  -- Order of events; afterEventId reads the ones after an event's seq.
  seq bigint generated always as identity unique,
  enterprise_id uuid not null,
  run_id uuid not null,
  type text not null,
  payload jsonb not null default '{}',
  created_at timestamptz not null default statement_timestamp()
);
create index run_events_run on run_events (run_id, seq);

-- Runs running now, per enterprise and team: dispatch raises these only below the limits, in the
-- same transaction as the run's status (a conditional update, so many engines never exceed them).
alter table enterprises add column running_count integer not null default 0;
alter table teams add column running_count integer not null default 0;
