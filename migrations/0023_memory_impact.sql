-- Memory that proves itself (issue 31; DESIGN 10): what each note did to the outcomes of the runs that
-- recalled it, recall that forgives typos (pg_trgm), no near-duplicate notes, notes that expire.

-- pg_trgm ships with PostgreSQL's contrib (the embedded server has it) and is a trusted extension: the
-- owner of the database, or any role with CREATE on it, may create it. On an external server where osd's
-- role has no such right (or the server lacks contrib), the refusal must not fail this migration: the
-- block below catches it (a block with an exception clause runs in a subtransaction, so the failed
-- create leaves nothing behind) and osd goes on without it. osd says so once at start, recall stays
-- full-text only and a duplicate is a note equal after case and white-space folding
-- (learning/memory/support.ts). An operator who creates the extension later gets trigram recall at
-- once, without the trigram indexes below (made only here): slower, never wrong.
do $$
begin
  create extension if not exists pg_trgm;
exception
  when insufficient_privilege or undefined_file or feature_not_supported then
    raise notice 'pg_trgm not created (%): memory recall stays full-text only', sqlerrm;
end
$$;

-- --- expiry and idempotency -----------------------------------------------------------------------------

-- A note may hold only until a time (a release date, who is on call): after it, it is neither recalled
-- nor listed among active notes, and a person may extend it.
alter table memory_notes add column valid_until timestamptz,
  add column idempotency_key text;
-- A person's request repeated with the same key answers the first note (created_by is the caller).
create unique index memory_notes_idempotency on memory_notes (enterprise_id, created_by, idempotency_key)
  where idempotency_key is not null;

-- --- near-duplicates --------------------------------------------------------------------------------------

-- A note's text as duplicates are judged: lower case, white space runs as one space, no outer spaces.
create function memory_fold(t text) returns text language sql immutable strict parallel safe as $$
  select lower(regexp_replace(btrim(t), '\s+', ' ', 'g'))
$$;

-- The active, unexpired note of one layer and owner that `note_text` near-duplicates (trigram similarity
-- of the folded texts >= 0.8), the most similar first; else null. `except_id` is left out: the note a
-- correction corrects. Without pg_trgm, only a note equal after folding. The threshold of `%` is set for
-- the transaction: every use of `%` in osd sets the one it means first.
create function memory_duplicate(enterprise uuid, note_layer text, note_task uuid, note_team uuid,
                                 note_text text, except_id uuid) returns uuid
language plpgsql volatile as $$
declare
  folded text := memory_fold(note_text);
  found uuid;
begin
  if exists (select 1 from pg_extension where extname = 'pg_trgm') then
    perform set_config('pg_trgm.similarity_threshold', '0.8', true);
    select n.id into found
      from memory_notes n
     where n.enterprise_id = enterprise and n.status = 'active' and n.layer = note_layer
       and n.task_id is not distinct from note_task and n.team_id is not distinct from note_team
       and (n.valid_until is null or n.valid_until > now())
       and n.id is distinct from except_id
       and memory_fold(n.text) % folded and similarity(memory_fold(n.text), folded) >= 0.8
     order by similarity(memory_fold(n.text), folded) desc, n.created_at, n.id
     limit 1;
  else
    select n.id into found
      from memory_notes n
     where n.enterprise_id = enterprise and n.status = 'active' and n.layer = note_layer
       and n.task_id is not distinct from note_task and n.team_id is not distinct from note_team
       and (n.valid_until is null or n.valid_until > now())
       and n.id is distinct from except_id
       and memory_fold(n.text) = folded
     order by n.created_at, n.id
     limit 1;
  end if;
  return found;
end
$$;

-- --- typo-forgiving recall ---------------------------------------------------------------------------

-- Every lexeme of an enterprise's notes (of any status: a note's text never changes), what a word of a
-- question is looked up in: a word that is none of them is a typo or a word memory does not know, and
-- the most similar lexemes stand in for it (memory_fuzzy). Kept by the trigger below for every writer.
create table memory_lexemes (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  lexeme text not null,
  primary key (enterprise_id, lexeme)
);

-- In lexeme order, so two notes written at once with the same new words never wait on each other in a
-- circle.
create function memory_lexemes_add() returns trigger language plpgsql as $$
begin
  insert into memory_lexemes (enterprise_id, lexeme)
  select distinct n.enterprise_id, w from new_notes n, unnest(tsvector_to_array(n.search)) w
   order by 1, 2
  on conflict do nothing;
  return null;
end
$$;
create trigger memory_notes_lexemes after insert on memory_notes
  referencing new table as new_notes for each statement execute function memory_lexemes_add();

