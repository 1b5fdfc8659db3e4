package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pagesBenchDestinations is how many destinations the seeded messages go
// to.
const pagesBenchDestinations = 4

// pagesBenchInboxSources is how many inbox sources the seeded inbound
// events come from.
const pagesBenchInboxSources = 3

// pagesBenchLeaseOwner is the dispatcher whose worker 0 holds
// pagesBenchLeased first tries in a stretch and as many retries on their
// rows: the messages in flight.
const (
	pagesBenchLeaseOwner = "bench-dispatcher-1"
	pagesBenchLeased     = 1000
)

// seedPages fills the bench database with INSERT ... SELECT: row i is
// message id i, created 100 ms after row i-1 (so a million rows span about
// 28 hours), topic one of ten (and a rare eleventh, order.audited, on
// every 10,007th row), destination one of four, in one of rows/10
// aggregates (ten messages each). Every (rows/dead)th row is dead, its
// error in one of --fingerprints groups, with three attempts; the newest
// 1 % of the others are pending, the rest delivered. The dead-letter
// groups, their hourly trend and blocked aggregates are derived from the
// rows, as the dispatcher's finalize would have kept them, and a
// dispatcher holds some pending messages (pagesBenchLeaseOwner). The
// sequence trigger is off while seeding: the sequence is set directly. Then VACUUM
// (ANALYZE) and a CHECKPOINT (checkpointSeeding), before any page is timed.
func seedPages(ctx context.Context, pool *pgxpool.Pool, opts pagesBenchOptions, logger *slog.Logger) error {
	step := 1 << 62
	if opts.dead > 0 {
		step = opts.rows / opts.dead
	}
	aggregates := max(opts.rows/10, 1)
	if _, err := pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind)
			SELECT 'bench-' || k, 'function' FROM generate_series(0, $1 - 1) AS k`, pagesBenchDestinations); err != nil {
		return fmt.Errorf("seed destinations: %w", err)
	}
	if err := seedWithoutSequenceTrigger(ctx, pool, []seedStep{
		{"messages", seedMessagesSQL, []any{opts.rows, step, aggregates, opts.fingerprints, pagesBenchDestinations}},
	}, logger); err != nil {
		return err
	}
	steps := []seedStep{
		{"replays", `UPDATE switchyard.outbox SET replay_of = id - 1 WHERE id % 10000 = 4 AND id > 1`, nil},
	}
	steps = append(steps, deadLetterSteps()...)
	steps = append(steps, []seedStep{
		{"blocked aggregates", `INSERT INTO switchyard.outbox_blocked_aggregates
			(destination, aggregate_type, aggregate_id, dead_message_id, blocked_at)
			SELECT destination, aggregate_type, aggregate_id, min(id), min(finished_at)
			FROM switchyard.outbox WHERE state = 'dead' GROUP BY 1, 2, 3`, nil},
		// A dispatcher's leases, for the in-flight and lease-holder
		// pages: first tries in a stretch (OutboxClaimUnordered) and
		// retries leased on their rows. The seed's first tries are all in
		// aggregates, which a stretch never holds, but the pages' queries
		// read a stretch's ids whatever messages they are.
		{"leased first tries", `INSERT INTO switchyard.outbox_stretches (destination, owner, leased_until, ids)
			SELECT 'bench-0', $1, now() + interval '1 day', array_agg(id) FROM (
				SELECT id FROM switchyard.outbox WHERE state = 'pending' AND attempts = 0 AND destination = 'bench-0'
				ORDER BY id LIMIT $2) AS s
			HAVING count(*) > 0`, []any{pagesBenchLeaseOwner + "/0", pagesBenchLeased}},
		{"leased retries", `UPDATE switchyard.outbox SET lease_owner = $1, leased_until = now() + interval '1 day'
			WHERE id IN (SELECT id FROM switchyard.outbox WHERE state = 'pending' AND attempts > 0 AND destination = 'bench-1'
				ORDER BY id LIMIT $2)`, []any{pagesBenchLeaseOwner + "/0", pagesBenchLeased}},
		{"inbox sources", `INSERT INTO switchyard.inbox_sources (name, scheme, secret_refs, handler)
			SELECT 'bench-in-' || k, 'standard-webhooks', ARRAY['env:BENCH_SECRET'], 'customer-upsert'
			FROM generate_series(0, $1 - 1) AS k`, []any{pagesBenchInboxSources}},
		{"inbox events", seedInboxSQL, []any{max(opts.rows/10, 100), pagesBenchInboxSources}},
		{"inbox duplicates", `INSERT INTO switchyard.inbox_duplicates (source, slot, count)
			SELECT 'bench-in-' || k, 0, 1000 + k FROM generate_series(0, $1 - 1) AS k`, []any{pagesBenchInboxSources}},
		{"vacuum", `VACUUM (ANALYZE) switchyard.outbox, switchyard.outbox_attempts, switchyard.dead_letter_groups,
			switchyard.dead_letter_hours, switchyard.outbox_blocked_aggregates, switchyard.inbox_events`, nil},
	}...)
	if err := runSeedSteps(ctx, pool, steps, logger); err != nil {
		return err
	}
	return checkpointSeeding(ctx, pool, logger)
}

// seedInboxSQL inserts $1 inbound events over $2 sources, one every
// second of received_at: of every 100, one failed, one parked (both with an
// error in one of 20 groups), one stale and one held; the rest processed.
const seedInboxSQL = `
INSERT INTO switchyard.inbox_events (source, event_id, headers, payload, entity_key, entity_version,
    status, attempts, last_error, error_fingerprint, received_at, processed_at)
