package console

import (
	"github.com/labstack/echo/v4"
)

// messageRestoreSubmit is the panel's Restore form: action.Service.Restore.
func (h *Handler) messageRestoreSubmit(c echo.Context) error {
	return h.messageStateFromPanel(c, h.actions.Restore, "Restored: the message is among the dead letters again.")
}
