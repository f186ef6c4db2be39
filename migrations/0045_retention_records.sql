-- Retention of what a run leaves behind besides itself (issue 46): a schedule's fires and a finished
-- bulk operation (with its items) leave the live tables with the enterprise's finished-runs window, as
-- the runs they started or moved do. These indexes let the pass find them from the oldest, per
-- enterprise, without reading every fire of the database (a schedule every minute makes 525,600 a year).
create index schedule_fires_enterprise_fire on schedule_fires (enterprise_id, fire_at);
create index run_bulk_operations_finished on run_bulk_operations (enterprise_id, finished_at)
  where status = 'completed';
