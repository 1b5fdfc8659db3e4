-- +goose Up

-- The dashboard's statistics, computed once per cluster (not per viewer).
--
-- One console instance at a time, the leader (it holds a session advisory
-- lock, see internal/stats), computes every figure the dashboard shows from
-- indexes and maintained tables (delivery_stats, dead_letter_groups,
-- dispatchers, breaker_events, outbox_blocked_aggregates,
-- inbox_duplicates and the partial indexes of the outbox and the inbox)
-- about twice a second, writes them here as one JSON document, and, when
-- the document changed, appends a change-feed row of kind 'stats' in the
-- same statement and sends the wake-up NOTIFY after commit. Every viewer,
-- on every instance, renders from this one row (each instance caches it
-- for a fraction of a second), so a thousand open dashboards cost the
-- database what one does. The document's shape is internal/stats.Snapshot.
CREATE TABLE switchyard.stats_snapshot (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version     bigint NOT NULL DEFAULT 0,
    computed_at timestamptz NOT NULL DEFAULT now(),
    leader      text NOT NULL DEFAULT '',
    snapshot    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(snapshot) = 'object')
) WITH (fillfactor = 50);
INSERT INTO switchyard.stats_snapshot DEFAULT VALUES;

-- +goose Down
DROP TABLE switchyard.stats_snapshot;
