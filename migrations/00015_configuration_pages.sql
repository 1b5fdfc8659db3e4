-- +goose Up

-- The configuration pages (docs/settings.md) edit destinations and inbox
-- sources. A disabled destination keeps its messages waiting: the
-- dispatchers route it no more, so nothing is claimed and no attempt is
-- burnt until it is enabled again. A disabled source answers its senders
-- 503, so they retry later, and records nothing.
ALTER TABLE switchyard.destinations ADD COLUMN disabled boolean NOT NULL DEFAULT false;
ALTER TABLE switchyard.inbox_sources ADD COLUMN disabled boolean NOT NULL DEFAULT false;

-- destination_checks holds the last check of a destination that the
-- console can make from outside the dispatcher: for a JetStream
-- destination, whether a stream captures its subjects. It is kept apart
-- from destinations so that a check never looks like an edit to the
-- dispatchers (which rebuild a destination's route, breaker included,
-- when its row changes). problem '' means the check passed.
CREATE TABLE switchyard.destination_checks (
    destination text PRIMARY KEY
        REFERENCES switchyard.destinations (name) ON DELETE CASCADE ON UPDATE CASCADE,
    problem     text NOT NULL DEFAULT '' CHECK (length(problem) <= 2000),
    checked_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE switchyard.destination_checks;
ALTER TABLE switchyard.inbox_sources DROP COLUMN disabled;
ALTER TABLE switchyard.destinations DROP COLUMN disabled;
