-- The organisation the engine assigns work through (spec: Concepts; Resources "Other records").
-- Composite keys (enterprise_id, id) let children reference parents within one enterprise only.

create table members (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  name text not null,
  email text not null,
  persona text not null default '',
  -- A removed member stays, so runs that name it keep their history; it is listed nowhere.
  removed_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, id)
);
create unique index members_email on members (enterprise_id, lower(email)) where removed_at is null;

create table member_avatars (
  enterprise_id uuid not null,
  member_id uuid primary key,
  content_type text not null,
  data bytea not null,
  updated_at timestamptz not null default now(),
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);

create table teams (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  name text not null,
  slug text not null,
  charter text not null default '',
  lead_member_id uuid,
  concurrent_run_limit integer check (concurrent_run_limit >= 1),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, slug),
  unique (enterprise_id, id),
  foreign key (enterprise_id, lead_member_id) references members (enterprise_id, id)
);

create table team_members (
  enterprise_id uuid not null,
  team_id uuid not null,
  member_id uuid not null,
  joined_at timestamptz not null default now(),
  primary key (team_id, member_id),
  foreign key (enterprise_id, team_id) references teams (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);
create index team_members_member on team_members (member_id);

-- A role is team-scoped (team_id) or enterprise-wide (team_id null); its slug is unique per
-- enterprise and team. Built-in roles (ceo, coo) exist in every enterprise.
create table roles (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  team_id uuid,
  name text not null,
  slug text not null,
  builtin boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, id),
  foreign key (enterprise_id, team_id) references teams (enterprise_id, id) on delete cascade
);
create unique index roles_slug on roles (enterprise_id, coalesce(team_id, '00000000-0000-0000-0000-000000000000'::uuid), slug);

create table role_members (
  enterprise_id uuid not null,
  role_id uuid not null,
  member_id uuid not null,
  granted_at timestamptz not null default now(),
  primary key (role_id, member_id),
  foreign key (enterprise_id, role_id) references roles (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);
create index role_members_member on role_members (member_id);
