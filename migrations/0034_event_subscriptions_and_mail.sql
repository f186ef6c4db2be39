-- Outbound event subscriptions, signed as Standard Webhooks, and mail to people (issue 47; DESIGN 15;
-- docs/events.md). Both are fanned out from the feed by the pass that gives events their positions
-- (domain/events/feed.ts), in its transaction: each event is delivered to each subscription, and
-- told to each person, exactly once.

create table event_subscriptions (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  url text not null,
  -- Filters as the feed's ?types= takes them: exact types, family.*, or *.
  types text[] not null,
  -- The families its maker could read when it was made or its types last changed: a subscription
  -- never carries what its maker could not read in the feed.
  families text[] not null,
  format text not null default 'standard' check (format in ('standard', 'slack')),
  description text,
  status text not null default 'enabled' check (status in ('enabled', 'disabled')),
  disabled_reason text,
  -- The signing key (the base64 after whsec_), sealed: osd must use it again (DESIGN 3).
  secret_sealed bytea not null,
  secret_hint text not null,
  -- Who made it (token:<id>, user:<id>), and the person told when osd disables it.
  created_by text not null,
  owner_user uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, id)
);
create index event_subscriptions_enabled on event_subscriptions (enterprise_id) where status = 'enabled';

-- One event to one subscription: its id is the webhook-id of every attempt. Claimed by the engines with
-- `for update skip locked` and a lease, like runs; a lease that lapses (an engine died mid-POST) sends it
-- again, with the same id (at least once).
create table event_deliveries (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  subscription_id uuid not null references event_subscriptions (id) on delete cascade,
  position bigint not null,
  type text not null,
  status text not null default 'pending' check (status in ('pending', 'succeeded', 'failed')),
  attempts integer not null default 0,
  next_at timestamptz,
  -- Tried for 3 days from here: its making, or a person's retry.
  trying_since timestamptz not null default now(),
  lease_owner text,
  lease_expires_at timestamptz,
  created_at timestamptz not null default now(),
  finished_at timestamptz,
  unique (enterprise_id, id)
);
create index event_deliveries_due on event_deliveries (next_at) where status = 'pending';
create index event_deliveries_list on event_deliveries (subscription_id, created_at desc, id desc);
create index event_deliveries_created on event_deliveries (created_at);

create table event_delivery_attempts (
  id bigint generated always as identity primary key,
  delivery_id uuid not null references event_deliveries (id) on delete cascade,
  at timestamptz not null,
  -- null: no answer (a timeout, a refused connection, the egress rule).
  status_code integer,
  latency_ms integer not null,
  -- The first 1 KB of the answer, or why there was none.
  answer text not null
);
create index event_delivery_attempts_delivery on event_delivery_attempts (delivery_id, id);

-- A person's choice of mail, per enterprise; null is the default of their role (owners: both;
-- members: gates only).
create table notification_settings (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  gates boolean,
  run_failures boolean,
  primary key (enterprise_id, user_id)
);

-- What to tell a person: a gate that waits for them, a run of theirs that failed, a subscription of
-- theirs that osd disabled. Sent in one mail per person at most once a minute (mail_people).
create table mail_items (
  id bigint generated always as identity primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  kind text not null check (kind in ('gate', 'run_failed', 'subscription_disabled')),
  subject jsonb not null,
  payload jsonb not null,
  created_at timestamptz not null default now(),
  sent_at timestamptz
);
create index mail_items_unsent on mail_items (user_id, id) where sent_at is null;
create index mail_items_created on mail_items (created_at);

-- A person to mail, claimed like work (a lease), not before a minute after their last mail.
create table mail_people (
  user_id uuid primary key references users (id) on delete cascade,
  not_before timestamptz not null default now(),
  failures integer not null default 0,
  lease_owner text,
  lease_expires_at timestamptz
);
