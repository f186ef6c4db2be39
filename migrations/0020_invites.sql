-- Invites (spec: Portal-only routes, POST /v1/users): an owner invites an email into the enterprise with a
-- role; the invited person accepts with the invite's secret (no mail is sent: the owner hands it over).
-- Only the secret's SHA-256 is stored. An invite is used once, expires after 7 days, and holds only while
-- the owner who made it is still an owner there.

create table invites (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  email text not null,
  role text not null check (role in ('owner', 'member')),
  token_hash bytea not null unique,
  invited_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by uuid references users (id) on delete set null
);
create index invites_pending on invites (enterprise_id, lower(email)) where accepted_at is null;
