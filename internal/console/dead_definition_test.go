package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/destination"
	"github.com/switchyard/switchyard/internal/msgfilter"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/internal/testwait"
)

// deadLetterMix writes messages in every state a message can be in, each
// through the code that puts it there (a dispatcher's finalize, a replay,
// a discard, a restore), so the dead-letter groups' counts are the ones
// those keep. Two destinations fail with their own error (two groups):
//
//	pending      never sent
//	delivered    sent, and the replays that were delivered
//	dead         died, never replayed, and the replays that died again
//	replayed     died, then replayed (delivered, dead again or pending),
//	             one of them discarded and restored since
//	discarded    died, then discarded
func deadLetterMix(t *testing.T, b bundle) {
	t.Helper()
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO switchyard.destinations (name, kind) VALUES ('shop', 'function'), ('bill', 'function')`)
	require.NoError(t, err)
	var msgs []outbox.Message
	for n := range 24 {
		msgs = append(msgs, outbox.Message{Topic: []string{"order.created", "order.paid", "invoice.sent"}[n%3],
			Destination: []string{"shop", "bill"}[n%2], Payload: fmt.Appendf(nil, `{"n": %d}`, n)})
	}
	enqueue(t, b, msgs...)
	// Every message dies, then the even ones' replays are delivered and
	// the odd ones' die again.
	deliverAll(t, b, 24, func(int) bool { return false })
	replayed := ids(t, b, `SELECT id FROM switchyard.outbox WHERE (payload->>'n')::int < 10 ORDER BY id`)
	replayAll(t, b, replayed)
	deliverAll(t, b, 24+10, func(n int) bool { return n%2 == 0 })
	// A replay left pending; a discarded message; a replayed one discarded
	// and restored; a dead one discarded and restored.
	replayAll(t, b, ids(t, b, `SELECT id FROM switchyard.outbox WHERE (payload->>'n')::int = 10 AND replay_of IS NULL`))
	outboxAction(t, b, outbox.Discard, `(payload->>'n')::int = 11`)
	outboxAction(t, b, outbox.Discard, `(payload->>'n')::int = 0 AND replay_of IS NULL`)
	outboxAction(t, b, outbox.Restore, `(payload->>'n')::int = 0 AND replay_of IS NULL`)
	outboxAction(t, b, outbox.Discard, `(payload->>'n')::int = 12`)
	outboxAction(t, b, outbox.Restore, `(payload->>'n')::int = 12`)
	enqueue(t, b, outbox.Message{Topic: "order.created", Destination: "shop", Payload: []byte(`{"n": 99}`)})
	for _, status := range []string{"pending", "delivered", "dead", "replayed", "discarded"} {
		require.NotEmpty(t, viewIDs(t, b, "o.status = $1", status), "a message in state %s", status)
	}
}

func enqueue(t *testing.T, b bundle, msgs ...outbox.Message) {
	t.Helper()
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(context.Background(), tx, msgs...)
		return err
	}))
}

// deliverAll runs a dispatcher until settled messages are delivered or
// dead: those whose payload's n accept says are delivered, the others
// refused for good, each destination with its own error.
func deliverAll(t *testing.T, b bundle, settled int, accept func(n int) bool) {
	t.Helper()
	route := func(refusal string) outbox.Route {
		return outbox.Route{Destination: destination.Func(func(_ context.Context, d destination.Delivery) (destination.Outcome, error) {
			var p struct{ N int }
			if err := json.Unmarshal(d.Payload, &p); err != nil || !accept(p.N) {
				return destination.Outcome{StatusCode: 422}, destination.Permanent(errors.New(refusal))
			}
			return destination.Outcome{StatusCode: 200}, nil
		})}
	}
	d := outbox.New(b.pool, outbox.Config{Workers: 2, Routes: map[string]outbox.Route{
		"shop": route("HTTP 422: order rejected"), "bill": route("HTTP 409: invoice exists")}})
	require.NoError(t, d.Start(context.Background()))
	defer d.Stop()
	testwait.Until(t, time.Minute, fmt.Sprintf("%d messages settled", settled), func() bool {
		return len(ids(t, b, `SELECT id FROM switchyard.outbox WHERE state <> 'pending'`)) == settled
	})
}

func replayAll(t *testing.T, b bundle, originals []int64) {
	t.Helper()
	req := outbox.BatchRequest{Mode: outbox.Redeliver, Actor: "ann"}
	for _, id := range originals {
		req.Messages = append(req.Messages, outbox.MessageRequest{MessageID: id, RequestID: uuid.New()})
	}
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		outcomes, err := outbox.ReplayBatch(context.Background(), tx, req)
		for _, o := range outcomes {
			require.NoError(t, o.Err)
		}
		return err
	}))
}

func outboxAction(t *testing.T, b bundle, act func(context.Context, pgx.Tx, int64) error, where string) {
	t.Helper()
	id := ids(t, b, `SELECT id FROM switchyard.outbox WHERE `+where)
	require.Len(t, id, 1, where)
	require.NoError(t, pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
		return act(context.Background(), tx, id[0])
	}))
}

func ids(t *testing.T, b bundle, query string, args ...any) []int64 {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), query, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return out
}

// viewIDs is the truth: the messages of switchyard.console_messages that
// where holds for, by ascending id.
func viewIDs(t *testing.T, b bundle, where string, args ...any) []int64 {
	t.Helper()
	return ids(t, b, `SELECT o.id FROM switchyard.console_messages o WHERE `+where+` ORDER BY o.id`, args...)
}

// walkedIDs is every row the message list shows at path, through all its
// pages, by ascending id.
func walkedIDs(t *testing.T, b bundle, path string) []int64 {
	t.Helper()
	var out []int64
	for _, s := range walkList(t, b, path) {
		id, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Issue 14, item 2: "dead" has one definition, switchyard.console_messages'
// status, and every count, list and filter agrees with it: the dead-letter
// groups (and so the dashboard's Dead tile) and its per-topic table, a
// group's messages, a triage item's replay, the message list through each
// of its access paths, its "about N" estimate, bulk replay's estimate and
// batches, and a destination's usage.
func TestEveryDeadCountAgreesWithConsoleMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deadLetterMix(t, b)
	ctx := context.Background()
	q := queries.New(b.pool)
	dead := viewIDs(t, b, `o.status = 'dead'`)
	replayed := viewIDs(t, b, `o.status = 'replayed'`)
	n := func(ids []int64) int64 { return int64(len(ids)) }

	sig, err := q.StatsDeadSignatureGet(ctx)
	require.NoError(t, err)
	require.Equal(t, n(dead), sig.Dead, "the dashboard's Dead tile (dead-letter groups)")
	flows, err := q.StatsDeadFlowList(ctx, 1000)
	require.NoError(t, err)
	var perFlow int64
	for _, f := range flows {
		require.Len(t, viewIDs(t, b, `o.status = 'dead' AND o.destination = $1 AND o.topic = $2`, f.Destination, f.Topic), int(f.Dead), "%s %s", f.Destination, f.Topic)
		perFlow += f.Dead
	}
	require.Equal(t, n(dead), perFlow, "the dashboard's per-topic table")

	groups := ids(t, b, `SELECT count(*) FROM switchyard.dead_letter_groups`)
	require.Equal(t, []int64{2}, groups)
	for _, fp := range []string{fingerprintOf(t, b, "shop"), fingerprintOf(t, b, "bill")} {
		want := viewIDs(t, b, `o.status = 'dead' AND o.error_fingerprint = $1`, fp)
		group, err := q.DeadLetterGroupGet(ctx, fp)
		require.NoError(t, err)
		require.Equal(t, n(want), int64(group.Dead), "group %s", fp)
		rows, err := q.DeadLetterMessageListOlder(ctx, queries.DeadLetterMessageListOlderParams{Fingerprint: fp, Cursor: 1 << 62, MaxRows: 1000})
		require.NoError(t, err)
		listed := make([]int64, len(rows))
		for i, r := range rows {
			listed[i] = r.ID
		}
		slices.Sort(listed)
		require.Equal(t, want, listed, "the group's page")
		triaged, err := q.TriageDeadGroupMessageList(ctx, queries.TriageDeadGroupMessageListParams{Fingerprint: fp, MaxMessages: 1000})
		require.NoError(t, err)
		require.Equal(t, want, triaged, "a replay from the group's triage item")
	}

	for path, want := range map[string][]int64{
		"/messages?state=dead":                        dead,
		"/messages?state=replayed":                    replayed,
		"/messages?state=dead&topic=order.*":          viewIDs(t, b, `o.status = 'dead' AND o.topic LIKE 'order.%'`),
		"/messages?state=replayed&topic=order.*":      viewIDs(t, b, `o.status = 'replayed' AND o.topic LIKE 'order.%'`),
		"/messages?state=dead&destination=sh*":        viewIDs(t, b, `o.status = 'dead' AND o.destination = 'shop'`),
		"/messages?state=replayed&destination=sh*":    viewIDs(t, b, `o.status = 'replayed' AND o.destination = 'shop'`),
		"/messages?state=dead&error=rejected":         viewIDs(t, b, `o.status = 'dead' AND o.last_error ILIKE '%rejected%'`),
		"/messages?state=discarded":                   viewIDs(t, b, `o.status = 'discarded'`),
		"/messages?state=dead&topic=order.created":    viewIDs(t, b, `o.status = 'dead' AND o.topic = 'order.created'`),
		"/messages?state=replayed&topic=invoice.sent": viewIDs(t, b, `o.status = 'replayed' AND o.topic = 'invoice.sent'`),
	} {
		require.Equal(t, want, walkedIDs(t, b, path), path)
	}

	// The "about N" of a longer list is the planner's: with the table
	// analyzed, it knows each state's share exactly.
	_, err = b.pool.Exec(ctx, `ANALYZE switchyard.outbox`)
	require.NoError(t, err)
	for state, want := range map[string][]int64{"dead": dead, "replayed": replayed} {
		estimate, err := q.ConsoleMessagesEstimate(ctx, queries.ConsoleMessagesEstimateParams{State: &state})
		require.NoError(t, err)
		require.Equal(t, n(want), estimate, "the list's estimate of state %s", state)
	}

	matches, err := bulkreplay.Estimate(ctx, b.pool, bulkreplay.Filter{})
	require.NoError(t, err)
	require.Equal(t, bulkreplay.Matches{N: n(dead)}, matches, "bulk replay's estimate")
	batch, err := q.ReplayJobListCandidates(ctx, queries.ReplayJobListCandidatesParams{CeilingID: msgfilter.NoCeiling, MaxRows: 1000})
	require.NoError(t, err)
	require.Equal(t, dead, batch, "bulk replay's batches")

	usage, err := q.DestinationUsage(ctx, "shop")
	require.NoError(t, err)
	require.Equal(t, int64(len(viewIDs(t, b, `o.status IN ('dead', 'replayed') AND o.destination = 'shop'`))), usage.Dead,
		"a destination's dead messages, which may still be replayed")
}

// fingerprintOf is the error fingerprint of destination's dead messages.
func fingerprintOf(t *testing.T, b bundle, dest string) string {
	t.Helper()
	var fp string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT DISTINCT error_fingerprint FROM switchyard.outbox WHERE state = 'dead' AND destination = $1`, dest).Scan(&fp))
	return fp
}
