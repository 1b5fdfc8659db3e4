-- For sqlc only (sqlc.yaml): the schema the migrations create, so that
-- sqlc can read migrations/00029_inbox_claim.sql, the inbox's claim that
-- the handler's one statement calls, without the rest of the migrations
-- (their tables would be generated into this package). Nothing runs it.
CREATE SCHEMA switchyard;
