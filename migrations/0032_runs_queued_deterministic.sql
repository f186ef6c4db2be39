-- Dispatch takes queued deterministic runs apart from the others (issue 43): an engine starts no more
-- runs for an executor than it has free slots, so runs that wait for a slot may stay queued, many of
-- them under a burst. Deterministic runs end inside the dispatch and take no slot; read through
-- runs_queued, the oldest first, each step would read past every run waiting for a slot to find them.
create index runs_queued_deterministic on runs (queued_at, id)
  where status = 'queued' and kind = 'deterministic';
