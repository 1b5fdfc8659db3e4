-- The PostgreSQL server itself (no table), used at start and by /readyz.

-- name: ServerVersionNumGet :one
-- ServerVersionNumGet is the server's version as an integer (150004 for 15.4):
-- the console refuses servers older than it supports.
SELECT current_setting('server_version_num')::int AS version_num;
