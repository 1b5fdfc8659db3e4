package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

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
