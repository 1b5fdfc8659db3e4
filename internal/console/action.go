package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/idempotency"
	"github.com/switchyard/switchyard/internal/outbox"
)

// Operator actions (replay, edit and replay, discard, restore, bulk replay
// start and cancel) live in internal/action, which owns their rules, role
// checks, transaction and audit row. Their handlers here are thin callers:
// parse the input, call the action, render. Every one:
//
//   - is reached through a route whose least role is in the route table
//     (the action checks the role again: edit and replay needs admin on
//     the JSON API's operator route);
//   - carries a client-generated request id, generated when its panel is
//     rendered, sent both as the Idempotency-Key header (the idempotency
//     middleware, keyed by the signed-in account) and in the body, where
//     it becomes the replay's request id (invariant 6);
//   - returns an *action.Refusal as its error, which the one error handler
//     (httpserver.ErrorHandler) maps to a status and shows its message;
//     panels show the message in place instead (panelMessage). A
//     forbidden refusal is recorded in the audit trail first
//     (recordDenials, Handler.forbidden).

// newActions is the action service of deps: it wakes the change feed
// (deps.Notify) and the dispatchers after every action.
func newActions(deps Deps) *action.Service {
	cfg := action.Config{
		ChangesCommitted: deps.Notify, Logger: deps.Logger,
		NATSURL: deps.NATSURL, Getenv: deps.Getenv, Inbox: deps.Inbox, InboxHandlers: deps.InboxHandlers,
		DestinationsSaved: deps.DestinationsSaved,
	}
	if deps.DB != nil {
		cfg.WakeDispatchers = func(ctx context.Context) error { return outbox.Notify(ctx, deps.DB) }
	}
	return action.New(cfg)
}

// actor is the request's actor: the signed-in principal and the client's
// address.
func actor(c echo.Context) action.Actor { return action.ActorOf(current(c), c.RealIP()) }

// recordDenials records an action's forbidden refusal as a denied request
// (Handler.forbidden: at most once a minute per session) and answers it
// with 403. It runs inside the idempotency middleware, which hands errors
// to the error handler itself.
func (h *Handler) recordDenials(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if r := action.AsRefusal(err); r != nil && r.Kind == action.KindForbidden {
			return h.forbidden(c, current(c), r.Need, r.Message)
		}
		return err
	}
}

// idempotent wraps an action's handler with the idempotency store, keyed
// by the signed-in account: one account's key never answers another's
// request.
func (h *Handler) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	next = h.recordDenials(next)
	if h.deps.DB == nil {
		return next // the action answers 503
	}
	mw := idempotency.Middleware(idempotency.Config{
		Pool: h.deps.DB, Logger: h.deps.Logger, MaxBody: maxAPIBody, TTL: h.deps.IdempotencyTTL,
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

// panelMessage is the message a panel shows in place of err: a refusal's
// (but a forbidden one, which is answered 403 and recorded) or a bad
// request's; "" if err is neither (the caller returns err then).
func panelMessage(err error) string {
	if r := action.AsRefusal(err); r != nil {
		if r.Kind == action.KindForbidden || r.Kind == action.KindUnavailable {
			return ""
		}
		return r.Message
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 500 && he.Code != http.StatusForbidden {
		if m, ok := he.Message.(string); ok {
			return m
		}
	}
	return ""
}

// maxAPIBody bounds a JSON API request's body, with or without an
// Idempotency-Key: the largest is an edited payload (MaxPayloadBytes) with
// its reason and the JSON around them. Every field has a smaller maximum
// of its own, checked by the action (internal/action/limits.go).
const maxAPIBody = action.MaxPayloadBytes + 64<<10

// decodeJSON decodes the request's JSON body into v, reading at most
// maxAPIBody bytes (413 beyond); an empty body leaves v as it is. A body
// that is not UTF-8 or holds a NUL in any string is refused (checkJSON).
func decodeJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxAPIBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "The body is too large: at most "+strconv.Itoa(maxAPIBody)+" bytes.")
	case err != nil:
		return echo.NewHTTPError(http.StatusBadRequest, "The body could not be read.")
	}
	if err := checkJSON("body", body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return echo.NewHTTPError(http.StatusBadRequest, "The body must be a JSON object: "+err.Error())
	}
	return nil
}

// readDB is the database the actions' pages read (Deps.DB), or a 503 when
// the console has none.
func (h *Handler) readDB() error {
	if h.deps.DB == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	return nil
}
