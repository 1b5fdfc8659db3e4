package ws

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/internal/triage"
)

// item creates a triage item (as the reconciler would) and returns it.
func (e *env) item(t *testing.T, name string) triage.Item {
	t.Helper()
	ctx := context.Background()
	ref := json.RawMessage(`{"check": "` + name + `"}`)
	require.NoError(t, pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		return triage.Track(ctx, tx, triage.ReconcileFindings, ref, name, "test")
	}))
	items, err := triage.List(ctx, e.pool, triage.Filter{})
	require.NoError(t, err)
	for _, it := range items {
		if it.Title == name {
			return it
		}
	}
	t.Fatalf("no item %s", name)
	return triage.Item{}
}

func mutation(item triage.Item, op triage.Op, args triage.Args) map[string]any {
	return map[string]any{"type": "mutate", "mutation_id": uuid.New(), "item": item.ID, "op": op, "args": args, "seen_version": item.Version}
}

func TestForeignOriginIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	s := e.signIn(t, "alice", auth.Operator)
	_, resp, err := e.dialOrigin(s, "https://evil.example")
	require.Error(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, 0, e.srv.Clients())
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	c := e.dial(t, e.signIn(t, "alice", auth.Operator))
	c.send(map[string]string{"type": "hello", "view": "board", "pad": strings.Repeat("x", 17<<10)})
	require.Equal(t, websocket.StatusMessageTooBig, c.closeStatus(5*time.Second))
}

func TestFloodClosesWith1008(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Rate: 1, Burst: 5})
	c := e.dial(t, e.signIn(t, "alice", auth.Operator))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 20 {
		if c.ws.Write(ctx, websocket.MessageText, []byte(`{"type": "nothing"}`)) != nil {
			break // closed under us: that is the point
		}
	}
	require.Equal(t, websocket.StatusPolicyViolation, c.closeStatus(5*time.Second))
}

// A viewer sees state and presence but mutates nothing: the refusal is
// answered and audited as denied, with the client's address.
func TestViewerMutationIsRefusedAndAudited(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	it := e.item(t, "drift")
	c := e.dial(t, e.signIn(t, "vera", auth.Viewer))
	c.send(map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}})
	c.await(5*time.Second, "the item's state", func(m message) bool { return m.Type == "state" && len(m.Items) == 1 })
	c.send(mutation(it, triage.OpClaim, triage.Args{}))
	m := c.await(5*time.Second, "the answer", func(m message) bool { return m.Type == "answer" })
	require.Equal(t, triage.RejectForbidden, m.Answer.Reason)
	var denied int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM switchyard.audit_log WHERE actor = 'vera' AND action = 'triage.claim' AND outcome = 'denied' AND remote_addr = '127.0.0.1'").Scan(&denied))
	require.Equal(t, 1, denied, "one denied row, with the address the console gave the socket")
}

// A revoked session's socket closes within 2 s, on the instance that
// holds it, through the change feed.
func TestRevokedSessionClosesItsSocket(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	s := e.signIn(t, "alice", auth.Operator)
	c := e.dial(t, s)
	c.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	c.await(5*time.Second, "presence", func(m message) bool { return m.Type == "presence" })
	require.NoError(t, e.auth.Logout(context.Background(), s.Principal, "127.0.0.1"))
	require.Equal(t, StatusSessionEnded, c.closeStatus(2*time.Second))
}

// B sees A's claim live, with A's presence on the item; the 20 clients
// of one item that all claim it at once all show the one holder.
func TestClaimsReachEveryClientLive(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	it := e.item(t, "drift")
	const clients = 20
	conns := make([]*client, clients)
	for i := range conns {
		conns[i] = e.dial(t, e.signIn(t, "op"+string(rune('a'+i)), auth.Operator))
		conns[i].send(map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}})
		conns[i].await(5*time.Second, "the item's state", func(m message) bool { return m.Type == "state" })
	}
	holders := make([]string, clients)
	errs := make([]error, clients)
	began := time.Now()
	testwait.Together(clients, func(i int) {
		if errs[i] = conns[i].sendErr(mutation(it, triage.OpClaim, triage.Args{})); errs[i] != nil {
			return
		}
		m, err := conns[i].awaitErr(30*time.Second, "the holder", func(m message) bool {
			return m.Type == "state" && len(m.Items) == 1 && m.Items[0].ClaimHolder != ""
		})
		if errs[i] = err; err == nil {
			holders[i] = m.Items[0].ClaimHolder
		}
	})
	took := time.Since(began)
	// The 1 s is a latency target, measured without the rest of
	// the test suite competing for two cores by console bench triage
	// (p99 commit to receipt); here every client must converge on the one
	// holder, each await bounded at 30 s: at load average 55 the 20
	// claims' transactions queue for the test's 4 pooled connections
	// ahead of the feed's read and the fan-out's, and the holder came
	// 5.8 s after the claims. Setting up the 20 clients takes
	// longer than a ping interval on a loaded machine: the clients read
	// (and answer pings) all the while, or the server would rightly drop
	// the first ones as dead before the claims.
	t.Logf("all %d clients showed the holder %v after the claims were released", clients, took)
	for i, err := range errs {
		require.NoError(t, err, "client %d", i)
	}
	for _, h := range holders {
		require.Equal(t, holders[0], h)
	}
	got, err := triage.Get(context.Background(), e.pool, it.ID)
	require.NoError(t, err)
	require.Equal(t, holders[0], got.ClaimHolder)
}

