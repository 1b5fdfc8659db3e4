package cli

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
)

// gate stands where a database will be: until it opens, every connection
// is accepted and closed at once (a server not up yet, or restarting);
// once open, connections go through to the real server. It counts the
// connections it turned away.
type gate struct {
	ln       net.Listener
	upstream string
	open     atomic.Bool
	refused  atomic.Int64
	wg       sync.WaitGroup
}

func newGate(t *testing.T, upstream string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{ln: ln, upstream: upstream}
	g.wg.Go(g.accept)
	t.Cleanup(func() { _ = ln.Close(); g.wg.Wait() })
	return g
}

func (g *gate) accept() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		if !g.open.Load() {
			g.refused.Add(1)
			_ = c.Close()
			continue
		}
		g.wg.Go(func() { g.forward(c) })
	}
}

func (g *gate) forward(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", g.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(u, c); _ = u.Close(); close(done) }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
	<-done
}

// through returns dbURL with its host replaced by the gate's address.
func (g *gate) through(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = g.ln.Addr().String()
	return u.String()
}

func upstreamOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	return u.Host
}

// `console dispatch` started before its database is reachable waits for
// it, trying again with backoff and logging once (not once per attempt),
// and delivers once the database is there, without ever exiting.
func TestDispatchWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	const messages = 20
	ctx := context.Background()
	receiver := newSink()
	receiver.release()
	dbURL, pool := sinkDatabase(t, receiver, messages)

	g := newGate(t, upstreamOf(t, dbURL))
	p := startConsole(t, []string{"DATABASE_URL=" + g.through(t, dbURL), "SINK_SECRET=" + testSecret}, "dispatch", "--workers", "2")
	began := time.Now()
	testwait.Until(t, time.Minute, "three attempts turned away at the gate (the console's log is above)", func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("console dispatch exited while the database was unreachable (%d):\n%s", p.WaitExit(t, time.Second), p.Stderr())
		default:
		}
		return g.refused.Load() >= 3
	})
	// The first failure is logged, then one line per 30 s window: never
	// one per attempt.
	waited := time.Since(began)
	lines := strings.Count(p.Stderr(), "waiting for the database")
	require.GreaterOrEqual(t, lines, 1, "the wait is logged:\n%s", p.Stderr())
	require.LessOrEqual(t, lines, 1+int(waited/(30*time.Second)), "one line per window, not per attempt:\n%s", p.Stderr())
	require.NotContains(t, p.Stderr(), "dispatcher started")

	g.open.Store(true)
	testwait.Until(t, 2*time.Minute, "every message delivered once the database is there (the console's log is above)", func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("console dispatch exited:\n%s", p.Stderr())
		default:
		}
		var delivered int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM switchyard.outbox WHERE state = 'delivered'`).Scan(&delivered))
		return delivered == messages
	})
	require.Contains(t, p.Stderr(), "database reachable")
	p.Stop(t)
}

// SIGTERM while `console dispatch` waits for its database ends it at once,
// with status 0: a supervisor stopping it is not a failure.
func TestDispatchWaitingForTheDatabaseStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	g := newGate(t, "127.0.0.1:1") // never opened
	p := startConsole(t, []string{"DATABASE_URL=postgres://switchyard@" + g.ln.Addr().String() + "/switchyard?sslmode=disable"}, "dispatch")
	testwait.Until(t, time.Minute, "the wait to be logged", func() bool {
		return strings.Contains(p.Stderr(), "waiting for the database")
	})
	select {
	case <-p.Exited():
		t.Fatalf("console dispatch exited while waiting:\n%s", p.Stderr())
	default:
	}
	stopped := time.Now()
	p.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, p.WaitExit(t, 10*time.Second), "a clean exit")
	t.Logf("exited %v after SIGTERM", time.Since(stopped))
}

// `console serve --database-wait forever` waits like the dispatcher and
// serves once the database is there; without it the first failure is
// final (TestUnreachableDatabaseURLFailsFastWithOneLine).
func TestServeWaitsForTheDatabaseWhenAsked(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	g := newGate(t, upstreamOf(t, dbURL))
	p := startConsole(t, []string{"DATABASE_URL=" + g.through(t, dbURL), "SWITCHYARD_DEMO=true", "SWITCHYARD_DATABASE_WAIT=forever"},
		"--listen", "127.0.0.1:0")
	testwait.Until(t, time.Minute, "two attempts turned away at the gate", func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("console serve exited while the database was unreachable:\n%s", p.Stderr())
		default:
		}
		return g.refused.Load() >= 2
	})
	g.open.Store(true)
	testwait.Until(t, time.Minute, "the console to listen once the database is there", func() bool {
		select {
		case <-p.Exited():
			t.Fatalf("console serve exited:\n%s", p.Stderr())
		default:
		}
		return strings.Contains(p.Stderr(), "console listening")
	})
	p.Stop(t)
}
