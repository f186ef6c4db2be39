-- Limits (issue 44). Failed sign-ins are counted per email and client address, and answered with a
-- growing delay instead of a lock of the email: whoever sends guesses for an email slows only their own
-- address, and the person can still sign in from theirs.
alter table login_failures add column client_address text not null default '';
drop index login_failures_email;
create index login_failures_email on login_failures (email_hash, client_address, at);
-- login_locks stays, unused by this release: an osd of the release before, still running beside this
-- one during an upgrade (docs/configuration.md, Upgrades), reads and writes it at every sign-in, and
-- answered every sign-in 500 once it was dropped.

-- Inbound webhook calls keep where they came from and how large they were; the calls that never
-- authenticated keep only that (no body, safe headers only) and for 3 days (pruneRefusedDeliveries).
alter table webhook_deliveries
  add column client_address text,
  add column size_bytes integer;
create index webhook_deliveries_refused_at on webhook_deliveries (received_at) where not authenticated;
