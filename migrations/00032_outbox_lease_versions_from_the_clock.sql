-- +goose Up

-- The claims' commits no longer wait for their WAL to reach the disk
-- (OutboxClaimUnordered and OutboxClaimOrdered in
-- internal/queries/sql/outbox.sql set synchronous_commit off for their own
-- transaction): the flush was the one wait left between a message's
-- commit and its delivery. A claim that a crash of the server then loses
-- (its WAL not yet written out; the WAL writer does within three times
-- wal_writer_delay) leaves its messages pending and unleased, to be claimed
-- and delivered again under the same idempotency key, like a dispatcher
-- killed between a delivery and its finalize. But the dispatcher that made
-- the lost claim may still hold its lease versions, and deliver: the next
-- claim of the same rows must never issue one of them again, or that
-- holder's finalize would apply under the new lease (fencing, invariant 2).
-- A version that only counts up (lease_version + 1) would be issued again
-- from the row as the crash left it. This one is the server's clock in
-- microseconds, never less than the last version plus one: by the time the
-- server is up again its clock has moved on past the lost claim, unless it
-- was set back meanwhile by more than the time the server was down.
-- +goose StatementBegin
CREATE FUNCTION switchyard.next_lease_version(last bigint) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT greatest(last + 1, (date_part('epoch', clock_timestamp()) * 1000000)::bigint)
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION switchyard.next_lease_version(bigint);
