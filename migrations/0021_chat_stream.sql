-- Chat replies stream and say what failed (issue 26; DESIGN 11, 13).
--
-- A reply the model provider did not answer is tried again after a back-off: its turn waits in blocked
-- with not_before set (blocked without it waits for a key to be bound, as before).
alter table chat_turns add column not_before timestamptz;
create index chat_turns_due on chat_turns (not_before) where status = 'blocked';

-- GET /v1/chats/{id}/events tells each change of a message once: every insert, and every update of its
-- content or tool call, takes the next change_seq. The number is taken under the chat's row lock, held to
-- the commit, so a chat's changes commit in the order of their numbers and a reader that has seen n
-- misses nothing by asking for what is after n. first_change is the number the message was stored with:
-- a client that holds a message has seen every change before it (Last-Event-ID).
create sequence chat_message_changes;
alter table chat_messages add column change_seq bigint, add column first_change bigint;
update chat_messages set change_seq = seq, first_change = seq;
select setval('chat_message_changes', (select coalesce(max(seq), 0) + 1 from chat_messages), false);
alter table chat_messages alter column change_seq set not null,
  alter column first_change set not null;
create index chat_messages_changes on chat_messages (chat_id, change_seq);

create function chat_message_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'UPDATE' and new.tool_call is not distinct from old.tool_call
     and new.content = old.content then
    new.change_seq := old.change_seq;
    return new;
  end if;
  perform 1 from chats where id = new.chat_id for no key update;
  new.change_seq := nextval('chat_message_changes');
  if tg_op = 'INSERT' then
    new.first_change := new.change_seq;
  end if;
  return new;
end
$$;

create trigger chat_message_changed before insert or update on chat_messages
  for each row execute function chat_message_changed();

-- Which osd processes have readers of a chat's event stream now (chat-deltas.ts): an engine sends a
-- reply's deltas by NOTIFY only when another process reads that chat. Not kept across a crash: a row
-- lost or left behind costs at most a second of deltas, or some NOTIFYs nobody hears (rows not seen for
-- three minutes are ignored).
create unlogged table chat_readers (
  chat_id uuid not null,
  process text not null,
  seen_at timestamptz not null default now(),
  primary key (chat_id, process)
);
