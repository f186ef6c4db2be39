-- Tool connections (spec: Endpoints Tools; DESIGN 6): an MCP tool server (url, token) or a
-- browser-operated system (sites, start page), connected on a layer. Its mustGate list names tools a
-- task must gate by name; the definition checks read every connection's list.

create table tool_connections (
  id uuid primary key default gen_random_uuid(),
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  -- The tool namespace: a run calls its tools as <name>.<tool> (the version-control one is vcs).
  name text not null,
  kind text not null check (kind in ('mcp', 'browser')),
  url text,
  -- AES-256-GCM of the tool server's token (DESIGN 3); never answered.
  token_ciphertext bytea,
  sites jsonb,
  start_page text,
  layer text not null check (layer in ('enterprise', 'team', 'member', 'role', 'task')),
  layer_id uuid,
  must_gate jsonb not null default '[]',
  description text not null default '',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (enterprise_id, id)
);
create index tool_connections_layer on tool_connections (enterprise_id, layer, layer_id);
