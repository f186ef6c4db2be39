-- Chats (spec: Concepts "Chat", Endpoints Chats; DESIGN 11): a conversation with one member. The person's
-- message is stored at once with a chat turn; the engine claims the turn (like a run: a lease, for update
-- skip locked) and makes the member's reply. Messages are the turn's journal: a model call's answer is
-- stored before its tool calls are decided, and a tool call is marked executing before it acts, so a
-- restart finishes the reply and never makes a tool call twice.
create table chats (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  member_id uuid not null,
  purpose text check (purpose in ('create_task')),
  status text not null default 'open' check (status in ('open', 'closed')),
  outcome text check (outcome in ('applied', 'rejected', 'closed')),
  task_id uuid,
  -- The seq of the last message a GET of the chat showed: member messages after it are unread.
  read_seq bigint not null default 0,
  last_message_at timestamptz,
  created_at timestamptz not null default now(),
  unique (enterprise_id, id),
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);
create index chats_recent on chats (enterprise_id, (coalesce(last_message_at, created_at)) desc)
  where purpose is null;

create table chat_messages (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  chat_id uuid not null references chats (id) on delete cascade,
  seq bigserial not null,
  role text not null check (role in ('person', 'member', 'tool')),
  content text not null default '',
  -- A tool call of the reply: {id, callId, name, arguments, status, result}; callId is the model's id.
  tool_call jsonb,
  -- Set when the call starts acting: a call found executing after a crash is never made again.
  executing_at timestamptz,
  -- The question gate of os.ask_ceo.
  gate_id uuid,
  -- The model call that wrote the message (its text and its tool calls share it).
  reply_group uuid,
  turn_id uuid,
  created_at timestamptz not null default now()
);
create index chat_messages_chat on chat_messages (chat_id, seq);

create table chat_turns (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null,
  chat_id uuid not null references chats (id) on delete cascade,
  -- pending: to be claimed; running: an engine makes the reply; waiting: a tool call or question waits
  -- for the person; blocked: no model key (retried when one is bound) or a spend cap; done.
  status text not null default 'pending'
    check (status in ('pending', 'running', 'waiting', 'blocked', 'done')),
  lease_owner text,
  lease_expires_at timestamptz,
  model_calls integer not null default 0,
  cost_usd_micros bigint not null default 0,
  -- Memory recall of the reply (recall health counts chats from here): succeeded or failed.
  recall text check (recall in ('succeeded', 'failed')),
  recalled_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- One reply at a time per chat (a message meanwhile is 409 chat_replying).
create unique index chat_turns_active on chat_turns (chat_id) where status <> 'done';
create index chat_turns_claim on chat_turns (created_at) where status in ('pending', 'running');
create index chat_turns_recall on chat_turns (enterprise_id, recalled_at) where recall is not null;

-- "always" answers: the caller (token or session) is not asked again for that member's tool.
create table chat_tool_grants (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  caller text not null,
  member_id uuid not null,
  tool text not null,
  created_at timestamptz not null default now(),
  unique (caller, member_id, tool),
  foreign key (enterprise_id, member_id) references members (enterprise_id, id) on delete cascade
);

-- The caller that sent a turn's message decides whether a grant applies.
alter table chat_turns add column caller text;

-- The task a create-task chat made names the chat it came from.
alter table tasks add column source_chat_id uuid;

create index gates_chat on gates (chat_id, created_at desc) where chat_id is not null;
