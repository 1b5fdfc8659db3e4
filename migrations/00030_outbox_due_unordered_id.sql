-- +goose Up

-- outbox_due_unordered gains the message's id as its last column, so that
-- an unordered claim can start after the last message its dispatcher
-- leased, (next_attempt_at, id) > (the mark), instead of at the head of
-- the index, where the messages in flight are: each claim stepped over
-- all of them, checked on their rows (migration 00024), a third of a
-- claim's time during a drain (BENCHMARKS.md, "The unordered claim starts
-- after its last lease"). Messages enqueued in one transaction share
-- next_attempt_at, hence the id. The id never changes, so the claim's
-- update stays HOT. Built in the migration's transaction: upgrade a large
-- outbox at a quiet time.
DROP INDEX switchyard.outbox_due_unordered;
CREATE INDEX outbox_due_unordered ON switchyard.outbox (destination, next_attempt_at, id)
    WHERE state = 'pending' AND aggregate_id = '';

-- +goose Down
DROP INDEX switchyard.outbox_due_unordered;
CREATE INDEX outbox_due_unordered ON switchyard.outbox (destination, next_attempt_at)
    WHERE state = 'pending' AND aggregate_id = '';
