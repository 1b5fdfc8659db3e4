package action_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

var filterFP = bulkreplay.Filter{Fingerprint: "fp-422"}

// A job starts with its audit row, which records the filter, and the
// server's own estimate; a second job for the filter is refused naming
// the first; cancel is recorded, a second cancel refused.
func TestStartAndCancelAJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 3 {
		b.message(t, "dead")
	}
	n, err := b.svc.Estimate(ctx, b.pool, b.operator, filterFP)
	require.NoError(t, err)
	require.Equal(t, bulkreplay.Matches{N: 3}, n)

	start := action.JobStartInput{Filter: filterFP, Mode: outbox.Redeliver, RatePerSecond: 5, RequestID: uuid.New()}
	job, err := b.svc.StartJob(ctx, b.pool, b.operator, start)
	require.NoError(t, err)
	require.Equal(t, "running", job.State)
	require.Equal(t, int64(3), job.Estimate)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'replay_job.start'
		AND target = $2 AND detail->'filter'->>'fingerprint' = 'fp-422' AND (detail->>'estimate')::int = 3`, start.RequestID.String(), "replay job "+job.ID.String()))

	before := b.footprint(t)
	second := start
	second.RequestID = uuid.New()
	_, err = b.svc.StartJob(ctx, b.pool, b.operator, second)
	r := requireRefused(t, err, action.KindConflict)
	require.Contains(t, r.Message, job.ID.String())
	require.Equal(t, before, b.footprint(t))

	cancel := action.JobCancelInput{JobID: job.ID, RequestID: uuid.New(), Reason: "wrong filter"}
	require.NoError(t, b.svc.CancelJob(ctx, b.pool, b.operator, cancel))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.replay_jobs WHERE id = $1 AND state = 'cancelled'`, job.ID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND action = 'replay_job.cancel' AND reason = 'wrong filter'`, cancel.RequestID.String()))
	cancel.RequestID = uuid.New()
	requireRefused(t, b.svc.CancelJob(ctx, b.pool, b.operator, cancel), action.KindConflict)
}

// Issue 15, item 15: an empty filter selects every dead message, so it
// needs an explicit All; the estimate recorded is the server's.
func TestAnEmptyFilterNeedsAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 2 {
		b.message(t, "dead")
	}
	in := action.JobStartInput{Mode: outbox.Redeliver, RequestID: uuid.New()}
	before := b.footprint(t)
	_, err := b.svc.StartJob(ctx, b.pool, b.operator, in)
	r := requireRefused(t, err, action.KindInvalid)
	require.Equal(t, "all", r.Field)
	require.Equal(t, before, b.footprint(t))

	in.All = true
	job, err := b.svc.StartJob(ctx, b.pool, b.operator, in)
	require.NoError(t, err)
	require.Equal(t, int64(2), job.Estimate)
}

// Issue 15, item 5: every operator text field has a maximum, checked
// before the database: a refusal naming the field, nothing stored.
func TestTextFieldsHaveMaximums(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dead := b.message(t, "dead")
	huge := strings.Repeat("x", 20<<20)
	long := strings.Repeat("é", action.MaxReasonChars+1)
	justRight := strings.Repeat("é", action.MaxReasonChars)
	longFilter := strings.Repeat("f", action.MaxFilterChars+1)
	before := b.footprint(t)
	cases := []struct {
		field string
		do    func() error
	}{
		{"reason", func() error {
			_, err := b.svc.Replay(ctx, b.pool, b.operator, action.ReplayInput{MessageID: dead, RequestID: uuid.New(), Mode: outbox.Reapply, Reason: huge})
			return err
		}},
		{"reason", func() error {
			return b.svc.Discard(ctx, b.pool, b.operator, action.MessageInput{MessageID: dead, RequestID: uuid.New(), Reason: long})
		}},
		{"reason", func() error {
			return b.svc.Restore(ctx, b.pool, b.operator, action.MessageInput{MessageID: dead, RequestID: uuid.New(), Reason: "a\x00b"})
		}},
		{"reason", func() error {
			return b.svc.CancelJob(ctx, b.pool, b.operator, action.JobCancelInput{JobID: uuid.New(), RequestID: uuid.New(), Reason: "\xff"})
		}},
		{"reason", func() error {
			_, err := b.svc.StartJob(ctx, b.pool, b.operator, action.JobStartInput{Filter: filterFP, Mode: outbox.Reapply, Reason: long, RequestID: uuid.New()})
			return err
		}},
		{"filter.topic", func() error {
			_, err := b.svc.StartJob(ctx, b.pool, b.operator, action.JobStartInput{Filter: bulkreplay.Filter{Topic: longFilter}, Mode: outbox.Redeliver, RequestID: uuid.New()})
			return err
		}},
		{"filter.error_contains", func() error {
			_, err := b.svc.Estimate(ctx, b.pool, b.operator, bulkreplay.Filter{ErrorContains: longFilter})
			return err
		}},
		{"filter.destination", func() error { // a prefix no index range can hold
			_, err := b.svc.Estimate(ctx, b.pool, b.operator, bulkreplay.Filter{Destination: "x\U0010FFFF*"})
			return err
		}},
		{"filter.created_to", func() error {
			_, err := b.svc.Estimate(ctx, b.pool, b.operator, bulkreplay.Filter{CreatedFrom: time.Now(), CreatedTo: time.Now().Add(-time.Hour)})
			return err
		}},
		{"payload", func() error {
			_, err := b.svc.Replay(ctx, b.pool, b.admin, action.ReplayInput{MessageID: dead, RequestID: uuid.New(), Mode: outbox.Redeliver,
				Payload: []byte(`"` + strings.Repeat("p", action.MaxPayloadBytes) + `"`)})
			return err
		}},
	}
	for i, tc := range cases {
		r := requireRefused(t, tc.do(), action.KindInvalid)
		require.Equal(t, tc.field, r.Field, i)
		require.Less(t, len(r.Message), 200, "the message does not echo the value")
	}
	require.Equal(t, before, b.footprint(t))

	// At the maximum, the reason is taken whole.
	rid := uuid.New()
	require.NoError(t, b.svc.Discard(ctx, b.pool, b.operator, action.MessageInput{MessageID: dead, RequestID: rid, Reason: justRight}))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM switchyard.audit_log WHERE request_id = $1 AND reason = $2`, rid.String(), justRight))
}
