-- A model call's spend reservation lives in one place (issue 43): a row naming the run or the chat
-- turn it is for, written with the reservation on the layers' counters and deleted by whoever
-- releases it (the call's settlement, or the engine that takes the work over after a crash), exactly
-- once. Runs kept theirs on the journal's step (reserved_usd_micros, spend_day) and chat turns as
-- JSON (chat_turns.reservation), each released by code of its own. The journal's step still records
-- the amount reserved for its call (history); spend_day and chat_turns.reservation are left in place,
-- unused, for an older osd still running beside a newer one during an upgrade.
create table spend_reservations (
  id uuid primary key,
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  run_id uuid references runs (id) on delete cascade,
  turn_id uuid references chat_turns (id) on delete cascade,
  day date not null,
  micros bigint not null,
  -- The layers the call was charged to, as they were: a member may change teams meanwhile.
  team_id uuid,
  task_id uuid,
  member_id uuid,
  created_at timestamptz not null default now(),
  check ((run_id is null) <> (turn_id is null))
);
create index spend_reservations_run on spend_reservations (run_id) where run_id is not null;
create index spend_reservations_turn on spend_reservations (turn_id) where turn_id is not null;

-- The reservations of calls in flight now move over.
insert into spend_reservations (id, enterprise_id, run_id, day, micros, team_id, task_id, member_id)
select gen_random_uuid(), j.enterprise_id, j.run_id, j.spend_day, j.reserved_usd_micros,
       r.team_id, r.task_id, r.member_id
  from run_journal j join runs r on r.id = j.run_id
 where j.kind = 'model' and j.state = 'started' and j.spend_day is not null and j.reserved_usd_micros > 0;
insert into spend_reservations (id, enterprise_id, turn_id, day, micros, team_id, member_id)
select (t.reservation ->> 'id')::uuid, t.enterprise_id, t.id, (t.reservation ->> 'day')::date,
       (t.reservation ->> 'micros')::bigint, (t.reservation ->> 'teamId')::uuid, c.member_id
  from chat_turns t join chats c on c.id = t.chat_id
 where t.reservation is not null;
update run_journal set reserved_usd_micros = 0, spend_day = null
 where kind = 'model' and state = 'started' and spend_day is not null;
update chat_turns set reservation = null where reservation is not null;
