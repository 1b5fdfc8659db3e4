-- switchyard.triage_mutations: idempotent triage mutations (internal/triage).
-- sqlc.narg(now) overrides the database clock in tests; NULL: now().

-- name: TriageMutationBegin :one
-- TriageMutationBegin records a mutation id for the account, first thing in
-- the mutation's transaction. It returns no row when the id is known: then
-- a concurrent duplicate has waited here for the first one's commit, and
-- TriageMutationGet reads the answer it stored.
INSERT INTO switchyard.triage_mutations (account_id, mutation_id, request_hash)
VALUES (@account_id, @mutation_id, @request_hash)
ON CONFLICT (account_id, mutation_id) DO NOTHING
RETURNING created_at;

-- name: TriageMutationGet :one
SELECT request_hash, answer FROM switchyard.triage_mutations
WHERE account_id = @account_id AND mutation_id = @mutation_id;

-- name: TriageMutationAnswer :exec
UPDATE switchyard.triage_mutations SET answer = @answer
WHERE account_id = @account_id AND mutation_id = @mutation_id;

-- name: TriageMutationPrune :execrows
-- TriageMutationPrune forgets answers older than keep_seconds
-- (triage_mutations_created).
DELETE FROM switchyard.triage_mutations WHERE created_at < now() - make_interval(secs => @keep_seconds::float8);
