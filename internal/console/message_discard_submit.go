package console

import (
	"github.com/labstack/echo/v4"
)

// messageDiscardSubmit is the panel's Discard form: action.Service.Discard.
func (h *Handler) messageDiscardSubmit(c echo.Context) error {
	return h.messageStateFromPanel(c, h.actions.Discard, "Discarded. It can be restored from here.")
}
