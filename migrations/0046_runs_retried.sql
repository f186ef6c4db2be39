-- A bulk retry acts on each chain of retries once (issue 50): a run that was retried, whatever
-- became of its retry, is left to that retry. So both the operation's match and its batches ask
-- whether a run has a retry at all, not only a pending one: this index answers both, and the
-- one-run retry's question (is its retry still pending) as well, which runs_retry_pending answered
-- before.
create index runs_retried on runs (previous_run_id) where origin = 'retry';
drop index runs_retry_pending;
