package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/web/templates"
)

// messageActionsPanel is GET /messages/:id/actions/panel: the panel alone,
// for a message page to embed (hx-get, hx-trigger="load").
func (h *Handler) messageActionsPanel(c echo.Context) error {
	m, err := h.messageActions(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.MessageActionsPanel(m))
}
