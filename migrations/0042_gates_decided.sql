-- Decided gates listed for audits (issue 51: GET /v1/gates?status=decided), newest decision first and
-- paged: read from this index in order, as gates_waiting serves the waiting list.
create index gates_decided on gates (enterprise_id, decided_at desc, id desc) where status = 'decided';
