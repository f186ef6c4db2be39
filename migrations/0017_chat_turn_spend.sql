-- A chat turn's spend (issue 18): the reservation of its model call in flight is kept on the turn, so an
-- engine that takes the turn over after a crash releases it exactly once ({id, day, micros, teamId}); a
-- turn a spend cap refused waits in paused_spend until the cap is raised or spend limits are turned off.
alter table chat_turns add column reservation jsonb;
alter table chat_turns drop constraint chat_turns_status_check;
alter table chat_turns add constraint chat_turns_status_check
  check (status in ('pending', 'running', 'waiting', 'blocked', 'paused_spend', 'done'));
