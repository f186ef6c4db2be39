-- What the engine reads at every pass, through an index whatever the statistics say (issue 30). After a
-- burst of starts, before autovacuum has analysed runs again (once a minute at best), the planner took
-- these reads for reads of a small table and scanned it: at 20,000 finished runs each cost 5-9 ms, and
-- one start in a quiet `osd serve` took 9 ms from its answer to its end where it takes 2.3 ms on a fresh
-- database.
--
-- Held runs whose back-off is over (resumeDueHolds), and when the next one is due (nextDueRun).
create index runs_held on runs (not_before nulls first) where status = 'blocked';
-- Pending runs that wait for a time (a successor's delay): when the next one is due.
create index runs_pending_later on runs (not_before) where status = 'pending' and not_before is not null;
