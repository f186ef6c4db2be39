-- Sign-ins saved on a browser connection's sites, per member (spec: Endpoints Tools, sign-ins).
create table browser_sign_ins (
  connection_id uuid not null references tool_connections (id) on delete cascade,
  enterprise_id uuid not null,
  member_id uuid not null,
  site text not null,
  saved_at timestamptz not null default now(),
  primary key (connection_id, member_id, site)
);

-- A tool OAuth in progress: it completes in the browser of the person who started it.
create table tool_oauth_states (
  state text primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  connection_id uuid not null references tool_connections (id) on delete cascade,
  created_at timestamptz not null default now()
);