SELECT 'bench-in-' || (i % $2::int), 'evt_' || i,
    jsonb_build_object('content-type', 'application/json', 'webhook-id', 'evt_' || i),
    jsonb_build_object('customer', jsonb_build_object('id', 'cus_' || (i % 5000), 'name', 'Customer ' || i), 'version', i),
    'customer/cus_' || (i % 5000), i,
    st, CASE WHEN st IN ('failed', 'parked') THEN 3 ELSE 0 END,
    CASE WHEN st IN ('failed', 'parked') THEN 'handler: customer service unavailable, group ' || (i % 20) END,
    CASE WHEN st IN ('failed', 'parked') THEN lpad(to_hex(i % 20), 16, '0') END,
    t, CASE WHEN st NOT IN ('failed', 'parked', 'held') THEN t END
FROM (
    SELECT i, now() - ($1::int - i) * interval '1 s' AS t,
        CASE i % 100 WHEN 11 THEN 'failed' WHEN 22 THEN 'parked' WHEN 33 THEN 'stale' WHEN 44 THEN 'held' ELSE 'processed' END AS st
    FROM generate_series(1, $1::int) AS i
) AS s`

// seedMessagesSQL inserts the messages; see seedPages. $1 rows, $2 the
// dead step, $3 aggregates, $4 fingerprints, $5 destinations.
const seedMessagesSQL = `
INSERT INTO switchyard.outbox (topic, destination, aggregate_type, aggregate_id, aggregate_seq,
    payload, headers, state, attempts, next_attempt_at, last_error, error_fingerprint, created_at, finished_at)
SELECT CASE WHEN i % 10007 = 0 THEN 'order.audited'
        ELSE 'order.' || (ARRAY['created', 'paid', 'shipped', 'cancelled', 'refunded', 'updated', 'noted', 'packed', 'returned', 'closed'])[i % 10 + 1] END,
    'bench-' || (i % $5::int), 'order', (i % $3::int)::text, (i - 1) / $3::int + 1,
    jsonb_build_object('order_id', i, 'amount_cents', i % 100000, 'currency', 'EUR',
        'lines', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || (i % 977), 'qty', i % 5 + 1))),
    jsonb_build_object('traceparent', '00-' || lpad(to_hex(i), 32, '0') || '-' || lpad(to_hex(i % 65536), 16, '0') || '-01'),
    CASE WHEN dead THEN 'dead' WHEN i > $1::int - $1::int / 100 THEN 'pending' ELSE 'delivered' END,
    CASE WHEN dead THEN 3 WHEN i > $1::int - $1::int / 100 THEN i % 2 ELSE 1 END,
    t,
    CASE WHEN dead THEN 'HTTP 503 from bench-' || (i % $5::int) || ': upstream unavailable, error group ' || fp
         WHEN i > $1::int - $1::int / 100 AND i % 2 = 1 THEN 'timeout after 10s' END,
    CASE WHEN dead THEN fp END,
    t,
    CASE WHEN dead OR i <= $1::int - $1::int / 100 THEN t + interval '2 s' END
