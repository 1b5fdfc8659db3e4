-- +goose Up

-- The console's inbox page lists events that want attention (failed,
-- parked, stale, held) newest first with a keyset on id, and the statistics
-- leader counts them per source and status. Processed events, the vast
-- majority, stay out of this index, so it stays as small as the set of
-- events that need a look; the list of all or of processed events walks
-- the primary key instead.
CREATE INDEX inbox_events_attention ON switchyard.inbox_events (status, id DESC)
    WHERE status <> 'processed';

-- +goose Down
DROP INDEX switchyard.inbox_events_attention;
