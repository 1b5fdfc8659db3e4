package console

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// messageEditReplaySubmit is the confirm button of edit and replay
// (admin); the payload was validated and shown as a diff first
// (messageEditPreview).
func (h *Handler) messageEditReplaySubmit(c echo.Context) error {
	payload := json.RawMessage(c.FormValue("payload"))
	if !json.Valid(payload) {
		return h.panelAfter(c, "", echo.NewHTTPError(http.StatusUnprocessableEntity, "The edited payload is not valid JSON."))
	}
	return h.replayFromPanel(c, compactJSON(payload))
}
