// Package inbox receives events from outside and applies each one exactly
// once per (source, event id).
//
// Receive does it in ONE transaction: it inserts (source, event id) with ON
// CONFLICT DO NOTHING (in effect: a failed event is taken again) and, if the
// row is new, runs the handler in that same transaction, then commits. The
// record of an event and its effect therefore commit together or not at
// all. The two designs this rules out are the two classic bugs:
//
//   - record first, apply later: a crash or error between the two leaves
//     the event recorded but never applied, and every redelivery is then
//     dropped as a duplicate: a lost effect;
//   - apply first, record later: a crash or error between the two leaves
//     the effect applied but the event unrecorded, and the redelivery
//     applies it again: a double effect.
//
// Concurrent deliveries of one event are serialised by the unique index:
// the second INSERT waits for the first transaction, then finds the row
// (duplicate: the handler is not called, the per-source counter is
// incremented) or, if the first rolled back, inserts it itself.
//
// A handler that returns an error or panics rolls the transaction back.
// The failure is then recorded in a separate transaction (attempts, error
// text and its fingerprint, see internal/fingerprint) so the console can
// show it; a redelivery retries the event, and after Policy.MaxAttempts
// failures it is parked: the inbox's dead letter, left for an operator.
//
// # Out-of-order events
//
// An event may name an entity (EntityKey) and that entity's version
// (EntityVersion, 1 or more). Receive keeps the last applied version of
// every entity per source (switchyard.inbox_entity_versions) and locks its
// row while applying, so one entity's events are applied one at a time. An
// event whose version is not above the applied one is recorded as stale and
// not applied. An event above the applied version + 1 (a gap: its
// predecessor has not arrived) is handled per the source's policy:
//
//   - OutOfOrderApply ("apply", the default): apply it; the versions it
//     skipped become stale if they arrive later. Use it when each event
//     carries the entity's whole state (a snapshot, like most webhook
//     providers send), so the newest one wins and the skipped ones carry
//     nothing the newest lacks. Versions need not be consecutive: a
//     timestamp or a provider's sequence number will do.
//   - OutOfOrderHold ("hold"): record it as held, without applying, and
//     apply it when its predecessor is applied, in the predecessor's
//     transaction. Use it when events are deltas (each one changes the
//     state its predecessor left: "+5 to the balance"), so that none may
//     be skipped. Versions must then be consecutive, starting at 1; a lost
//     predecessor keeps its successors held, visibly, until an operator
//     acts.
package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/advisory"
	"github.com/switchyard/switchyard/internal/pgtext"
)

// DefaultMaxAttempts is how many failed attempts park an event when the
// policy does not say.
const DefaultMaxAttempts = 5

// Errors of this package; test them with errors.Is.
var (
	// ErrInvalid: the event cannot be received as given; nothing was
	// written.
	ErrInvalid = errors.New("inbox: invalid event")
	// ErrHandler: the handler returned an error or panicked; its
	// transaction was rolled back and the failure recorded (see
	// Result.Outcome: OutcomeFailed or OutcomeParked).
	ErrHandler = errors.New("inbox: handler failed")
	// ErrTransient: the handler failed for a reason that says nothing about
	// the event (a lock not granted in time, a serialization failure, a
	// deadlock, or an error the handler wrapped with ErrTransient itself);
	// its transaction was rolled back and nothing was recorded, so no
	// attempt is used up: the sender should retry.
	ErrTransient = errors.New("inbox: busy, retry")
)

// transient reports whether a handler's error is contention rather than a
// verdict on the event.
func transient(err error) bool {
	if errors.Is(err, advisory.ErrLockTimeout) || errors.Is(err, ErrTransient) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03": // serialization_failure, deadlock_detected, lock_not_available
			return true
		}
	}
	return false
}

// OutOfOrder is a source's policy for an event that skips entity
// versions; see the package documentation.
type OutOfOrder string

// The out-of-order policies.
const (
	OutOfOrderApply OutOfOrder = "apply"
	OutOfOrderHold  OutOfOrder = "hold"
)

// Policy is how the source of an event wants it treated.
type Policy struct {
	// OutOfOrder: "" means OutOfOrderApply.
	OutOfOrder OutOfOrder
	// MaxAttempts: failed attempts that park the event; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
}

// Event is one inbound event.
type Event struct {
	// Source and ID identify the event: it takes effect once per pair.
	Source string
	ID     string
	// Headers are kept with the event for the console; may be nil.
	Headers map[string]string
	// Payload must be valid JSON.
	Payload []byte
	// EntityKey and EntityVersion, when EntityKey is set, order the event
	// among the events of the same entity; EntityVersion must then be 1
	// or more.
	EntityKey     string
	EntityVersion int64
	// Policy is the source's.
	Policy Policy
	// payloadValid: Payload was checked to be valid JSON already (by
	// Receiver.Accept, which parses the request), so Receive need not
	// read it a second time.
	payloadValid bool
	// row is the event's switchyard.inbox_events id while its handler
	// runs (0 before it is recorded), so that what the handler enqueued
	// can be linked to the event.
	row int64
}

