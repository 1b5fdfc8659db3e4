package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// repair runs RepairTx in a transaction of its own, as an action does.
func (e *env) repair(actor string, id int64) (RepairResult, error) {
	var r RepairResult
	err := pgx.BeginFunc(context.Background(), e.pool, func(tx pgx.Tx) error {
		var err error
		r, err = RepairTx(context.Background(), tx, By{Actor: actor, Reason: "customer asked"}, id)
		return err
	})
	return r, err
}

// repairAll walks the open findings of f, repairing each, as a bulk
// repair does; it returns how many it repaired.
func (e *env) repairAll(f FindingFilter) (repaired int, err error) {
	var before int64
	for {
		ids, err := OpenFindings(context.Background(), e.pool, f, before, 7)
		if err != nil || len(ids) == 0 {
			return repaired, err
		}
		for _, id := range ids {
			r, err := e.repair("bulk", id)
			switch {
			case errors.Is(err, ErrAlreadyResolved):
			case err != nil:
				return repaired, err
			case !r.Existing:
				repaired++
			}
		}
		before = ids[len(ids)-1]
	}
}

// findingID returns the id of the finding of kind for key.
func (e *env) findingID(kind, key string) int64 {
	e.t.Helper()
	var id int64
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		"SELECT id FROM switchyard.reconcile_findings WHERE kind = $1 AND key = $2", kind, key).Scan(&id))
	return id
}

// runAll runs every due check's cycle.
func (e *env) runAll(r *Runner) {
	e.t.Helper()
	for {
		ran, err := r.RunOnce(context.Background())
		require.NoError(e.t, err)
		if !ran {
			return
		}
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// Invariant 6 for repairs: 20 operators clicking repair of one finding at
// once, for each of two findings (a lost delivery and a mismatched row),
// make one outbox row per finding; every click is answered with that row.
// The redelivery carries the original's idempotency key. Each finding's
// repair is audited once, and once the repairs have reached the remote the
// next cycle resolves both findings.
func TestRepairMakesOneOutboxRowWhateverTheClicksAndOperators(t *testing.T) {
	t.Parallel()
	e := setup(t, 100)
	_, keys := e.delivered(10)
	for i, k := range keys {
		if i != 4 {
			e.hooks.Put(k.String(), nil)
		}
	}
	e.remote.Alter("42", "status", "cancelled")
	e.deliveryCheck("hooks")
	e.tableCheck("orders", 50, 1000, 30_000)
	e.runAll(e.runner("a"))
	lost, mismatch := e.findingID(MissingRemote, keys[4].String()), e.findingID(Mismatch, "42")

	const clicks = 20
	fresh := map[int64]*atomic.Int64{lost: {}, mismatch: {}}
	results := make(chan RepairResult, 2*clicks)
	findings := []int64{lost, mismatch}
	testwait.Together(len(findings)*clicks, func(k int) {
		f, i := findings[k/clicks], k%clicks // operator i clicks on finding f
		r, err := e.repair(fmt.Sprintf("op%d", i), f)
		if err != nil {
			t.Errorf("repair %d: %v", f, err)
			return
		}
		if !r.Existing {
			fresh[f].Add(1)
		}
		results <- r
	})
	close(results)
	require.Equal(t, int64(1), fresh[lost].Load())
	require.Equal(t, int64(1), fresh[mismatch].Load())
	first := map[int64]RepairResult{}
	for r := range results {
		if _, ok := first[r.FindingID]; !ok {
			first[r.FindingID] = r
		}
		require.Equal(t, first[r.FindingID].MessageID, r.MessageID, "every click answered with the one row")
	}
	require.Equal(t, keys[4], first[lost].Key, "redelivered with the original idempotency key")
	require.Equal(t, 1, e.count("SELECT count(*) FROM switchyard.outbox WHERE replay_request = $1", RepairKey(lost, 1)))
	require.Equal(t, 1, e.count("SELECT count(*) FROM switchyard.outbox WHERE message_id = $1", first[mismatch].Key))
	require.Equal(t, 10+1+1, e.count("SELECT count(*) FROM switchyard.outbox"))
	require.Equal(t, 2, e.count("SELECT count(*) FROM switchyard.reconcile_findings WHERE status = 'repair_requested'"))

	// The repairs reach the remote (what the destination would do).
	e.hooks.Put(keys[4].String(), nil)
	var payload []byte
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT payload FROM switchyard.outbox WHERE id = $1", first[mismatch].MessageID).Scan(&payload))
	var repaired struct {
		Key    string         `json:"key"`
		Fields map[string]any `json:"fields"`
	}
	require.NoError(t, json.Unmarshal(payload, &repaired))
	e.remote.Put(repaired.Key, repaired.Fields)
	_, err := e.pool.Exec(context.Background(), "UPDATE switchyard.reconcile_checks SET next_cycle_at = now()")
	require.NoError(t, err)
	e.runAll(e.runner("a"))
	require.Equal(t, 2, e.count("SELECT count(*) FROM switchyard.reconcile_findings WHERE status = 'resolved'"))
	require.Equal(t, 0, e.count("SELECT count(*) FROM switchyard.reconcile_findings WHERE status <> 'resolved'"))
}

// A finding that does not exist is refused; a missing_local repair enqueues a
// deletion; an ignored finding is audited and can no longer be repaired.
func TestRepairRefusalsAndIgnore(t *testing.T) {
	t.Parallel()
	e := setup(t, 20)
	e.remote.Put("21", orderFields(21))
	e.remote.Drop("5")
	e.tableCheck("orders", 50, 1000, 30_000)
	e.runAll(e.runner("a"))
	extra, lost := e.findingID(MissingLocal, "21"), e.findingID(MissingRemote, "5")

	_, err := e.repair("op", 1<<40)
	require.ErrorIs(t, err, ErrFindingNotFound)
	require.Equal(t, 0, e.count("SELECT count(*) FROM switchyard.outbox"))

	r, err := e.repair("op", extra)
	require.NoError(t, err)
	var payload string
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT payload::text FROM switchyard.outbox WHERE id = $1", r.MessageID).Scan(&payload))
	require.JSONEq(t, `{"key": "21", "deleted": true}`, payload)

	require.NoError(t, pgx.BeginFunc(context.Background(), e.pool, func(tx pgx.Tx) error {
		_, err := IgnoreTx(context.Background(), tx, By{Actor: "op", Reason: "known"}, lost)
		return err
	}))
	_, err = e.repair("op", lost)
	require.True(t, errors.Is(err, ErrAlreadyResolved), "%v", err)
	rows, err := e.pool.Query(context.Background(), "SELECT event FROM switchyard.reconcile_finding_events WHERE finding_id = $1 ORDER BY id", lost)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"opened", StatusIgnored}, events)
}

