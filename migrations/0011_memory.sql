-- Memory: notes the company learns, per task, team or enterprise (spec: Concepts, Memory; DESIGN 10).
-- A task reads its own notes, its team's and the enterprise's. Search is PostgreSQL full-text search on a
-- generated tsvector with a GIN index; no extension.

create table memory_notes (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  layer text not null check (layer in ('task', 'team', 'enterprise')),
  -- The owner of a task note or a team note; an enterprise note has neither.
  task_id uuid,
  team_id uuid,
  text text not null check (char_length(text) between 1 and 4000),
  kind text not null default 'note' check (kind in ('note', 'correction')),
  corrects_id uuid,
  -- proposed: a training run's correction of a person's note, waiting in the review queue (a conflict);
  -- neither it nor superseded and tombstoned notes are ever recalled or listed.
  status text not null default 'active'
    check (status in ('active', 'proposed', 'superseded', 'tombstoned')),
  source text not null check (source in ('person', 'training')),
  -- [{runId, excerpt}]: the runs a lesson was learned from.
  evidence jsonb not null default '[]',
  rating_up integer not null default 0,
  rating_down integer not null default 0,
  recalls bigint not null default 0,
  -- The correction that superseded this note.
  superseded_by_id uuid,
  -- Who wrote it: token:<id> for a person through the API, run:<id> for a training run.
  created_by text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  -- 'english': notes are prose written by people and models in English, and stemming lets "deploys"
  -- recall a note about "deploy" and drops stop words ("the", "on") that would match every note.
  search tsvector generated always as (to_tsvector('english', text)) stored,
  unique (enterprise_id, id),
  check (layer <> 'task' or (task_id is not null and team_id is null)),
  check (layer <> 'team' or (team_id is not null and task_id is null)),
  check (layer <> 'enterprise' or (task_id is null and team_id is null)),
  -- A correction's corrects_id is null only once the note it corrected is gone.
  check (corrects_id is null or kind = 'correction'),
  -- A task's or team's notes go with it.
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, team_id) references teams (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, corrects_id) references memory_notes (enterprise_id, id)
    on delete set null (corrects_id),
  foreign key (enterprise_id, superseded_by_id) references memory_notes (enterprise_id, id)
    on delete set null (superseded_by_id)
);
-- Only active notes are searched: the index holds nothing else.
create index memory_notes_search on memory_notes using gin (search) where status = 'active';
create index memory_notes_list on memory_notes (enterprise_id, created_at desc, id desc)
  where status = 'active';
create index memory_notes_task on memory_notes (enterprise_id, task_id) where task_id is not null;
create index memory_notes_team on memory_notes (enterprise_id, team_id) where team_id is not null;

-- What a recall ranks by: the words of the text (websearch_to_tsquery), any of them matching, so a run's
-- goal and input recall every note that shares a word with them, and ts_rank ranks notes that share more
-- above those that share fewer. A term written as -word is searched as word: a recall wants what a text
-- is about. Should the rewrite ever fail to parse, the query as written is used.
create function memory_query(q text) returns tsquery language plpgsql immutable strict as $$
declare
  parsed tsquery := websearch_to_tsquery('english', q);
begin
  begin
    return replace(replace(parsed::text, '!', ''), ' & ', ' | ')::tsquery;
  exception when others then
    return parsed;
  end;
end
$$;

-- Which notes a recall looks at: on a large memory (20,000 notes or more), a word in more than 2% of
-- the notes (PostgreSQL's own statistics of the search column, most_common_elems) finds nothing on its
-- own: it only ranks the notes the text's rarer words find. Without that, a goal of 25 everyday words
-- finds most of the notes and ranks them all (a few hundred milliseconds at 100,000 notes). A text of
-- only such words finds the notes holding all of them, as websearch_to_tsquery reads it. The caller
-- asks again with memory_query when this finds nothing.
create function memory_filter(q text) returns tsquery language plpgsql stable strict as $$
declare
  parsed tsquery := websearch_to_tsquery('english', q);
  words text[];
  common text[];
  kept text[];
begin
  begin
    if coalesce((select reltuples from pg_class where oid = 'memory_notes'::regclass), 0) < 20000 then
      return memory_query(q);
    end if;
    -- The lexemes as tsquery writes them (quoted, a quote doubled).
    words := array(
      select distinct m[1] from regexp_matches(parsed::text, '''((?:[^'']|'''')*)''', 'g') m);
    if cardinality(words) = 0 then
      return parsed;
    end if;
    common := array(
      select x.e
        from pg_stats s,
             unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) as x(e, f)
       where s.schemaname = current_schema() and s.tablename = 'memory_notes'
         and s.attname = 'search' and x.f > 0.02 and x.e is not null);
    kept := array(select w from unnest(words) w where replace(w, '''''', '''') <> all(common));
    if cardinality(kept) = 0 then
      return parsed;
    end if;
    return array_to_string(array(select '''' || w || '''' from unnest(kept) w), ' | ')::tsquery;
  exception when others then
    return memory_query(q);
  end;
end
$$;

create table memory_ratings (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  note_id uuid not null,
  rating text not null check (rating in ('up', 'down')),
  reason text,
  created_by text,
  created_at timestamptz not null default now(),
  foreign key (enterprise_id, note_id) references memory_notes (enterprise_id, id) on delete cascade
);
create index memory_ratings_note on memory_ratings (enterprise_id, note_id);

-- The review queue: conflicts (a training run's correction of a person's note, not applied) and notes
-- rated down.
create table memory_review_items (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  kind text not null check (kind in ('conflict', 'rated_down')),
  note_id uuid not null,
  -- conflict: the proposed correction.
  correction_id uuid,
  reason text,
  status text not null default 'open' check (status in ('open', 'resolved', 'dismissed')),
  created_at timestamptz not null default now(),
  decided_at timestamptz,
  unique (enterprise_id, id),
  check ((kind = 'conflict') = (correction_id is not null)),
  foreign key (enterprise_id, note_id) references memory_notes (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, correction_id) references memory_notes (enterprise_id, id)
    on delete cascade
);
-- One open rated_down item per note, however many rate it down.
create unique index memory_review_open_rated_down on memory_review_items (note_id)
  where status = 'open' and kind = 'rated_down';
create index memory_review_open on memory_review_items (enterprise_id, created_at)
  where status = 'open';

-- Every review decision: who, when and why.
create table memory_review_decisions (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  item_id uuid not null,
  decision text not null check (decision in ('resolved', 'dismissed')),
  correction_id uuid,
  reason text not null,
  decided_by text,
  decided_at timestamptz not null default now(),
  foreign key (enterprise_id, item_id) references memory_review_items (enterprise_id, id)
    on delete cascade,
  foreign key (enterprise_id, correction_id) references memory_notes (enterprise_id, id)
    on delete set null (correction_id)
);
create index memory_review_decisions_list on memory_review_decisions (enterprise_id, decided_at desc);

-- recall-health counts the recall events of the last 24 hours per enterprise.
create index run_events_memory on run_events (enterprise_id, created_at)
  where type in ('memory.recalled', 'memory.recall_failed');
