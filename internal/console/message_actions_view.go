package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// lastAttemptsShown is how many of a message's newest attempts its
// actions page shows; the message page lists them all.
const lastAttemptsShown = 5

// messageActions reads the panel's view of the message, with fresh
// request ids and the controls the viewer's role allows.
func (h *Handler) messageActions(c echo.Context) (templates.MessageActions, error) {
	id, err := messageID(c)
	if err != nil {
		return templates.MessageActions{}, err
	}
	if err := h.readDB(); err != nil {
		return templates.MessageActions{}, err
	}
	row, err := queries.New(h.deps.DB).OutboxActionPanelGet(c.Request().Context(), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return templates.MessageActions{}, echo.NewHTTPError(http.StatusNotFound, "No such message.")
	}
	if err != nil {
		return templates.MessageActions{}, err
	}
	role := current(c).Role
	m := templates.MessageActions{
		ID: row.ID, Topic: row.Topic, Destination: row.Destination, State: row.State, Attempts: row.Attempts,
		Replays: row.Replays, Generation: row.Generation, ReplayPending: row.ReplayPending, LastReplayID: row.LastReplayID,
		LastReplayState: row.LastReplayState,
		Blocking:        row.Blocking,
		CanOperate:      role.Allows(auth.Operator), CanEdit: role.Allows(auth.Admin),
		ReplayRequestID: uuid.NewString(), DiscardRequestID: uuid.NewString(),
	}
	if row.AggregateID != "" {
		m.Aggregate = row.AggregateType + "/" + row.AggregateID
	}
	if row.LastError != nil {
		m.LastError = *row.LastError
	}
	if row.ReplayOf != nil {
		m.ReplayOf = *row.ReplayOf
	}
	m.Payload = RedactedPayload
	if h.PayloadVisible(c) {
		m.Payload = prettyJSON(row.Payload)
	}
	m.Headers = headerList(row.Headers)
	attempts, err := queries.New(h.deps.DB).OutboxAttemptListLatest(c.Request().Context(),
		queries.OutboxAttemptListLatestParams{MessageID: id, MaxRows: lastAttemptsShown})
	if err != nil {
		return templates.MessageActions{}, fmt.Errorf("read the last attempts of message %d: %w", id, err)
	}
	for _, a := range attempts {
		m.LastAttempts = append(m.LastAttempts, attemptView(a))
	}
	return m, nil
}

// panelAfter answers a panel's form: the panel re-rendered from the
// database, and the action's notice, or its refusal's message
// (panelMessage), out of band in #action-outcome (MessageActionsAnswer). Refusals answer 200 so that htmx shows them in place;
// the JSON API answers them with their status.
func (h *Handler) panelAfter(c echo.Context, notice string, actionErr error) error {
	msg := ""
	if actionErr != nil {
		if msg = panelMessage(actionErr); msg == "" {
			return actionErr
		}
		notice = ""
	}
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	m.Notice, m.Error = notice, msg
	if msg != "" {
		// Refill the replay form, so the operator only adds what was
		// missing (a fresh request id comes with it).
		m.ReplayMode, m.ReplayReason = c.FormValue("mode"), fitting(c.FormValue("reason"), action.MaxReasonChars)
	}
	// The answer may land after a newer live refresh: the page refreshes
	// once more after it (see MessageActionsPage).
	c.Response().Header().Set("HX-Trigger-After-Settle", templates.ActionAnsweredEvent)
	return render(c, http.StatusOK, templates.MessageActionsAnswer(m))
}

// messageStateAction is action.Service.Discard or Restore.
type messageStateAction func(context.Context, *pgxpool.Pool, action.Actor, action.MessageInput) error

// messageStateFromPanel runs do (a discard or restore) as the panel's
// form asks, and answers with the panel and notice.
func (h *Handler) messageStateFromPanel(c echo.Context, do messageStateAction, notice string) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	in := action.MessageInput{MessageID: id, RequestID: rid, Reason: c.FormValue("reason")}
	if err := do(c.Request().Context(), h.deps.DB, actor(c), in); err != nil {
		return h.panelAfter(c, "", err)
	}
	return h.panelAfter(c, notice, nil)
}