insert into memory_lexemes (enterprise_id, lexeme)
select distinct n.enterprise_id, w from memory_notes n, unnest(tsvector_to_array(n.search)) w
on conflict do nothing;

-- The lexemes that stand in for the words of `q` no note of the enterprise holds (at most 8 such words
-- of 4 to 40 letters, no digits: ids and numbers are not misspelt words), 2 per word, each with trigram
-- similarity >= 0.3, OR-ed; `weight` their mean similarity, which the recall's score multiplies their
-- rank by. Null when every word is known, none has a similar lexeme, or pg_trgm is not there.
-- The candidates are the lexemes that begin with the word's letter and are at most 2 letters longer or
-- shorter (memory_lexemes_near): a typo is rarely in a word's first letter, and a trigram index over
-- the lexemes (gin_trgm_ops, or gist's nearest neighbours) reads most of its posting lists for a
-- word's first trigrams ("  d", " de"): 3 to 10 ms a word at 50,000 lexemes, and the planner preferred
-- a sequential scan to it (100 ms), where this reads a few hundred index entries (under 1 ms).
create function memory_fuzzy(enterprise uuid, q text, out query tsquery, out weight float8)
language plpgsql stable as $$
declare
  fixes text[];
begin
  if q is null or not exists (select 1 from pg_extension where extname = 'pg_trgm') then
    return;
  end if;
  select array_agg(distinct f.lexeme), avg(f.sim)
    into fixes, weight
    from (select w from unnest(tsvector_to_array(to_tsvector('english', q))) w
           where char_length(w) between 4 and 40 and w !~ '[0-9]'
             and not exists (select 1 from memory_lexemes l
                              where l.enterprise_id = enterprise and l.lexeme = w)
           limit 8) words,
         lateral (select l.lexeme, similarity(l.lexeme, words.w)::float8 as sim
                    from memory_lexemes l
                   where l.enterprise_id = enterprise and left(l.lexeme, 1) = left(words.w, 1)
                     and char_length(l.lexeme) between char_length(words.w) - 2
                                                   and char_length(words.w) + 2
                     and similarity(l.lexeme, words.w) >= 0.3
                   order by sim desc, l.lexeme
                   limit 2) f;
  if fixes is null then
    weight := null;
    return;
  end if;
  begin
    query := array_to_string(
      array(select '''' || replace(replace(x, '\', '\\'), '''', '''''') || '''' from unnest(fixes) x),
      ' | ')::tsquery;
  exception when syntax_error then
    query := null;
    weight := null;
  end;
end
$$;
create index memory_lexemes_near on memory_lexemes
  (enterprise_id, left(lexeme, 1), char_length(lexeme)) include (lexeme);

do $$
begin
  if exists (select 1 from pg_extension where extname = 'pg_trgm') then
    -- The duplicate check's candidates: active notes whose folded text shares trigrams with the new one.
    execute 'create index memory_notes_fold_trgm on memory_notes
               using gin (memory_fold(text) gin_trgm_ops) where status = ''active''';
  end if;
end
$$;

-- --- impact -----------------------------------------------------------------------------------------------

-- Counted when runs end (learning/memory/impact.ts, through the hook runs/outcomes.ts calls), so a read
-- never scans runs: every finished run (succeeded or failed; a cancelled run is no outcome) of a task...
create table memory_task_outcomes (
  enterprise_id uuid not null,
  task_id uuid primary key,
  succeeded bigint not null default 0,
  failed bigint not null default 0,
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);

-- ...and per note and task whose runs recalled it (memory.recalled): those runs' outcomes, and the
-- task's counts just before the first of them ended (first_*) and once the latest of them ended
-- (last_*). The runs of the task that did not recall the note over that period are the difference:
-- last - first - the recalling runs.
create table memory_note_impact (
  enterprise_id uuid not null,
  note_id uuid not null,
  task_id uuid not null,
  succeeded integer not null default 0,
  failed integer not null default 0,
  first_succeeded bigint not null,
  first_failed bigint not null,
  last_succeeded bigint not null,
  last_failed bigint not null,
  first_at timestamptz not null,
  last_at timestamptz not null,
  primary key (note_id, task_id),
  foreign key (enterprise_id, note_id) references memory_notes (enterprise_id, id) on delete cascade,
  foreign key (enterprise_id, task_id) references tasks (enterprise_id, id) on delete cascade
);
create index memory_note_impact_enterprise on memory_note_impact (enterprise_id);

-- A note's impact (DESIGN 10, issue 31): of the finished runs that recalled it, how many succeeded and
-- failed; the success rate of the finished runs of the same tasks over the same period that did not
-- recall it; lift = successRate - baseRate, null while either side has fewer than 5 runs. Rates to 4
-- decimals. A filter on note_id or enterprise_id reaches memory_note_impact's indexes (it groups by them).
create view memory_impact as
select x.enterprise_id, x.note_id, x.succeeded + x.failed as recalled_runs, x.succeeded, x.failed,
       x.base_succeeded, x.base_failed,
       round(x.succeeded::numeric / nullif(x.succeeded + x.failed, 0), 4)::float8 as success_rate,
       round(x.base_succeeded::numeric / nullif(x.base_succeeded + x.base_failed, 0), 4)::float8
         as base_rate,
       case when x.succeeded + x.failed >= 5 and x.base_succeeded + x.base_failed >= 5 then
         round(x.succeeded::numeric / (x.succeeded + x.failed)
               - x.base_succeeded::numeric / (x.base_succeeded + x.base_failed), 4)::float8
       end as lift
  from (select i.enterprise_id, i.note_id,
               sum(i.succeeded)::int as succeeded, sum(i.failed)::int as failed,
               sum(i.last_succeeded - i.first_succeeded - i.succeeded)::int as base_succeeded,
               sum(i.last_failed - i.first_failed - i.failed)::int as base_failed
          from memory_note_impact i
         group by i.enterprise_id, i.note_id) x;

-- The runs that ended before this migration, counted as the hook would have: each task's finished runs
-- in the order they ended, and per note and task the counts around its recalling runs.
with ended as (
  select r.id, r.enterprise_id, r.task_id, r.status, r.finished_at,
         count(*) filter (where r.status = 'succeeded') over w as s_upto,
         count(*) filter (where r.status = 'failed') over w as f_upto
    from runs r
   where r.status in ('succeeded', 'failed') and r.finished_at is not null
  window w as (partition by r.task_id order by r.finished_at, r.id
               rows between unbounded preceding and current row)
)
insert into memory_task_outcomes (enterprise_id, task_id, succeeded, failed)
select enterprise_id, task_id, max(s_upto), max(f_upto) from ended group by enterprise_id, task_id;

with ended as (
  select r.id, r.enterprise_id, r.task_id, r.status, r.finished_at,
         count(*) filter (where r.status = 'succeeded') over w as s_upto,
         count(*) filter (where r.status = 'failed') over w as f_upto
    from runs r
   where r.status in ('succeeded', 'failed') and r.finished_at is not null
  window w as (partition by r.task_id order by r.finished_at, r.id
               rows between unbounded preceding and current row)
),
recalled as (
  select distinct e.run_id, x.note_id
    from run_events e, jsonb_array_elements_text(e.payload -> 'noteIds') x(note_id)
   where e.type = 'memory.recalled' and jsonb_typeof(e.payload -> 'noteIds') = 'array'
)
insert into memory_note_impact (enterprise_id, note_id, task_id, succeeded, failed, first_succeeded,
                                first_failed, last_succeeded, last_failed, first_at, last_at)
select en.enterprise_id, n.id, en.task_id,
       count(*) filter (where en.status = 'succeeded'),
       count(*) filter (where en.status = 'failed'),
       (array_agg(en.s_upto - (en.status = 'succeeded')::int order by en.finished_at, en.id))[1],
       (array_agg(en.f_upto - (en.status = 'failed')::int order by en.finished_at, en.id))[1],
       (array_agg(en.s_upto order by en.finished_at desc, en.id desc))[1],
       (array_agg(en.f_upto order by en.finished_at desc, en.id desc))[1],
       min(en.finished_at), max(en.finished_at)
  from recalled rc
  join ended en on en.id = rc.run_id
  join memory_notes n on n.enterprise_id = en.enterprise_id and n.id::text = rc.note_id
 group by en.enterprise_id, n.id, en.task_id;

-- --- low impact -----------------------------------------------------------------------------------------

-- A note recalled by at least 20 finished runs whose lift is -0.2 or lower opens a review item; one open
-- per note, and after a decision another only once 20 more runs recalled it (recalled_runs: the note's
-- recalled runs when the item opened).
alter table memory_review_items drop constraint memory_review_items_kind_check;
alter table memory_review_items
  add constraint memory_review_items_kind_check
    check (kind in ('conflict', 'rated_down', 'low_impact')),
  add column recalled_runs integer;
create unique index memory_review_open_low_impact on memory_review_items (note_id)
  where status = 'open' and kind = 'low_impact';
create index memory_review_low_impact on memory_review_items (note_id, recalled_runs)
  where kind = 'low_impact';
