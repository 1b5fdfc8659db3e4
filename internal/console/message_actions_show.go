package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/auth"
	"github.com/switchyard/switchyard/internal/outbox"
	"github.com/switchyard/switchyard/web/templates"
)

// messageActionsShow is GET /messages/:id/actions: the message and its
// actions panel on a page of their own. The page re-fetches itself when
// the message changes, sending the version it shows as seen: the same
// version answers 204 (nothing to swap).
func (h *Handler) messageActionsShow(c echo.Context) error {
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	if seen := c.QueryParam("seen"); seen != "" && seen == m.Version() {
		return c.NoContent(http.StatusNoContent)
	}
	return render(c, http.StatusOK, templates.MessageActionsPage(h.page("Message "+c.Param("id"), templates.SectionMessages), m))
}

// messageActionsPanel is GET /messages/:id/actions/panel: the panel alone,
// for a message page to embed (hx-get, hx-trigger="load").
func (h *Handler) messageActionsPanel(c echo.Context) error {
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.MessageActionsPanel(m))
}

// messageActions reads the panel's view of the message, with fresh
// request ids and the controls the viewer's role allows.
func (h *Handler) messageActions(c echo.Context) (templates.MessageActions, error) {
	id, err := messageID(c)
	if err != nil {
		return templates.MessageActions{}, err
	}
	if h.deps.DB == nil {
		return templates.MessageActions{}, echo.NewHTTPError(http.StatusServiceUnavailable, "Actions are unavailable: this console has no database.")
	}
	row, err := h.queries().ActionMessageGet(c.Request().Context(), id)
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
		Blocking:   row.Blocking,
		CanOperate: role.Allows(auth.Operator), CanEdit: role.Allows(auth.Admin),
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
	return m, nil
}

// panelAfter answers a panel's form: the panel re-rendered from the
// database, with the action's notice, or its refusal's message. Refusals
// answer 200 so that htmx shows them in place; the JSON API answers them
// with their status.
func (h *Handler) panelAfter(c echo.Context, notice string, actionErr error) error {
	msg := ""
	if actionErr != nil {
		if msg = refusalMessage(actionErr); msg == "" {
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
		m.ReplayMode, m.ReplayReason = c.FormValue("mode"), c.FormValue("reason")
	}
	return render(c, http.StatusOK, templates.MessageActionsPanel(m))
}

// messageReplaySubmit is the panel's Replay form (redeliver or re-apply).
func (h *Handler) messageReplaySubmit(c echo.Context) error {
	return h.replaySubmit(c, nil)
}

// messageEditReplaySubmit is the confirm button of edit and replay
// (admin); the payload was validated and shown as a diff first.
func (h *Handler) messageEditReplaySubmit(c echo.Context) error {
	payload := json.RawMessage(c.FormValue("payload"))
	if !json.Valid(payload) {
		return h.panelAfter(c, "", echo.NewHTTPError(http.StatusUnprocessableEntity, "The edited payload is not valid JSON."))
	}
	return h.replaySubmit(c, compactJSON(payload))
}

func (h *Handler) replaySubmit(c echo.Context, payload json.RawMessage) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	mode := outbox.ReplayMode(c.FormValue("mode"))
	done, err := h.replay(c, replayInput{MessageID: id, RequestID: rid, Mode: mode, Reason: c.FormValue("reason"), Payload: payload})
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	what := "Replayed"
	if payload != nil {
		what = "Replayed with the edited payload"
	}
	return h.panelAfter(c, what+" ("+string(mode)+") as message "+strconv.FormatInt(done.ID, 10)+".", nil)
}

// messageDiscardSubmit and messageRestoreSubmit are the panel's Discard
// and Restore forms.
func (h *Handler) messageDiscardSubmit(c echo.Context) error { return h.discardSubmit(c, false) }

func (h *Handler) messageRestoreSubmit(c echo.Context) error { return h.discardSubmit(c, true) }

func (h *Handler) discardSubmit(c echo.Context, restore bool) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	if err := h.discard(c, id, rid, c.FormValue("reason"), restore); err != nil {
		return h.panelAfter(c, "", err)
	}
	if restore {
		return h.panelAfter(c, "Restored: the message is among the dead letters again.", nil)
	}
	return h.panelAfter(c, "Discarded. It can be restored from here.", nil)
}

// messageEditPreview validates an edited payload and shows its diff
// against the original with the confirm button; it changes nothing.
func (h *Handler) messageEditPreview(c echo.Context) error {
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	edited := []byte(c.FormValue("payload"))
	if !json.Valid(edited) {
		return render(c, http.StatusOK, templates.ActionError("The edited payload is not valid JSON: correct it and show the diff again."))
	}
	mode := c.FormValue("mode")
	if mode != string(outbox.Redeliver) && mode != string(outbox.Reapply) {
		mode = string(outbox.Reapply)
	}
	if mode == string(outbox.Reapply) && c.FormValue("reason") == "" {
		return render(c, http.StatusOK, templates.ActionError("Re-applying needs a reason: say why the edited payload is replayed."))
	}
	// The confirm button's request id is made here, with the diff it
	// confirms: a double click sends it twice, a new preview gets another.
	diff, changed := lineDiff(m.Payload, prettyJSON(edited))
	return render(c, http.StatusOK, templates.EditPreviewFragment(templates.EditPreview{
		ID: m.ID, RequestID: uuid.NewString(), Payload: string(compactJSON(edited)), Reason: c.FormValue("reason"),
		Mode: mode, Diff: diff, Changed: changed,
	}))
}
