package audit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func record(t *testing.T, pool *pgxpool.Pool, e audit.Entry) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		id, err = audit.Record(context.Background(), tx, e)
		return err
	}))
	return id
}

func TestRecordCommitsWithItsTransactionOnly(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := audit.Record(ctx, tx, audit.Entry{Actor: "alice", Action: "replay", Outcome: audit.OK}); err != nil {
			return err
		}
		return fmt.Errorf("the effect failed")
	})
	require.Error(t, err)
	rows, _, err := audit.List(ctx, pool, audit.Filter{})
	require.NoError(t, err)
	require.Empty(t, rows, "a rolled-back action leaves no audit row")

	_, err = audit.Record(ctx, nil, audit.Entry{Actor: "alice", Action: "Bad Action", Outcome: audit.OK})
	require.ErrorIs(t, err, audit.ErrInvalid)
	_, err = audit.Record(ctx, nil, audit.Entry{Actor: "alice", Action: "replay", Outcome: "maybe"})
	require.ErrorIs(t, err, audit.ErrInvalid)
}

func TestListPagesByKeysetAndFilters(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	for i := range 7 {
		actor := "alice"
		if i%2 == 1 {
			actor = "bob"
		}
		record(t, pool, audit.Entry{Actor: actor, Action: audit.ActionLogin, Target: fmt.Sprint(i), Outcome: audit.OK, RequestID: fmt.Sprintf("req-%d", i)})
	}
	record(t, pool, audit.Entry{Actor: "bob", Action: audit.ActionLogout, Outcome: audit.OK})

	page, next, err := audit.List(ctx, pool, audit.Filter{Limit: 3})
	require.NoError(t, err)
	require.Len(t, page, 3)
	require.Equal(t, audit.ActionLogout, page[0].Action, "newest first")
	require.Equal(t, page[2].ID, next)
	var all []audit.Row
	all = append(all, page...)
	for next != 0 {
		page, next, err = audit.List(ctx, pool, audit.Filter{Limit: 3, Before: next})
		require.NoError(t, err)
		all = append(all, page...)
	}
	require.Len(t, all, 8)
	for i := 1; i < len(all); i++ {
		require.Less(t, all[i].ID, all[i-1].ID)
	}

	bobLogins, _, err := audit.List(ctx, pool, audit.Filter{Actor: "bob", Action: audit.ActionLogin})
	require.NoError(t, err)
	require.Len(t, bobLogins, 3)
	for _, r := range bobLogins {
		require.Equal(t, "bob", r.Actor)
		require.Equal(t, audit.ActionLogin, r.Action)
	}
}

// The application cannot change the trail: UPDATE, DELETE and TRUNCATE fail
// in the database, whoever runs them.
func TestTrailIsAppendOnly(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	record(t, pool, audit.Entry{Actor: "alice", Action: "replay", Outcome: audit.OK})
	for _, sql := range []string{
		`UPDATE switchyard.audit_log SET reason = 'nothing to see'`,
		`DELETE FROM switchyard.audit_log`,
		`TRUNCATE switchyard.audit_log`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "append-only", sql)
	}
	rows, _, err := audit.List(ctx, pool, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
}

// Concurrent writers extend one chain: ids are consecutive and the chain
// verifies. An edit that bypasses the trigger is found at its row.
func TestHashChainVerifiesAndFindsTampering(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const writers = 20
	errs := make(chan error, writers)
	testwait.Together(writers, func(i int) {
		errs <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := audit.Record(ctx, tx, audit.Entry{Actor: "op", Action: "replay", Target: fmt.Sprint(i), Outcome: audit.OK})
			return err
		})
	})
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := audit.Verify(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, writers, n)
	var lo, hi int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT min(id), max(id) FROM switchyard.audit_log`).Scan(&lo, &hi))
	require.EqualValues(t, writers-1, hi-lo)

	// A superuser who disables the trigger can edit a row; the chain
	// shows where.
	_, err = pool.Exec(ctx, `ALTER TABLE switchyard.audit_log DISABLE TRIGGER audit_log_no_update`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE switchyard.audit_log SET actor = 'someone else' WHERE id = $1`, lo+5)
	require.NoError(t, err)
	_, err = audit.Verify(ctx, pool)
	require.ErrorIs(t, err, audit.ErrChainBroken)
	require.ErrorContains(t, err, fmt.Sprintf("row %d", lo+5))
}

// Actions lists every action recorded, each once, sorted, by probing the
// action index once per distinct action (issue 14, item 11).
func TestActionsListsEveryRecordedActionOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	log := audit.Log{DB: pool}
	actions, err := log.Actions(context.Background())
	require.NoError(t, err)
	require.Empty(t, actions, "an empty trail has no actions")
	for i, a := range []string{"message.replay", "login", "message.replay", "replay_job.start", "login", "custom.thing"} {
		record(t, pool, audit.Entry{Actor: fmt.Sprintf("u%d", i), Action: a, Outcome: audit.OK})
	}
	actions, err = log.Actions(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"custom.thing", "login", "message.replay", "replay_job.start"}, actions)
}
