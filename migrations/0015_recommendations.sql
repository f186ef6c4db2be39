-- Recommendations: changes to a task that an os-improve run proposes and a person decides (spec:
-- Concepts, Recommendations; DESIGN 10). A recommendation outlives its task (approving one whose task
-- is gone answers 404 task_not_found), so task_id and the version ids are not foreign keys.

create table recommendations (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  task_id uuid not null,
  task_slug text not null,
  -- The version the changes were proposed against: approve publishes on it (a newer one is a conflict).
  base_version_id uuid not null,
  -- The os-improve run that proposed it (one proposal per run).
  proposed_by_run_id uuid,
  -- Fields of a version publish, only those changed.
  changes jsonb not null,
  rationale text not null,
  -- [{runId, why}]
  evidence jsonb not null default '[]',
  status text not null default 'waiting' check (status in ('waiting', 'approved', 'declined')),
  decision text check (decision in ('approve', 'decline')),
  reason text,
  -- token:<id> of the person who decided, or save:<token> when a saved version declined it.
  decided_by text,
  decided_at timestamptz,
  -- What the decider sent, so that the same caller repeating the same key is answered the same.
  idempotency_key text,
  -- The version an approval published and the run it started.
  version_id uuid,
  run_id uuid,
  created_at timestamptz not null default now(),
  unique (enterprise_id, id),
  check ((status = 'waiting') = (decided_at is null))
);

create index recommendations_waiting on recommendations (enterprise_id, created_at desc)
  where status = 'waiting';
create index recommendations_task on recommendations (enterprise_id, task_id, created_at desc);
create index recommendations_decided on recommendations (enterprise_id, decided_at desc)
  where status <> 'waiting';
create unique index recommendations_one_per_run on recommendations (proposed_by_run_id)
  where proposed_by_run_id is not null;

-- When an os-improve run last started by itself for a task: at most once per task per
-- OSD_IMPROVE_INTERVAL_MINUTES, however many processes see failures at once.
create table improve_triggers (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  task_id uuid not null,
  last_at timestamptz not null,
  primary key (enterprise_id, task_id),
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);
