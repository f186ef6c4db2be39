-- Tasks and their immutable versions (spec: Task definition, Versioning; DESIGN 3).
-- Fields the spec says change the task at once (name, slug, teamId, assigneeRole, serializeOn, status,
-- kind) are columns of the task; every other field of the definition lives in a version.

create table tasks (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  slug text not null,
  name text not null,
  team_id uuid,
  assignee_role text,
  kind text not null default 'llm' check (kind in ('llm', 'deterministic')),
  status text not null default 'active' check (status in ('active', 'deprecated')),
  serialize_on jsonb,
  current_version_id uuid,
  -- Warnings of the definition checks that did not stop the save (spec: Definition checks).
  definition_issues jsonb not null default '[]',
  -- custom: made here; copy: an independent copy; clone: linked to a catalogue original, read-only;
  -- builtin: the service's own, immutable.
  origin text not null default 'custom' check (origin in ('custom', 'copy', 'clone', 'builtin')),
  source_task_id uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, slug),
  unique (enterprise_id, id),
  -- No cascade: a team that tasks belong to is not deleted (domain/teams.ts refuses it first).
  foreign key (enterprise_id, team_id) references teams (enterprise_id, id)
);
create index tasks_team on tasks (enterprise_id, team_id);
create index tasks_assignee_role on tasks (enterprise_id, assignee_role);

create table task_versions (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  task_id uuid not null,
  number integer not null,
  definition jsonb not null,
  created_at timestamptz not null default now(),
  unique (task_id, number),
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);

alter table tasks
  add foreign key (current_version_id) references task_versions (id) deferrable initially deferred;

-- A task's schedule (DESIGN 7): a 5-field cron in an IANA time zone, with the input its runs start with.
create table task_schedules (
  task_id uuid primary key,
  enterprise_id uuid not null,
  cron text not null,
  timezone text not null,
  input jsonb not null default '{}',
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);

-- One row per fire of a schedule: the unique key is how exactly one of many engine processes starts
-- the run of that minute (DESIGN 7).
create table schedule_fires (
  task_id uuid not null,
  fire_at timestamptz not null,
  enterprise_id uuid not null,
  run_id uuid,
  outcome text not null,
  created_at timestamptz not null default now(),
  primary key (task_id, fire_at),
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);

-- A version is immutable once saved (spec: Task read answer): no code path updates one, and the
-- database refuses it too.
create function task_versions_immutable() returns trigger language plpgsql as $$
begin
  raise exception 'task versions are immutable';
end
$$;
create trigger task_versions_immutable before update on task_versions
  for each row execute function task_versions_immutable();
