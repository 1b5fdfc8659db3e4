package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/audit"
	"github.com/switchyard/switchyard/internal/bulkreplay"
	"github.com/switchyard/switchyard/internal/changefeed"
	"github.com/switchyard/switchyard/internal/idempotency"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/internal/queries"
)

// Operator actions (replay, edit and replay, discard, restore, bulk replay
// start and cancel). Every one:
//
//   - is reached through a route whose least role is in the route table
//     (edit and replay checks the admin role itself, since it shares the
//     replay route of the JSON API);
//   - carries a client-generated request id, generated when its panel is
//     rendered, sent both as the Idempotency-Key header (the idempotency
//     middleware, keyed by the signed-in account) and in the body, where
//     it becomes outbox.ReplayRequest.RequestID (invariant 6);
//   - commits its effect and its one audit row in one transaction
//     (invariant 7), with a changefeed.KindMessageChanged row for every
//     message it changed (messagesChanged), then wakes the change feed:
//     every open page of those messages, on every console instance,
//     shows the change without a reload.
//
// A refused action (not dead, replay in flight, reason required, job not
// running) commits nothing and records no audit row: the trail holds what
// happened, and a refusal changed nothing. A role too low is the
// exception: who tried what they may not do is recorded (outcome denied,
// at most once a minute per session; see Handler.forbidden). A replay
// request that had already been applied (the same request id) creates
// nothing and records nothing either: the first one was recorded.

// act runs effect and the audit row it fills in one transaction, then
// notifies. effect may set e's Target, Detail and Reason; it returns
// skip=true when it took no effect (nothing is recorded then).
func (h *Handler) act(c echo.Context, e audit.Entry, effect func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (skip bool, err error)) error {
	if h.deps.DB == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	p := current(c)
	e.Actor, e.ActorID, e.Outcome, e.RemoteAddr = p.Name, p.ActorID(), audit.OK, c.RealIP()
	ctx := c.Request().Context()
	applied := false
	err := pgx.BeginFunc(ctx, h.deps.DB, func(tx pgx.Tx) error {
		skip, err := effect(ctx, tx, &e)
		if err != nil || skip {
			return err
		}
		_, err = audit.Record(ctx, tx, e)
		applied = err == nil
		return err
	})
	if err != nil {
		return err
	}
	if h.deps.Notify != nil {
		h.deps.Notify()
	}
	if applied {
		// A replay is a new outbox row, and a discarded or replayed dead
		// head frees the messages behind it: wake the dispatchers now,
		// after the commit, rather than at their next poll. Only an
		// optimisation, so a failure is logged, not answered.
		// The action has committed: a client gone meanwhile must not cancel it.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := outbox.Notify(wctx, h.deps.DB); err != nil {
			h.deps.Logger.Warn("wake the dispatchers after an action", slog.Any("error", err))
		}
	}
	return nil
}

// messagesChanged appends a changefeed.KindMessageChanged change for each
// of ids in tx, the action's transaction, so that the change reaches the
// open pages of those messages if and only if the action commits (act
// wakes the feed after the commit).
func messagesChanged(ctx context.Context, tx pgx.Tx, action string, ids ...int64) error {
	payload, err := json.Marshal(map[string]string{"action": action})
	if err != nil {
		return err
	}
	for _, id := range ids {
		err := changefeed.Append(ctx, tx, changefeed.Change{Kind: changefeed.KindMessageChanged, Subject: strconv.FormatInt(id, 10), Payload: payload})
		if err != nil {
			return fmt.Errorf("message %d changed: %w", id, err)
		}
	}
	return nil
}

// idempotent wraps an action's handler with the idempotency store, keyed
// by the signed-in account: one account's key never answers another's
// request.
func (h *Handler) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	if h.deps.DB == nil {
		return next // act answers 503
	}
	mw := idempotency.Middleware(idempotency.Config{
		Pool: h.deps.DB, Logger: h.deps.Logger, TTL: h.deps.IdempotencyTTL,
		Principal: func(c echo.Context) string {
			p := current(c)
			if p.UserID == 0 {
				return "demo"
			}
			return "user:" + strconv.FormatInt(p.UserID, 10)
		},
	})
	return mw(next)
}

// requestID reads an action's request id: the body's (or form's) value,
// else the Idempotency-Key header. Both present must agree, so that the
// stored response and the outbox row belong to the same intent.
func requestID(c echo.Context, fromBody string) (uuid.UUID, error) {
	header := c.Request().Header.Get(idempotency.Header)
	text := fromBody
	if text == "" {
		text = header
	}
	if text == "" {
		return uuid.Nil, echo.NewHTTPError(http.StatusBadRequest,
			"A request id is required (request_id, or the Idempotency-Key header): generate one per intended action and reuse it on retries.")
	}
	id, err := uuid.Parse(text)
	if err != nil {
		return uuid.Nil, echo.NewHTTPError(http.StatusBadRequest, "The request id must be a UUID.")
	}
	if header != "" && header != text {
		return uuid.Nil, echo.NewHTTPError(http.StatusBadRequest, "The request id and the Idempotency-Key header differ.")
	}
	return id, nil
}

// messageID parses the :id of a message route.
func messageID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, echo.NewHTTPError(http.StatusNotFound, "No such message.")
	}
	return id, nil
}

// refusal maps an action's refusal to the status and message the operator
// sees; other errors pass through (and become a 500).
func refusal(err error) error {
	var status int
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, "No such message.")
	case errors.Is(err, outbox.ErrReplayInFlight):
		return echo.NewHTTPError(http.StatusConflict,
			"A replay of this message is still in flight: wait until it is delivered or dead before replaying or discarding it again.")
	case errors.Is(err, outbox.ErrNotDead), errors.Is(err, outbox.ErrNotDiscarded), errors.Is(err, bulkreplay.ErrAlreadyRunning):
		status = http.StatusConflict
	case errors.Is(err, outbox.ErrReasonRequired), errors.Is(err, bulkreplay.ErrReasonRequired),
		errors.Is(err, outbox.ErrRequestReused), errors.Is(err, bulkreplay.ErrInvalidRate):
		status = http.StatusUnprocessableEntity
	default:
		return err
	}
	return echo.NewHTTPError(status, sentence(err))
}

// sentence turns an engine error into a sentence: without the package
// prefix, capitalised, with a full stop.
func sentence(err error) string {
	s := err.Error()
	for _, prefix := range []string{"outbox: ", "bulkreplay: "} {
		s = strings.TrimPrefix(s, prefix)
	}
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// refusalMessage is the message of a refusal for a panel, or "" if err is
// not one (the caller returns err then).
func refusalMessage(err error) string {
	var he *echo.HTTPError
	if errors.As(refusal(err), &he) {
		return fmt.Sprint(he.Message)
	}
	return ""
}

// queries reads through the actions' database (Deps.DB, checked first).
func (h *Handler) queries() *queries.Queries { return queries.New(h.deps.DB) }
