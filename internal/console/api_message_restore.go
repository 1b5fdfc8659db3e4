package console

import (
	"github.com/labstack/echo/v4"
)

// apiMessageRestore is POST /api/messages/:id/restore: action.Service.Restore.
func (h *Handler) apiMessageRestore(c echo.Context) error {
	return h.apiMessageState(c, h.actions.Restore, "dead")
}
