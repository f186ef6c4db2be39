-- A recall's terms in one call (issue 30: recall at a run's first start, p50 <= 3 ms at 100,000 notes).
-- Recall asked memory_fuzzy and memory_filter_fixed (0026) for the same text: each looked the text's
-- unknown words up among the enterprise's lexemes (memory_typos) and read the common lexemes from
-- pg_stats, so a 25-word goal did both twice (about 1 ms each of a 3 ms search). memory_search_terms
-- does each once and answers what both answered; recall's two searches and a notes list's q read it.

-- memory_filter_parsed's rule (0026) with the common lexemes given.
create function memory_filter_parsed(parsed tsquery, common text[]) returns tsquery
language plpgsql stable strict as $$
declare
  words text[];
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

create or replace function memory_filter_parsed(parsed tsquery) returns tsquery
language sql stable strict as $$
  select memory_filter_parsed(parsed, memory_common_lexemes())
$$;

-- `first`: recall's first filter, the text's rarer words with each unknown word read as its most similar
-- lexeme (memory_filter_fixed, 0026), or'ed with the stand-ins few notes hold; `every`: the second
-- search's (and a notes list's): every word, or'ed with every stand-in; `query`: what ranks
-- (memory_query); `fuzzy` and `weight`: the stand-ins and their mean similarity (memory_fuzzy, 0024),
-- null when the text has no unknown word or pg_trgm is missing.
create function memory_search_terms(enterprise uuid, q text,
                                    out first tsquery, out every tsquery, out query tsquery,
                                    out fuzzy tsquery, out weight float8)
language plpgsql stable as $$
declare
  parsed tsquery := websearch_to_tsquery('english', coalesce(q, ''));
  common text[] := memory_common_lexemes();
  fixes text[];
  found int := 0;
  kept text[];
  rare tsquery;
  r record;
begin
  query := memory_query(q);
  -- Each unknown word's two most similar lexemes stand in for it; the most similar reads it.
  for r in select t.typo, t.fix, t.sim, t.nth from memory_typos(enterprise, q, 2) t loop
    fixes := fixes || r.fix;
    found := found + 1;
    weight := coalesce(weight, 0) + r.sim;
    if r.nth = 1 then
      parsed := ts_rewrite(parsed, memory_lexeme_query(r.typo), memory_lexeme_query(r.fix));
    end if;
  end loop;
  first := memory_filter_parsed(parsed, common);
  if found > 0 then
    -- As memory_fuzzy had them: the stand-ins once each, in order, and their mean similarity.
    fixes := array(select distinct x from unnest(fixes) x order by 1);
    weight := weight / found;
    kept := array(select x from unnest(fixes) x where x <> all(common));
    begin
      fuzzy := array_to_string(array(select memory_lexeme_query(x)::text from unnest(fixes) x), ' | ')::tsquery;
      if cardinality(kept) > 0 then
        rare := array_to_string(array(select memory_lexeme_query(x)::text from unnest(kept) x), ' | ')::tsquery;
      end if;
    exception when syntax_error then
      fuzzy := null;
      weight := null;
      rare := null;
    end;
  else
    weight := null;
  end if;
  first := case when rare is null then first else first || rare end;
  every := case when fuzzy is null then query else query || fuzzy end;
end
$$;

drop function memory_fuzzy(uuid, text);
drop function memory_filter_fixed(uuid, text);
