-- Connected apps (spec: Portal-only routes; DESIGN 8): an app asks for access with a consent request (a
-- device-style flow: no mail or browser redirect exists here); a person reads its short user code, and an
-- owner of an enterprise approves it there or anyone who holds the code declines it. An approved request
-- becomes a connection of that enterprise, whose API token the app collects once by polling with its poll
-- token. Revoking the connection revokes that token at once, in every osd process (the token NOTIFY).

create table app_connections (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  app_name text not null,
  scopes text[] not null,
  -- The owner who approved it; null once that person is deleted.
  approved_by uuid references users (id) on delete set null,
  approved_at timestamptz not null default now(),
  revoked_at timestamptz,
  unique (enterprise_id, id)
);
create index app_connections_enterprise on app_connections (enterprise_id, approved_at);

create table consent_requests (
  id uuid primary key default gen_random_uuid(),
  app_name text not null,
  scopes text[] not null,
  -- What a person types: 8 characters of an alphabet without 0, O, 1 and I, as ABCD-EFGH.
  user_code text not null,
  -- SHA-256 of the app's poll token; the token itself is answered once, at the request.
  poll_hash bytea not null,
  status text not null default 'pending' check (status in ('pending', 'approved', 'declined')),
  created_at timestamptz not null default now(),
  -- A pending request past this is expired: it can be neither approved nor declined.
  expires_at timestamptz not null,
  decided_by uuid references users (id) on delete set null,
  decided_at timestamptz,
  -- Set when approved: where, and the connection it made.
  enterprise_id uuid references enterprises (id) on delete cascade,
  connection_id uuid references app_connections (id) on delete cascade,
  -- When the app collected its token (once; the token's secret is never stored).
  token_issued_at timestamptz,
  check ((status = 'approved') = (connection_id is not null))
);
-- A code names one pending request; decided and expired ones may share it with a later request.
create unique index consent_requests_pending_code on consent_requests (user_code) where status = 'pending';
create index consent_requests_code on consent_requests (user_code, created_at);
create index consent_requests_pending on consent_requests (expires_at) where status = 'pending';

-- The token an approved request handed its app; revoking the connection revokes it.
alter table api_tokens
  add column app_connection_id uuid references app_connections (id) on delete cascade;
create index api_tokens_app_connection on api_tokens (app_connection_id) where app_connection_id is not null;
