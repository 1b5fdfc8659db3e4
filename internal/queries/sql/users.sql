-- switchyard.users: console accounts. See internal/auth.

-- name: UserCreate :one
INSERT INTO switchyard.users (name, role, password_hash)
VALUES (@name, @role, @password_hash)
RETURNING *;

-- name: UserGetByName :one
SELECT * FROM switchyard.users WHERE name = @name;

-- name: UserSetPassword :one
UPDATE switchyard.users SET password_hash = @password_hash, password_changed_at = now()
WHERE name = @name
RETURNING *;

-- name: UserDisable :one
UPDATE switchyard.users SET disabled_at = coalesce(disabled_at, now())
WHERE name = @name
RETURNING *;

-- name: UserCountActive :one
-- UserCountActive counts accounts that can sign in: serving on a
-- non-loopback address needs at least one.
SELECT count(*) FROM switchyard.users WHERE disabled_at IS NULL;
