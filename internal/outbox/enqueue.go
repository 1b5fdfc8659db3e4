// Package outbox is the transactional outbox: Enqueue writes messages in the
// caller's transaction, and the Dispatcher delivers them with fenced leases,
// retries and per-aggregate order. Messages without an aggregate are leased
// one by one; an aggregate is leased as a whole (its first few pending
// messages, delivered in order by one goroutine), which is what makes
// ordered delivery as cheap as unordered. The schema is in
// migrations/00003_outbox.sql; the claim and
// finalize statements are in internal/queries/sql/outbox.sql, their plans in
// EXPLAIN.md.
package outbox

import (
	"bytes"
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
// stays usable. Under a context from RecordEnqueued, the ids are also
// added to that record.
func Enqueue(ctx context.Context, tx pgx.Tx, msgs ...Message) ([]uuid.UUID, error) {
	rows, err := prepare(msgs)
	if err != nil {
		return nil, err
	}
	// One destination, inserted row by row: each insert checks it (see
	// queries.OutboxInsert), the first before anything is written, and
	// the check costs no round trip of its own.
	checkEach := len(rows) < copyThreshold && !slices.ContainsFunc(msgs, func(m Message) bool { return m.Destination != msgs[0].Destination })
	if !checkEach {
		if err := checkDestinations(ctx, tx, msgs); err != nil {
			return nil, err
		}
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
		if err := copyRows(ctx, tx, rows); err != nil {
			return nil, err
		}
		noteEnqueued(ctx, ids)
		return ids, nil
	}
	q := queries.New(tx)
	for _, r := range rows {
		_, err := q.OutboxInsert(ctx, r)
		if errors.Is(err, pgx.ErrNoRows) {
			// Only the first can find no destination: the first insert's
			// trigger keeps it from being removed until commit.
			return nil, unknownDestination(r.Destination)
		}
		if err != nil {
			return nil, fmt.Errorf("outbox: insert message %s: %w", r.MessageID, err)
		}
	}
	noteEnqueued(ctx, ids)
	return ids, nil
}

// Prepare validates m as Enqueue does and returns the row Enqueue would
// insert for it, its message id assigned: for a caller that inserts the
// message with a statement of its own (the inbox's forward handler looks
// the destination up, inserts and links the message to its event in one).
// Such a caller must also refuse a destination that does not exist with
// ErrUnknownDestination, and sends no NOTIFY either. Errors wrap
// ErrInvalid.
func Prepare(m Message) (queries.OutboxInsertParams, error) {
	rows, err := prepare([]Message{m})
	if err != nil {
		return queries.OutboxInsertParams{}, err
	}
	return rows[0], nil
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
	case holdsNUL(m.Payload):
		return errors.New(`payload holds a \u0000 escape, which PostgreSQL's JSON operators cannot read`)
	case m.MaxAttempts < 0:
		return errors.New("max attempts is negative")
	}
	return nil
}

// holdsNUL reports whether valid JSON holds a string (or key) with the
// \u0000 escape: the outbox's payload column is json, kept as given, and
// would store it, but every ->> on that row would then fail, and with it
// any filter on a payload field (the column's CHECK refuses it too).
func holdsNUL(payload []byte) bool {
	if !bytes.Contains(payload, []byte(`\u0000`)) {
		return false // the common case: no need to decode
	}
	var doc any
	if json.Unmarshal(payload, &doc) != nil {
		return false
	}
	return anyNUL(doc)
}

func anyNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		return slices.ContainsFunc(v, anyNUL)
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || anyNUL(e) {
				return true
			}
		}
	}
	return false
}

// checkDestinations fails with ErrInvalid when a message names a destination
// that does not exist, before anything is inserted: a foreign-key violation
// would abort the caller's transaction. Enqueue runs it for messages to
// several destinations, or for many (copied); otherwise each insert checks.
func checkDestinations(ctx context.Context, tx pgx.Tx, msgs []Message) error {
	var names []string
	for _, m := range msgs {
		if !slices.Contains(names, m.Destination) {
			names = append(names, m.Destination)
		}
	}
	known, err := queries.New(tx).DestinationListKnown(ctx, names)
	if err != nil {
		return fmt.Errorf("outbox: look up destinations: %w", err)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return unknownDestination(n)
		}
	}
	return nil
}

func unknownDestination(name string) error {
	return fmt.Errorf("%w: %w %q", ErrInvalid, ErrUnknownDestination, name)
}

func copyRows(ctx context.Context, tx pgx.Tx, rows []queries.OutboxInsertParams) error {
	params := make([]queries.OutboxCopyParams, len(rows))
	for i, r := range rows {
		params[i] = queries.OutboxCopyParams{MessageID: r.MessageID, Topic: r.Topic, Destination: r.Destination,
			AggregateType: r.AggregateType, AggregateID: r.AggregateID, Payload: r.Payload, Headers: r.Headers,
			MaxAttempts: r.MaxAttempts}
	}
	if _, err := queries.New(tx).OutboxCopy(ctx, params); err != nil {
		return fmt.Errorf("outbox: copy %d messages: %w", len(rows), err)
	}
	return nil
}
