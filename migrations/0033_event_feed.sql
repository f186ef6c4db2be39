-- One ordered event feed per enterprise (issue 47; DESIGN 15; docs/events.md).
--
-- Every event osd records (a run's, a gate's, an execution's closing, a chat message, a recommendation,
-- a memory review item) enters the feed from a trigger on the table that records it, in the writer's
-- own transaction: a change and its feed event commit together, and no writer has code of its own
-- for it. It enters an inbox first, without a position.
--
-- Positions are given later, by a sequencing pass (domain/events/feed.ts sequenceFeed, run by the
-- engines): it locks the enterprise's head row, moves the inbox rows it can see (committed ones) into
-- the feed with the next positions, and moves the head, in one transaction. Passes of one enterprise
-- are serialised by that row lock, and a pass's positions become visible at its commit all at once,
-- after those of every earlier pass: a reader sees positions 1..head with no hole, and a transaction
-- that commits late simply gets a later position. The writers' hot path takes no lock for it (one
-- insert more per statement); a per-enterprise counter taken by every writer would serialise the
-- engine's run transitions of an enterprise on one row.

-- Who started a run (an API start, a retry): the person, or the maker of the token that did. Mailed
-- when the run fails (notifications).
alter table runs add column started_by uuid;

create table event_inbox (
  id bigint generated always as identity primary key,
  enterprise_id uuid not null,
  type text not null,
  subject jsonb not null,
  payload jsonb not null,
  created_at timestamptz not null default statement_timestamp()
);
create index event_inbox_enterprise on event_inbox (enterprise_id, id);

-- The newest position given in each enterprise's feed: locked by the pass that gives the next ones.
create table event_feed_heads (
  enterprise_id uuid primary key references enterprises (id) on delete cascade,
  last_position bigint not null default 0
);

create table events (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  position bigint not null,
  type text not null,
  subject jsonb not null,
  payload jsonb not null,
  created_at timestamptz not null,
  primary key (enterprise_id, position)
);
-- Kept 7 days (pruneFeed).
create index events_created on events (created_at);

