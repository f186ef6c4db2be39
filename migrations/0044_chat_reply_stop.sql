-- Stopping a chat reply (issue 51 item 16). A person's stop is recorded on the turn, so the engine
-- streaming the reply sees it whichever process took the request (and an engine that takes the turn
-- over after a crash sees it too); the reply then ends, and what it had written so far is kept as the
-- member's message, marked stopped.
alter table chat_turns add column stop_requested_at timestamptz;
alter table chat_messages add column stopped boolean not null default false;