// A presence whose socket's instance died (its heartbeats stopped)
// expires on the database clock; the sweep announces it and every board
// drops the name.
func TestDeadPresenceExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Now()
	now := func() *time.Time { mu.Lock(); defer mu.Unlock(); c := clock; return &c }
	e := setup(t, Config{SweepInterval: 50 * time.Millisecond})
	e.presence.Now = now
	ghost := uuid.New()
	require.NoError(t, e.presence.Join(ctx, ghost, auth.Principal{UserID: 99, Name: "ghost"}, triage.BoardView))
	mu.Lock()
	clock = clock.Add(triage.DefaultPresenceTTL - 5*time.Second) // alice comes later than the ghost
	mu.Unlock()

	c := e.dial(t, e.signIn(t, "alice", auth.Operator))
	c.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	c.await(5*time.Second, "the ghost on the board", func(m message) bool {
		return m.Type == "presence" && slices.Contains(m.Views[triage.BoardView], "ghost")
	})
	mu.Lock()
	clock = clock.Add(6 * time.Second) // the ghost's TTL is over, alice's is not
	mu.Unlock()
	m := c.await(5*time.Second, "the ghost gone", func(m message) bool {
		return m.Type == "presence" && m.Views[triage.BoardView] != nil && !slices.Contains(m.Views[triage.BoardView], "ghost")
	})
	require.Equal(t, []string{"alice"}, m.Views[triage.BoardView])
}

// The server commits, then the connection drops before the client reads
// the ack: the client resends the same mutation on a new socket and gets
// the same answer; nothing happens twice.
func TestResentMutationAfterADropGetsTheStoredAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	it := e.item(t, "drift")
	s := e.signIn(t, "alice", auth.Operator)
	m := mutation(it, triage.OpStatus, triage.Args{Status: triage.Acknowledged})

	first := e.dial(t, s)
	first.send(m)
	committed := func() int {
		var n int
		require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM switchyard.triage_events WHERE op = 'status'").Scan(&n))
		return n
	}
	testwait.Until(t, 5*time.Second, "the mutation to commit", func() bool { return committed() > 0 })
	first.ws.CloseNow() // the ack is never read

	again := e.dial(t, s)
	again.send(m)
	a := again.await(5*time.Second, "the answer", func(m message) bool { return m.Type == "answer" })
	require.True(t, a.Answer.OK, a.Answer.Message)
	require.Equal(t, triage.Acknowledged, a.Answer.Item.Status)
	require.Equal(t, 1, committed(), "no duplicate")
}

// A mutation stuck behind a lock held elsewhere (a long transaction on
// the item) is abandoned after MutationTimeout: the client is told it was
// not applied, the socket keeps reading, and the same mutation resent
// once the lock is gone is applied once.
func TestStuckMutationTimesOutAndTheSocketKeepsReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t, Config{MutationTimeout: 300 * time.Millisecond})
	it := e.item(t, "drift")
	c := e.dial(t, e.signIn(t, "alice", auth.Operator))

	blocker, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = blocker.Rollback(ctx) })
	_, err = blocker.Exec(ctx, "SELECT 1 FROM switchyard.triage_items WHERE id = $1 FOR UPDATE", it.ID)
	require.NoError(t, err)

	m := mutation(it, triage.OpStatus, triage.Args{Status: triage.Acknowledged})
	c.send(m)
	got := c.await(5*time.Second, "the stuck mutation's error", func(m message) bool { return m.Type == "error" || m.Type == "answer" })
	require.Equal(t, "error", got.Type, "the mutation waited for the lock instead of timing out")

	c.send(map[string]any{"type": "hello", "view": "item", "items": []int64{it.ID}})
	c.await(5*time.Second, "the socket to answer again", func(m message) bool { return m.Type == "presence" })

	require.NoError(t, blocker.Rollback(ctx))
	// Resent until acked: on a loaded machine an attempt may itself take
	// longer than the short timeout, and is then resent like any other.
	testwait.Until(t, 30*time.Second, "the resent mutation's ack", func() bool {
		c.send(m)
		a := c.await(5*time.Second, "the resent mutation's outcome", func(m message) bool { return m.Type == "error" || m.Type == "answer" })
		require.True(t, a.Type == "error" || a.Answer.OK, a.Answer.Message)
		return a.Type == "answer"
	})
	var events int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM switchyard.triage_events WHERE item_id = $1 AND op = 'status'", it.ID).Scan(&events))
	require.Equal(t, 1, events)
}
