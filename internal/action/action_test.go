package action_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

// A replay commits the replay row, a change for the original and for the
// replay, and one audit row together, then wakes the feed and the
// dispatchers once. The same request id again creates and records
// nothing.
func TestReplayCommitsItsEffectChangesAndAuditRowTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.message(t, "dead")
	before := b.footprint(t)
	in := action.ReplayInput{MessageID: id, RequestID: uuid.New(), Mode: outbox.Reapply, Reason: "validator fixed"}

	done, err := b.svc.Replay(ctx, b.pool, b.operator, in)
	require.NoError(t, err)
	require.False(t, done.Existing)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND replay_of = $2`, done.ID, id))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'message.replay'
		AND actor = 'otto' AND actor_id = 2 AND outcome = 'ok' AND reason = 'validator fixed' AND remote_addr = '192.0.2.2'
		AND target = $2 AND (detail->>'replay_id')::bigint = $3`, in.RequestID.String(), "message "+itoa(id), done.ID))
	for _, m := range []int64{id, done.ID} {
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'message_changed' AND subject = $1`, itoa(m)), m)
	}
	require.Equal(t, int64(1), b.changed.Load())
	require.Equal(t, int64(1), b.woken.Load())

	after := b.footprint(t)
	again, err := b.svc.Replay(ctx, b.pool, b.operator, in)
	require.NoError(t, err)
	require.True(t, again.Existing)
	require.Equal(t, done.ID, again.ID)
	require.Equal(t, after, b.footprint(t), "a request applied before creates and records nothing")
	require.Equal(t, int64(1), b.woken.Load(), "nothing new for the dispatchers")
	require.Equal(t, footprint{audit: before.audit + 1, changes: after.changes, outbox: before.outbox + 1}, after)
}

// An admin's edit keeps the original payload and records both.
func TestEditAndReplayRecordsBothPayloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.message(t, "dead")
	rid := uuid.New()
	done, err := b.svc.Replay(context.Background(), b.pool, b.admin, action.ReplayInput{MessageID: id, RequestID: rid,
		Mode: outbox.Redeliver, Payload: json.RawMessage(`{"order":2}`)})
	require.NoError(t, err)
	var detail map[string]json.RawMessage
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT detail FROM switchyard.audit_log
		WHERE request_id = $1 AND action = 'message.edit_replay'`, rid.String()).Scan(&detail))
	require.JSONEq(t, `{"order":1}`, string(detail["original_payload"]))
	require.JSONEq(t, `{"order":2}`, string(detail["payload"]))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND payload::jsonb = '{"order":2}'`, done.ID))
}

// Discard and restore: each its effect, its change and its audit row.
func TestDiscardAndRestoreCommitWithTheirAuditRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.message(t, "dead")
	discard, restore := uuid.New(), uuid.New()

	require.NoError(t, b.svc.Discard(ctx, b.pool, b.operator, action.MessageInput{MessageID: id, RequestID: discard, Reason: "obsolete"}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND state = 'discarded'`, id))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'message.discard' AND reason = 'obsolete'`, discard.String()))

	require.NoError(t, b.svc.Restore(ctx, b.pool, b.operator, action.MessageInput{MessageID: id, RequestID: restore}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE id = $1 AND state = 'dead'`, id))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'message.restore'`, restore.String()))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'message_changed' AND subject = $1`, itoa(id)))
	require.Equal(t, int64(2), b.woken.Load())
}

