-- How many times a run or a chat turn was held (blocked) so far (issue 43): its back-off grows with
-- it (domain/models/holds.ts). Runs used to count their run.blocked events; chat turns counted the
-- notices whose words said the provider did not answer, which a notice updated in place never let
-- pass one, so a reply's retries stayed 60 s apart for good.
alter table runs add column holds int not null default 0;
alter table chat_turns add column holds int not null default 0;

-- The runs still under way or waiting keep the holds their events count.
update runs r
   set holds = (select count(*) from run_events e where e.run_id = r.id and e.type = 'run.blocked')
 where r.status in ('pending', 'queued', 'running', 'blocked', 'paused_spend', 'waiting_on_gate');
