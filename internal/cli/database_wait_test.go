package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/testwait"
)

// records keeps the messages logged to it; seen, when set, is called
// with each.
type records struct {
	mu   sync.Mutex
	msgs []string // guarded by mu
	seen func(msg string)
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	if r.seen != nil {
		r.seen(rec.Message)
	}
	return nil
}

func (r *records) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// refused is what dialing a port where nothing listens returns.
var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// failing returns a start function that fails with err n times, then
// succeeds, and counts its calls.
func failing(n int, err error) (func(context.Context) error, *int) {
	calls := 0
	return func(context.Context) error {
		calls++
		if calls <= n {
			return err
		}
		return nil
	}, &calls
}

// An unreachable database is tried again until it answers, and the wait
// logs the first failure, then once per window: the number of log lines
// depends on the window, not on the attempts.
func TestDatabaseWaitLogsOncePerWindowNotPerAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		logEvery     time.Duration
		wantStillLog int
	}{
		{"a window longer than the wait", time.Hour, 0},
		{"a window shorter than a pause", 0, 4}, // attempts 2–5 each end a window
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &records{}
			w := databaseWait{limit: waitForever, base: time.Millisecond, ceiling: 2 * time.Millisecond, logEvery: tc.logEvery}
			start, calls := failing(5, refused)
			require.NoError(t, w.await(context.Background(), slog.New(rec), start))
			require.Equal(t, 6, *calls, "five failures, then the attempt that reached it")
			require.Equal(t, 1, rec.count("waiting for the database"))
			require.Equal(t, tc.wantStillLog, rec.count("still waiting for the database"))
			require.Equal(t, 1, rec.count("database reachable"))
		})
	}
}

// What waiting cannot change ends the wait at once; so does a limit of 0
// (the first failure, as it is, with nothing logged) and a limit that
// passes.
func TestDatabaseWaitGivesUp(t *testing.T) {
	t.Parallel()
	badPassword := &pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"}
	for _, tc := range []struct {
		name      string
		limit     time.Duration
		err       error
		wantCalls int
	}{
		{"a wrong password, waiting forever", waitForever, badPassword, 1},
		{"an unreachable database, not waiting", 0, refused, 1},
		{"an unreachable database, waiting 20ms", 20 * time.Millisecond, refused, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &records{}
			w := databaseWait{limit: tc.limit, base: time.Millisecond, ceiling: 2 * time.Millisecond, logEvery: time.Hour}
			start, calls := failing(1<<30, tc.err)
			began := time.Now()
			err := w.await(context.Background(), slog.New(rec), start)
			require.ErrorIs(t, err, tc.err)
			if tc.wantCalls > 0 {
				require.Equal(t, tc.wantCalls, *calls)
			} else {
				require.Greater(t, *calls, 1, "tried again until the limit")
				require.GreaterOrEqual(t, time.Since(began), tc.limit)
			}
			if tc.limit == 0 || tc.err == badPassword {
				require.Zero(t, rec.count("waiting for the database"), "nothing to wait for: nothing said about waiting")
			}
		})
	}
}

// A wait in its pause ends as soon as its context does (SIGTERM), with the
// context's error.
func TestDatabaseWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &records{seen: func(msg string) {
		if msg == "waiting for the database" {
			cancel() // the first pause has begun (or is about to): an hour long
		}
	}}
	w := databaseWait{limit: waitForever, base: time.Hour, ceiling: time.Hour, logEvery: time.Hour}
	start, calls := failing(1<<30, refused)
	done := make(chan error, 1)
	go func() { done <- w.await(ctx, slog.New(rec), start) }()
	err := testwait.For(t, 10*time.Second, "the wait to end with its context", done)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, *calls)
}

func TestParseDatabaseWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		command, value string
		want           time.Duration
		wantErr        bool
	}{
		{"dispatch", "", waitForever, false},
		{"serve", "", 0, false},
		{"demo", "", 0, false},
		{"serve", "forever", waitForever, false},
		{"dispatch", "0s", 0, false},
		{"serve", "2m", 2 * time.Minute, false},
		{"serve", "-1s", 0, true},
		{"serve", "soon", 0, true},
	} {
		got, err := parseDatabaseWait(tc.command, tc.value)
		if tc.wantErr {
			require.Error(t, err, "%s %q", tc.command, tc.value)
			continue
		}
		require.NoError(t, err, "%s %q", tc.command, tc.value)
		require.Equal(t, tc.want, got, "%s %q", tc.command, tc.value)
	}
	_, err := parseConfig([]string{"dispatch", "--database-wait", "soon"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "invalid database wait")
	cfg, err := parseConfig([]string{"serve"}, func(k string) string {
		return map[string]string{"SWITCHYARD_DATABASE_WAIT": "forever"}[k]
	}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, waitForever, cfg.databaseWait)
}
