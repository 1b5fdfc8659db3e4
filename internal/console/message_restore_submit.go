package console

import (
	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/action"
)

// messageRestoreSubmit is the panel's Restore form: action.Service.Restore.
func (h *Handler) messageRestoreSubmit(c echo.Context) error {
	in, err := messageForm(c)
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	if err := h.actions.Restore(c.Request().Context(), h.deps.DB, actor(c), in); err != nil {
		return h.panelAfter(c, "", err)
	}
	return h.panelAfter(c, "Restored: the message is among the dead letters again.", nil)
}

// messageForm reads a discard or restore form: the route's message, the
// request id and the reason.
func messageForm(c echo.Context) (action.MessageInput, error) {
	id, err := messageID(c)
	if err != nil {
		return action.MessageInput{}, err
	}
	rid, err := requestID(c, c.FormValue("request_id"))
	if err != nil {
		return action.MessageInput{}, err
	}
	return action.MessageInput{MessageID: id, RequestID: rid, Reason: c.FormValue("reason")}, nil
}
