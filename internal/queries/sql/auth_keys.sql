-- switchyard.auth_keys: server-side keys (session and CSRF signing).

-- name: AuthKeyGet :one
SELECT key FROM switchyard.auth_keys WHERE name = @name;
