// Package destination defines what the dispatcher delivers outbox messages
// to: the Destination interface, the Delivery it is given, the Outcome it
// reports, and how an error says it is permanent (never worth retrying).
// Implementations live in subpackages (webhook, jetstream, function) and
// never touch the database: the dispatcher records what they report.
package destination

import (
	"context"
	"errors"
	"time"
)

// Delivery is one attempt to deliver one message.
type Delivery struct {
	// MessageID is the message's idempotency key: every attempt of one
	// message carries the same value, so the receiver can dedupe.
	MessageID     string
	Topic         string
	AggregateType string
	AggregateID   string
	// Payload is the message's JSON payload, as enqueued.
	Payload []byte
	// Headers are the message's own headers, passed on where the
	// destination has headers.
	Headers map[string]string
	// Attempt is 1 for the first attempt.
	Attempt    int
	EnqueuedAt time.Time
}

// Outcome is what a destination observed, for the attempt record. It is
// meaningful whether Deliver succeeded or not.
type Outcome struct {
	// StatusCode is the HTTP status, or 0 where there is none.
	StatusCode int
	// Response is the first bytes of the receiver's answer (at most
	// MaxResponseBytes), for operators to read.
	Response string
}

// MaxResponseBytes bounds Outcome.Response.
const MaxResponseBytes = 1024

// Destination delivers messages. Deliver must honour ctx's deadline and
// cancellation, must be safe for concurrent use, and returns nil only when
// the receiver has accepted the message (for JetStream: the publish was
// acknowledged). An error wrapped with Permanent sends the message straight
// to dead; any other error is retried with backoff.
type Destination interface {
	Deliver(ctx context.Context, d Delivery) (Outcome, error)
}

// Func adapts a function to Destination: the in-process destination for
// embedding and tests.
type Func func(ctx context.Context, d Delivery) (Outcome, error)

// Deliver calls f.
func (f Func) Deliver(ctx context.Context, d Delivery) (Outcome, error) { return f(ctx, d) }

// ErrPermanent marks a failure that retrying cannot fix: a status the
// destination's policy calls permanent (PermanentStatus by default), an
// invalid payload, a misconfigured destination.
var ErrPermanent = errors.New("destination: permanent failure")

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent marks err as permanent. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err, or any error it wraps, is permanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// PermanentStatus is the default delivery policy: it reports whether an
// HTTP status means the request will never succeed as sent. Every 4xx is,
// except 408 (timeout) and 429 (rate limited), and except 401, 403 and 404:
// a receiver rotating its secret or deploying a new route answers those
// for a while, and dead-lettering every message at once would turn a
// short gap into an operator's replay. A destination may replace this
// policy with its own list (switchyard.destinations.permanent_statuses).
func PermanentStatus(code int) bool {
	switch code {
	case 401, 403, 404, 408, 429:
		return false
	}
	return code >= 400 && code < 500
}
