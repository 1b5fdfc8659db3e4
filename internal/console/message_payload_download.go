package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/switchyard/switchyard/internal/queries"
)

// messagePayloadDownload serves GET /messages/:id/payload: the raw payload
// as an attachment, never rendered by the browser (nosniff; the page's CSP
// still applies if someone opens it).
func (h *Handler) messagePayloadDownload(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return errNotFound("Message")
	}
	payload, err := queries.New(h.deps.DB).ConsoleMessagePayloadGet(c.Request().Context(), id)
	if err != nil {
		return notFound(err, "Message")
	}
	hdr := c.Response().Header()
	hdr.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="message-%d.json"`, id))
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/json", []byte(payload))
}
