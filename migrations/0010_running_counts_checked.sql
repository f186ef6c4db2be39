-- The running counts that dispatch reads under row locks (DESIGN 5) are kept by transitionAll. A count
-- below zero can only come from a move decided on a stale row: refuse it, rather than let a limit
-- admit one run too many from then on.
alter table enterprises add constraint enterprises_running_count_not_negative check (running_count >= 0);
alter table teams add constraint teams_running_count_not_negative check (running_count >= 0);
