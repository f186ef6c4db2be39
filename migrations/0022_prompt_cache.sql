-- Prompt caching (issue 29; DESIGN 13): a model call is billed for four kinds of tokens, each at its own
-- price, and osd records each as the provider reports it. input_tokens keeps its meaning of the input
-- billed at the full input price: neither read from nor written to the provider's cache (every call
-- recorded before this migration was uncached, so its rows need no change).
alter table llm_usage
  add column cache_read_tokens bigint not null default 0,
  add column cache_write_tokens bigint not null default 0;
