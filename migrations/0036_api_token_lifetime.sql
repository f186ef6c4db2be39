-- API tokens that change, rotate, expire and end with their maker (issue 45).
--
-- expires_at: null for a token that never expires. revoked_reason: why revoked_at is set (revoked by a
-- person or the operator, or creator_removed: its maker left the enterprise); rows revoked before this
-- migration say revoked. A rotation moves the hash of the secret it replaces to previous_token_hash,
-- which still signs in until previous_valid_until (the grace a person chose, at most 7 days); a
-- rotation without grace leaves both null. rotated_at: the last rotation.
alter table api_tokens
  add column expires_at timestamptz,
  add column revoked_reason text,
  add column previous_token_hash bytea,
  add column previous_valid_until timestamptz,
  add column rotated_at timestamptz,
  add constraint api_tokens_revoked_reason
    check (revoked_reason is null or revoked_reason in ('revoked', 'creator_removed'));

update api_tokens set revoked_reason = 'revoked' where revoked_at is not null;

-- A sign-in with the secret a rotation replaced finds its token here during the grace.
create unique index api_tokens_previous_hash on api_tokens (previous_token_hash)
  where previous_token_hash is not null;

-- Removing a person revokes the live tokens they made in that enterprise.
create index api_tokens_created_by on api_tokens (created_by_user, enterprise_id)
  where revoked_at is null;
