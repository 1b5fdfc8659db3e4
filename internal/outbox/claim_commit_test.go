package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/destination"
)

// A claim's commit does not wait for its WAL flush: each claim statement
// turns synchronous_commit off for its own transaction, and nothing else
// the dispatcher sends does (a finalize's commit still waits for the disk:
// what it records is what the console shows). A statement trigger records
// the setting each update of the outbox and its aggregates ran under.
func TestClaimsAloneCommitWithoutWaitingForTheDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The test cluster's databases commit without waiting by default
	// (internal/dbtest): this pool's sessions wait, as a server's do.
	conf, err := pgxpool.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	conf.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, conf)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	addDestinations(t, pool, "alpha")
	_, err = pool.Exec(ctx, `
		CREATE TABLE commit_modes (tbl text, mode text);
		CREATE FUNCTION record_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO commit_modes VALUES (TG_TABLE_NAME, current_setting('synchronous_commit'));
			RETURN NULL;
		END $$;
		CREATE TRIGGER record_commit_mode AFTER UPDATE ON switchyard.outbox
			FOR EACH STATEMENT EXECUTE FUNCTION record_commit_mode();
		CREATE TRIGGER record_commit_mode AFTER UPDATE ON switchyard.outbox_aggregates
			FOR EACH STATEMENT EXECUTE FUNCTION record_commit_mode();`)
	require.NoError(t, err)
	modes := func() map[string][]string {
		t.Helper()
		rows, err := pool.Query(ctx, `DELETE FROM commit_modes RETURNING tbl, mode`)
		require.NoError(t, err)
		defer rows.Close()
		got := map[string][]string{}
		for rows.Next() {
			var tbl, mode string
			require.NoError(t, rows.Scan(&tbl, &mode))
			got[tbl] = append(got[tbl], mode)
		}
		require.NoError(t, rows.Err())
		return got
	}
	d := New(pool, Config{LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)},
		Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)})
	_ = modes() // the enqueue's aggregate numbering

	claimed, err := d.claim(ctx, "w", 10, nil)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	require.Equal(t, map[string][]string{"outbox": {"off", "off"}, "outbox_aggregates": {"off"}}, modes(),
		"the unordered claim, and the ordered one's head and aggregate")

	now := time.Now()
	var results []result
	for _, g := range claimed {
		results = append(results, result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now})
	}
	_, _, err = d.finalize(ctx, "w", results)
	require.NoError(t, err)
	got := modes()
	require.NotEmpty(t, got["outbox"])
	for tbl, seen := range got {
		for _, mode := range seen {
			require.Equal(t, "on", mode, "the finalize's update of %s", tbl)
		}
	}
	require.Equal(t, 2, countWhere(t, pool, "state = 'delivered'"))
}

// Invariant 2 across a crash of the server. A claim's commit does not wait
// for its WAL flush, so a crash may lose it while its dispatcher delivers
// under its leases; recovery leaves the rows as they were before it (here
// put back by hand), and the next claim leases them again. The lost
// claim's finalize must then change nothing: the next claim never issues
// its lease versions again, as counting up from the rows as they were
// would (migrations/00032_outbox_lease_versions_from_the_clock.sql).
func TestFencingHoldsForAClaimLostInACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t, "alpha")
	d := New(pool, Config{LeaseDuration: time.Hour, Routes: map[string]Route{"alpha": {Destination: destination.Func(nil)}}})
	enqueue(t, pool, Message{Topic: "t", Destination: "alpha", Payload: []byte(`{}`)},
		Message{Topic: "t", Destination: "alpha", AggregateType: "order", AggregateID: "1", Payload: []byte(`{}`)})
	_, err := pool.Exec(ctx, `
		CREATE TABLE messages_before AS SELECT id, lease_owner, lease_version, leased_until, attempts FROM switchyard.outbox;
		CREATE TABLE aggregates_before AS SELECT destination, aggregate_type, aggregate_id, lease_owner, lease_version, due_at
			FROM switchyard.outbox_aggregates`)
	require.NoError(t, err)
	// fences is each claimed delivery's fence by kind: an unordered
	// message's lease version, an aggregate's.
	fences := func(claimed []group) map[string]int64 {
		t.Helper()
		require.Len(t, claimed, 2)
		f := map[string]int64{}
		for _, g := range claimed {
			if m := g.msgs[0]; m.AggregateID == "" {
				f["unordered"] = m.LeaseVersion
			} else {
				f["aggregate"] = m.AggregateLeaseVersion
			}
		}
		return f
	}

	lost, err := d.claim(ctx, "lost", 10, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		UPDATE switchyard.outbox o SET lease_owner = b.lease_owner, lease_version = b.lease_version,
			leased_until = b.leased_until, attempts = b.attempts
		FROM messages_before b WHERE o.id = b.id;
		UPDATE switchyard.outbox_aggregates a SET lease_owner = b.lease_owner, lease_version = b.lease_version, due_at = b.due_at
		FROM aggregates_before b
		WHERE a.destination = b.destination AND a.aggregate_type = b.aggregate_type AND a.aggregate_id = b.aggregate_id`)
	require.NoError(t, err)
	next, err := d.claim(ctx, "next", 10, nil)
	require.NoError(t, err)
	lostFences, nextFences := fences(lost), fences(next)
	for kind, version := range lostFences {
		require.NotEqual(t, version, nextFences[kind], "the %s's lease version given again", kind)
	}

	now := time.Now()
	finalizeAll := func(worker string, claimed []group) {
		t.Helper()
		var results []result
		for _, g := range claimed {
			results = append(results, result{msg: g.msgs[0], outcome: outcomeDelivered, started: now, finished: now})
		}
		_, _, err := d.finalize(ctx, worker, results)
		require.NoError(t, err)
	}
	finalizeAll("lost", lost)
	require.Equal(t, 2, countWhere(t, pool, "state = 'pending'"), "the lost claim's finalize changed nothing")
	finalizeAll("next", next)
	require.Equal(t, 2, countWhere(t, pool, "state = 'delivered' AND delivered_by = 'next'"))
}
