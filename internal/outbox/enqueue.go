// Package outbox is the transactional outbox: Enqueue writes messages in the
// caller's transaction, and the Dispatcher delivers them with fenced leases,
// retries and per-aggregate order. Messages without an aggregate are leased
// one by one; an aggregate is leased as a whole (its first few pending
// messages, delivered in order by one goroutine), which is what makes
// ordered delivery as cheap as unordered. The schema is in
// migrations/00002_outbox.sql and 00004_leased_aggregates.sql; the claim and
// finalize statements are in internal/queries/sql/outbox.sql, their plans in
// EXPLAIN.md.
package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/queries"
)

// MaxPayloadBytes is the largest payload Enqueue accepts.
const MaxPayloadBytes = 1 << 20

// copyThreshold is the batch size from which Enqueue uses COPY instead of
// one INSERT per message.
const copyThreshold = 64

// ErrInvalid wraps every validation failure of Enqueue; nothing is written
// when it is returned, and the caller's transaction is still usable.
var ErrInvalid = errors.New("outbox: invalid message")

// ErrUnknownDestination wraps, with ErrInvalid, the failure of a message
// that names no row of switchyard.destinations: a configuration that may
// yet be fixed, rather than a message that can never be sent.
var ErrUnknownDestination = errors.New("outbox: unknown destination")

// Message is one event to deliver.
type Message struct {
	// ID is the idempotency key sent with every delivery attempt. Zero: a
	// new time-ordered UUID (v7).
	ID          uuid.UUID
	Topic       string
	Destination string
	// AggregateType and AggregateID, when AggregateID is set, order the
	// message after every earlier message of the same aggregate and
	// destination. Empty: unordered.
	AggregateType string
	AggregateID   string
	// Payload must be valid JSON, at most MaxPayloadBytes.
	Payload []byte
	Headers map[string]string
	// MaxAttempts overrides the destination's; 0 keeps it.
	MaxAttempts int
}

// Enqueue writes msgs in tx, the caller's transaction: they commit if and
// only if the caller commits. It sends no NOTIFY (a NOTIFY inside the
// transaction would serialise every committing enqueuer). It returns the
// message ids in order. On a validation error nothing is written and tx
// stays usable.
func Enqueue(ctx context.Context, tx pgx.Tx, msgs ...Message) ([]uuid.UUID, error) {
	rows, err := prepare(msgs)
	if err != nil {
		return nil, err
	}
	if err := checkDestinations(ctx, tx, msgs); err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.MessageID
	}
	// The sequence trigger locks one row per aggregate until commit. Taking
	// those locks in one global order (by aggregate) means two transactions
	// enqueueing for the same aggregates can never deadlock; the stable
	// sort keeps each aggregate's messages in the caller's order.
	slices.SortStableFunc(rows, func(a, b queries.OutboxInsertParams) int {
		return cmp.Or(strings.Compare(a.Destination, b.Destination),
			strings.Compare(a.AggregateType, b.AggregateType), strings.Compare(a.AggregateID, b.AggregateID))
	})
	if len(rows) >= copyThreshold {
		return ids, copyRows(ctx, tx, rows)
	}
	q := queries.New(tx)
	for _, r := range rows {
		if _, err := q.OutboxInsert(ctx, r); err != nil {
			return nil, fmt.Errorf("outbox: insert message %s: %w", r.MessageID, err)
		}
	}
	return ids, nil
}

func prepare(msgs []Message) ([]queries.OutboxInsertParams, error) {
	rows := make([]queries.OutboxInsertParams, len(msgs))
	for i, m := range msgs {
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrInvalid, i, err)
		}
		id := m.ID
		if id == uuid.Nil {
			var err error
			if id, err = uuid.NewV7(); err != nil {
				return nil, fmt.Errorf("outbox: new message id: %w", err)
			}
		}
		headers, err := json.Marshal(m.Headers)
		if err != nil || m.Headers == nil {
			headers = []byte("{}")
		}
		var maxAttempts *int32
		if m.MaxAttempts > 0 {
			n := int32(m.MaxAttempts)
			maxAttempts = &n
		}
		rows[i] = queries.OutboxInsertParams{
			MessageID: id, Topic: m.Topic, Destination: m.Destination,
			AggregateType: m.AggregateType, AggregateID: m.AggregateID,
			Payload: m.Payload, Headers: headers, MaxAttempts: maxAttempts,
		}
	}
	return rows, nil
}

func (m Message) validate() error {
	switch {
	case m.Topic == "":
		return errors.New("topic is empty")
	case m.Destination == "":
		return errors.New("destination is empty")
	case m.AggregateID == "" && m.AggregateType != "":
		return errors.New("aggregate type given without an aggregate id")
	case len(m.Payload) > MaxPayloadBytes:
		return fmt.Errorf("payload is %d bytes, more than the %d allowed", len(m.Payload), MaxPayloadBytes)
	case !json.Valid(m.Payload):
		return errors.New("payload is not valid JSON")
	case m.MaxAttempts < 0:
		return errors.New("max attempts is negative")
	}
	return nil
}

// checkDestinations fails with ErrInvalid when a message names a destination
// that does not exist, before anything is inserted: a foreign-key violation
// would abort the caller's transaction.
func checkDestinations(ctx context.Context, tx pgx.Tx, msgs []Message) error {
	var names []string
	for _, m := range msgs {
		if !slices.Contains(names, m.Destination) {
			names = append(names, m.Destination)
		}
	}
	known, err := queries.New(tx).DestinationKnown(ctx, names)
	if err != nil {
		return fmt.Errorf("outbox: look up destinations: %w", err)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return fmt.Errorf("%w: %w %q", ErrInvalid, ErrUnknownDestination, n)
		}
	}
	return nil
}

var copyColumns = []string{"message_id", "topic", "destination", "aggregate_type", "aggregate_id", "payload", "headers", "max_attempts"}

func copyRows(ctx context.Context, tx pgx.Tx, rows []queries.OutboxInsertParams) error {
	src := pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		return []any{r.MessageID, r.Topic, r.Destination, r.AggregateType, r.AggregateID,
			string(r.Payload), string(r.Headers), r.MaxAttempts}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"switchyard", "outbox"}, copyColumns, src); err != nil {
		return fmt.Errorf("outbox: copy %d messages: %w", len(rows), err)
	}
	return nil
}
