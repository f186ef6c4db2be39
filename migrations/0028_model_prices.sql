-- Prices of models the shipped price list does not hold (issue 51; DESIGN 6): a local model served
-- from an address the operator set, or a provider's model newer than the list. Set per enterprise, in
-- US dollars per million tokens as the list holds its own; a cache figure left out is the provider's
-- ratio to the input price (shared/schemas/models.ts cacheRatios).
create table llm_prices (
  enterprise_id uuid not null references enterprises (id) on delete cascade,
  model text not null,
  input_usd_mtok double precision not null,
  output_usd_mtok double precision not null,
  cache_read_usd_mtok double precision,
  cache_write_usd_mtok double precision,
  updated_at timestamptz not null default now(),
  primary key (enterprise_id, model)
);

-- Model calls that no price applied to (a model neither listed nor priced by the enterprise, served
-- from an operator's address): counted at $0, and counted here so that answers can say "unpriced".
alter table llm_usage add column unpriced_calls integer not null default 0;
alter table spend_days add column unpriced_calls integer not null default 0;
alter table runs add column unpriced_calls integer not null default 0;
