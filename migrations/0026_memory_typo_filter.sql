-- A misspelt word among common ones made the slowest asks (issue 31, npm run bench:memory at 100,000 notes:
-- "login storage tax lanugage", p99 36-41 ms against 19 ms spelt right). When every word of a text is
-- common, memory_filter (0011) searches for notes holding them all; the misspelt word is in that "all" and
-- no note holds it, so the first search found nothing, and the second took every note holding any of the
-- words. Recall's first search now reads the text with each unknown word replaced by its most similar
-- lexeme (memory_filter_fixed), so a typo costs what the word spelt right costs; the stand-ins still rank,
-- and the second search is as it was.
--
-- memory_typos is the look-up memory_fuzzy made (0023, 0024), now one function both use; which lexemes
-- most notes hold is said by memory_common_lexemes, for memory_filter and memory_fuzzy alike.

-- The words of `q` no note of the enterprise holds (at most 8, of 4 to 40 letters, no digits), each with
-- its `per_word` most similar lexemes (similarity >= 0.3; among those of its first letter and a near
-- length: see 0023). No rows without pg_trgm.
create function memory_typos(enterprise uuid, q text, per_word int)
returns table (typo text, fix text, sim float8, nth bigint)
language plpgsql stable as $$
begin
  if q is null or not exists (select 1 from pg_extension where extname = 'pg_trgm') then
    return;
  end if;
  return query
  select words.w, f.lexeme, f.sim, f.nth
    from (select w from unnest(tsvector_to_array(to_tsvector('english', q))) w
           where char_length(w) between 4 and 40 and w !~ '[0-9]'
             and not exists (select 1 from memory_lexemes l
                              where l.enterprise_id = enterprise and l.lexeme = w)
           limit 8) words,
         lateral (select l.lexeme, similarity(l.lexeme, words.w)::float8 as sim,
                         row_number() over (order by similarity(l.lexeme, words.w) desc, l.lexeme) as nth
                    from memory_lexemes l
                   where l.enterprise_id = enterprise and left(l.lexeme, 1) = left(words.w, 1)
                     and char_length(l.lexeme) between char_length(words.w) - 2
                                                   and char_length(words.w) + 2
                     and similarity(l.lexeme, words.w) >= 0.3
                   order by 2 desc, 1
                   limit per_word) f;
end
$$;

-- A lexeme as a tsquery of itself.
create function memory_lexeme_query(x text) returns tsquery language sql immutable strict as $$
  select ('''' || replace(replace(x, '\', '\\'), '''', '''''') || '''')::tsquery
$$;

-- The lexemes more than 2% of notes hold, by the statistics of memory_notes.search; none while memory is
-- small (under 20,000 notes), where every word filters.
create function memory_common_lexemes() returns text[] language plpgsql stable as $$
-- plpgsql, not sql: its plan over the pg_stats view is kept for the session (an sql function's is made
-- again at each call, which cost an ask about 1 ms in npm run bench:memory).
begin
  if coalesce((select reltuples from pg_class where oid = 'memory_notes'::regclass), 0) < 20000 then
    return '{}'::text[];
  end if;
  return array(select c.e
                 from pg_stats s,
                      unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) as c(e, f)
                where s.schemaname = current_schema() and s.tablename = 'memory_notes'
                  and s.attname = 'search' and c.f > 0.02 and c.e is not null);
end
$$;

drop function memory_fuzzy(uuid, text);

-- As in 0024, over memory_typos.
create function memory_fuzzy(enterprise uuid, q text, out query tsquery, out weight float8,
                             out rare tsquery)
language plpgsql stable as $$
declare
  fixes text[];
  common text[];
  kept text[];
begin
  select array_agg(distinct t.fix), avg(t.sim) into fixes, weight from memory_typos(enterprise, q, 2) t;
  if fixes is null then
    weight := null;
    return;
  end if;
  common := memory_common_lexemes();
  kept := array(select x from unnest(fixes) x where x <> all(common));
  begin
    query := array_to_string(array(select memory_lexeme_query(x)::text from unnest(fixes) x), ' | ')::tsquery;
    if cardinality(kept) > 0 then
      rare := array_to_string(array(select memory_lexeme_query(x)::text from unnest(kept) x), ' | ')::tsquery;
    end if;
  exception when syntax_error then
    query := null;
    weight := null;
    rare := null;
  end;
end
$$;

-- memory_filter's rule (0011) over a parsed query rather than a text; memory_filter itself now says it
-- through this one.
create function memory_filter_parsed(parsed tsquery) returns tsquery language plpgsql stable strict as $$
declare
  words text[];
  common text[];
  kept text[];
begin
  begin
    if coalesce((select reltuples from pg_class where oid = 'memory_notes'::regclass), 0) < 20000 then
      return replace(replace(parsed::text, '!', ''), ' & ', ' | ')::tsquery;
    end if;
    words := array(
      select distinct m[1] from regexp_matches(parsed::text, '''((?:[^'']|'''')*)''', 'g') m);
    if cardinality(words) = 0 then
      return parsed;
    end if;
    common := memory_common_lexemes();
    kept := array(select w from unnest(words) w where replace(w, '''''', '''') <> all(common));
    if cardinality(kept) = 0 then
      return parsed;
    end if;
    return array_to_string(array(select '''' || w || '''' from unnest(kept) w), ' | ')::tsquery;
  exception when others then
    return parsed;
  end;
end
$$;

-- Recall's first filter: memory_filter of `q` read with each unknown word as its most similar lexeme.
create function memory_filter_fixed(enterprise uuid, q text) returns tsquery
language plpgsql stable as $$
declare
  parsed tsquery := websearch_to_tsquery('english', coalesce(q, ''));
  r record;
begin
  for r in select t.typo, t.fix from memory_typos(enterprise, q, 1) t loop
    parsed := ts_rewrite(parsed, memory_lexeme_query(r.typo), memory_lexeme_query(r.fix));
  end loop;
  return memory_filter_parsed(parsed);
end
$$;

create or replace function memory_filter(q text) returns tsquery language sql stable strict as $$
  select memory_filter_parsed(websearch_to_tsquery('english', q))
$$;
