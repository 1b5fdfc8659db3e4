-- +goose Up

-- What became of a replay, for the pages that show it (issue 14).
--
-- replay_job: the bulk replay job that created a replay (NULL for a single
-- replay and for every ordinary message). A job's page counts its replays
-- by state through outbox_replay_job, so it shows how many were delivered,
-- died again or are pending as they settle. Partial: ordinary messages
-- have no entry, so the dispatcher's finalize of them adds nothing; only
-- a job's replays take one entry per state change.
ALTER TABLE switchyard.outbox ADD COLUMN replay_job uuid;
CREATE INDEX outbox_replay_job ON switchyard.outbox (replay_job, state) WHERE replay_job IS NOT NULL;

-- The message list's "discarded" filter walks this; discards are rare and
-- a message enters it by an operator's action, never by the dispatcher.
CREATE INDEX outbox_discarded_id ON switchyard.outbox (id) WHERE state = 'discarded';

-- The console's states of a message, defined once here and used by every
-- list and filter (internal/console):
--   pending, delivered  as stored;
--   dead                dead and unresolved: never replayed (what the
--                       dead-letter groups count);
--   replayed            dead, then replayed: replay_outcome is the state of
--                       its newest replay (pending, delivered, dead,
--                       discarded; '' for a message never replayed);
--   discarded           archived by an operator.
-- Columns are appended (CREATE OR REPLACE VIEW keeps the old ones).
CREATE OR REPLACE VIEW switchyard.console_messages AS
SELECT o.id, o.message_id, o.topic, o.destination, o.aggregate_type, o.aggregate_id, o.aggregate_seq,
    o.state, o.attempts, o.last_error, o.error_fingerprint, o.created_at, o.finished_at, o.replay_of,
    (CASE WHEN o.state = 'dead' AND o.replays > 0 THEN 'replayed' ELSE o.state END)::text AS status,
    coalesce(CASE WHEN o.replays > 0 THEN
        (SELECT r.state FROM switchyard.outbox r WHERE r.replay_of = o.id ORDER BY r.id DESC LIMIT 1)
    END, '')::text AS replay_outcome
FROM switchyard.outbox o;

-- +goose Down
DROP VIEW switchyard.console_messages;
CREATE VIEW switchyard.console_messages AS
SELECT id, message_id, topic, destination, aggregate_type, aggregate_id, aggregate_seq,
    state, attempts, last_error, error_fingerprint, created_at, finished_at, replay_of
FROM switchyard.outbox;
DROP INDEX switchyard.outbox_discarded_id;
DROP INDEX switchyard.outbox_replay_job;
ALTER TABLE switchyard.outbox DROP COLUMN replay_job;