// Two walks of the open findings (a bulk repair's) at once, then a retry,
// make one outbox row per finding: every finding is repaired by exactly
// one walk. The open drift groups as triage will show it.
func TestBulkRepairWalksMakeOneRowPerFinding(t *testing.T) {
	t.Parallel()
	e := setup(t, 600)
	for i := 2; i <= 600; i += 2 {
		e.remote.Alter(strconv.Itoa(i), "status", "lost")
	}
	e.remote.Drop("601") // nothing: not a local key
	e.tableCheck("orders", 100, 10_000, 30_000)
	e.runAll(e.runner("a"))

	groups, err := FindingGroups(context.Background(), e.pool)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	require.Equal(t, "reconcile:orders:mismatch", groups[0].Fingerprint())
	require.Equal(t, int64(300), groups[0].Findings)

	var repaired atomic.Int64
	testwait.Together(2, func(int) {
		n, err := e.repairAll(FindingFilter{Check: "orders", Kind: Mismatch})
		if err != nil {
			t.Errorf("repair all: %v", err)
		}
		repaired.Add(int64(n))
	})
	require.Equal(t, int64(300), repaired.Load(), "each finding repaired by one walk")
	again, err := e.repairAll(FindingFilter{Check: "orders"})
	require.NoError(t, err)
	require.Zero(t, again, "a retry finds nothing left open")
	require.Equal(t, 300, e.count("SELECT count(*) FROM switchyard.outbox"))
}
