-- Bulk operations on runs (issue 50; docs/runs.md): cancel or retry every run of an enterprise that a
-- filter matches. The runs matched are written down when the operation is made (its items), so what it
-- acts on is fixed and counted at once; the engines claim an operation like a run (a lease, renewed,
-- taken over once it lapses) and act on its items a batch per transaction, so an operation an engine
-- dropped mid-way is finished by another and no run is moved twice.
create table run_bulk_operations (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  action text not null check (action in ('cancel', 'retry')),
  -- As the request gave it (taskId, status, origin, startedAfter, startedBefore).
  filter jsonb not null,
  -- The same key in the same enterprise answers the same operation.
  idempotency_key text not null,
  -- Who made it (token:<id> or user:<id>) and why, if they said (issue 50: every action recorded).
  created_by text not null,
  reason text,
  status text not null default 'running' check (status in ('running', 'completed')),
  matched integer not null,
  done integer not null default 0,
  failed integer not null default 0,
  skipped integer not null default 0,
  lease_owner text,
  lease_expires_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (enterprise_id, idempotency_key)
);
create index run_bulk_operations_running on run_bulk_operations (created_at) where status = 'running';

-- One matched run of an operation, and what became of it: done (cancelled, or retried as new_run_id),
-- failed (its task cannot run), or skipped (it moved meanwhile: the reason says how). No foreign key to
-- runs: retention may move a run out of the live tables while an item of it is kept.
create table run_bulk_items (
  operation_id uuid not null references run_bulk_operations (id) on delete cascade,
  enterprise_id uuid not null,
  run_id uuid not null,
  outcome text check (outcome in ('done', 'failed', 'skipped')),
  reason text,
  new_run_id uuid,
  primary key (operation_id, run_id)
);
create index run_bulk_items_left on run_bulk_items (operation_id, run_id) where outcome is null;

-- A retry asks whether the run's retry is already pending (the one-run route answers that run; a bulk
-- retry skips it): through this small index, not every pending run of the database.
create index runs_retry_pending on runs (previous_run_id) where origin = 'retry' and status = 'pending';
