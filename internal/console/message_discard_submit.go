package console

import (
	"github.com/labstack/echo/v4"
)

// messageDiscardSubmit is the panel's Discard form: action.Service.Discard.
func (h *Handler) messageDiscardSubmit(c echo.Context) error {
	in, err := messageForm(c)
	if err != nil {
		return h.panelAfter(c, "", err)
	}
	if err := h.actions.Discard(c.Request().Context(), h.deps.DB, actor(c), in); err != nil {
		return h.panelAfter(c, "", err)
	}
	return h.panelAfter(c, "Discarded. It can be restored from here.", nil)
}
