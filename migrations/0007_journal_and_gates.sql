-- The journal of a run's model and tool calls (DESIGN 5, 6): each call is written before the run moves
-- on, so a run resumed after a gate, a restart or a crash pays for no model call twice and acts on no
-- tool call twice.
create table run_journal (
  id bigint generated always as identity primary key,
  enterprise_id uuid not null,
  run_id uuid not null,
  step integer not null,
  kind text not null check (kind in ('model', 'tool')),
  -- started: sent, answer not yet kept (a crash here means the call may have happened); done; failed.
  state text not null check (state in ('started', 'done', 'failed')),
  request jsonb not null,
  response jsonb,
  cost_usd_micros bigint not null default 0,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (run_id, step)
);

-- Gates (spec: Gate; DESIGN 6): a decision waiting for a person, on a tool call a task must gate or a
-- question.
create table gates (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  run_id uuid,
  task_id uuid,
  chat_id uuid,
  kind text not null check (kind in ('tool', 'question')),
  tool text,
  arguments jsonb,
  owner text,
  approval text,
  summary text,
  choices jsonb,
  questions jsonb,
  -- The journal step of the gated call, so the approved call is the one that runs, once.
  journal_step integer,
  status text not null default 'waiting' check (status in ('waiting', 'decided')),
  decision text check (decision in ('approve', 'reject', 'request_changes')),
  note text,
  answers jsonb,
  choice text,
  decided_by text,
  decided_at timestamptz,
  created_at timestamptz not null default now(),
  unique (enterprise_id, id)
);
create index gates_waiting on gates (enterprise_id, created_at desc) where status = 'waiting';
create index gates_run on gates (run_id);
