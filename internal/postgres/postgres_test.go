package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// The console's sessions run without JIT compilation (see connect), unless
// the URL sets it.
func TestOpenTurnsJITOffUnlessTheURLSetsIt(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	jit := func(url string) string {
		db, err := Open(context.Background(), Config{URL: url}, slog.New(slog.NewTextHandler(t.Output(), nil)))
		require.NoError(t, err)
		defer db.Close()
		var v string
		require.NoError(t, db.Pool.QueryRow(context.Background(), "SHOW jit").Scan(&v))
		return v
	}
	require.Equal(t, "off", jit(url))
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	require.Equal(t, "on", jit(url+sep+"jit=on"))
	require.Equal(t, "on", jit(url+sep+"options=-c%20jit%3Don"))
}

// An unreachable server fails at once with one line naming where it looked.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	_, err := Open(context.Background(), Config{URL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.ErrorContains(t, err, `cannot reach the database at 127.0.0.1:1 (database "none")`)
	require.False(t, strings.Contains(err.Error(), "\n"), "one line: %q", err)
}

// Unavailable tells what waiting may cure (no server yet, a restart, a
// lost connection, a timeout) from a verdict (wrong password, no such
// database, an SQL error, a URL that does not parse).
func TestUnavailable(t *testing.T) {
	t.Parallel()
	pgErr := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code} }
	_, parseErr := pgconn.ParseConfig("postgres://x:notaport/y")
	require.Error(t, parseErr)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"reset, wrapped", fmt.Errorf("ping: %w", syscall.ECONNRESET), true},
		{"closed mid-handshake", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), true},
		{"our own timeout", fmt.Errorf("ping: %w", context.DeadlineExceeded), true},
		{"shutting down", pgErr("57P01"), true},
		{"crashed", pgErr("57P02"), true},
		{"starting up", pgErr("57P03"), true},
		{"no slots", pgErr("53300"), true},
		{"connection exception", pgErr("08006"), true},
		{"wrong password", pgErr("28P01"), false},
		{"no such database", pgErr("3D000"), false},
		{"an SQL error", pgErr("42P01"), false},
		{"a URL that does not parse", fmt.Errorf("invalid DATABASE_URL: %w", parseErr), false},
		{"anything else", errors.New("PostgreSQL 12 is too old"), false},
		{"no error", nil, false},
	} {
		require.Equal(t, tc.want, Unavailable(tc.err), tc.name)
	}
}

// A connect_timeout in the URL is kept; without one, new connections get
// DefaultConnectTimeout.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	db, err := Open(context.Background(), Config{URL: dbtest.NewURL(t)}, logger)
	require.NoError(t, err)
	defer db.Close()
	require.Equal(t, DefaultConnectTimeout, db.Pool.Config().ConnConfig.ConnectTimeout)
	u, err := url.Parse(dbtest.NewURL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("connect_timeout", "3")
	u.RawQuery = q.Encode()
	db2, err := Open(context.Background(), Config{URL: u.String()}, logger)
	require.NoError(t, err)
	defer db2.Close()
	require.Equal(t, 3*time.Second, db2.Pool.Config().ConnConfig.ConnectTimeout)
}