// Every refusal names its kind and commits nothing: no audit row, no
// change, no outbox row, no job, no wake-up.
func TestRefusalsCommitNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dead, pending := b.message(t, "dead"), b.message(t, "pending")
	replay := func(a action.Actor, in action.ReplayInput) error {
		if in.RequestID == uuid.Nil {
			in.RequestID = uuid.New()
		}
		_, err := b.svc.Replay(ctx, b.pool, a, in)
		return err
	}
	msg := func(id int64) action.MessageInput { return action.MessageInput{MessageID: id, RequestID: uuid.New()} }
	cases := []struct {
		name string
		kind action.Kind
		do   func() error
		want string // in the message
	}{
		{"not dead", action.KindConflict, func() error {
			return replay(b.operator, action.ReplayInput{MessageID: pending, Mode: outbox.Redeliver})
		}, "(it is pending)"},
		{"no such message", action.KindNotFound, func() error {
			return replay(b.operator, action.ReplayInput{MessageID: 1 << 40, Mode: outbox.Redeliver})
		}, "No such message"},
		{"reapply without reason", action.KindInvalid, func() error { return replay(b.operator, action.ReplayInput{MessageID: dead, Mode: outbox.Reapply}) }, "needs a reason"},
		{"bad mode", action.KindInvalid, func() error { return replay(b.operator, action.ReplayInput{MessageID: dead, Mode: "twice"}) }, "mode"},
		{"invalid payload", action.KindInvalid, func() error {
			return replay(b.admin, action.ReplayInput{MessageID: dead, Mode: outbox.Redeliver, Payload: json.RawMessage(`{`)})
		}, "valid JSON"},
		{"discard not dead", action.KindConflict, func() error { return b.svc.Discard(ctx, b.pool, b.operator, msg(pending)) }, "not dead"},
		{"restore not discarded", action.KindConflict, func() error { return b.svc.Restore(ctx, b.pool, b.operator, msg(dead)) }, "discarded"},
		{"cancel no job", action.KindConflict, func() error {
			return b.svc.CancelJob(ctx, b.pool, b.operator, action.JobCancelInput{JobID: uuid.New(), RequestID: uuid.New()})
		}, "not running"},
		{"bad rate", action.KindInvalid, func() error {
			_, err := b.svc.StartJob(ctx, b.pool, b.operator, action.JobStartInput{Filter: filterFP, Mode: outbox.Redeliver, RatePerSecond: -1, RequestID: uuid.New()})
			return err
		}, "rate"},
		{"no database", action.KindUnavailable, func() error {
			_, err := b.svc.Replay(ctx, nil, b.operator, action.ReplayInput{MessageID: dead, RequestID: uuid.New(), Mode: outbox.Redeliver})
			return err
		}, "no database"},
	}
	before := b.footprint(t)
	for _, tc := range cases {
		r := requireRefused(t, tc.do(), tc.kind)
		require.Contains(t, r.Message, tc.want, tc.name)
		require.False(t, strings.HasPrefix(r.Message, "outbox:") || strings.HasPrefix(r.Message, "bulkreplay:"), tc.name)
	}
	require.Equal(t, before, b.footprint(t))
	require.Zero(t, b.changed.Load())
	require.Zero(t, b.woken.Load())
}

// The action checks the role itself, whatever its caller checked: a
// viewer may do nothing, an operator may not edit a payload. Nothing is
// recorded (the caller records the denial, which only it can bound per
// session).
func TestActionsCheckTheRole(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dead := b.message(t, "dead")
	redeliver := action.ReplayInput{MessageID: dead, RequestID: uuid.New(), Mode: outbox.Redeliver}
	before := b.footprint(t)
	for name, do := range map[string]func() error{
		"replay": func() error { _, err := b.svc.Replay(ctx, b.pool, b.viewer, redeliver); return err },
		"discard": func() error {
			return b.svc.Discard(ctx, b.pool, b.viewer, action.MessageInput{MessageID: dead, RequestID: uuid.New()})
		},
		"restore": func() error {
			return b.svc.Restore(ctx, b.pool, b.viewer, action.MessageInput{MessageID: dead, RequestID: uuid.New()})
		},
		"estimate": func() error {
			_, err := b.svc.Estimate(ctx, b.pool, b.viewer, filterFP)
			return err
		},
		"start": func() error {
			_, err := b.svc.StartJob(ctx, b.pool, b.viewer, action.JobStartInput{Filter: filterFP, Mode: outbox.Redeliver, RequestID: uuid.New()})
			return err
		},
		"cancel": func() error {
			return b.svc.CancelJob(ctx, b.pool, b.viewer, action.JobCancelInput{JobID: uuid.New(), RequestID: uuid.New()})
		},
	} {
		r := requireRefused(t, do(), action.KindForbidden)
		require.Equal(t, auth.Operator, r.Need, name)
	}
	edit := redeliver
	edit.Payload = json.RawMessage(`{"order":3}`)
	_, err := b.svc.Replay(ctx, b.pool, b.operator, edit)
	r := requireRefused(t, err, action.KindForbidden)
	require.Equal(t, auth.Admin, r.Need)
	require.Contains(t, r.Message, "admin")
	require.Equal(t, before, b.footprint(t))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Many operators replay one dead message at once, each with a request id
// of their own: one replay and one audit row; every other one is refused
// as in flight, having committed nothing.
func TestConcurrentReplaysOfOneMessageMakeOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.message(t, "dead")
	const n = 20
	errs := make(chan error, n)
	testwait.Together(n, func(int) {
		_, err := b.svc.Replay(context.Background(), b.pool, b.operator, action.ReplayInput{MessageID: id, RequestID: uuid.New(), Mode: outbox.Redeliver})
		errs <- err
	})
	var ok, inFlight int
	for range n {
		err := <-errs
		switch r := action.AsRefusal(err); {
		case err == nil:
			ok++
		case r != nil && r.Kind == action.KindConflict && strings.Contains(r.Message, "still in flight"):
			inFlight++
		default:
			t.Errorf("unexpected outcome: %v", err)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, n-1, inFlight)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE replay_of = $1`, id))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'message.replay'`))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'message_changed'`))
	require.Equal(t, int64(1), b.woken.Load())
}
