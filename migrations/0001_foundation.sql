-- The tenant and its API tokens (DESIGN 3, 8). Every other tenant table carries enterprise_id.

create table enterprises (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique,
  name text not null,
  concurrent_run_limit integer not null default 10 check (concurrent_run_limit >= 1),
  chat_model_tier text not null default 'mid',
  chat_memory_depth text not null default 'medium',
  metrics jsonb not null default '[]',
  -- Spec, Authentication 8: one webhook secret per enterprise, stored only as a hash. The initial one is
  -- never revealed, so webhooks need a first rotation.
  webhook_secret_hash bytea not null,
  webhook_secret_last_chars text not null,
  webhook_secret_since timestamptz not null default now(),
  webhook_secret_rotated boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table api_tokens (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  name text not null,
  scopes text[] not null,
  -- SHA-256 of the token; the token itself is shown once and never stored.
  token_hash bytea not null unique,
  last_chars text not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index api_tokens_enterprise on api_tokens (enterprise_id, created_at);

-- Pictures live beside the rows they belong to, so reads of the enterprise row stay small.
create table enterprise_avatars (
  enterprise_id uuid primary key references enterprises (id) on delete cascade,
  content_type text not null,
  data bytea not null,
  updated_at timestamptz not null default now()
);
