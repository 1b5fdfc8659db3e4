package postgres

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// A URL opens that server, with the pool size asked for, and no embedded
// cluster.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	db, err := Open(context.Background(), Config{URL: dbtest.NewURL(t), MaxConns: 3}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.NoError(t, err)
	defer db.Close()
	require.Nil(t, db.Cluster)
	require.EqualValues(t, 3, db.Pool.Config().MaxConns)
	require.Equal(t, "switchyard-console", db.Pool.Config().ConnConfig.RuntimeParams["application_name"])
}

// An unreachable server fails at once with one line naming where it looked.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Config{URL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.ErrorContains(t, err, `cannot reach the database at 127.0.0.1:1 (database "none")`)
	require.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err)
}
