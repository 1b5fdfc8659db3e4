package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// The built-in handlers: a source names one of them in
// switchyard.inbox_sources.handler and needs no Go code. They take
// precedence over a Go handler registered under the same name.
const (
	// HandlerForward enqueues each new event to the outbox destination
	// the source names (forward_to), in the transaction that records it:
	// the inbox becomes a durable, deduplicating gateway in front of the
	// team's own service. When the source names an entity_field, the
	// messages of one entity are delivered in the order their events were
	// recorded.
	HandlerForward = "forward"
	// HandlerSQL calls the function the source names (sql_function,
	// "schema.function", taking (event jsonb, headers jsonb)) in the
	// transaction that records the event, so its effect in the team's own
	// tables happens once. A function that raises is a failed attempt.
	HandlerSQL = "sql"
)

// ForwardHeaderSource and ForwardHeaderEventID are the headers a forwarded
// message carries, naming the source and the event it came from.
const (
	ForwardHeaderSource  = "Switchyard-Inbox-Source"
	ForwardHeaderEventID = "Switchyard-Inbox-Event-Id"
)

// sqlFunctionName is what a 'sql' source may name: schema.function, in
// lower-case unquoted identifiers (the migration's CHECK says the same).
var sqlFunctionName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$`)

// entityFieldPath is a dotted path of payload field names.
var entityFieldPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// builtin returns the Registration of a built-in handler that row names,
// false when it names none, or an error when its settings are wrong.
func builtin(row queries.SwitchyardInboxSource) (Registration, bool, error) {
	switch row.Handler {
	case HandlerForward:
		reg, err := forwardRegistration(row.Name, row.ForwardTo, row.EntityField)
		return reg, true, err
	case HandlerSQL:
		reg, err := sqlRegistration(row.SqlFunction)
		return reg, true, err
	}
	return Registration{}, false, nil
}

// forwardRegistration enqueues every event to destination (forwardSpec).
func forwardRegistration(source, destination, entityField string) (Registration, error) {
	switch {
	case destination == "":
		return Registration{}, errors.New("handler forward: forward_to names no destination")
	case entityField != "" && !entityFieldPath.MatchString(entityField):
		return Registration{}, fmt.Errorf("handler forward: entity_field %q is not a dotted path of field names", entityField)
	}
	spec := &forwardSpec{source: source, destination: destination, entityField: entityField}
	handle := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		msg, err := spec.message(ev)
		if err != nil {
			return err
		}
		return forward(ctx, tx, ev.row, msg)
	}
	return Registration{Handle: handle, once: spec}, nil
}

// forwardSpec is a forward source's handler: every event enqueued to
// destination. Its topic is the payload's "type" when that is a non-empty
// string (the Standard Webhooks payload convention), else the source's
// name; its aggregate, when entityField is set, is (source, the entity's
// id), which orders one entity's messages.
type forwardSpec struct {
	source, destination, entityField string
}

// message is the outbox message that forwards ev.
func (f *forwardSpec) message(ev Event) (outbox.Message, error) {
	topic, entity, err := forwardFields(ev.Payload, f.entityField)
	if err != nil {
		return outbox.Message{}, err
	}
	msg := outbox.Message{
		Topic: topic, Destination: f.destination, Payload: ev.Payload,
		Headers: map[string]string{ForwardHeaderSource: ev.Source, ForwardHeaderEventID: ev.ID},
	}
	if topic == "" {
		msg.Topic = f.source
	}
	if entity != "" {
		msg.AggregateType, msg.AggregateID = "inbox:"+f.source, entity
	}
	return msg, nil
}

// receiveOnce receives ev, an event without an entity version, in one
// statement (InboxEventForwardOnce): the claim, the message and its link,
// or the duplicate's count. It cannot tell (onceReceiver) when the
// payload has no entity id where the source orders by one, the
// destination does not exist, or the statement failed.
func (f *forwardSpec) receiveOnce(ctx context.Context, pool *pgxpool.Pool, ev Event, headers []byte) (res Result, ok bool) {
	msg, err := f.message(ev)
	if err != nil {
		return Result{}, false
	}
	p, err := outbox.Prepare(msg)
	if err != nil {
		return Result{}, false
	}
	row, err := queries.New(pool).InboxEventForwardOnce(ctx, queries.InboxEventForwardOnceParams{
		Destination: p.Destination, Source: ev.Source, EventID: ev.ID, EventHeaders: headers, EventPayload: ev.Payload,
		Slot: slot(ev.ID), MessageID: p.MessageID, Topic: p.Topic, AggregateType: p.AggregateType, AggregateID: p.AggregateID,
		Payload: p.Payload, Headers: p.Headers, MaxAttempts: p.MaxAttempts,
	})
	switch {
	case err != nil || !row.DestinationKnown:
		return Result{}, false
	case row.EventRow == 0:
		return Result{Outcome: OutcomeDuplicate}, true
	}
	return Result{Outcome: OutcomeProcessed}, true
}

// forward enqueues msg and links it to event row (0: no link) in one
// statement, where outbox.Enqueue and run's link would take three round
// trips: a third of a new event's. A destination that does not exist is
// a configuration that is wrong, not the event: the error is transient
// (503 to the sender, no attempt used, so nothing is parked meanwhile).
func forward(ctx context.Context, tx pgx.Tx, row int64, msg outbox.Message) error {
	p, err := outbox.Prepare(msg)
	if err != nil {
		return fmt.Errorf("forward to %s: %w", msg.Destination, err)
	}
	_, err = queries.New(tx).InboxEventMessageForward(ctx, queries.InboxEventMessageForwardParams{
		Destination: p.Destination, MessageID: p.MessageID, Topic: p.Topic, AggregateType: p.AggregateType,
		AggregateID: p.AggregateID, Payload: p.Payload, Headers: p.Headers, MaxAttempts: p.MaxAttempts, InboxEventID: row,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: forward to %s: %w: %w %q", ErrTransient, msg.Destination, outbox.ErrInvalid, outbox.ErrUnknownDestination, msg.Destination)
	}
	if err != nil {
		return fmt.Errorf("forward to %s: %w", msg.Destination, err)
	}
	return nil
}

// forwardFields reads the payload's "type" and, when entityField is set,
// the entity id at that path (a string, or a number as written). An event
// without that entity id is a failed attempt: forwarding it unordered
// would break the order its source promised.
func forwardFields(payload []byte, entityField string) (topic, entity string, err error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(payload, &doc); err != nil {
		return "", "", fmt.Errorf("payload is not a JSON object: %w", err)
	}
	_ = json.Unmarshal(doc["type"], &topic) // absent or not a string: no topic of its own
	if entityField == "" {
		return topic, "", nil
	}
	raw, ok := lookupPath(doc, strings.Split(entityField, "."))
	var n json.Number
	switch {
	case !ok:
	case json.Unmarshal(raw, &entity) == nil && entity != "":
		return topic, entity, nil
	case json.Unmarshal(raw, &n) == nil:
		return topic, n.String(), nil
	}
	return "", "", fmt.Errorf("payload has no string or number at %q (the source's entity_field)", entityField)
}

// lookupPath walks path through nested JSON objects.
func lookupPath(doc map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	raw, ok := doc[path[0]]
	if !ok || len(path) == 1 {
		return raw, ok
	}
	var inner map[string]json.RawMessage
	if json.Unmarshal(raw, &inner) != nil {
		return nil, false
	}
	return lookupPath(inner, path[1:])
}

// sqlRegistration calls fn(event, headers) through switchyard.inbox_call,
// which checks the name again and quotes it, and links the event to the
// outbox rows the function wrote in tx (migration 00019 says how it finds
// them, concurrent enqueues and the function's subtransactions included).
func sqlRegistration(fn string) (Registration, error) {
	if !sqlFunctionName.MatchString(fn) {
		return Registration{}, fmt.Errorf("handler sql: sql_function %q is not schema.function in lower-case identifiers", fn)
	}
	handle := func(ctx context.Context, tx pgx.Tx, ev Event) error {
		var row *int64
		if ev.row != 0 {
			row = &ev.row
		}
		err := queries.New(tx).InboxHandlerCall(ctx, queries.InboxHandlerCallParams{Fn: fn, Event: ev.Payload, Headers: headersJSON(ev.Headers), InboxEventID: row})
		if err != nil {
			return fmt.Errorf("call %s: %w", fn, err)
		}
		return nil
	}
	return Registration{Handle: handle, once: sqlSpec{fn: fn}}, nil
}

// sqlSpec is a 'sql' source's handler: function fn called with each event.
type sqlSpec struct{ fn string }

// receiveOnce receives ev, an event without an entity version, in one
// statement (InboxEventCallOnce): the claim and the function's call, or
// the duplicate's count. It cannot tell (onceReceiver) when the statement
// failed: a function that raised, whose failure the general path records
// after calling it again (its writes are rolled back each time).
func (s sqlSpec) receiveOnce(ctx context.Context, pool *pgxpool.Pool, ev Event, headers []byte) (Result, bool) {
	row, err := queries.New(pool).InboxEventCallOnce(ctx, queries.InboxEventCallOnceParams{
		Source: ev.Source, EventID: ev.ID, EventHeaders: headers, EventPayload: ev.Payload, Slot: slot(ev.ID), Fn: s.fn,
	})
	switch {
	case err != nil:
		return Result{}, false
	case row.EventRow == 0:
		return Result{Outcome: OutcomeDuplicate}, true
	}
	return Result{Outcome: OutcomeProcessed}, true
}
