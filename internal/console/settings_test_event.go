package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/queries"
	"github.com/switchyard/switchyard/web/templates"
)

// destinationTestSubmit serves POST /settings/destinations/:name/test: a
// test message through the outbox (action.DestinationTest), answered with
// a panel that follows it live. A refusal is shown in the panel.
func (h *Handler) destinationTestSubmit(c echo.Context) error {
	name := c.Param("name")
	sent, err := h.actions.DestinationTest(c.Request().Context(), h.deps.DB, actor(c), action.DestinationTestInput{Name: name})
	if msg := testRefusal(err); msg != "" {
		return render(c, http.StatusOK, templates.DestinationTestPanel(templates.DestinationTestResult{Error: msg}))
	}
	if err != nil {
		return err
	}
	r, err := h.destinationTestResult(c, name, sent.ID)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.DestinationTestPanel(r))
}

// destinationTestLive serves GET /settings/destinations/:name/test/:id:
// the test message's state, for the panel's live refresh (one read by
// primary key).
func (h *Handler) destinationTestLive(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return errNotFound("Message")
	}
	r, err := h.destinationTestResult(c, c.Param("name"), id)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, templates.DestinationTestStatus(r))
}

// destinationTestResult reads message id, a test message of destination
// name (any other message is not found: this route shows test messages
// only).
func (h *Handler) destinationTestResult(c echo.Context, name string, id int64) (templates.DestinationTestResult, error) {
	m, err := queries.New(h.deps.DB).ConsoleMessageGet(c.Request().Context(), id)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (m.Destination != name || m.Topic != action.TestTopic)) {
		return templates.DestinationTestResult{}, errNotFound("Message")
	}
	if err != nil {
		return templates.DestinationTestResult{}, fmt.Errorf("read test message %d: %w", id, err)
	}
	lastError := ""
	if m.LastError != nil {
		lastError = *m.LastError
	}
	return templates.DestinationTestResult{
		ID: m.ID, MessageID: m.MessageID.String(), State: m.State, Attempts: int(m.Attempts),
		LastError: lastError, Done: m.State == "delivered" || m.State == "dead",
		LiveURL: fmt.Sprintf("%s/test/%d", destinationURL(name), m.ID),
	}, nil
}

// sourceTestSubmit serves POST /settings/sources/:name/test: a signed test
// event through the inbox (action.SourceTest), answered with its outcome.
func (h *Handler) sourceTestSubmit(c echo.Context) error {
	name := c.Param("name")
	got, err := h.actions.SourceTest(c.Request().Context(), h.deps.DB, actor(c), action.SourceTestInput{Name: name})
	if msg := testRefusal(err); msg != "" {
		return render(c, http.StatusOK, templates.SourceTestPanel(templates.SourceTestResult{Error: msg}))
	}
	if err != nil {
		return err
	}
	tone := "bad"
	switch got.Outcome {
	case "processed", "duplicate":
		tone = "ok"
	case "held", "stale", "failed":
		tone = "warn"
	}
	return render(c, http.StatusOK, templates.SourceTestPanel(templates.SourceTestResult{
		EventID: got.EventID, Outcome: got.Outcome, Error: got.Error, Tone: tone,
		EventsURL: "/inbox?" + url.Values{"source": {name}}.Encode(),
	}))
}

// testRefusal is the message a test panel shows for err: any refusal but
// a forbidden one (which recordDenials answers 403 and records).
func testRefusal(err error) string {
	if r := action.AsRefusal(err); r != nil && r.Kind != action.KindForbidden {
		return r.Message
	}
	return ""
}
