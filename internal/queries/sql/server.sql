-- Queries about the PostgreSQL server itself, used at start and by /readyz.

-- name: ServerVersionNum :one
-- ServerVersionNum is the server's version as an integer (150004 for 15.4):
-- the console refuses servers older than it supports.
SELECT current_setting('server_version_num')::int AS version_num;
