-- Configuration as code (issue 48; DESIGN 15): documents in, the enterprise made to match.
--
-- A version may say why it was published: "applied from config" for one an apply published (and what
-- an API caller sends as message). Versions are immutable: a message is written with its version.
alter table task_versions add column message text;

-- Where an apply took a tool connection's token or a model key from (`tokenFrom: env:NAME`): the name of
-- a variable of osctl's environment, never the secret, which stays encrypted in its own row. An export
-- names it again, so a repository's files round-trip; the row goes with its connection.
create table config_secret_sources (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  tool_connection_id uuid unique references tool_connections (id) on delete cascade,
  llm_connection_id uuid unique references llm_connections (id) on delete cascade,
  source text not null check (source ~ '^env:[A-Za-z_][A-Za-z0-9_]*$'),
  updated_at timestamptz not null default now(),
  check (num_nonnulls(tool_connection_id, llm_connection_id) = 1)
);
create index config_secret_sources_enterprise on config_secret_sources (enterprise_id);
