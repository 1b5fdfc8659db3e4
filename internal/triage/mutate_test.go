package triage

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
)

// Failures create their items in the transaction that records them: a
// dead letter its group's item, a dead head its blocked aggregate's, a
// parked inbound event its group's; each item's history starts "created".
func TestFailuresCreateTheirItems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	killDead(t, pool, 1, message("o-1"))
	_, err := queries.New(pool).InboxEventFail(ctx, queries.InboxEventFailParams{
		Source: "shop", EventID: "e-1", Headers: []byte(`{}`), Payload: []byte(`{}`), MaxAttempts: 1,
		LastError: new("handler: boom"), ErrorFingerprint: new("boom"),
	})
	require.NoError(t, err)

	group := onlyItem(t, pool, DeadLetterGroup)
	require.Equal(t, Open, group.Status)
	require.JSONEq(t, `{"destination": "d", "aggregate_type": "order", "aggregate_id": "o-1"}`, string(onlyItem(t, pool, BlockedAggregate).Ref))
	require.JSONEq(t, `{"source": "shop", "fingerprint": "boom"}`, string(onlyItem(t, pool, InboxFailureGroup).Ref))
	history, err := History(ctx, pool, group.ID)
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Equal(t, "created", history[0].Op)
	require.Equal(t, 3, count(t, pool, "SELECT count(*) FROM switchyard.changes WHERE kind = 'triage'"), "each creation is announced")
}

// Invariants 6 and 7 for triage: 100 copies of one mutation (one mutation
// id) at once take effect once, with one event row and one audit row, and
// every copy gets the same answer.
func TestIdenticalMutationsTakeEffectOnce(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice := account(t, pool, "alice", auth.Operator)
	in := Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpStatus, Args: Args{Status: Acknowledged, Reason: "on it"}, SeenVersion: item.Version}

	const copies = 100
	answers := make([][]byte, copies)
	testwait.Together(copies, func(i int) {
		a, err := Mutate(context.Background(), pool, alice, in)
		if err != nil {
			t.Errorf("copy %d: %v", i, err)
			return
		}
		answers[i], _ = json.Marshal(a)
	})

	var first Answer
	require.NoError(t, json.Unmarshal(answers[0], &first))
	require.True(t, first.OK, "the mutation is acknowledged: %s", answers[0])
	require.Equal(t, Acknowledged, first.Item.Status)
	for i, a := range answers {
		require.JSONEq(t, string(answers[0]), string(a), "copy %d's answer", i)
	}
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.triage_events WHERE item_id = $1 AND op = 'status'", item.ID))
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.audit_log WHERE action = 'triage.status'"))
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.changes WHERE kind = 'triage' AND subject = $1 AND payload->>'status' = 'acknowledged'", fmt.Sprint(item.ID)))
	got, err := Get(context.Background(), pool, item.ID)
	require.NoError(t, err)
	require.Equal(t, item.Version+1, got.Version, "one effect, one version")

	reused := in
	reused.Args.Reason = "something else"
	a, err := Mutate(context.Background(), pool, alice, reused)
	require.NoError(t, err)
	require.Equal(t, RejectReused, a.Reason, "one mutation id, another request")
}

// 20 operators claim one item at once: exactly one holds it, and each of
// the others is told who.
func TestConcurrentClaimsMakeOneHolder(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	const clients = 20
	actors := make([]auth.Principal, clients)
	for i := range actors {
		actors[i] = account(t, pool, fmt.Sprintf("op%d", i), auth.Operator)
	}
	answers := make([]Answer, clients)
	testwait.Together(clients, func(i int) {
		var err error
		answers[i], err = Mutate(context.Background(), pool, actors[i], Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpClaim, SeenVersion: item.Version})
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	})

	var holders []string
	for _, a := range answers {
		if a.OK {
			holders = append(holders, a.Item.ClaimHolder)
		}
	}
	require.Len(t, holders, 1, "exactly one claim succeeds")
	for _, a := range answers {
		if !a.OK {
			require.Equal(t, RejectClaimed, a.Reason)
			require.Equal(t, holders[0], a.Holder, "every loser is told who holds it")
		}
	}
	got, err := Get(context.Background(), pool, item.ID)
	require.NoError(t, err)
	require.Equal(t, holders[0], got.ClaimHolder)
}

// A claim is a lease on the database clock: once it has expired, someone
// else may claim the item, and the old holder's later mutations and
// heartbeats are refused.
func TestClaimLeaseExpiresOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice, bob := account(t, pool, "alice", auth.Operator), account(t, pool, "bob", auth.Operator)

	clock := newClock(t, pool)
	engine := &Engine{Pool: pool, Lease: time.Minute, Now: clock.now}
	move := clock.move

	a := mutate(t, engine, alice, item.ID, OpClaim, Args{}, item.Version)
	require.True(t, a.OK)
	early := mutate(t, engine, bob, item.ID, OpClaim, Args{}, a.Item.Version)
	require.Equal(t, RejectClaimed, early.Reason, "a live claim is refused")

	move(30 * time.Second)
	_, err := engine.Heartbeat(ctx, alice, item.ID)
	require.NoError(t, err, "the holder's page extends the lease")
	move(50 * time.Second)
	took := mutate(t, engine, bob, item.ID, OpClaim, Args{}, a.Item.Version)
	require.False(t, took.OK, "the heartbeat kept the claim alive")

	move(time.Minute)
	took = mutate(t, engine, bob, item.ID, OpClaim, Args{}, a.Item.Version)
	require.True(t, took.OK, "the lease expired: %s", took.Message)
	require.Equal(t, "bob", took.Item.ClaimHolder)

	late := mutate(t, engine, alice, item.ID, OpStatus, Args{Status: Resolved}, took.Item.Version)
	require.Equal(t, RejectClaimed, late.Reason)
	require.Equal(t, "bob", late.Holder)
	_, err = engine.Heartbeat(ctx, alice, item.ID)
	require.ErrorIs(t, err, ErrClaimLost)
	release := mutate(t, engine, alice, item.ID, OpRelease, Args{}, took.Item.Version)
	require.False(t, release.OK)
}

