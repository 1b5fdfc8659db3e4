package action_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// bundle is a test's database, a Service whose wake-ups are counted, and
// an actor of each role.
type bundle struct {
	pool                    *pgxpool.Pool
	svc                     *action.Service
	changed, woken          *atomic.Int64
	viewer, operator, admin action.Actor
}

func setup(t *testing.T) bundle {
	t.Helper()
	b := bundle{pool: dbtest.New(t), changed: new(atomic.Int64), woken: new(atomic.Int64)}
	b.svc = action.New(action.Config{
		ChangesCommitted: func() { b.changed.Add(1) },
		WakeDispatchers:  func(context.Context) error { b.woken.Add(1); return nil },
	})
	b.viewer = action.Actor{AccountID: 1, Name: "vera", Role: auth.Viewer, RemoteAddr: "192.0.2.1"}
	b.operator = action.Actor{AccountID: 2, Name: "otto", Role: auth.Operator, RemoteAddr: "192.0.2.2"}
	b.admin = action.Actor{AccountID: 3, Name: "ada", Role: auth.Admin, RemoteAddr: "192.0.2.3"}
	_, err := b.pool.Exec(context.Background(), `INSERT INTO switchyard.destinations (name, kind, address) VALUES ('billing', 'function', 'billing')`)
	require.NoError(t, err)
	return b
}

// message writes a message in state (as a dispatcher leaves a dead one)
// and returns its id.
func (b bundle) message(t *testing.T, state string) int64 {
	t.Helper()
	var id int64
	err := b.pool.QueryRow(context.Background(), `INSERT INTO switchyard.outbox
		(topic, destination, payload, state, attempts, last_error, error_fingerprint, finished_at)
		VALUES ('orders.created', 'billing', '{"order":1}', $1, 3, 'HTTP 422: rejected', 'fp-422',
			CASE WHEN $1 = 'pending' THEN NULL ELSE now() END)
		RETURNING id`, state).Scan(&id)
	require.NoError(t, err)
	return id
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// footprint is what any action leaves: audit rows, change rows, outbox
// rows, replay jobs.
type footprint struct{ audit, changes, outbox, jobs int }

func (b bundle) footprint(t *testing.T) footprint {
	t.Helper()
	return footprint{
		audit:   b.count(t, `SELECT count(*) FROM switchyard.audit_log`),
		changes: b.count(t, `SELECT count(*) FROM switchyard.changes`),
		outbox:  b.count(t, `SELECT count(*) FROM switchyard.outbox`),
		jobs:    b.count(t, `SELECT count(*) FROM switchyard.replay_jobs`),
	}
}

// requireRefused checks that err is a refusal of kind and returns it.
func requireRefused(t *testing.T, err error, kind action.Kind) *action.Refusal {
	t.Helper()
	r := action.AsRefusal(err)
	require.NotNil(t, r, "want a %s refusal, got %v", kind, err)
	require.Equal(t, kind, r.Kind, r.Message)
	require.NotEmpty(t, r.Message)
	return r
}
