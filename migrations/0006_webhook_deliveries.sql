-- Inbound webhook deliveries (spec: Webhook history; DESIGN 7): each is stored with its request
-- (credentials left out, sensitive fields redacted), its answer, how long it took, what followed, and a
-- link to the original on replays.

create table webhook_deliveries (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  -- task: starts a task's run; gate: decides a gate.
  kind text not null check (kind in ('task', 'gate')),
  -- The task slug or the gate id the call named.
  target text not null,
  -- in_progress while it is handled; accepted (2xx), refused (4xx) or failed (5xx) after.
  status text not null default 'in_progress' check (status in ('in_progress', 'accepted', 'refused', 'failed')),
  authenticated boolean not null,
  request jsonb not null,
  -- The body as sent, AES-256-GCM under the server key, for replays; never when it held the secret.
  sealed_body bytea,
  contained_secret boolean not null default false,
  response_status integer,
  response_body jsonb,
  duration_ms integer,
  run_id uuid,
  execution_id uuid,
  gate_id uuid,
  replay_of uuid references webhook_deliveries (id) on delete set null,
  idempotency_key text,
  received_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (enterprise_id, idempotency_key)
);
create index webhook_deliveries_received on webhook_deliveries (enterprise_id, received_at desc, id desc);

create table run_logs (
  run_id uuid primary key,
  enterprise_id uuid not null,
  body text not null,
  updated_at timestamptz not null default now()
);