// MaxEventIDBytes is the longest event id the inbox takes (docs/inbox.md):
// the id is a key of the (source, event id) index, whose entries must fit
// a third of a page; a longer id would fail every delivery.
const MaxEventIDBytes = 256

// MaxErrorBytes bounds the handler error text stored with a failed event.
const MaxErrorBytes = 2048

func (ev Event) validate() error {
	switch {
	case ev.Source == "":
		return errors.New("source is empty")
	case ev.ID == "":
		return errors.New("event id is empty")
	case len(ev.ID) > MaxEventIDBytes || !pgtext.Valid(ev.ID):
		return fmt.Errorf("event id is not text of at most %d bytes without NUL", MaxEventIDBytes)
	case !ev.payloadValid && !json.Valid(ev.Payload):
		return errors.New("payload is not valid JSON")
	case ev.EntityKey != "" && ev.EntityVersion < 1:
		return fmt.Errorf("entity %q has version %d: want 1 or more", ev.EntityKey, ev.EntityVersion)
	case ev.EntityKey == "" && ev.EntityVersion != 0:
		return errors.New("entity version given without an entity key")
	case ev.Policy.OutOfOrder != "" && ev.Policy.OutOfOrder != OutOfOrderApply && ev.Policy.OutOfOrder != OutOfOrderHold:
		return fmt.Errorf("unknown out-of-order policy %q", ev.Policy.OutOfOrder)
	case ev.Policy.MaxAttempts < 0:
		return errors.New("max attempts is negative")
	}
	return nil
}

func (p Policy) maxAttempts() int32 {
	if p.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return int32(min(p.MaxAttempts, 1<<30))
}

// Handler applies an event's effect in tx, the transaction that records the
// event. It must do all its writes through tx (an outbox message too:
// outbox.Enqueue(ctx, tx, ...)), and must not commit or roll back tx. The
// messages it enqueues with outbox.Enqueue under ctx are linked to the
// event (switchyard.inbox_event_messages, shown on the event's page). An
// error or a panic rolls everything back and counts as a failed attempt,
// except an error wrapping ErrTransient, which records nothing (the sender
// is asked to retry).
// A handler may be called again for the same event after a failure, never
// after a success.
type Handler func(ctx context.Context, tx pgx.Tx, ev Event) error

// Outcome says what Receive did with an event.
type Outcome string

// The outcomes.
const (
	// OutcomeProcessed: the handler's effect committed with the event.
	OutcomeProcessed Outcome = "processed"
	// OutcomeDuplicate: the event was already recorded; nothing was done.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeStale: older than its entity's applied version; recorded,
	// not applied.
	OutcomeStale Outcome = "stale"
	// OutcomeHeld: recorded, waiting for its predecessor (OutOfOrderHold).
	OutcomeHeld Outcome = "held"
	// OutcomeFailed: the handler failed; a redelivery will retry.
	OutcomeFailed Outcome = "failed"
	// OutcomeParked: the handler failed for the last allowed time; the
	// event waits for an operator.
	OutcomeParked Outcome = "parked"
)

// Result is what Receive did.
type Result struct {
	Outcome Outcome
	// Attempts is the event's failed attempts so far (failed, parked).
	Attempts int
	// Released counts held successors applied after this event, in its
	// transaction.
	Released int
}

// Receive applies ev once: see the package documentation. It returns an
// error wrapping ErrInvalid when ev is invalid (nothing written), one
// wrapping ErrHandler with Outcome failed or parked when the handler failed
// (its failure recorded), and any other error when the database failed (the
// event's fate is then whatever committed: a retry is safe).
func Receive(ctx context.Context, pool *pgxpool.Pool, ev Event, h Handler) (Result, error) {
	return receive(ctx, pool, ev, Registration{Handle: h})
}

// receive is Receive with reg's handler. A built-in handler, or a Go
// handler with Registration.Once, receives an event without an entity
// version in one statement when it can (onceReceiver), else as any
// handler.
func receive(ctx context.Context, pool *pgxpool.Pool, ev Event, reg Registration) (Result, error) {
	if err := ev.validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	headers := headersJSON(ev.Headers)
	if once := reg.onceOf(); once != nil && ev.EntityKey == "" {
		if res, ok := once.receiveOnce(ctx, pool, ev, headers); ok {
			return res, nil
		}
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("inbox: receive %s/%s: %w", ev.Source, ev.ID, err)
		}
	}
	res, err := receiveTx(ctx, pool, ev, headers, reg.Handle)
	if err == nil {
		return res, nil
	}
	var failed *handlerError
	if !errors.As(err, &failed) || ctx.Err() != nil {
		// A cancelled request is no verdict on the event: nothing is
		// recorded, and the sender's retry will find it as it was.
		return Result{}, fmt.Errorf("inbox: receive %s/%s: %w", ev.Source, ev.ID, err)
	}
	if transient(failed.err) {
		return Result{}, fmt.Errorf("%w: %s/%s: %w", ErrTransient, ev.Source, ev.ID, failed.err)
	}
	return recordFailure(ctx, pool, ev, headers, failed)
}
