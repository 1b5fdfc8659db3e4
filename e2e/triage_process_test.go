package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/consoletest"
	"github.com/switchyard/switchyard/internal/dbtest"
	"github.com/switchyard/switchyard/internal/testwait"
	"github.com/switchyard/switchyard/internal/triage"
)

// triageInstances starts n `console serve` processes (no dispatcher) on
// one fresh database with env added, and the accounts viewer, operator,
// operator2. Each process must stop cleanly when the test ends unless the
// test killed it.
func triageInstances(t *testing.T, n int, env ...string) (*pgxpool.Pool, *auth.Service, []*consoletest.Process) {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	procs := make([]*consoletest.Process, n)
	for i := range procs {
		// One after the other: the first migrates the database.
		procs[i] = consoletest.Serve(t, useSuite(t).binary, append([]string{"DATABASE_URL=" + dbURL, "SWITCHYARD_WORKERS=0"}, env...))
	}
	svc := e2eAuth(pool, auth.Config{Notify: func() { _ = changefeed.Notify(context.Background(), pool) }})
	for _, a := range []struct {
		name string
		role auth.Role
	}{{"viewer", auth.Viewer}, {"operator", auth.Operator}, {"operator2", auth.Operator}} {
		require.NoError(t, svc.AddUser(context.Background(), auth.CLI, a.name, a.role, e2ePassword))
	}
	return pool, svc, procs
}

// triageClient is a page's triage socket, spoken by the test: every
// message the server sends lands in msgs, in order.
type triageClient struct {
	t    *testing.T
	conn *websocket.Conn
	msgs chan map[string]json.RawMessage
}

// dialTriage signs name in and opens its triage socket on the console at
// base. The socket is closed when the test ends.
func dialTriage(t *testing.T, svc *auth.Service, base, name string) *triageClient {
	t.Helper()
	s, err := svc.Login(context.Background(), name, e2ePassword, "127.0.0.1")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {"switchyard_session=" + s.Token}, "Origin": {base}},
	})
	require.NoError(t, err, "dial %s's triage socket", name)
	c := &triageClient{t: t, conn: conn, msgs: make(chan map[string]json.RawMessage, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.msgs)
		for {
			_, data, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(data, &m) == nil {
				c.msgs <- m
			}
		}
	}()
	t.Cleanup(func() {
		conn.CloseNow()
		<-done
	})
	return c
}

func (c *triageClient) send(v any) {
	c.t.Helper()
	data, err := json.Marshal(v)
	require.NoError(c.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.conn.Write(ctx, websocket.MessageText, data))
}

// await returns the first message of type typ that match accepts (nil:
// any), skipping the others, or fails the test after limit.
func (c *triageClient) await(limit time.Duration, typ string, match func(m map[string]json.RawMessage) bool) map[string]json.RawMessage {
	c.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		m := testwait.For(c.t, time.Until(deadline), "a "+typ+" message", c.msgs)
		require.NotNil(c.t, m, "the socket closed while waiting for a %s message", typ)
		if string(m["type"]) == `"`+typ+`"` && (match == nil || match(m)) {
			return m
		}
	}
}

// mutate sends a mutation and returns its answer.
func (c *triageClient) mutate(item int64, op triage.Op, args triage.Args, seen int64) triage.Answer {
	c.t.Helper()
	id := uuid.New()
	c.send(map[string]any{"type": "mutate", "mutation_id": id, "item": item, "op": op, "args": args, "seen_version": seen})
	m := c.await(30*time.Second, "answer", func(m map[string]json.RawMessage) bool {
		var a triage.Answer
		return json.Unmarshal(m["answer"], &a) == nil && a.MutationID == id
	})
	var a triage.Answer
	require.NoError(c.t, json.Unmarshal(m["answer"], &a))
	return a
}

