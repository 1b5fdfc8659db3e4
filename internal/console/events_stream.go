package console

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// eventsStream serves the live change stream (Server-Sent Events; see
// internal/sse for the events and the resume and resync rules). The stream
// is written straight to the connection: no gzip or timeout middleware may
// wrap this route, since either would buffer or cut a stream that is meant
// to stay open for hours.
func (h *Handler) eventsStream(c echo.Context) error {
	if h.deps.Events == nil {
		return echo.NewHTTPError(http.StatusServiceUnavailable, "Live updates are not available in this process.")
	}
	h.deps.Events.ServeHTTP(c.Response(), c.Request())
	return nil
}
