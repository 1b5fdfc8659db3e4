package inbox

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// versioned is event id "v<version>" of entity "cust-1".
func versioned(version int64, policy OutOfOrder) Event {
	ev := event(fmt.Sprintf("v%d", version))
	ev.EntityKey, ev.EntityVersion, ev.Policy.OutOfOrder = "cust-1", version, policy
	return ev
}

// applied lists the versions the handler applied, in order.
func applied(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version FROM effects ORDER BY id`)
	require.NoError(t, err)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return versions
}

func TestOutOfOrderApplyPolicy(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	steps := []struct {
		version int64
		want    Outcome
	}{
		{1, OutcomeProcessed}, {3, OutcomeProcessed}, {2, OutcomeStale}, {3, OutcomeDuplicate}, {5, OutcomeProcessed}, {4, OutcomeStale},
	}
	for _, s := range steps {
		res, err := Receive(context.Background(), pool, versioned(s.version, OutOfOrderApply), writeEffect)
		require.NoError(t, err)
		require.Equal(t, s.want, res.Outcome, "version %d", s.version)
	}
	require.Equal(t, []int64{1, 3, 5}, applied(t, pool))
	st, _ := status(t, pool, "test", "v2")
	require.Equal(t, "stale", st)
	require.Equal(t, 5, count(t, pool, `SELECT version FROM switchyard.inbox_entity_versions WHERE entity_key = 'cust-1'`))
}

func TestOutOfOrderHoldPolicy(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	steps := []struct {
		version  int64
		want     Outcome
		released int
	}{
		{3, OutcomeHeld, 0}, {4, OutcomeHeld, 0}, {1, OutcomeProcessed, 0}, {6, OutcomeHeld, 0},
		{2, OutcomeProcessed, 2}, // 3 and 4 follow in 2's transaction; 6 waits for 5
		{1, OutcomeDuplicate, 0},
		{5, OutcomeProcessed, 1},
	}
	for _, s := range steps {
		res, err := Receive(context.Background(), pool, versioned(s.version, OutOfOrderHold), writeEffect)
		require.NoError(t, err)
		require.Equal(t, s.want, res.Outcome, "version %d", s.version)
		require.Equal(t, s.released, res.Released, "version %d", s.version)
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, applied(t, pool))
	require.Equal(t, 6, count(t, pool, `SELECT count(*) FROM switchyard.inbox_events WHERE status = 'processed'`))

	// An event older than the applied version is stale under hold too.
	stale := versioned(2, OutOfOrderHold)
	stale.ID = "v2-again"
	res, err := Receive(context.Background(), pool, stale, writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeStale, res.Outcome)
}

// A held successor whose handler fails when its predecessor is applied is
// rolled back alone: the predecessor commits, the successor is recorded as
// failed, and its redelivery applies it.
func TestHeldSuccessorFailureStaysWithTheSuccessor(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	ctx := context.Background()
	failOn3 := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		if err := writeEffect(ctx, tx, ev); err != nil {
			return err
		}
		if ev.EntityVersion == 3 {
			return fmt.Errorf("cannot apply version 3")
		}
		return nil
	}
	for _, v := range []int64{3, 2} {
		res, err := Receive(ctx, pool, versioned(v, OutOfOrderHold), failOn3)
		require.NoError(t, err)
		require.Equal(t, OutcomeHeld, res.Outcome)
	}
	res, err := Receive(ctx, pool, versioned(1, OutOfOrderHold), failOn3)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, 1, res.Released, "2 follows; 3 fails")
	require.Equal(t, []int64{1, 2}, applied(t, pool))
	st, attempts := status(t, pool, "test", "v3")
	require.Equal(t, "failed", st)
	require.Equal(t, 1, attempts)

	res, err = Receive(ctx, pool, versioned(3, OutOfOrderHold), writeEffect)
	require.NoError(t, err)
	require.Equal(t, OutcomeProcessed, res.Outcome)
	require.Equal(t, []int64{1, 2, 3}, applied(t, pool))
}
