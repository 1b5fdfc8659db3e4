package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/fingerprint"
	"github.com/switchyard/switchyard/internal/pgtext"
	"github.com/switchyard/switchyard/internal/queries"
)

// Errors of RetryTx; test them with errors.Is.
var (
	// ErrEventNotFound: no inbound event has that id.
	ErrEventNotFound = errors.New("inbox: no such event")
	// ErrNotRetryable: the event is not failed or parked (processed,
	// stale, held): there is nothing to retry.
	ErrNotRetryable = errors.New("inbox: event is not failed or parked")
)

// Retry is who asks for a retry, and the id of their request.
type Retry struct {
	Actor     string
	RequestID uuid.UUID
}

// Retried is what RetryTx did.
type Retried struct {
	Source, EventID string
	// Outcome: OutcomeProcessed (the handler's effect committed),
	// OutcomeStale or OutcomeHeld (an entity's version settled it
	// without the handler), OutcomeFailed or OutcomeParked (the handler
	// failed again; Error says why).
	Outcome Outcome
	// Attempt is the retry's number among the event's attempts (its
	// failed attempts come first).
	Attempt int
	Error   string
	// Existing: this request id already retried the event; nothing was
	// done now, and the rest is that retry's.
	Existing bool
}

// RetryTx runs a failed or parked event's handler again, now, in tx (the
// caller's transaction, which also records who asked): an operator's
// retry. It locks the event first, so a delivery of the same event or a
// second retry waits for it, and is idempotent by by.RequestID: the same
// request again finds its attempt (Existing) and does nothing. The handler
// runs under a savepoint: when it fails, its writes are rolled back and the
// failure is recorded as one more attempt (a parked event stays parked);
// a transient failure (ErrTransient) rolls back and records nothing.
// Errors: ErrEventNotFound, ErrNotRetryable, ErrMisconfigured (the event's
// source has no working handler here), ErrTransient, or the database's.
func (r *Receiver) RetryTx(ctx context.Context, tx pgx.Tx, id int64, by Retry) (Retried, error) {
	q := queries.New(tx)
	row, err := q.InboxEventLockForRetry(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Retried{}, fmt.Errorf("%w: %d", ErrEventNotFound, id)
	}
	if err != nil {
		return Retried{}, fmt.Errorf("lock event %d: %w", id, err)
	}
	res := Retried{Source: row.Source, EventID: row.EventID}
	rid := pgtype.UUID{Bytes: by.RequestID, Valid: true}
	if prev, err := q.InboxEventAttemptGetByRequest(ctx, rid); err == nil {
		res.Outcome, res.Attempt, res.Existing = Outcome(prev.Outcome), int(prev.Attempt), true
		res.Error = derefText(prev.Error)
		return res, nil
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return Retried{}, fmt.Errorf("find retry %s: %w", by.RequestID, err)
	}
	if row.Status != string(OutcomeFailed) && row.Status != string(OutcomeParked) {
		return Retried{}, fmt.Errorf("%w: event %s/%s is %s", ErrNotRetryable, row.Source, row.EventID, row.Status)
	}
	src, ok := (*r.sources.Load())[row.Source]
	reg, known := r.registration(src)
	switch {
	case !ok:
		return Retried{}, fmt.Errorf("%w: source %q is not configured", ErrMisconfigured, row.Source)
	case src.Problem != nil:
		return Retried{}, fmt.Errorf("%w: %s: %w", ErrMisconfigured, row.Source, src.Problem)
	case !known:
		return Retried{}, fmt.Errorf("%w: no handler named %q is registered", ErrMisconfigured, src.Handler)
	}
	ev := eventOf(row, src.Policy)
	outcome, herr := retryApply(ctx, tx, ev, reg.Handle)
	if herr == nil {
		return retrySettled(ctx, tx, res, row.ID, row.Attempts, outcome, by)
	}
	var failed *handlerError
	if !errors.As(herr, &failed) {
		return Retried{}, herr
	}
	if transient(failed.err) {
		return Retried{}, fmt.Errorf("%w: %s/%s: %w", ErrTransient, row.Source, row.EventID, failed.err)
	}
	return retryFailed(ctx, tx, res, ev, failed, by)
}

