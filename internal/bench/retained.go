package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedRetained fills the outbox, before the drain's own messages, with the
// history a long-lived destination keeps until retention removes it:
// opts.retained delivered messages (each with its delivered attempt on its
// row, in the same aggregates as the drain's messages, whose sequences
// then continue from them) and opts.retainedDead dead ones (unordered, so
// that no aggregate of the drain waits behind them, over 1,000 error
// groups, each with three failed attempts, and the dead-letter groups
// they make). INSERT ... SELECT with the sequence trigger off, as bench
// pages seeds (the Go API would take an hour for ten million rows), in
// the bench's own database (benchDispatch refuses to run it in place: the
// dead-letter groups make triage events, which cannot be deleted); the
// aggregates' rows are written directly. Then VACUUM (ANALYZE), as
// autovacuum would have long since done for rows this old, and a
// CHECKPOINT where the role may (superuser or pg_checkpoint). It returns the
// highest id seeded: the drain's messages come after it. target is the
// bench's database, or the template it is copied from
// (openHistoryTemplate).
func seedRetained(ctx context.Context, target *benchTarget, opts benchOptions, logger *slog.Logger) (int64, error) {
	dest := target.destinationName()
	err := seedWithoutSequenceTrigger(ctx, target.pool, []seedStep{
		{"delivered messages", seedRetainedDeliveredSQL, []any{dest, opts.retained, opts.aggregates}},
		{"dead messages", seedRetainedDeadSQL, []any{dest, opts.retainedDead}},
	}, logger)
	if err != nil {
		return 0, err
	}
	var steps []seedStep
	if opts.aggregates > 0 {
		steps = append(steps, seedStep{"aggregates", `INSERT INTO switchyard.outbox_aggregates
				(destination, aggregate_type, aggregate_id, last_seq, done_seq)
			SELECT $1, 'order', k::text, n, n
			FROM (SELECT k, $2::int / $3::int + (k < $2::int % $3::int)::int AS n FROM generate_series(0, $3::int - 1) AS k) AS s
			WHERE n > 0`, []any{dest, opts.retained, opts.aggregates}})
	}
	steps = append(steps, deadLetterSteps()...)
	steps = append(steps, seedStep{"vacuum", `VACUUM (ANALYZE) switchyard.outbox, switchyard.outbox_aggregates, switchyard.outbox_attempts,
			switchyard.dead_letter_groups, switchyard.dead_letter_hours`, nil})
	if err := runSeedSteps(ctx, target.pool, steps, logger); err != nil {
		return 0, err
	}
	if err := checkpointSeeding(ctx, target.pool, logger); err != nil {
		return 0, err
	}
	logger.Info("seeded the retained history", slog.Int("delivered", opts.retained), slog.Int("dead", opts.retainedDead),
		slog.String("database", target.name))
	return lastRetainedID(ctx, target.pool)
}

// lastRetainedID returns the highest id of the retained history, in a
// database that holds nothing else yet.
func lastRetainedID(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var last int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM switchyard.outbox`).Scan(&last); err != nil {
		return 0, fmt.Errorf("read the last retained message: %w", err)
	}
	return last, nil
}

// seedRetainedDeliveredSQL inserts $2 delivered messages to destination $1
// like benchMessage's, spread over $3 aggregates (none when 0): message i
// is the (i / $3 + 1)th of aggregate i mod $3. Created one every 10 ms up
// to a day ago, delivered 20 ms later.
const seedRetainedDeliveredSQL = `
INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, aggregate_seq, payload,
    state, attempts, lease_version, next_attempt_at, created_at, finished_at,
    delivered_by, delivered_started_at, delivered_ms)
SELECT 'bench.order.updated', $1, CASE WHEN $3::int > 0 THEN 'order' ELSE '' END,
    CASE WHEN $3::int > 0 THEN (i % $3::int)::text ELSE '' END,
    CASE WHEN $3::int > 0 THEN i / $3::int + 1 END,
    json_build_object('seq', i, 'status', 'paid', 'amount_cents', 12990, 'currency', 'EUR'),
    'delivered', 1, 1, t, t, t + interval '20 ms', 'bench-history', t, 20
FROM (
    SELECT i, now() - interval '1 day' - ($2::int - i) * interval '10 ms' AS t
    FROM generate_series(0, $2::int - 1) AS i
) AS s`

// seedRetainedDeadSQL inserts $2 dead unordered messages to destination
// $1, their errors in 1,000 groups, dead a day ago or earlier.
const seedRetainedDeadSQL = `
INSERT INTO switchyard.outbox (topic, destination, payload, state, attempts, next_attempt_at,
    last_error, error_fingerprint, created_at, finished_at)
SELECT 'bench.order.updated', $1,
    json_build_object('seq', i, 'status', 'paid', 'amount_cents', 12990, 'currency', 'EUR'),
    'dead', 3, t, 'HTTP 503 from ' || $1 || ': upstream unavailable, error group ' || (i % 1000),
    lpad(to_hex(i % 1000), 16, '0'), t, t + interval '2 s'
FROM (
    SELECT i, now() - interval '1 day' - ($2::int - i) * interval '100 ms' AS t
    FROM generate_series(0, $2::int - 1) AS i
) AS s`

// checkpointSeeding writes out what seeding wrote, where the role may
// (superuser or pg_checkpoint). Seeding millions of rows writes gigabytes
// of WAL: without a checkpoint now, one runs during the measured phase
// and makes it pay for the seeding (full-page images, flushes): a page
// timed at 10,000,000 rows had a p95 twenty times its p50.
func checkpointSeeding(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	_, err := pool.Exec(ctx, `CHECKPOINT`)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == sqlstateInsufficientPrivilege:
		logger.Warn("the role may not CHECKPOINT: the measured phase may pay for a checkpoint of the seeded rows")
	case err != nil:
		return fmt.Errorf("checkpoint after seeding: %w", err)
	}
	return nil
}
