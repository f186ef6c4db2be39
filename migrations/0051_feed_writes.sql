-- The feed's writes, cheaper per event (issue 47: the feed's cost on bench:runs). Three pieces of
-- upkeep that every event paid. Measured on PostgreSQL 17, a run's three events written and moved as
-- bench:runs does them: the feed's part of the backends' CPU went from 61-63 µs an event to 46, and
-- on bench:runs the feed's share of PostgreSQL's CPU per run from 1.22 to 1.10:
--
-- - events' foreign key to enterprises: a check per row moved (a key-share lock of the enterprise,
--   12 µs an event, a third of the pass). The pass writes events only for enterprises whose head row
--   it has locked, and a head row goes with its enterprise (on delete cascade): the events go with
--   the head, by the trigger below, which the same row's lock orders after any pass under way.
-- - events_created, an index read only by the hourly prune (4 µs an event): the prune walks each
--   enterprise's feed in position order instead (domain/events/feed.ts pruneFeed).
-- - the inbox's primary key, which nothing looks up (the pass finds its rows through
--   event_inbox_enterprise and deletes them by ctid).
alter table events drop constraint events_enterprise_id_fkey;
drop index events_created;
alter table event_inbox drop constraint event_inbox_pkey;

-- An enterprise deleted (osd never does; an operator may): its feed, and what waits for a position.
create function feed_forget_enterprise() returns trigger language plpgsql as $$
begin
  delete from events where enterprise_id = old.enterprise_id;
  delete from event_inbox where enterprise_id = old.enterprise_id;
  return null;
end
$$;
create trigger event_feed_heads_forget after delete on event_feed_heads
  for each row execute function feed_forget_enterprise();
