-- A run's trace context (issue 49): the W3C traceparent its passes continue, from the caller's
-- traceparent at its start, its predecessor's, or a trace made for it; null for a run started while
-- tracing was off (and every run before this migration). Only the W3C form is ever stored: version
-- 00, trace id, parent span id, flags, in lower-case hex, neither id all zeros. NOT VALID: the runs
-- already there (all null) are not scanned; every row written from now on is checked.
alter table runs add column trace_parent text;
alter table runs add constraint runs_trace_parent_w3c
  check (trace_parent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
         and trace_parent !~ '^00-0{32}-' and trace_parent !~ '-0{16}-[0-9a-f]{2}$') not valid;