// An account demoted to viewer while it holds a claim cannot keep the
// claim alive from its open page: the heartbeat is refused and the lease
// runs out, after which an operator claims the item.
func TestDemotedHolderCannotExtendItsClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice, bob := account(t, pool, "alice", auth.Operator), account(t, pool, "bob", auth.Operator)
	clock := newClock(t, pool)
	engine := &Engine{Pool: pool, Lease: time.Minute, Now: clock.now}

	a := mutate(t, engine, alice, item.ID, OpClaim, Args{}, item.Version)
	require.True(t, a.OK)
	demoted := alice
	demoted.Role = auth.Viewer
	clock.move(30 * time.Second)
	_, err := engine.Heartbeat(ctx, demoted, item.ID)
	require.ErrorIs(t, err, ErrClaimLost, "a viewer's heartbeat extends nothing")
	clock.move(31 * time.Second)
	took := mutate(t, engine, bob, item.ID, OpClaim, Args{}, a.Item.Version)
	require.True(t, took.OK, "the demoted holder's lease ran out: %s", took.Message)
}

// A resolved item whose failure happens again (a new dead letter of the
// same fingerprint) reopens by itself, and its history says why.
func TestResolvedItemReopensWhenItsFailureReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	alice := account(t, pool, "alice", auth.Operator)
	resolved := mutate(t, &Engine{Pool: pool}, alice, item.ID, OpStatus, Args{Status: Resolved, Reason: "fixed upstream"}, item.Version)
	require.True(t, resolved.OK, resolved.Message)

	killDead(t, pool, 2, message(""))
	got, err := Get(ctx, pool, item.ID)
	require.NoError(t, err)
	require.Equal(t, Open, got.Status)
	require.Equal(t, resolved.Item.Version+1, got.Version)
	history, err := History(ctx, pool, item.ID)
	require.NoError(t, err)
	last := history[len(history)-1]
	require.Equal(t, "reopened", last.Op)
	require.Equal(t, "system", last.Actor)
	require.Contains(t, string(last.Detail), "a new dead letter in the group")
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.changes WHERE kind = 'triage' AND payload->>'status' = 'open' AND payload->>'version' = $1", fmt.Sprint(got.Version)))
}

// A viewer's mutation is refused and recorded as denied, once however
// often it is sent.
func TestViewerMutationIsRefusedAndAudited(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	viewer := account(t, pool, "vera", auth.Viewer)
	in := Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpClaim, SeenVersion: item.Version}
	for range 2 {
		a, err := Mutate(context.Background(), pool, viewer, in)
		require.NoError(t, err)
		require.Equal(t, RejectForbidden, a.Reason)
		require.Equal(t, item.Version, a.Item.Version, "the current state comes with the refusal")
	}
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.audit_log WHERE action = 'triage.claim' AND outcome = 'denied' AND actor = 'vera'"))
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.triage_events WHERE item_id = $1", item.ID), "nothing happened to the item")
}

// A viewer with a session who sends many refused mutations (each a new
// intent) leaves one denied audit row a minute, not one each: the
// append-only trail cannot be flooded from a socket.
func TestRefusedMutationsOfASessionAreAuditedOnceAMinute(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	killDead(t, pool, 1, message(""))
	item := onlyItem(t, pool, DeadLetterGroup)
	viewer := account(t, pool, "vic", auth.Viewer)
	require.NoError(t, pool.QueryRow(context.Background(), `INSERT INTO switchyard.sessions (token_hash, user_id, expires_at)
		VALUES (sha256('vic'), $1, now() + interval '1 hour') RETURNING id`, viewer.UserID).Scan(&viewer.SessionID))
	for range 5 {
		a, err := Mutate(context.Background(), pool, viewer, Input{MutationID: uuid.New(), ItemID: item.ID, Op: OpClaim, SeenVersion: item.Version})
		require.NoError(t, err)
		require.Equal(t, RejectForbidden, a.Reason)
	}
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM switchyard.audit_log WHERE action = 'triage.claim' AND outcome = 'denied' AND actor = 'vic'"))
	require.Equal(t, 4, count(t, pool, "SELECT denied_unaudited FROM switchyard.sessions WHERE id = $1", viewer.SessionID))
}

func mutate(t *testing.T, e *Engine, actor auth.Principal, item int64, op Op, args Args, seen int64) Answer {
	t.Helper()
	a, err := e.Mutate(context.Background(), actor, Input{MutationID: uuid.New(), ItemID: item, Op: op, Args: args, SeenVersion: seen})
	require.NoError(t, err)
	return a
}
