package action_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/inbox"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/testwait"
)

// inboxRig is a receiver with one source, "shop", whose handler fails
// while broken is set and otherwise forwards the event to the outbox.
type inboxRig struct {
	rcv    *inbox.Receiver
	broken *atomic.Bool
	calls  *atomic.Int64
}

func newInboxRig(t *testing.T, b bundle) inboxRig {
	t.Helper()
	rig := inboxRig{broken: new(atomic.Bool), calls: new(atomic.Int64)}
	rig.broken.Store(true)
	verifier, err := inbox.NewVerifier(inbox.SchemeStandardWebhooks, []string{"whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ="}, time.Minute)
	require.NoError(t, err)
	handle := func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
		rig.calls.Add(1)
		if rig.broken.Load() {
			return errors.New("HTTP 500 from the shop's backend")
		}
		_, err := outbox.Enqueue(ctx, tx, outbox.Message{Topic: "shop.order", Destination: "billing", Payload: ev.Payload})
		return err
	}
	rig.rcv = inbox.NewReceiver(inbox.ReceiverConfig{
		Pool:     b.pool,
		Sources:  []inbox.Source{{Name: "shop", Verifier: verifier, Scheme: inbox.SchemeStandardWebhooks, Handler: "orders"}},
		Handlers: inbox.Registry{"orders": {Handle: handle}},
	})
	return rig
}

// failed receives an event whose handler fails, maxAttempts allowed, and
// returns its row id.
func (rig inboxRig) failed(t *testing.T, b bundle, id string, maxAttempts int) int64 {
	t.Helper()
	ev := inbox.Event{Source: "shop", ID: id, Payload: []byte(`{"order": 7}`), Policy: inbox.Policy{MaxAttempts: maxAttempts}}
	_, err := inbox.Receive(context.Background(), b.pool, ev, func(context.Context, pgx.Tx, inbox.Event) error {
		return errors.New("HTTP 500 from the shop's backend")
	})
	require.ErrorIs(t, err, inbox.ErrHandler)
	var row int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT id FROM switchyard.inbox_events WHERE event_id = $1`, id).Scan(&row))
	return row
}

// A parked event is retried by an operator: while the handler still fails
// the retry is one more recorded attempt (the event stays parked), once it
// works the event is processed and its effect committed; each retry is
// audited, and the same request id again changes nothing.
func TestRetryInboxEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rig := newInboxRig(t, b)
	ctx := context.Background()
	id := rig.failed(t, b, "evt-1", 1)

	before := b.footprint(t)
	_, err := b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.viewer, action.InboxRetryInput{EventID: id, RequestID: uuid.New()})
	requireRefused(t, err, action.KindForbidden)
	require.Equal(t, before, b.footprint(t), "a refusal writes nothing")
	require.Zero(t, rig.calls.Load())

	res, err := b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id, RequestID: uuid.New(), Reason: "shop said fixed"})
	require.NoError(t, err)
	require.Equal(t, inbox.OutcomeParked, res.Outcome)
	require.Equal(t, 2, res.Attempt)
	require.Contains(t, res.Error, "HTTP 500")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox.retry' AND detail->>'outcome' = 'parked'`))

	rig.broken.Store(false)
	rid := uuid.New()
	res, err = b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id, RequestID: rid})
	require.NoError(t, err)
	require.Equal(t, inbox.Retried{Source: "shop", EventID: "evt-1", Outcome: inbox.OutcomeProcessed, Attempt: 3}, res)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE topic = 'shop.order'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_events WHERE id = $1 AND status = 'processed' AND processed_at IS NOT NULL`, id))
	// One change per retry: the failed one and this one.
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.changes WHERE kind = 'inbox_event' AND subject = $1`, strconv.FormatInt(id, 10)))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.inbox_event_attempts WHERE inbox_event_id = $1 AND attempt = 3 AND outcome = 'processed' AND actor = 'otto' AND request_id = $2`, id, rid))

	// The same request again (a double click, a retried POST): the first
	// retry's answer, nothing run, nothing recorded.
	before = b.footprint(t)
	calls := rig.calls.Load()
	again, err := b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id, RequestID: rid})
	require.NoError(t, err)
	require.True(t, again.Existing)
	require.Equal(t, inbox.OutcomeProcessed, again.Outcome)
	require.Equal(t, before, b.footprint(t))
	require.Equal(t, calls, rig.calls.Load())

	// A new request on a processed event is refused.
	_, err = b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id, RequestID: uuid.New()})
	requireRefused(t, err, action.KindConflict)
	_, err = b.svc.RetryInboxEvent(ctx, b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id + 1000, RequestID: uuid.New()})
	requireRefused(t, err, action.KindNotFound)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox.retry'`))
}

// Twenty operators retry one failed event at the same moment, each with a
// request id of their own: the handler's effect happens once; one retry
// processes the event, every other is refused as a conflict.
func TestRetryInboxEventRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rig := newInboxRig(t, b)
	rig.broken.Store(false)
	id := rig.failed(t, b, "evt-race", 5)

	const n = 20
	var processed, conflicts, other atomic.Int64
	testwait.Together(n, func(int) {
		res, err := b.svc.RetryInboxEvent(context.Background(), b.pool, rig.rcv, b.operator, action.InboxRetryInput{EventID: id, RequestID: uuid.New()})
		switch r := action.AsRefusal(err); {
		case err == nil && res.Outcome == inbox.OutcomeProcessed:
			processed.Add(1)
		case r != nil && r.Kind == action.KindConflict:
			conflicts.Add(1)
		default:
			other.Add(1)
			t.Errorf("unexpected answer %+v, %v", res, err)
		}
	})
	require.Equal(t, int64(1), processed.Load())
	require.Equal(t, int64(n-1), conflicts.Load())
	require.Zero(t, other.Load())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.outbox WHERE topic = 'shop.order'`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE action = 'inbox.retry'`))
}
