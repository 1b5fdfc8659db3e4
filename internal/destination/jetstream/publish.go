package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard/switchyard/internal/destination"
)

var _ destination.Destination = (*Destination)(nil)

// Deliver publishes m and waits for the stream's PubAck; see Publish.
// Outcome.Response names the stream and sequence that stored the message,
// and says so when the stream dropped it as a duplicate (which is still
// success: the message is in the stream).
func (d *Destination) Deliver(ctx context.Context, m destination.Delivery) (destination.Outcome, error) {
	ack, err := d.Publish(ctx, m)
	if err != nil {
		return destination.Outcome{}, err
	}
	text := fmt.Sprintf("stream %s seq %d", ack.Stream, ack.Sequence)
	if ack.Duplicate {
		text += " (duplicate)"
	}
	return destination.Outcome{Response: text}, nil
}

// Publish publishes m.Payload to SubjectPrefix + "." + m.Topic with the
// message's headers and Nats-Msg-Id = m.MessageID (which a message header
// cannot override; other Nats-* headers pass through and keep their
// JetStream meaning), and returns the stream's acknowledgement. It waits
// at most the configured Timeout. Errors:
//   - permanent, without publishing: an empty message id, a payload that
//     is not valid JSON, a topic that makes no valid subject, a malformed
//     header name;
//   - permanent: no stream captures the subject (no responders, after the
//     client's two short retries that ride out a leader election), or the
//     message is larger than the server or stream allows;
//   - retryable: no PubAck within Timeout, ctx ended, connection errors,
//     and any other error the stream reports.
func (d *Destination) Publish(ctx context.Context, m destination.Delivery) (*natsjs.PubAck, error) {
	msg, err := d.message(m)
	if err != nil {
		return nil, destination.Permanent(err)
	}
	attemptCtx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	ack, err := d.js.PublishMsg(attemptCtx, msg)
	if err != nil {
		return nil, d.publishError(ctx, msg.Subject, err)
	}
	return ack, nil
}

// message builds the NATS message for m, or says why there is none.
func (d *Destination) message(m destination.Delivery) (*nats.Msg, error) {
	if m.MessageID == "" {
		return nil, errors.New("jetstream: message has no id")
	}
	if !json.Valid(m.Payload) {
		return nil, fmt.Errorf("jetstream: message %s: invalid payload: not valid JSON", m.MessageID)
	}
	subject := d.prefix + "." + m.Topic
	if err := checkSubject(subject); err != nil {
		return nil, fmt.Errorf("jetstream: message %s: topic %q: subject %q: %w", m.MessageID, m.Topic, subject, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = m.Payload
	for name, value := range m.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("jetstream: message %s: invalid header name %q", m.MessageID, name)
		}
		if !strings.EqualFold(name, natsjs.MsgIDHeader) {
			msg.Header.Set(name, value)
		}
	}
	msg.Header.Set(natsjs.MsgIDHeader, m.MessageID)
	return msg, nil
}

// publishError classifies a failed publish; parent is the caller's
// context, to tell its end from our timeout.
func (d *Destination) publishError(parent context.Context, subject string, err error) error {
	var apiErr *natsjs.APIError
	switch {
	case errors.Is(err, natsjs.ErrNoStreamResponse):
		return destination.Permanent(fmt.Errorf(
			"jetstream: publish to %s: no stream captures this subject (no responders): %w", subject, err))
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadHeaderMsg), errors.Is(err, nats.ErrBadSubject),
		errors.As(err, &apiErr) && apiErr.ErrorCode == natsjs.JSErrCodeStreamMessageExceedsMaximum:
		return destination.Permanent(fmt.Errorf("jetstream: publish to %s: %w", subject, err))
	case parent.Err() != nil:
		return fmt.Errorf("jetstream: publish to %s: %w", subject, parent.Err())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("jetstream: publish to %s: no PubAck within %s: %w", subject, d.timeout, err)
	default:
		return fmt.Errorf("jetstream: publish to %s: %w", subject, err)
	}
}

// checkSubject accepts a literal subject: dot-separated non-empty tokens
// without whitespace, none of them a wildcard.
func checkSubject(s string) error {
	for token := range strings.SplitSeq(s, ".") {
		switch {
		case token == "":
			return errors.New("empty subject token")
		case token == "*" || token == ">":
			return fmt.Errorf("wildcard token %q", token)
		case strings.ContainsAny(token, " \t\r\n\f\v"):
			return errors.New("whitespace in subject")
		}
	}
	return nil
}

// validHeaderName accepts printable ASCII without ':' or space, as the
// NATS header format requires.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}