// eventOf is the Event a recorded row holds.
func eventOf(row queries.InboxEventLockForRetryRow, p Policy) Event {
	ev := Event{Source: row.Source, ID: row.EventID, Payload: row.Payload, EntityKey: row.EntityKey, Policy: p, row: row.ID}
	if row.EntityVersion != nil {
		ev.EntityVersion = *row.EntityVersion
	}
	var headers map[string]string
	if json.Unmarshal(row.Headers, &headers) == nil {
		ev.Headers = headers
	}
	return ev
}

// retryApply runs the handler under a savepoint, as Receive would for a
// new event (an entity's version may settle it as stale or held instead),
// and marks the event processed. A handler's failure rolls the savepoint
// back and is returned as a *handlerError.
func retryApply(ctx context.Context, tx pgx.Tx, ev Event, h Handler) (Outcome, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("savepoint for the retry of %s: %w", ev.ID, err)
	}
	outcome := OutcomeProcessed
	if ev.EntityKey == "" {
		err = run(ctx, sp, ev, h)
	} else {
		var res Result
		res, err = applyVersioned(ctx, sp, ev, ev.row, h)
		outcome = res.Outcome
	}
	if err == nil && outcome == OutcomeProcessed {
		err = queries.New(sp).InboxEventMarkProcessed(ctx, ev.row)
	}
	if err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return "", fmt.Errorf("roll back the retry of %s: %w (after %w)", ev.ID, rerr, err)
		}
		return "", err
	}
	if err := sp.Commit(ctx); err != nil {
		return "", fmt.Errorf("release the savepoint of the retry of %s: %w", ev.ID, err)
	}
	return outcome, nil
}

// retrySettled records a retry that took effect, and tells the pages.
func retrySettled(ctx context.Context, tx pgx.Tx, res Retried, id int64, failedBefore int32, outcome Outcome, by Retry) (Retried, error) {
	q := queries.New(tx)
	attempt, err := q.InboxEventAttemptInsert(ctx, queries.InboxEventAttemptInsertParams{
		InboxEventID: id, FailedAttempts: failedBefore, Outcome: string(outcome), Actor: by.Actor,
		RequestID: by.RequestID})
	if err != nil {
		return Retried{}, fmt.Errorf("record the retry of event %d: %w", id, err)
	}
	res.Outcome, res.Attempt = outcome, int(attempt)
	if err := eventChanged(ctx, tx, id, res); err != nil {
		return Retried{}, err
	}
	return res, nil
}

// retryFailed records a retry whose handler failed.
func retryFailed(ctx context.Context, tx pgx.Tx, res Retried, ev Event, failed *handlerError, by Retry) (Retried, error) {
	q := queries.New(tx)
	text := pgtext.Clean(failed.Error(), MaxErrorBytes)
	fp := fingerprint.Of(text)
	row, err := q.InboxEventRetryFail(ctx, queries.InboxEventRetryFailParams{
		LastError: &text, ErrorFingerprint: &fp, MaxAttempts: attemptsAllowed(ev, failed), ID: ev.row,
		Actor: by.Actor, RequestID: pgtype.UUID{Bytes: by.RequestID, Valid: true},
	})
	if err != nil {
		return Retried{}, fmt.Errorf("record the failed retry of %s/%s: %w", ev.Source, ev.ID, err)
	}
	res.Outcome, res.Attempt, res.Error = Outcome(row.Status), int(row.Attempt), text
	if err := eventChanged(ctx, tx, ev.row, res); err != nil {
		return Retried{}, err
	}
	return res, nil
}

// eventChanged appends a changefeed.KindInboxEvent change for the event,
// in the retry's transaction.
func eventChanged(ctx context.Context, tx pgx.Tx, id int64, res Retried) error {
	payload, err := json.Marshal(map[string]string{"source": res.Source, "status": string(res.Outcome)})
	if err != nil {
		return fmt.Errorf("encode the change of event %d: %w", id, err)
	}
	err = changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindInboxEvent, Subject: strconv.FormatInt(id, 10), Payload: payload})
	if err != nil {
		return fmt.Errorf("event %d changed: %w", id, err)
	}
	return nil
}

func derefText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
