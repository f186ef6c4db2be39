-- Pause of a task or of a whole enterprise (issue 50; docs/usage.md#pause). A row is one pause:
-- who paused and why, and once it is over who resumed it. While a row has no resumed_at the task (or,
-- with no task, every task and chat of the enterprise) starts no new step: starts are accepted and
-- wait pending, admission passes them over, dispatch leaves them, and a run under way goes back to
-- pending after its current step. The rows are the record of every action (the event feed tells them
-- too), so they are kept after the resume.
create table pauses (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  -- null: the whole enterprise.
  task_id uuid references tasks (id) on delete cascade,
  paused_at timestamptz not null default statement_timestamp(),
  -- token:<id> or user:<id> (http/caller.ts actor), as gates record who decided.
  paused_by text not null,
  reason text not null,
  resumed_at timestamptz,
  resumed_by text,
  resume_reason text
);
-- One pause in force per task and per enterprise: a second pause finds the first (idempotent).
create unique index pauses_in_force on pauses (enterprise_id, coalesce(task_id, '00000000-0000-0000-0000-000000000000'::uuid))
  where resumed_at is null;
create index pauses_task on pauses (task_id) where task_id is not null;

-- task.paused, task.resumed, enterprise.paused, enterprise.resumed in the event feed (migration 0033),
-- in the writer's transaction, as every other event enters it.
create function feed_pauses() returns trigger language plpgsql as $$
declare
  family text;
  subject jsonb;
begin
  family := case when new.task_id is null then 'enterprise' else 'task' end;
  subject := jsonb_strip_nulls(jsonb_build_object(
    'pauseId', new.id, 'taskId', new.task_id,
    'taskSlug', (select slug from tasks where id = new.task_id)));
  if tg_op = 'INSERT' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, family || '.paused', subject,
            jsonb_build_object('by', new.paused_by, 'reason', new.reason));
  elsif old.resumed_at is null and new.resumed_at is not null then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, family || '.resumed', subject, jsonb_strip_nulls(jsonb_build_object(
      'by', new.resumed_by, 'reason', new.resume_reason, 'pausedBy', new.paused_by,
      'pausedReason', new.reason, 'pausedAt', new.paused_at)));
  else
    return null;
  end if;
  perform feed_wake();
  return null;
end
$$;
create trigger pauses_feed after insert or update of resumed_at on pauses
  for each row execute function feed_pauses();