FROM (
    SELECT i, i % $2::bigint = 3 AS dead,
        lpad(to_hex((i / $2::bigint) % $4::int), 16, '0') AS fp,
        now() - ($1::int - i) * interval '100 ms' AS t
    FROM generate_series(1, $1::int) AS i
) AS s`

// seedStep is one statement of a bench's seeding, named in its progress
// log and errors.
type seedStep struct {
	what string
	sql  string
	args []any
}

// runSeedSteps runs the steps in order on db (a pool: each in a
// transaction of its own; or a transaction), logging how long each took.
func runSeedSteps(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, steps []seedStep, logger *slog.Logger) error {
	for _, s := range steps {
		start := time.Now()
		if _, err := db.Exec(ctx, s.sql, s.args...); err != nil {
			return fmt.Errorf("seed %s: %w", s.what, err)
		}
		logger.Info("seeded", slog.String("step", s.what), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	}
	return nil
}

// The statements that derive, from the dead messages seeded before them,
// what the dispatcher's finalize would have written as they died: three
// failed attempts each (the second not applied for every third message),
// the dead-letter groups and their hourly counts (deadLetterSteps).
const (
	seedDeadAttemptsSQL = `INSERT INTO switchyard.outbox_attempts
			(message_id, attempt, worker, lease_version, started_at, finished_at, outcome, applied, status_code, error, duration_ms)
			SELECT o.id, a, 'bench-worker-' || (o.id % 4), a, o.created_at + a * interval '500 ms',
				o.created_at + a * interval '500 ms' + interval '40 ms',
				CASE WHEN a = 3 THEN 'dead' ELSE 'retry' END, a <> 2 OR o.id % 3 <> 0, 503, o.last_error, 40
			FROM switchyard.outbox o CROSS JOIN generate_series(1, 3) AS a
			WHERE o.state = 'dead'`
	seedDeadLetterGroupsSQL = `INSERT INTO switchyard.dead_letter_groups
			(fingerprint, dead, first_dead_at, last_dead_at, sample_id, sample_error, destinations)
			SELECT error_fingerprint, count(*), min(finished_at), max(finished_at), max(id),
				(array_agg(last_error ORDER BY id DESC))[1], array_agg(DISTINCT destination ORDER BY destination)
			FROM switchyard.outbox WHERE state = 'dead' GROUP BY error_fingerprint`
	seedDeadLetterHoursSQL = `INSERT INTO switchyard.dead_letter_hours (fingerprint, hour, dead)
			SELECT error_fingerprint, date_trunc('hour', finished_at), count(*)
			FROM switchyard.outbox WHERE state = 'dead' GROUP BY 1, 2`
)

// deadLetterSteps are those statements as seeding steps.
func deadLetterSteps() []seedStep {
	return []seedStep{
		{"attempts", seedDeadAttemptsSQL, nil},
		{"dead-letter groups", seedDeadLetterGroupsSQL, nil},
		{"dead-letter hours", seedDeadLetterHoursSQL, nil},
	}
}

// seedWithoutSequenceTrigger runs the steps, which insert messages with
// their aggregate_seq already set, in one transaction with the outbox's
// sequence trigger disabled: ALTER TABLE is transactional, so a failed
// step leaves the trigger as it was. The trigger also records an ordered
// message in outbox_aggregate_messages (migration 00028); the last step
// does that for the seeded messages, in one statement.
func seedWithoutSequenceTrigger(ctx context.Context, pool *pgxpool.Pool, steps []seedStep, logger *slog.Logger) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		all := append([]seedStep{{"disable the sequence trigger", `ALTER TABLE switchyard.outbox DISABLE TRIGGER outbox_assign_seq`, nil}}, steps...)
		all = append(all,
			seedStep{"aggregate messages", `INSERT INTO switchyard.outbox_aggregate_messages (aggregate_type, aggregate_id, message_id)
				SELECT aggregate_type, aggregate_id, id FROM switchyard.outbox WHERE aggregate_id <> ''
				ON CONFLICT DO NOTHING`, nil},
			seedStep{"enable the sequence trigger", `ALTER TABLE switchyard.outbox ENABLE TRIGGER outbox_assign_seq`, nil})
		return runSeedSteps(ctx, tx, all, logger)
	})
}