-- Wakes the sequencing passes for the tables whose writers send no NOTIFY of their own (a run's
-- events send osd_run, a chat's osd_chat after commit): few and slow writes, so a NOTIFY inside their
-- transaction costs nothing that matters.
create function feed_wake() returns void language sql as $$ select pg_notify('osd_feed_inbox', '') $$;

-- A run's events, one insert per statement. gate.* and recommendation.* come from their own tables,
-- with more to say.
create function feed_run_events() returns trigger language plpgsql as $$
begin
  insert into event_inbox (enterprise_id, type, subject, payload, created_at)
  select e.enterprise_id, e.type,
         jsonb_build_object('runId', e.run_id, 'taskId', r.task_id, 'taskSlug', r.task_slug,
                            'executionId', r.execution_id),
         e.payload, e.created_at
    from added e join runs r on r.id = e.run_id
   where e.type not in ('gate.decided', 'recommendation.proposed', 'recommendation.approved')
   order by e.seq;
  return null;
end
$$;
create trigger run_events_feed after insert on run_events referencing new table as added
  for each statement execute function feed_run_events();

-- A gate opened (gate.waiting), decided (gate.decided) or closed undecided by its run's end or its
-- chat's closing (gate.closed). Never its arguments: they may carry what only the gate's page shows.
create function feed_gates() returns trigger language plpgsql as $$
declare
  subject jsonb;
begin
  subject := jsonb_strip_nulls(jsonb_build_object(
    'gateId', new.id, 'runId', new.run_id, 'chatId', new.chat_id, 'taskId', new.task_id,
    'taskSlug', (select task_slug from runs where id = new.run_id),
    'executionId', (select execution_id from runs where id = new.run_id)));
  if tg_op = 'INSERT' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, 'gate.waiting', subject, jsonb_strip_nulls(jsonb_build_object(
      'kind', new.kind, 'tool', new.tool, 'owner', new.owner, 'approval', new.approval,
      'summary', new.summary, 'questions', new.questions, 'choices', new.choices)));
  elsif old.status = 'waiting' and new.status = 'decided' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, case when new.decision is null then 'gate.closed' else 'gate.decided' end,
            subject, jsonb_strip_nulls(jsonb_build_object(
              'kind', new.kind, 'tool', new.tool, 'decision', new.decision, 'decidedBy', new.decided_by,
              'note', new.note, 'choice', new.choice, 'answers', new.answers)));
  end if;
  -- Its writers' own NOTIFYs (a run's events) may come later or never (a chat's gate, an os gate):
  -- the passes are woken here, so a waiting gate is on the stream at once, not at the next sweep.
  perform feed_wake();
  return null;
end
$$;
create trigger gates_feed after insert or update of status on gates
  for each row execute function feed_gates();

-- A chat message stored (chat.message), or changed: a tool call decided or done, a question answered
-- (chat.message_updated, when its change_seq moves: migration 0021). The first 2,000 characters.
create function feed_chat_messages() returns trigger language plpgsql as $$
begin
  insert into event_inbox (enterprise_id, type, subject, payload)
  values (new.enterprise_id,
          case when tg_op = 'INSERT' then 'chat.message' else 'chat.message_updated' end,
          jsonb_build_object('chatId', new.chat_id, 'messageId', new.id),
          jsonb_strip_nulls(jsonb_build_object(
            'role', new.role, 'content', left(new.content, 2000), 'gateId', new.gate_id,
            'toolCall', case when new.tool_call is not null then jsonb_strip_nulls(jsonb_build_object(
              'name', new.tool_call ->> 'name', 'status', new.tool_call ->> 'status')) end)));
  return null;
end
$$;
create trigger chat_messages_feed after insert on chat_messages
  for each row execute function feed_chat_messages();
create trigger chat_messages_feed_changed after update on chat_messages
  for each row when (old.change_seq is distinct from new.change_seq)
  execute function feed_chat_messages();

create function feed_chats() returns trigger language plpgsql as $$
begin
  insert into event_inbox (enterprise_id, type, subject, payload)
  values (new.enterprise_id, 'chat.closed', jsonb_build_object('chatId', new.id),
          jsonb_strip_nulls(jsonb_build_object('outcome', new.outcome, 'purpose', new.purpose)));
  return null;
end
$$;
create trigger chats_feed after update of status on chats
  for each row when (old.status = 'open' and new.status = 'closed')
  execute function feed_chats();

create function feed_execution_closures() returns trigger language plpgsql as $$
declare
  changed execution_closures;
begin
  changed := case when tg_op = 'INSERT' then new else old end;
  insert into event_inbox (enterprise_id, type, subject, payload)
  values (changed.enterprise_id,
          case when tg_op = 'INSERT' then 'execution.closed' else 'execution.reopened' end,
          jsonb_build_object('executionId', changed.execution_id), '{}');
  perform feed_wake();
  return null;
end
$$;
create trigger execution_closures_feed after insert or delete on execution_closures
  for each row execute function feed_execution_closures();

create function feed_recommendations() returns trigger language plpgsql as $$
declare
  subject jsonb;
begin
  subject := jsonb_strip_nulls(jsonb_build_object(
    'recommendationId', new.id, 'taskId', new.task_id, 'taskSlug', new.task_slug,
    'runId', new.proposed_by_run_id));
  if tg_op = 'INSERT' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, 'recommendation.proposed', subject,
            jsonb_build_object('rationale', left(new.rationale, 2000)));
  elsif old.status = 'waiting' and new.status <> 'waiting' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, 'recommendation.decided', subject, jsonb_strip_nulls(jsonb_build_object(
      'status', new.status, 'decision', new.decision, 'reason', new.reason,
      'decidedBy', new.decided_by, 'versionId', new.version_id, 'startedRunId', new.run_id)));
  else
    return null;
  end if;
  perform feed_wake();
  return null;
end
$$;
create trigger recommendations_feed after insert or update of status on recommendations
  for each row execute function feed_recommendations();

create function feed_memory_review() returns trigger language plpgsql as $$
declare
  subject jsonb;
begin
  subject := jsonb_build_object('itemId', new.id, 'noteId', new.note_id);
  if tg_op = 'INSERT' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, 'memory.review_opened', subject, jsonb_strip_nulls(jsonb_build_object(
      'kind', new.kind, 'reason', new.reason, 'correctionId', new.correction_id)));
  elsif old.status = 'open' and new.status <> 'open' then
    insert into event_inbox (enterprise_id, type, subject, payload)
    values (new.enterprise_id, 'memory.review_decided', subject,
            jsonb_build_object('kind', new.kind, 'status', new.status));
  else
    return null;
  end if;
  perform feed_wake();
  return null;
end
$$;
create trigger memory_review_feed after insert or update of status on memory_review_items
  for each row execute function feed_memory_review();

-- Every enterprise has a head from the start (the passes also make one for an enterprise without).
insert into event_feed_heads (enterprise_id) select id from enterprises on conflict do nothing;
create function feed_head_of_enterprise() returns trigger language plpgsql as $$
begin
  insert into event_feed_heads (enterprise_id) values (new.id) on conflict do nothing;
  return null;
end
$$;
create trigger enterprises_feed_head after insert on enterprises
  for each row execute function feed_head_of_enterprise();
