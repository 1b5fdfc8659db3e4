-- +goose Up

-- Bulk repair of reconciliation findings by filter runs on the bulk replay
-- job machinery (internal/bulkreplay: this table, its runner, its lease,
-- its progress on the change feed): a job's kind says what its batches
-- do. A 'repair' job walks the open findings of its filter (a check, and
-- a kind) in id order up to upper_id (the newest finding when it was
-- created) and repairs each through reconcile.RepairTx, whose idempotency
-- key is derived from the finding and its cycle: a batch repeated after a
-- crash makes nothing twice. Its mode is always 'redeliver' (the repairs
-- keep their derived keys); replayed counts the repairs made.
ALTER TABLE switchyard.replay_jobs
    ADD COLUMN kind text NOT NULL DEFAULT 'replay' CHECK (kind IN ('replay', 'repair'));

-- +goose Down
ALTER TABLE switchyard.replay_jobs DROP COLUMN kind;
