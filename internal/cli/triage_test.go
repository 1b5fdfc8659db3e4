package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/triage"
	"github.com/switchyard/switchyard/internal/ws"
)

// The triage socket the console builds is closed as soon as its session
// is revoked (StatusSessionEnded), as its SSE streams are, not at the
// socket's next recheck a minute later: newTriage hands the server the
// process's session guard.
func TestRevokedSessionClosesItsTriageSocketAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	listener := changefeed.NewListener(pool, changefeed.Config{})
	require.NoError(t, listener.Start(ctx))
	t.Cleanup(listener.Stop)
	guard := auth.NewStreamGuard()
	_, unwatch := listener.Subscribe(guard.Observe)
	t.Cleanup(unwatch)
	_, socket := newTriage(triageConfig{}, pool, guard, listener.Wake, slog.New(slog.DiscardHandler))
	_, unsubscribe := listener.Subscribe(socket.Observe)
	t.Cleanup(unsubscribe)
	require.NoError(t, socket.Start(ctx))

	accounts := auth.New(pool, auth.Config{Params: auth.Params{Time: 1, MemoryKiB: 8 * 1024, Threads: 1, KeyLen: 32}, Notify: listener.Wake})
	require.NoError(t, accounts.AddUser(ctx, auth.CLI, "alice", auth.Operator, "correct horse battery"))
	session, err := accounts.Login(ctx, "alice", "correct horse battery", "127.0.0.1")
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recheck := func(ctx context.Context) (auth.Principal, error) { return accounts.Authenticate(ctx, session.Token) }
		p, err := recheck(r.Context())
		if err != nil {
			http.Error(w, "sign in", http.StatusUnauthorized)
			return
		}
		socket.Serve(w, r, p, "127.0.0.1", recheck)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(socket.Stop) // runs first: sockets close before the HTTP server

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {srv.URL}},
	})
	require.NoError(t, err)
	defer conn.CloseNow()
	require.NoError(t, conn.Write(dctx, websocket.MessageText, []byte(`{"type":"hello","view":"board","items":[]}`)))
	_, _, err = conn.Read(dctx) // the hello's answer: the socket is registered
	require.NoError(t, err)

	require.NoError(t, accounts.Logout(ctx, session.Principal, "127.0.0.1"))
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // far below the minute of the recheck
	defer cancel()
	for {
		_, _, err := conn.Read(rctx)
		if err != nil {
			require.Equal(t, ws.StatusSessionEnded, websocket.CloseStatus(err), "read: %v", err)
			return
		}
	}
}

// What production gives, from the defaults: a claim lasts 5 minutes
// without a heartbeat, nobody's answer is held, and someone whose tab or
// instance dies vanishes from presence within 45 s: their row expires a
// TTL after its last refresh, the next sweep (a sixth of the TTL later at
// most) deletes it, and the change feed leaves 5 s for the push.
func TestTriageDefaultsBoundClaimsAndPresence(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	require.Equal(t, triage.DefaultLease, cfg.triage.lease)
	require.Equal(t, 5*time.Minute, cfg.triage.lease)
	require.Zero(t, cfg.triage.ackDelay)
	ttl := cfg.triage.presenceTTL
	require.Equal(t, triage.DefaultPresenceTTL, ttl)
	require.LessOrEqual(t, ttl+ttl/6, 40*time.Second)
	require.Less(t, ttl/3, ttl/2, "refreshed at least twice per TTL")

	_, err = parseConfig([]string{"--triage-lease", "0s"}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "invalid triage lease")
	_, err = parseConfig(nil, func(k string) string {
		if k == "SWITCHYARD_TRIAGE_ACK_DELAY" {
			return "-1s"
		}
		return ""
	}, io.Discard)
	require.ErrorContains(t, err, "invalid triage ack delay")
}
