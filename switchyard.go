// Package switchyard is the Go API of Switchyard, reliable messaging on
// PostgreSQL: a transactional outbox, an inbox that applies each event
// once, and the operations console over both.
//
// Everything goes through the caller's own PostgreSQL database, in the
// schema switchyard (create it with Run's "migrate" command, or by running
// the console once):
//
//   - Enqueue and EnqueueMany write messages in the caller's pgx.Tx, beside
//     the business change they announce: the message exists if and only if
//     that transaction commits. The dispatcher (Run) delivers it to its
//     destination, at least once, with its id as the idempotency key.
//   - Receive records an inbound event and runs a Handler in one
//     transaction, the handler's effect and the record of the event
//     committing together: the event takes effect once per (source, id),
//     whatever the redeliveries and concurrent duplicates.
//   - Run runs the console, the dispatcher and the inbox receiver
//     (POST /inbox/{source}) inside the caller's own binary, with the
//     caller's Go inbox handlers (Handlers), configured like the console
//     binary (flags and environment, README.md).
//
// The API works over github.com/jackc/pgx/v5; nothing of the driver's
// connection handling is wrapped or hidden: pass the pgx.Tx or
// *pgxpool.Pool the program already has. Services in other languages use
// the same tables with plain SQL (README.md, "Enqueueing from any
// language").
package switchyard

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/outbox"
)

// MaxPayloadBytes is the largest payload Enqueue accepts: 1 MiB.
const MaxPayloadBytes = 1 << 20

// The outbox's own limit must be the same: a negative difference either
// way does not compile.
const _ = uint(MaxPayloadBytes-outbox.MaxPayloadBytes) + uint(outbox.MaxPayloadBytes-MaxPayloadBytes)

// Errors of Enqueue and EnqueueMany; test them with errors.Is.
var (
	// ErrInvalidMessage wraps every validation failure: nothing was
	// written, and the caller's transaction is still usable.
	ErrInvalidMessage = outbox.ErrInvalid
	// ErrUnknownDestination wraps, with ErrInvalidMessage, the failure of
	// a message that names no configured destination
	// (switchyard.destinations).
	ErrUnknownDestination = outbox.ErrUnknownDestination
)

// Message is one event to deliver to one destination.
type Message struct {
	// ID is the idempotency key sent with every delivery attempt (the
	// webhook-id header, Nats-Msg-Id). Zero: a new time-ordered UUID (v7).
	ID uuid.UUID
	// Topic names the kind of event ("order.created"); required.
	Topic string
	// Destination names a row of switchyard.destinations; required.
	Destination string
	// AggregateType and AggregateID, when AggregateID is set, order the
	// message after every earlier message of the same aggregate and
	// destination: it is not delivered before them. Empty: unordered.
	AggregateType string
	AggregateID   string
	// Payload is the JSON body delivered, byte for byte as given (key
	// order, spacing and numbers included); valid JSON of at most
	// MaxPayloadBytes.
	Payload []byte
	// Headers go with the message (as HTTP headers to a webhook); may be
	// nil.
	Headers map[string]string
	// MaxAttempts overrides the destination's number of attempts before
	// the message is dead; 0 keeps the destination's.
	MaxAttempts int
}

// Enqueue writes msg in tx, the caller's transaction, and returns its id:
// the message commits if and only if tx commits. On an
// error wrapping ErrInvalidMessage nothing was written and tx is still
// usable; any other error is the database's, and tx is then aborted.
// Enqueue sends no NOTIFY in tx: one would serialise every committing
// enqueuer.
func Enqueue(ctx context.Context, tx pgx.Tx, msg Message) (uuid.UUID, error) {
	ids, err := EnqueueMany(ctx, tx, []Message{msg})
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}

// EnqueueMany writes msgs in tx, as Enqueue does, and returns their ids in
// order. A large batch is written with COPY, in one round trip. The
// messages of one aggregate are delivered in the order given. Either all
// are written or, on an error, none.
func EnqueueMany(ctx context.Context, tx pgx.Tx, msgs []Message) ([]uuid.UUID, error) {
	if len(msgs) == 0 {
		return []uuid.UUID{}, nil
	}
	in := make([]outbox.Message, len(msgs))
	for i, m := range msgs {
		// A conversion, not a copy field by field: the two types must
		// stay identical, which the compiler checks here.
		in[i] = outbox.Message(m)
	}
	ids, err := outbox.Enqueue(ctx, tx, in...)
	if err != nil {
		return nil, fmt.Errorf("switchyard: %w", err)
	}
	return ids, nil
}
