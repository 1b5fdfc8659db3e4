package switchyard

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/inbox"
)

// Errors of Receive; test them with errors.Is.
var (
	// ErrInvalidEvent: the event cannot be received as given; nothing was
	// written.
	ErrInvalidEvent = inbox.ErrInvalid
	// ErrHandler: the handler returned an error or panicked; its
	// transaction was rolled back and the failure recorded (Result.Outcome
	// is OutcomeFailed or OutcomeParked).
	ErrHandler = inbox.ErrHandler
	// ErrTransient: the handler failed for a reason that says nothing
	// about the event (a lock not granted in time, a serialization
	// failure, a deadlock, or an error the handler wrapped with
	// ErrTransient itself); nothing was recorded and no attempt used up:
	// the sender should retry.
	ErrTransient = inbox.ErrTransient
)

// OutOfOrder is a source's policy for an event that skips versions of its
// entity (Event.EntityVersion).
type OutOfOrder string

// The out-of-order policies.
const (
	// OutOfOrderApply applies the event; the versions it skipped are
	// stale if they arrive later. For events that carry the entity's
	// whole state.
	OutOfOrderApply OutOfOrder = "apply"
	// OutOfOrderHold keeps the event, unapplied, until its predecessor is
	// applied. For events that are deltas; versions must then be
	// consecutive from 1.
	OutOfOrderHold OutOfOrder = "hold"
)

// Event is one inbound event.
type Event struct {
	// Source and ID identify the event: it takes effect once per pair.
	Source string
	ID     string
	// Headers are kept with the event for the console; may be nil.
	Headers map[string]string
	// Payload must be valid JSON; it is kept as given.
	Payload []byte
	// EntityKey and EntityVersion, when EntityKey is set, order the event
	// among the events of the same entity; EntityVersion must then be 1 or
	// more. An event not above the entity's applied version is recorded as
	// stale and not applied.
	EntityKey     string
	EntityVersion int64
	// OutOfOrder: "" means OutOfOrderApply.
	OutOfOrder OutOfOrder
	// MaxAttempts is how many failed attempts park the event (the inbox's
	// dead letter, left for an operator); 0 means 5.
	MaxAttempts int
}

// Handler applies an event's effect in tx, the transaction that records
// the event. It must do all its writes through tx (an outbox message too:
// Enqueue(ctx, tx, ...)) and must not commit or roll back tx. The messages
// it enqueues with Enqueue or EnqueueMany under ctx (or a context derived
// from it) are linked to the event, and the console's page of the event
// lists them; rows it inserts into switchyard.outbox with SQL are not. An error or
// a panic rolls everything back and counts as a failed attempt, except an
// error wrapping ErrTransient, which records nothing. A handler may be
// called again for the same event after a failure, never after a success.
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

// Receive applies ev once per (ev.Source, ev.ID): in one transaction it
// records the event and, if it is new, runs h, so that the record and the
// effect commit together or not at all. A duplicate (also one delivered
// concurrently) returns OutcomeDuplicate without calling h.
//
// It returns an error wrapping ErrInvalidEvent when ev is invalid
// (nothing written), one wrapping ErrHandler with OutcomeFailed or
// OutcomeParked when h failed (its failure recorded for the console), one
// wrapping ErrTransient when h met contention (nothing recorded), and any
// other error when the database failed (a retry is then safe).
func Receive(ctx context.Context, pool *pgxpool.Pool, ev Event, h Handler) (Result, error) {
	res, err := inbox.Receive(ctx, pool, ev.internal(), h.internal())
	if err != nil {
		err = fmt.Errorf("switchyard: %w", err)
	}
	return Result{Outcome: Outcome(res.Outcome), Attempts: res.Attempts, Released: res.Released}, err
}

func (ev Event) internal() inbox.Event {
	return inbox.Event{
		Source: ev.Source, ID: ev.ID, Headers: ev.Headers, Payload: ev.Payload,
		EntityKey: ev.EntityKey, EntityVersion: ev.EntityVersion,
		Policy: inbox.Policy{OutOfOrder: inbox.OutOfOrder(ev.OutOfOrder), MaxAttempts: ev.MaxAttempts},
	}
}

func eventOf(ev inbox.Event) Event {
	return Event{
		Source: ev.Source, ID: ev.ID, Headers: ev.Headers, Payload: ev.Payload,
		EntityKey: ev.EntityKey, EntityVersion: ev.EntityVersion,
		OutOfOrder: OutOfOrder(ev.Policy.OutOfOrder), MaxAttempts: ev.Policy.MaxAttempts,
	}
}

func (h Handler) internal() inbox.Handler {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error { return h(ctx, tx, eventOf(ev)) }
}

// Registration is a Go handler that inbox sources can name.
type Registration struct {
	// Handle applies each new event of the sources that name it.
	Handle Handler
	// Entity, when set, returns the entity key and version an event's
	// payload names, for out-of-order resolution (Event.EntityKey); key ""
	// means none. An error makes the event malformed: the sender gets 400.
	// Nil: the events of this handler are unordered.
	Entity func(payload []byte) (key string, version int64, err error)
	// Once, when set, receives an event without an entity version in one
	// statement of the handler's own, where Handle takes three round trips
	// (the claim with its BEGIN, Handle's statements, the COMMIT): the
	// statement claims the event with switchyard.inbox_claim, applies
	// Handle's effect only when the claim returns an event id above 0,
	// and Once returns that id (0: a duplicate, counted by the claim).
	// Any error sends the event down Handle's path, which must have the
	// same effect, so that a failure is recorded as for any handler
	// (docs/inbox.md, "One statement per event").
	Once func(ctx context.Context, pool *pgxpool.Pool, ev Event, c Claim) (eventRow int64, err error)
}

// Claim is what a Registration.Once statement passes to
// switchyard.inbox_claim(source, event_id, headers, payload, slot).
type Claim struct {
	Source, EventID string
	// Headers is the JSON object of the request headers the inbox keeps.
	Headers []byte
	Payload []byte
	// Slot is the row of the source's duplicate counter the event counts in.
	Slot int16
}

func (f onceFunc) internal() func(context.Context, *pgxpool.Pool, inbox.Event, inbox.Claim) (int64, error) {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, pool *pgxpool.Pool, ev inbox.Event, c inbox.Claim) (int64, error) {
		return f(ctx, pool, eventOf(ev), Claim(c))
	}
}

type onceFunc func(ctx context.Context, pool *pgxpool.Pool, ev Event, c Claim) (int64, error)

// Handlers maps handler names to Go handlers. An inbox source
// (switchyard.inbox_sources) runs the handler its handler column names; the
// names "forward" and "sql" are the built-in handlers, which need no Go
// code (docs/inbox.md) and take precedence over a Go handler of that name.
type Handlers map[string]Registration

// Handle registers h under name, unordered, and returns hs.
func (hs Handlers) Handle(name string, h Handler) Handlers {
	hs[name] = Registration{Handle: h}
	return hs
}

func (hs Handlers) internal() inbox.Registry {
	reg := make(inbox.Registry, len(hs))
	for name, r := range hs {
		reg[name] = inbox.Registration{Handle: r.Handle.internal(), Entity: r.Entity, Once: onceFunc(r.Once).internal()}
	}
	return reg
}
