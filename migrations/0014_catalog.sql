-- The catalogue (spec: Concepts "Catalogue", Endpoints Catalogue; DESIGN 12).
--
-- Originals are ordinary task and role rows. The service's own entries live in one service-owned
-- enterprise (enterprises.catalog), loaded from the files under catalog/ at start; an enterprise's
-- published entries stay its own rows. A row is public while published_at is set.
--
-- A clone is a task of the cloning enterprise (origin clone, source_task_id the original's id) with
-- versions of its own: each new version of the original is written into every attached clone as a new
-- version of the clone (source_version_id names the original's version), in the same transaction. So a
-- clone's runs never read another enterprise's rows. A clone whose original left the catalogue keeps its
-- last version and is detached (detached_at).

alter table enterprises add column catalog boolean not null default false;
create unique index enterprises_one_catalog on enterprises (catalog) where catalog;

alter table tasks
  add column published_at timestamptz,
  add column detached_at timestamptz,
  -- The service's entries: the hash of the files the row was loaded from, and the schedule a clone starts with.
  add column source_hash text,
  add column catalog_schedule jsonb;
create index tasks_published on tasks (published_at) where published_at is not null;
create index tasks_source_task on tasks (source_task_id) where source_task_id is not null;

alter table task_versions add column source_version_id uuid;

alter table roles
  add column published_at timestamptz,
  add column description text not null default '',
  add column source_hash text;
create index roles_published on roles (published_at) where published_at is not null;
