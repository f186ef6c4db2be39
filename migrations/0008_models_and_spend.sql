-- Model provider connections (spec: Endpoints Models; DESIGN 6): an API key bound at a layer
-- (enterprise, team or member; the nearest layer wins at run time), or a subscription login
-- (provider_b OAuth). Keys are encrypted at rest and never answered.
create table llm_connections (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  provider text not null check (provider in ('provider_a', 'provider_b')),
  kind text not null check (kind in ('api_key', 'subscription')),
  layer text not null check (layer in ('enterprise', 'team', 'member')),
  layer_id uuid,
  name text not null,
  description text not null default '',
  plan text,
  -- AES-256-GCM of the key, or of the subscription's tokens as JSON.
  secret_ciphertext bytea not null,
  secret_hint text not null,
  access_expires_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, id)
);
create unique index llm_connections_binding
  on llm_connections (enterprise_id, provider, layer, coalesce(layer_id, '00000000-0000-0000-0000-000000000000'::uuid));

-- Tokens and cents per connection, day and model (GET /v1/llm/connections/{id}/usage).
create table llm_usage (
  connection_id uuid not null references llm_connections (id) on delete cascade,
  enterprise_id uuid not null,
  day date not null,
  model text not null,
  calls integer not null default 0,
  input_tokens bigint not null default 0,
  output_tokens bigint not null default 0,
  cost_usd_micros bigint not null default 0,
  primary key (connection_id, day, model)
);

-- The enterprise's choice of model per tier and provider, over the shipped defaults.
create table llm_tier_overrides (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  provider text not null,
  tier text not null,
  model text not null,
  updated_at timestamptz not null default now(),
  primary key (enterprise_id, provider, tier)
);

-- The provider_b sign-in in progress: state and PKCE verifier between start and complete.
create table llm_oauth_states (
  state text primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  verifier_ciphertext bytea not null,
  layer text not null,
  layer_id uuid,
  created_at timestamptz not null default now()
);

-- Spend (spec: Spend; DESIGN 6): daily caps per layer, and what each layer spent today. A model call
-- first reserves its worst case under the counters' row locks, so concurrent runs cannot overshoot.
alter table enterprises add column spend_enabled boolean not null default true;

create table spend_caps (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  layer text not null check (layer in ('enterprise', 'team', 'task', 'member')),
  layer_id uuid not null,
  money_cents_day integer not null check (money_cents_day >= 0),
  updated_at timestamptz not null default now(),
  primary key (enterprise_id, layer, layer_id)
);

create table spend_days (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  day date not null,
  layer text not null,
  layer_id uuid not null,
  spent_usd_micros bigint not null default 0,
  reserved_usd_micros bigint not null default 0,
  runs integer not null default 0,
  primary key (enterprise_id, day, layer, layer_id)
);

alter table run_journal add column connection_id uuid;
alter table run_journal add column reserved_usd_micros bigint not null default 0;
alter table run_journal add column spend_day date;

-- Members' inboxes (os.mail_send to a member's address; GET /v1/members/{id}/emails).
create table member_emails (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  member_id uuid not null,
  from_address text not null,
  to_address text not null,
  subject text not null,
  body text not null,
  run_id uuid,
  read_at timestamptz,
  received_at timestamptz not null default now(),
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);
create index member_emails_inbox on member_emails (member_id, received_at desc);

create table email_attachments (
  id uuid primary key default gen_random_uuid(),
  email_id uuid not null references member_emails (id) on delete cascade,
  filename text not null,
  content_type text not null,
  data bytea not null
);

-- Mail a run sent to an address outside the enterprise: recorded as sent, delivered nowhere.
create table sent_emails (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  run_id uuid,
  from_address text not null,
  to_address text not null,
  subject text not null,
  body text not null,
  sent_at timestamptz not null default now()
);

-- Plans a run wrote with os.write_plan (spec: Plans (planned)).
create table plans (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  kind text not null default 'run',
  status text not null default 'proposed',
  title text not null,
  items jsonb not null default '[]',
  produced_by_run_id uuid,
  chat_session_id uuid,
  created_at timestamptz not null default now()
);
