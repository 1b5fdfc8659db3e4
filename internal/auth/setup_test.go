package auth

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testlog"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const goodPassword = "correct horse battery"

// testParams hash the tests' passwords: argon2id at DefaultParams costs
// seconds per hash under the race detector, and most tests sign in many
// times. Tests of the parameters themselves ask for DefaultParams.
var testParams = Params{Time: 1, MemoryKiB: 1024, Threads: 1, KeyLen: 32}

// setup returns a service on a fresh database with accounts alice (admin)
// and bob (viewer), both with goodPassword, hashed with cfg.Params
// (testParams when unset).
func setup(t *testing.T, cfg Config) (*Service, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.New(t)
	if cfg.Params == (Params{}) {
		cfg.Params = testParams
	}
	if cfg.Logger == nil {
		cfg.Logger = testlog.New(t)
	}
	svc := New(pool, cfg)
	ctx := context.Background()
	require.NoError(t, svc.AddUser(ctx, CLI, "alice", Admin, goodPassword))
	require.NoError(t, svc.AddUser(ctx, CLI, "bob", Viewer, goodPassword))
	return svc, pool
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