// A claim is a lease on the database clock: while its holder's console
// process is stopped (SIGSTOP) it runs out, another operator claims the
// item on another instance, and once the stopped process runs again
// (SIGCONT) what the former holder's page sends through it is refused:
// the heartbeat that was waiting in its socket, and a status change.
func TestTriageClaimExpiresWhileHolderProcessIsStopped(t *testing.T) {
	t.Parallel()
	const lease = 4 * time.Second
	pool, svc, procs := triageInstances(t, 2, "SWITCHYARD_TRIAGE_LEASE="+lease.String())
	stopped, other := procs[0], procs[1]
	t.Cleanup(func() { other.Stop(t) })
	t.Cleanup(func() { stopped.Stop(t) })
	t.Cleanup(func() { _ = syscall.Kill(stopped.Pid(), syscall.SIGCONT) }) // runs first, should the test fail while stopped
	deadMessages(t, pool, 1, `{"order":41}`)
	item := triageItemID(t, pool)

	a := dialTriage(t, svc, stopped.URL, "operator")
	b := dialTriage(t, svc, other.URL, "operator2")
	claim := a.mutate(item, triage.OpClaim, triage.Args{}, 1)
	require.True(t, claim.OK, claim.Message)
	seen := claim.Item.Version
	refused := b.mutate(item, triage.OpClaim, triage.Args{}, seen)
	require.Equal(t, triage.RejectClaimed, refused.Reason, "a live claim holds off another operator")

	stopped.Signal(t, syscall.SIGSTOP)
	testwait.Until(t, 10*time.Second, "the holder's console to be stopped", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", stopped.Pid()))
		require.NoError(t, err)
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(fields) > 0 && fields[0] == "T"
	})
	a.send(map[string]any{"type": "heartbeat", "item": item}) // waits in the stopped process's socket
	testwait.Until(t, 3*lease, "the claim's lease to run out on the database clock", func() bool {
		var over bool
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT claim_expires_at <= now() FROM switchyard.triage_items WHERE id = $1`, item).Scan(&over))
		return over
	})
	taken := b.mutate(item, triage.OpClaim, triage.Args{}, seen)
	require.True(t, taken.OK, "another operator claims the expired item: %s", taken.Message)
	require.Equal(t, "operator2", taken.Item.ClaimHolder)

	stopped.Signal(t, syscall.SIGCONT)
	hb := a.await(30*time.Second, "heartbeat", nil)
	require.JSONEq(t, "false", string(hb["ok"]), "the stopped holder's heartbeat does not win the claim back")
	late := a.mutate(item, triage.OpStatus, triage.Args{Status: triage.Investigating}, seen)
	require.False(t, late.OK)
	require.Equal(t, triage.RejectClaimed, late.Reason, late.Message)
	require.Equal(t, "operator2", late.Holder)

	now, err := triage.Get(context.Background(), pool, item)
	require.NoError(t, err)
	require.Equal(t, "operator2", now.ClaimHolder)
	require.Equal(t, triage.Open, now.Status)
	require.Zero(t, count(t, pool, `SELECT count(*) FROM switchyard.triage_events WHERE item_id = $1 AND op = 'status'`, item), "the refused change left no event")
}

func triageItemID(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var item int64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT id FROM switchyard.triage_items WHERE kind = 'dead_letter_group'`).Scan(&item))
	return item
}

// boardNames returns who the presence message m says is on the board,
// and whether it speaks of the board at all.
func boardNames(t *testing.T, m map[string]json.RawMessage) ([]string, bool) {
	t.Helper()
	var views map[string][]string
	require.NoError(t, json.Unmarshal(m["views"], &views))
	names, ok := views[triage.BoardView]
	return names, ok
}

// kill -9 of the instance that holds a user's socket: that user vanishes
// from the board's presence on the other instance, within 45 s (what the
// defaults give: a 30 s TTL swept every 5 s). The instances here run with
// a TTL of 3 s so that the test is quick; the bound it checks is the one
// the same arithmetic gives that TTL.
func TestTriagePresenceForgetsAKilledInstance(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	_, svc, procs := triageInstances(t, 2, "SWITCHYARD_TRIAGE_PRESENCE_TTL="+ttl.String())
	doomed, survivor := procs[0], procs[1]
	t.Cleanup(func() { survivor.Stop(t) })

	watcher := dialTriage(t, svc, survivor.URL, "viewer")
	watcher.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	gone := dialTriage(t, svc, doomed.URL, "operator")
	gone.send(map[string]any{"type": "hello", "view": "board", "items": []int64{}})
	watcher.await(30*time.Second, "presence", func(m map[string]json.RawMessage) bool {
		names, ok := boardNames(t, m)
		return ok && slices.Contains(names, "operator") && slices.Contains(names, "viewer")
	})

	killed := time.Now()
	doomed.Signal(t, syscall.SIGKILL)
	require.Equal(t, -1, doomed.WaitExit(t, 10*time.Second), "killed by the signal")
	// TTL + a sweep (TTL/6), plus two seconds for the change feed.
	limit := ttl + ttl/6 + 2*time.Second
	watcher.await(limit+5*time.Second, "presence", func(m map[string]json.RawMessage) bool {
		names, ok := boardNames(t, m)
		return ok && !slices.Contains(names, "operator")
	})
	took := time.Since(killed)
	t.Logf("the killed instance's user vanished after %v", took)
	require.Less(t, took, limit, "vanished within TTL plus a sweep")
}
