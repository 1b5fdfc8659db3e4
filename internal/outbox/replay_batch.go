package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchyard/switchyard/internal/queries"
)

// MessageRequest names one message of a batch and its replay request id.
type MessageRequest struct {
	MessageID int64
	// RequestID is the replay's request id (invariant 6): a bulk job
	// derives it from the job and the message, so a repeated batch creates
	// nothing twice.
	RequestID uuid.UUID
}

// BatchRequest asks for replays of many dead messages, with one mode,
// operator and reason.
type BatchRequest struct {
	// Messages are the originals, each at most once.
	Messages []MessageRequest
	Mode     ReplayMode
	Actor    string
	Reason   string
	// Job is the bulk replay job the batch belongs to (stored on each
	// replay, so the job's page counts their outcomes); uuid.Nil for none.
	Job uuid.UUID
}

// Outcome is what a batch did with one of its messages: Err is nil when it
// was replayed (Replayed.Existing: by this request before), else the error
// Replay would have returned for it alone (ErrNotFound, ErrNotDead,
// ErrReplayInFlight, ErrRequestReused).
type Outcome struct {
	MessageID int64
	Replayed  Replayed
	Err       error
}

// ReplayBatch replays msgs in tx with the rules of Replay for each message,
// in a fixed handful of statements whatever the batch's size: it locks the
// originals in id order, then their aggregates in key order; one statement
// writes every replay (INSERT ... SELECT), marks the originals and lowers
// their dead-letter groups' counts; one more unblocks the aggregates whose
// blocking dead head was replayed. The end state is that of replaying the
// messages one by one in id order (TestReplayBatchMatchesOneByOne).
//
// It returns one Outcome per message, in id order; a refusal of one message
// is an Outcome, not an error, and the others still apply. After commit,
// the caller wakes the dispatchers with Notify (never inside tx: invariant
// 9); they find the replays by polling otherwise.
func ReplayBatch(ctx context.Context, tx pgx.Tx, r BatchRequest) ([]Outcome, error) {
	if err := CheckMode(r.Mode, r.Reason); err != nil {
		return nil, err
	}
	return replayBatch(ctx, tx, r, nil)
}

// replayBatch is ReplayBatch; payload, if set, replaces every original's
// payload (edit and replay, a batch of one).
func replayBatch(ctx context.Context, tx pgx.Tx, r BatchRequest, payload json.RawMessage) ([]Outcome, error) {
	if len(r.Messages) == 0 {
		return nil, nil
	}
	msgs := slices.SortedFunc(slices.Values(r.Messages), func(a, b MessageRequest) int { return cmp.Compare(a.MessageID, b.MessageID) })
	ids := make([]int64, len(msgs))
	requests := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		if i > 0 && m.MessageID == ids[i-1] {
			return nil, fmt.Errorf("outbox: message %d is twice in one replay batch", m.MessageID)
		}
		ids[i], requests[i] = m.MessageID, m.RequestID
	}
	q := queries.New(tx)
	if err := q.OutboxReplayLock(ctx, ids); err != nil {
		return nil, fmt.Errorf("outbox: lock %d messages to replay: %w", len(ids), err)
	}
	if err := q.OutboxReplayLockAggregates(ctx, ids); err != nil {
		return nil, fmt.Errorf("outbox: lock the aggregates of %d messages to replay: %w", len(ids), err)
	}
	rows, err := q.OutboxReplayApply(ctx, queries.OutboxReplayApplyParams{
		Ids: ids, RequestIds: requests, Payload: payload, Mode: string(r.Mode), Actor: r.Actor, Reason: r.Reason,
		Job: pgtype.UUID{Bytes: r.Job, Valid: r.Job != uuid.Nil},
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: replay %d messages: %w", len(ids), err)
	}
	outcomes := make([]Outcome, len(rows))
	var heads []int64
	for i, row := range rows {
		outcomes[i] = outcome(row)
		if row.Blocking {
			heads = append(heads, row.ID)
		}
	}
	if len(heads) > 0 {
		if err := unblockHeads(ctx, q, heads, true); err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}

// outcome maps a row of OutboxReplayApply to what Replay returns.
func outcome(row queries.OutboxReplayApplyRow) Outcome {
	o := Outcome{MessageID: row.ID}
	switch row.Status {
	case "replayed", "existing":
		o.Replayed = Replayed{ID: row.ReplayID, Key: row.DeliveryKey, Existing: row.Status == "existing"}
	case "not_found":
		o.Err = fmt.Errorf("%w: %d", ErrNotFound, row.ID)
	case "not_dead":
		o.Err = fmt.Errorf("%w (it is %s)", ErrNotDead, row.State)
	case "in_flight":
		o.Err = ErrReplayInFlight
	case "request_reused":
		o.Err = ErrRequestReused
	default:
		o.Err = errors.New("outbox: replay of message: unknown status " + row.Status)
	}
	return o
}
