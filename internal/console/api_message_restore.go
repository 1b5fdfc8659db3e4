package console

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// apiMessageRestore is POST /api/messages/:id/restore: action.Service.Restore.
func (h *Handler) apiMessageRestore(c echo.Context) error {
	in, err := messageInput(c)
	if err != nil {
		return err
	}
	if err := h.actions.Restore(c.Request().Context(), h.deps.DB, actor(c), in); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, MessageStateResponse{MessageID: in.MessageID, State: "dead"})
}
