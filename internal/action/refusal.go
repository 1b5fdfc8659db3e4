package action

import (
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Kind is the kind of a refusal: what a transport maps to its own answer
// (an HTTP status, a WebSocket reject code).
type Kind string

// Kinds of refusal.
const (
	// KindNotFound: the message or job does not exist.
	KindNotFound Kind = "not_found"
	// KindConflict: the target's state forbids the action now (not dead,
	// a replay in flight, a job already running or not running).
	KindConflict Kind = "conflict"
	// KindInvalid: the input is wrong (a reason missing or too long, a
	// mode, a rate, a payload); Field names the input at fault.
	KindInvalid Kind = "invalid"
	// KindForbidden: the actor's role is too low; Need is the role it
	// takes. The caller records the denial.
	KindForbidden Kind = "forbidden"
	// KindUnavailable: the actions cannot run here (no database).
	KindUnavailable Kind = "unavailable"
)

// Refusal is an action refused: nothing was committed and nothing was
// recorded. Message is a whole sentence, safe to show to the actor.
type Refusal struct {
	Kind    Kind
	Message string
	// Field is the input at fault of a KindInvalid refusal ("reason",
	// "payload", "filter.topic"), or "".
	Field string
	// Need is the role a KindForbidden refusal lacked.
	Need auth.Role
}

func (r *Refusal) Error() string { return "action refused (" + string(r.Kind) + "): " + r.Message }

// AsRefusal returns err's *Refusal, or nil if err is no refusal.
func AsRefusal(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

func invalid(field, msg string) *Refusal {
	return &Refusal{Kind: KindInvalid, Field: field, Message: msg}
}

func noDatabase() *Refusal {
	return &Refusal{Kind: KindUnavailable, Message: "Actions are unavailable: this console has no database."}
}

func conflict(msg string) *Refusal { return &Refusal{Kind: KindConflict, Message: msg} }

// requireRole refuses a below need.
func requireRole(a Actor, need auth.Role, msg string) error {
	if a.Role.Allows(need) {
		return nil
	}
	if msg == "" {
		msg = fmt.Sprintf("Your role (%s) may not use this; it needs %s.", a.Role, need)
	}
	return &Refusal{Kind: KindForbidden, Need: need, Message: msg}
}

// Messages of the engine's refusals.
const (
	msgNoMessage      = "No such message."
	msgReplayInFlight = "A replay of this message is still in flight: wait until it is delivered or dead before replaying or discarding it again."
	msgNotDead        = "Only a dead message can be replayed or discarded; this one is not dead"
	msgNotDiscarded   = "Only a discarded message can be restored."
	msgReasonRequired = "A replay with a new idempotency key needs a reason."
	msgRequestReused  = "This request id already replayed another message; send a new one."
)

// engineRefusal maps the refusals of outbox and bulkreplay to a Refusal;
// any other error is returned as it is. outbox.ErrNotDead is mapped by the
// caller, which knows the message's state (notDead).
func engineRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, outbox.ErrNotFound):
		return &Refusal{Kind: KindNotFound, Message: msgNoMessage}
	case errors.Is(err, outbox.ErrReplayInFlight):
		return conflict(msgReplayInFlight)
	case errors.Is(err, outbox.ErrNotDiscarded):
		return conflict(msgNotDiscarded)
	case errors.Is(err, outbox.ErrReasonRequired), errors.Is(err, bulkreplay.ErrReasonRequired):
		return invalid("reason", msgReasonRequired)
	case errors.Is(err, outbox.ErrRequestReused):
		return invalid("request_id", msgRequestReused)
	case errors.Is(err, bulkreplay.ErrInvalidRate):
		return invalid("rate_per_second", fmt.Sprintf("The rate must be from 1 to %d replays per second.", bulkreplay.MaxRatePerSecond))
	}
	return err
}
