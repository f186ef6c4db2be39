-- Retention per enterprise, with an archive that reads back (issue 46; DESIGN 15). A background pass of
-- every engine moves what is past its window out of the live tables: finished executions with their
-- events, journal, logs and gates; closed chats with their messages, turns and question gates; webhook
-- deliveries. With archive on, what leaves is written first to gzip JSON lines files under
-- OSD_ARCHIVE_DIR, and the index below keeps where each run and chat went, so that GET /v1/runs/{id}
-- and GET /v1/chats/{id} still answer it (archived: true).

-- An enterprise's windows, as ISO 8601 durations (null: kept for ever). No row: the defaults
-- (domain/retention/settings.ts): finished runs 90 days, closed chats 180, webhook deliveries 30,
-- archive on.
create table retention_settings (
  enterprise_id uuid primary key references enterprises (id) on delete cascade,
  finished_runs text,
  closed_chats text,
  webhook_deliveries text,
  archive boolean not null default true,
  updated_at timestamptz not null default now()
);

-- When a chat closed: its window starts then. A trigger rather than each closing path setting it, so
-- that no way of closing a chat (closed, applied, rejected) can leave it unset. Chats closed before
-- this migration count from their last message.
alter table chats add column closed_at timestamptz;
update chats set closed_at = coalesce(last_message_at, created_at) where status = 'closed';

create function chat_closed_at() returns trigger language plpgsql as $$
begin
  if new.status = 'closed' and old.status <> 'closed' then
    new.closed_at := now();
  end if;
  return new;
end
$$;

create trigger chat_closed_at before update of status on chats
  for each row execute function chat_closed_at();

create index chats_closed on chats (enterprise_id, closed_at) where status = 'closed';

-- A gzip member of an archive file: one per batch the pass moved. Files are <enterprise id>/<UTC
-- day>.jsonl.gz under OSD_ARCHIVE_DIR; offset and length let a read inflate only its member.
create table archive_members (
  id bigint generated always as identity primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  file text not null,
  byte_offset bigint not null,
  byte_length integer not null,
  created_at timestamptz not null default now()
);
-- Where the next member of a file goes: after the last one committed (a member written by a batch
-- that then rolled back is overwritten).
create index archive_members_file on archive_members (file, byte_offset desc);

-- Which member holds an archived run or chat (ids are UUIDs, unique across both). Kept small on
-- purpose: it is the one thing that grows with every run moved out.
create table archive_index (
  id uuid primary key,
  member_id bigint not null
);
