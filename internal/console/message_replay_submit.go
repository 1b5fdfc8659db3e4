package console

import (
	"encoding/json"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
	"github.com/switchyard/switchyard/internal/outbox"
)

// messageReplaySubmit is the panel's Replay form (redeliver or re-apply):
// action.Service.Replay.
func (h *Handler) messageReplaySubmit(c echo.Context) error {
	return h.replayFromPanel(c, nil)
}

// replayFromPanel replays the route's message as the panel's form asks,
// with payload if it is an edit, and answers with the panel.
func (h *Handler) replayFromPanel(c echo.Context, payload json.RawMessage) error {
	id, err := messageID(c)
	if err != nil {
		return err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	mode := outbox.ReplayMode(c.FormValue("mode"))
	done, err := h.actions.Replay(c.Request().Context(), h.deps.DB, actor(c), action.ReplayInput{
		MessageID: id, RequestID: rid, Mode: mode, Reason: c.FormValue("reason"), Payload: payload})
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	what := "Replayed"
	if payload != nil {
		what = "Replayed with the edited payload"
	}
	return h.panelAfter(c, what+" ("+string(mode)+") as message "+strconv.FormatInt(done.ID, 10)+".", nil)
}
