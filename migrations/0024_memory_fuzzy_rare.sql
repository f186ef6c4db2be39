-- Typo stand-ins that every note holds do not widen a search (issue 31, measured with
-- npm run bench:memory at 100,000 notes): a misspelt common word of a 25-word goal stood in for by the
-- common word itself made the search's filter match one note in ten, and the goal's recall took 25 ms
-- where it takes 3 ms spelt right. memory_filter (migration 0011) already leaves such words out of the
-- filter on a large memory; memory_fuzzy now says which of its stand-ins are rare by the same rule
-- (`rare`), and recall's first search adds only those to its filter. They all still rank (`query`), and
-- the second search, made when the first finds nothing, filters with every stand-in.
drop function memory_fuzzy(uuid, text);

create function memory_fuzzy(enterprise uuid, q text, out query tsquery, out weight float8,
                             out rare tsquery)
language plpgsql stable as $$
declare
  fixes text[];
  kept text[];
begin
  if q is null or not exists (select 1 from pg_extension where extname = 'pg_trgm') then
    return;
  end if;
  -- The candidates: see migration 0023.
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
  kept := fixes;
  if coalesce((select reltuples from pg_class where oid = 'memory_notes'::regclass), 0) >= 20000 then
    kept := array(
      select x from unnest(fixes) x
       where x <> all(array(
               select c.e
                 from pg_stats s,
                      unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) as c(e, f)
                where s.schemaname = current_schema() and s.tablename = 'memory_notes'
                  and s.attname = 'search' and c.f > 0.02 and c.e is not null)));
  end if;
  begin
    query := array_to_string(
      array(select '''' || replace(replace(x, '\', '\\'), '''', '''''') || '''' from unnest(fixes) x),
      ' | ')::tsquery;
    if cardinality(kept) > 0 then
      rare := array_to_string(
        array(select '''' || replace(replace(x, '\', '\\'), '''', '''''') || '''' from unnest(kept) x),
        ' | ')::tsquery;
    end if;
  exception when syntax_error then
    query := null;
    weight := null;
    rare := null;
  end;
end
$$;
