-- People (spec: Portal-only routes, Authentication 6-7, 10; DESIGN 8): a person signs in with an email and
-- a password and acts, through a session, in one of the enterprises they belong to. The owner of an
-- enterprise holds its chief executive role. Passwords are kept as scrypt hashes, session secrets and CSRF
-- tokens as SHA-256 hashes, emails of failed logins as SHA-256 hashes: nothing a person types is stored
-- in clear but their email.

create table users (
  id uuid primary key default gen_random_uuid(),
  email text not null,
  name text not null default '',
  -- scrypt$<log2 N>$<r>$<p>$<salt base64>$<hash base64> (server/domain/passwords.ts)
  password_hash text not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index users_email_key on users (lower(email));

create table enterprise_people (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  role text not null check (role in ('owner', 'member')),
  created_at timestamptz not null default now(),
  primary key (enterprise_id, user_id)
);
create index enterprise_people_user on enterprise_people (user_id);

create table sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (id) on delete cascade,
  -- The enterprise the session acts in; null when the person belongs to none (yet).
  enterprise_id uuid references enterprises (id) on delete set null,
  token_hash bytea not null unique,
  csrf_hash bytea not null,
  created_at timestamptz not null default now(),
  -- Moved forward at most once a minute by the requests of the session: the idle expiry counts from it.
  last_seen_at timestamptz not null default now(),
  -- The absolute expiry: a session ends then, however busy.
  expires_at timestamptz not null,
  revoked_at timestamptz
);
create index sessions_user on sessions (user_id) where revoked_at is null;

-- Failed logins of the last 15 minutes, by the SHA-256 of the lowercased email (whether or not a person has
-- it: the answer must not tell). Ten lock the email for 15 minutes.
create table login_failures (
  email_hash bytea not null,
  at timestamptz not null default now()
);
create index login_failures_email on login_failures (email_hash, at);

create table login_locks (
  email_hash bytea primary key,
  until timestamptz not null
);

alter table api_tokens
  add column created_by_user uuid references users (id) on delete set null,
  add column last_used_at timestamptz;
