package action

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/inbox"
)

// AuditInboxRetry is the audit action of RetryInboxEvent.
const AuditInboxRetry = "inbox.retry"

// InboxRetryInput names an inbound event to retry.
type InboxRetryInput struct {
	// EventID is the event's switchyard.inbox_events id.
	EventID int64
	// RequestID makes the retry idempotent: the same id again does
	// nothing more and answers the first retry's outcome.
	RequestID uuid.UUID
	// Reason is optional.
	Reason string
}

// RetryInboxEvent runs a failed or parked inbound event's handler again,
// now (inbox.Receiver.RetryTx), through rcv, the receiver that knows the
// event's source and handler. The attempt, its outcome (processed, or
// failed again: the failure is recorded as one more attempt, and a parked
// event stays parked), a change for the pages and the audit row commit
// together. The same request id again answers the first retry (Existing)
// and records nothing. Role: operator. Refusals: KindForbidden,
// KindInvalid (request id, reason), KindNotFound, KindConflict (the event
// is not failed or parked; the event's source cannot be handled here; the
// handler was busy: try again), KindUnavailable.
func (s *Service) RetryInboxEvent(ctx context.Context, pool *pgxpool.Pool, rcv *inbox.Receiver, a Actor, in InboxRetryInput) (inbox.Retried, error) {
	if err := requireRole(a, auth.Operator, "Retrying an inbound event needs the operator role."); err != nil {
		return inbox.Retried{}, err
	}
	if in.RequestID == uuid.Nil {
		return inbox.Retried{}, invalid("request_id", "A retry needs a request id.")
	}
	if err := CheckText("reason", in.Reason, MaxReasonChars); err != nil {
		return inbox.Retried{}, err
	}
	if rcv == nil {
		return inbox.Retried{}, &Refusal{Kind: KindUnavailable, Message: "Retries are unavailable: this console receives no inbound events."}
	}
	var res inbox.Retried
	entry := audit.Entry{Action: AuditInboxRetry, Target: inboxEventTarget(in.EventID), Reason: strings.TrimSpace(in.Reason), RequestID: in.RequestID.String()}
	err := s.run(ctx, pool, a, entry, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (bool, error) {
		var err error
		res, err = rcv.RetryTx(ctx, tx, in.EventID, inbox.Retry{Actor: a.Name, RequestID: in.RequestID})
		if err != nil || res.Existing {
			return false, inboxRefusal(err)
		}
		e.Detail, err = json.Marshal(map[string]any{"source": res.Source, "event_id": res.EventID,
			"outcome": res.Outcome, "attempt": res.Attempt, "error": res.Error})
		return true, err
	})
	if err != nil {
		return inbox.Retried{}, err
	}
	return res, nil
}

// inboxRefusal maps the refusals of inbox.RetryTx to a Refusal; any other
// error is returned as it is.
func inboxRefusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, inbox.ErrEventNotFound):
		return &Refusal{Kind: KindNotFound, Message: "No such inbound event."}
	case errors.Is(err, inbox.ErrNotRetryable):
		return conflict("Only a failed or parked event can be retried; " + strings.TrimPrefix(err.Error(), inbox.ErrNotRetryable.Error()+": ") + ".")
	case errors.Is(err, inbox.ErrMisconfigured):
		return conflict("This event's source cannot be handled here (" + strings.TrimPrefix(err.Error(), inbox.ErrMisconfigured.Error()+": ") + "): fix the source, then retry.")
	case errors.Is(err, inbox.ErrTransient):
		return conflict("The handler was busy (a lock or a serialization conflict): nothing was recorded; retry again.")
	}
	return err
}

func inboxEventTarget(id int64) string { return "inbox event " + strconv.FormatInt(id, 10) }
