-- +goose Up

-- Dead letters grouped by error fingerprint, maintained by the finalize
-- statement that makes messages dead, so that the console lists groups
-- (count, first and last seen, destinations, a sample) without counting the
-- outbox. Replays and discards (operator actions) take messages out of a
-- group and lower its count in the same transaction.
CREATE TABLE switchyard.dead_letter_groups (
    fingerprint   text PRIMARY KEY,
    dead          integer NOT NULL CHECK (dead >= 0),
    first_dead_at timestamptz NOT NULL,
    last_dead_at  timestamptz NOT NULL,
    sample_id     bigint NOT NULL,  -- the latest dead message of the group
    sample_error  text NOT NULL DEFAULT '',
    destinations  text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX dead_letter_groups_last ON switchyard.dead_letter_groups (last_dead_at DESC, fingerprint);

-- The trend of each group: messages that went dead per hour.
CREATE TABLE switchyard.dead_letter_hours (
    fingerprint text NOT NULL,
    hour        timestamptz NOT NULL,
    dead        integer NOT NULL,
    PRIMARY KEY (fingerprint, hour)
);

-- A group's messages, newest first, for its page (keyset on id).
CREATE INDEX outbox_dead_fingerprint ON switchyard.outbox (error_fingerprint, id DESC) WHERE state = 'dead';

-- Messages that went dead before this migration.
INSERT INTO switchyard.dead_letter_groups (fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
SELECT coalesce(error_fingerprint, ''), count(*), min(coalesce(finished_at, created_at)), max(coalesce(finished_at, created_at)),
    max(id), coalesce((array_agg(last_error ORDER BY id DESC))[1], ''), array_agg(DISTINCT destination)
FROM switchyard.outbox WHERE state = 'dead'
GROUP BY coalesce(error_fingerprint, '');

-- +goose Down
DROP INDEX switchyard.outbox_dead_fingerprint;
DROP TABLE switchyard.dead_letter_hours;
DROP TABLE switchyard.dead_letter_groups;
